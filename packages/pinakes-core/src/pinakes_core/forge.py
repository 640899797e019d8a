"""The web addresses under which a forge (GitHub, GitLab …) shows the KB's own files.

A repository's README often links its pages by their full forge address. This module reads the
KB's git checkout, if it lies in one, for its remotes; :mod:`pinakes_core.links` reads such
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

# A git remote: https://host/owner/repo(.git), ssh://git@host/owner/repo.git, git@host:owner/repo.
_REMOTE = re.compile(
    r"^(?:https?://(?:[^@/]+@)?|ssh://(?:[^@/]+@)?|[^@/\s]+@)([\w.-]+)[/:]([\w.-]+(?:/[\w.-]+)+)/?$"
)
_REMOTE_URL = re.compile(r"^\s*url\s*=\s*(\S+)\s*$", re.MULTILINE)
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
            pointer = git.read_text(encoding="utf-8", errors="replace").strip()
            git = (top / pointer.removeprefix("gitdir:").strip()).resolve()
            common = git / "commondir"
            if common.is_file():
                git = (git / common.read_text(encoding="utf-8").strip()).resolve()
        config = read_limited(git / "config", limit=_MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except (OSError, UnsafeFileError):
        return ()
    inside = root.relative_to(top).as_posix()
    folder = "" if inside == "." else inside
    pages: list[tuple[str, str]] = []
    for url in _REMOTE_URL.findall(config):
        match = _REMOTE.match(url)
        if match:
            base = f"https://{match.group(1)}/{match.group(2).removesuffix('.git')}"
            pages += [(base + view, folder) for view in _FORGE_VIEWS]
    return tuple(dict.fromkeys(pages))
