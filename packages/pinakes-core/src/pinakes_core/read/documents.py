"""Finding and reading documents in a KB folder (DESIGN §2, §13).

Every file is untrusted input: binary files, oversize files, unreadable files and symlinks that
leave the root or loop are reported as skips, never raised. A document's frontmatter is read
by :mod:`pinakes_core.read.frontmatter`.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinakes_core.config import SyncConfig, bounded_pattern, gitignore_line
from pinakes_core.derived import STORE_DIR
from pinakes_core.errors import UnsafeFileError
from pinakes_core.intake import (
    MAX_GITIGNORE_BYTES,
    display_name,
    inside,
    read_limited,
)
from pinakes_core.read.sidecar import SIDECAR_SUFFIX, TEMP_PREFIX

if TYPE_CHECKING:
    import pathspec

# pathspec is imported by the functions that match paths: the MCP server imports this module
# (through manage.writing) at start and matches nothing until a write (issue 37).
from pinakes_core.read.sources import source_type

__all__ = [
    "DOCUMENT_FORMATS",
    "MAX_DEPTH",
    "FileEntry",
    "Skip",
    "decode",
    "name_title",
    "never_indexed",
    "not_included_hint",
    "path_spec",
    "scan",
    "utf8_name",
]

_NOT_UTF8 = "name is not valid UTF-8; rename it to index it"
# The temp files atomic writes make (`sidecar.TEMP_PREFIX`, tempfile.mkstemp's random part),
# and those sidecar writes made before (".<name>.pnk.yaml.<random>.tmp").
_SIDECAR_TEMP = re.compile(
    rf"^{re.escape(TEMP_PREFIX)}[A-Za-z0-9_]{{6,}}\.tmp$"
    rf"|^\..+{re.escape(SIDECAR_SUFFIX)}\.[A-Za-z0-9_]{{6,}}\.tmp$"
)

#: File stems of a folder's own page, named after the folder when they name nothing else.
_FOLDER_PAGES = frozenset({"index", "_index", "readme"})

#: Folders nested deeper than this below the root are not entered (one skip line says so).
MAX_DEPTH = 128
#: Folders of installed packages and caches: a docs site after ``npm install`` holds thousands
#: of packages' READMEs, none of them the user's notes.
_VENDORED = frozenset({"node_modules", "__pycache__"})
#: Folders a notes app fills with copies of the user's pages, never pages of their own: Logseq's
#: backups of a page edited outside it and its page versions (each a near-duplicate document).
_APP_COPIES = ("**/logseq/bak/", "**/logseq/version-files/")


def never_indexed(name: str) -> bool:
    """Whether sync (and the watcher) skip a folder of this name: dot-folders and vendored ones."""
    return name.startswith(".") or name in _VENDORED


@dataclass(frozen=True)
class Skip:
    """A file left out of the index, with the reason in one sentence."""

    path: str
    reason: str


@dataclass(frozen=True)
class FileEntry:
    """A candidate document found by :func:`scan`, with the stat data change detection uses."""

    rel: str
    location: str  # the absolute path as scanned; ``path`` is it as a Path, made on demand
    mtime_ns: int
    size: int
    sidecar_mtime_ns: int | None
    sidecar_size: int | None

    @property
    def path(self) -> Path:
        """The document's absolute path (a ``Path`` per file cost ~10 % of a 100k-file walk)."""
        return Path(self.location)

    @property
    def stamp(self) -> tuple[int, int, int | None, int | None]:
        """The stat data change detection compares: the file's and its sidecar's."""
        return (self.mtime_ns, self.size, self.sidecar_mtime_ns, self.sidecar_size)

    @property
    def is_markdown(self) -> bool:
        """Whether the document is parsed as Markdown (otherwise as plain text)."""
        return self.source_type == "markdown"

    @property
    def source_type(self) -> str:
        """``markdown``, ``text``, ``pdf`` or ``code`` (see :mod:`pinakes_core.read.sources`)."""
        return source_type(self.rel)

    @property
    def sidecar(self) -> Path:
        """The sidecar path beside the document (it may not exist)."""
        return self.path.with_name(self.path.name + SIDECAR_SUFFIX)


def path_spec(lines: list[str]) -> pathspec.PathSpec[Any]:
    """The gitignore-style matcher of ``[sync] include``/``exclude`` (patterns bounded)."""
    import pathspec

    return pathspec.PathSpec.from_lines("gitignore", [bounded_pattern(p) for p in lines])


def _matcher(spec: pathspec.PathSpec[Any]) -> Callable[[str], bool]:
    """``spec.match_file`` as one regular expression when no pattern is negated.

    Include/exclude lists are plain globs; matching them pattern by pattern through pathspec
    was a quarter of a no-change sync over 100k files (issue 14). A spec with a negated
    pattern (order matters there) keeps pathspec's own matching.
    """
    patterns = [p for p in spec.patterns if p.include is not None]
    regexes = [getattr(p, "regex", None) for p in patterns]
    if not patterns:
        return lambda _rel: False
    if not all(p.include for p in patterns) or not all(isinstance(r, re.Pattern) for r in regexes):
        return spec.match_file
    try:
        combined = re.compile("|".join(f"(?:{r.pattern})" for r in regexes if r is not None))
    except re.error:  # e.g. two patterns naming the same group
        return spec.match_file
    return lambda rel: combined.search(rel) is not None


def _gitignore(directory: Path) -> pathspec.GitIgnoreSpec | None:
    import pathspec

    path = directory / ".gitignore"
    try:
        data = read_limited(path, limit=MAX_GITIGNORE_BYTES)
    except (OSError, UnsafeFileError):
        return None
    lines = [bounded_pattern(p) for p in data.decode("utf-8", errors="replace").splitlines()]
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:  # a line git cannot read either (Windows' 'build\'): git skips it
        return pathspec.GitIgnoreSpec.from_lines([line for line in lines if gitignore_line(line)])


#: Documentation formats the default ``[sync] include`` leaves out that Pinakes reads once
#: included (Markdown dialects as Markdown, the others as plain text): a folder of them, left out
#: without a word, looks empty to a new user (:func:`not_included_hint`).
DOCUMENT_FORMATS = frozenset(
    {".rst", ".adoc", ".asciidoc", ".org", ".tex", ".textile", ".wiki", ".mediawiki"}
    | {".mdown", ".mkd", ".mkdn", ".mdwn", ".qmd", ".rmd"}
)


def not_included_hint(counts: Counter[str]) -> str | None:
    """One sentence naming the document files ``[sync] include`` leaves out, or ``None``."""
    if not counts:
        return None
    top = [f"{n} {suffix}" for suffix, n in counts.most_common(3)]
    if len(counts) > len(top):
        top.append("more")
    files = top[0] if len(top) == 1 else ", ".join(top[:-1]) + " and " + top[-1]
    first = counts.most_common(1)[0][0]
    noun = "file" if counts.total() == 1 else "files"
    return (
        f'[sync] include leaves out {files} {noun}; add "**/*{first}" (and the like) to index them.'
    )


def scan(
    root: Path,
    config: SyncConfig,
    *,
    leftovers: list[Path] | None = None,
    not_included: Counter[str] | None = None,
    unreadable: list[str] | None = None,
) -> tuple[list[FileEntry], list[Skip]]:
    """Walk ``root`` and return the candidate documents (sorted by path) and the skipped files.

    Dot-directories (``.git``, ``.pinakes``, ``.obsidian`` …) are never entered. ``.gitignore``
    files are honoured at every level when ``config.gitignore`` is set. Symlinks are followed
    only when they stay inside the root and do not loop. The walk is iterative: a folder nested
    deeper than :data:`MAX_DEPTH` levels, or a name that is not valid UTF-8, is one skip line,
    never an error.

    Args:
        root: the KB root.
        config: the ``[sync]`` settings.
        leftovers: when given, the temp files an interrupted sidecar write left behind
            (``.<name>.pnk.yaml.<random>.tmp``) are appended to it, for the sync to remove.
        not_included: when given, counts by suffix the files of :data:`DOCUMENT_FORMATS` that
            ``include`` does not select (and nothing excludes or ignores).
        unreadable: when given, the relative paths of the folders ("" for the root) and
            files that could not be read are appended to it: what is indexed from them is
            not known to be gone, so a sync keeps it.
    """
    root = root.resolve()
    include = _matcher(path_spec(config.include))
    exclude = _matcher(path_spec([*config.exclude, *_APP_COPIES]))
    max_bytes = int(config.max_file_mb * 1024 * 1024)
    entries: list[FileEntry] = []
    skips: list[Skip] = []
    seen_dirs: set[tuple[int, int]] = set()
    Ignores = list[tuple[str, "pathspec.GitIgnoreSpec"]]

    def ignored(rel: str, is_dir: bool, ignores: Ignores) -> bool:
        for base, spec in ignores:
            sub = rel[len(base) + 1 :] if base else rel
            if spec.match_file(sub + "/" if is_dir else sub):
                return True
        return False

    # Depth-first, in the order a recursive walk would take, without recursion.
    stack: list[tuple[str, str, Ignores, int]] = [(str(root), "", [], 0)]
    while stack:
        directory, rel_dir, ignores, depth = stack.pop()
        shown_dir = display_name(rel_dir) or "."
        try:
            st_dir = os.stat(directory)
        except OSError as exc:
            skips.append(Skip(shown_dir, f"folder cannot be read ({exc.strerror})"))
            if unreadable is not None:
                unreadable.append(rel_dir)
            continue
        if (st_dir.st_dev, st_dir.st_ino) in seen_dirs:
            skips.append(
                Skip(shown_dir, "symlinked directory loops back to a folder already indexed")
            )
            continue
        seen_dirs.add((st_dir.st_dev, st_dir.st_ino))
        if config.gitignore:
            spec = _gitignore(Path(directory))
            if spec is not None:
                ignores = [*ignores, (rel_dir, spec)]
        try:
            # Real entries before symlinks, so a folder is indexed under its own path and a
            # symlink aliasing it is the one reported as a repeat.
            with os.scandir(directory) as listing:
                children = sorted(listing, key=lambda e: (e.is_symlink(), e.name))
            by_name = {child.name: child for child in children}
        except OSError as exc:
            skips.append(Skip(shown_dir, f"folder cannot be read ({exc.strerror})"))
            if unreadable is not None:
                unreadable.append(rel_dir)
            continue
        folders: list[tuple[str, str, Ignores, int]] = []
        for child in children:
            rel = f"{rel_dir}/{child.name}" if rel_dir else child.name
            if never_indexed(child.name) and child.is_dir(follow_symlinks=False):
                continue
            if leftovers is not None and _SIDECAR_TEMP.match(child.name):
                if child.is_file(follow_symlinks=False):
                    leftovers.append(Path(child.path))
                continue
            if child.is_symlink():
                target = os.path.realpath(child.path)
                if not os.path.exists(target):
                    skips.append(Skip(display_name(rel), "symlink is broken or loops"))
                    continue
                if not inside(target, root):
                    skips.append(Skip(display_name(rel), "symlink points outside the KB root"))
                    continue
            try:
                is_dir = child.is_dir()
            except OSError:
                skips.append(Skip(display_name(rel), "symlink loops"))
                continue
            if is_dir:
                if child.name == STORE_DIR or ignored(rel, True, ignores):
                    continue
                if not utf8_name(child.name):
                    skips.append(Skip(display_name(rel), _NOT_UTF8 + "; nothing in it is indexed"))
                elif depth >= MAX_DEPTH:
                    skips.append(
                        Skip(
                            display_name(rel),
                            f"folder is nested more than {MAX_DEPTH} levels deep; nothing in it is indexed",
                        )
                    )
                else:
                    folders.append((child.path, rel, ignores, depth + 1))
                continue
            if child.name.endswith(SIDECAR_SUFFIX):
                continue
            if not include(rel):
                suffix = os.path.splitext(child.name)[1].lower()
                if (
                    not_included is not None
                    and suffix in DOCUMENT_FORMATS
                    and not (exclude(rel) or ignored(rel, False, ignores))
                ):
                    not_included[suffix] += 1
                continue
            if exclude(rel) or ignored(rel, False, ignores):
                continue
            if not utf8_name(child.name):
                skips.append(Skip(display_name(rel), _NOT_UTF8))
                continue
            try:
                st = child.stat()
            except OSError as exc:
                skips.append(Skip(rel, f"file cannot be read ({exc.strerror})"))
                if unreadable is not None:
                    unreadable.append(rel)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > max_bytes:
                skips.append(
                    Skip(
                        rel,
                        f"file is {st.st_size / 1048576:.1f} MB, over [sync] max_file_mb = {config.max_file_mb:g}",
                    )
                )
                continue
            # The sidecar is looked up in the listing: most files have none, and a failing
            # stat per file was a syscall and a Path each (issue 14: 100k-file walks).
            side = by_name.get(child.name + SIDECAR_SUFFIX)
            side_mtime: int | None = None
            side_size: int | None = None
            if side is not None:
                try:
                    sst = side.stat()
                    side_mtime, side_size = sst.st_mtime_ns, sst.st_size
                except OSError:
                    pass
            entries.append(
                FileEntry(rel, child.path, st.st_mtime_ns, st.st_size, side_mtime, side_size)
            )
        stack.extend(reversed(folders))
    entries.sort(key=lambda e: e.rel)
    return entries, skips


def name_title(stem: str, folder: str = "") -> str:
    """The title a file name gives a document that names none: its stem, namespaces read.

    Logseq writes the page ``Whiteboard/Tool/Eraser`` to ``Whiteboard___Tool___Eraser.md``
    (``Whiteboard%2FTool.md`` before 2022) and links to it as ``[[Whiteboard/Tool/Eraser]]``:
    the title is the page's name, so those links find it and a hit shows it. A folder's own
    page (``index.md``, Hugo's ``_index.md``, ``README.md``) is named by its ``folder``, the last
    part of the document's folder path ("" at the KB's root, where the stem stays), without the
    leading underscores that mark a folder a site generator does not publish as a page (Hugo's
    ``_common``, Jekyll's ``_docs``): ``_common/_index.md`` is "common".
    """
    if folder and stem.lower() in _FOLDER_PAGES:
        return name_title(folder.lstrip("_") or folder)
    title = stem.replace("___", "/")
    if "%2" in title:
        title = re.sub("%2[Ff]", "/", title)
    return title if title.strip("/") else stem


def utf8_name(name: str) -> bool:
    """Whether a file name from the file system is valid UTF-8 (the scan skips others)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes arrive as surrogate escapes
        return False
    return True


def decode(data: bytes) -> tuple[str, bool]:
    """Decode document bytes as UTF-8, replacing invalid sequences.

    Returns:
        The text (with a leading BOM removed and newlines normalised to LF) and whether
        any byte had to be replaced.
    """
    try:
        text, lossy = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, lossy = data.decode("utf-8", errors="replace"), True
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return text, lossy
