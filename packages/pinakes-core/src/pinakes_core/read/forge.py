"""The web addresses under which a forge (GitHub, GitLab …) shows the KB's own files.

A repository's README often links its pages by their full forge address. This module reads the
KB's git checkout, if it lies in one, for its remotes; :mod:`pinakes_core.read.links` reads such
links as links to the KB's documents. It imports nothing heavy: every sync asks it.
"""

from __future__ import annotations

import re
from pathlib import Path

from pinakes_core.errors import UnsafeFileError
from pinakes_core.intake import read_limited

__all__ = ["repository_pages"]

#: A git config larger than this is not read (a checkout's is a few hundred bytes).
_MAX_CONFIG_BYTES = 1 << 20

# A git remote: https://host/owner/repo(.git), ssh://git@host:2222/owner/repo.git,
# git@host:owner/repo. An https port belongs to the web address; an ssh port does not.
_REMOTE = re.compile(
    r"^(?:(https?)://(?:[^@/]+@)?|ssh://(?:[^@/]+@)?|[^@/\s]+@)([\w.-]+)(:\d+)?[/:]"
    r"([\w.-]+(?:/[\w.-]+)+)/?$"
)
# Lines of a git config: a section header ([remote "origin"]) and a url key within it.
_SECTION = re.compile(r"^[ \t]*\[[ \t]*([^\]\s\"]+)")
_URL_KEY = re.compile(r"^[ \t]*url[ \t]*=[ \t]*\"?([^\s\"]+)\"?[ \t]*$")
#: A .git pointer file (worktree, submodule) or commondir larger than this is not a pointer.
_MAX_POINTER_BYTES = 4096
# Where a forge shows a file of a repository: GitHub's blob/tree/raw, GitLab's /-/blob/ ….
_FORGE_VIEWS = ("/blob/", "/tree/", "/raw/", "/-/blob/", "/-/tree/", "/-/raw/")


def repository_pages(root: Path) -> tuple[tuple[str, str], ...]:
    """Web addresses under which the KB's own files are shown, as ``(url prefix, folder)``.

    A repository's README often links its pages by their full forge address
    (``https://github.com/owner/repo/blob/main/guide.md``). When the KB lies in a git checkout,
    each remote's file views are returned with the KB's folder inside the repository (``""``
    at its top); :func:`read_text` reads such links as links to the KB's documents.
    """
    try:  # a parent folder may be unreadable: then there is no checkout to speak of
        root = root.resolve()
        top = next((d for d in (root, *root.parents) if (d / ".git").exists()), None)
        if top is None:
            return ()
        git = top / ".git"
        if git.is_file():  # a worktree or submodule: "gitdir: <path>"
            git = (top / _pointer(git).removeprefix("gitdir:").strip()).resolve()
            common = git / "commondir"
            if common.is_file():
                git = (git / _pointer(common)).resolve()
        config = read_limited(git / "config", limit=_MAX_CONFIG_BYTES).decode("utf-8", "replace")
    # A broken checkout is no checkout: unreadable, a NUL in a pointer (ValueError), a symlink
    # loop (RuntimeError on Python 3.11), a FIFO or an oversized file (UnsafeFileError).
    except (OSError, UnsafeFileError, ValueError, RuntimeError):
        return ()
    inside = root.relative_to(top).as_posix()
    folder = "" if inside == "." else inside
    pages: list[tuple[str, str]] = []
    for url in _remote_urls(config):
        match = _REMOTE.match(url)
        if match:
            scheme, host, port, path = match.groups()
            if scheme and port:  # a web forge on its own port
                host += port
            base = f"https://{host}/{path.removesuffix('.git')}"
            pages += [(base + view, folder) for view in _FORGE_VIEWS]
    return tuple(dict.fromkeys(pages))


def _pointer(path: Path) -> str:
    """A .git pointer file's text (bounded, undecodable bytes replaced)."""
    return read_limited(path, limit=_MAX_POINTER_BYTES).decode("utf-8", "replace").strip()


def _remote_urls(config: str) -> list[str]:
    """The ``url`` values of the config's ``[remote …]`` sections (not its submodules')."""
    urls, section = [], ""
    for line in config.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            continue
        key = _URL_KEY.match(line) if section == "remote" else None
        if key:
            urls.append(key.group(1))
    return urls
