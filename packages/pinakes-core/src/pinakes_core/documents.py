"""Finding and reading documents in a KB folder (DESIGN §2, §13).

Every file is untrusted input: binary files, oversize files, unreadable files and symlinks that
leave the root or loop are reported as skips, never raised. Frontmatter that fails to parse is
a warning; the document is still indexed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from pinakes_core.config import SyncConfig
from pinakes_core.errors import SidecarError
from pinakes_core.sidecar import SIDECAR_SUFFIX, LinkSpec, parse_links

__all__ = [
    "FileEntry",
    "Frontmatter",
    "Skip",
    "decode",
    "parse_frontmatter",
    "scan",
]

_STORE_DIR = ".pinakes"
_MARKDOWN_SUFFIXES = (".md", ".markdown")


@dataclass(frozen=True)
class Skip:
    """A file left out of the index, with the reason in one sentence."""

    path: str
    reason: str


@dataclass(frozen=True)
class FileEntry:
    """A candidate document found by :func:`scan`, with the stat data change detection uses."""

    rel: str
    path: Path
    mtime_ns: int
    size: int
    sidecar_mtime_ns: int | None
    sidecar_size: int | None

    @property
    def is_markdown(self) -> bool:
        """Whether the document is parsed as Markdown (otherwise as plain text)."""
        return self.rel.lower().endswith(_MARKDOWN_SUFFIXES)

    @property
    def sidecar(self) -> Path:
        """The sidecar path beside the document (it may not exist)."""
        return self.path.with_name(self.path.name + SIDECAR_SUFFIX)


@dataclass
class Frontmatter:
    """What Pinakes reads from a Markdown document's YAML frontmatter."""

    title: str | None = None
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    links: tuple[LinkSpec, ...] = ()
    end_line: int = 0  # number of lines the frontmatter block occupies (0 when absent)
    warning: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # the whole mapping (field filters)


def _spec(lines: list[str]) -> pathspec.PathSpec[Any]:
    return pathspec.PathSpec.from_lines("gitignore", lines)


def _gitignore(directory: Path) -> pathspec.GitIgnoreSpec | None:
    path = directory / ".gitignore"
    try:
        return pathspec.GitIgnoreSpec.from_lines(
            path.read_text(encoding="utf-8", errors="replace").splitlines()
        )
    except OSError:
        return None


def scan(root: Path, config: SyncConfig) -> tuple[list[FileEntry], list[Skip]]:
    """Walk ``root`` and return the candidate documents (sorted by path) and the skipped files.

    Dot-directories (``.git``, ``.pinakes``, ``.obsidian`` …) are never entered. ``.gitignore``
    files are honoured at every level when ``config.gitignore`` is set. Symlinks are followed
    only when they stay inside the root and do not loop.
    """
    root = root.resolve()
    include = _spec(config.include)
    exclude = _spec(config.exclude)
    max_bytes = int(config.max_file_mb * 1024 * 1024)
    entries: list[FileEntry] = []
    skips: list[Skip] = []
    seen_dirs: set[str] = set()

    def ignored(rel: str, is_dir: bool, ignores: list[tuple[str, pathspec.GitIgnoreSpec]]) -> bool:
        for base, spec in ignores:
            sub = rel[len(base) + 1 :] if base else rel
            if spec.match_file(sub + "/" if is_dir else sub):
                return True
        return False

    def walk(
        directory: Path, rel_dir: str, ignores: list[tuple[str, pathspec.GitIgnoreSpec]]
    ) -> None:
        real = os.path.realpath(directory)
        if real in seen_dirs:
            skips.append(
                Skip(rel_dir or ".", "symlinked directory loops back to a folder already indexed")
            )
            return
        seen_dirs.add(real)
        if config.gitignore:
            spec = _gitignore(directory)
            if spec is not None:
                ignores = [*ignores, (rel_dir, spec)]
        try:
            # Real entries before symlinks, so a folder is indexed under its own path and a
            # symlink aliasing it is the one reported as a repeat.
            children = sorted(os.scandir(directory), key=lambda e: (e.is_symlink(), e.name))
        except OSError as exc:
            skips.append(Skip(rel_dir or ".", f"folder cannot be read ({exc.strerror})"))
            return
        for child in children:
            rel = f"{rel_dir}/{child.name}" if rel_dir else child.name
            if child.name.startswith(".") and child.is_dir(follow_symlinks=False):
                continue
            if child.is_symlink():
                target = os.path.realpath(child.path)
                if not os.path.exists(target):
                    skips.append(Skip(rel, "symlink is broken or loops"))
                    continue
                if os.path.commonpath([target, str(root)]) != str(root):
                    skips.append(Skip(rel, "symlink points outside the KB root"))
                    continue
            try:
                is_dir = child.is_dir()
            except OSError:
                skips.append(Skip(rel, "symlink loops"))
                continue
            if is_dir:
                if child.name == _STORE_DIR or ignored(rel, True, ignores):
                    continue
                walk(Path(child.path), rel, ignores)
                continue
            if child.name.endswith(SIDECAR_SUFFIX) or not include.match_file(rel):
                continue
            if exclude.match_file(rel) or ignored(rel, False, ignores):
                continue
            try:
                st = child.stat()
            except OSError as exc:
                skips.append(Skip(rel, f"file cannot be read ({exc.strerror})"))
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
            side = Path(child.path + SIDECAR_SUFFIX)
            side_mtime: int | None = None
            side_size: int | None = None
            try:
                sst = side.stat()
                side_mtime, side_size = sst.st_mtime_ns, sst.st_size
            except OSError:
                pass
            entries.append(
                FileEntry(rel, Path(child.path), st.st_mtime_ns, st.st_size, side_mtime, side_size)
            )

    walk(root, "", [])
    entries.sort(key=lambda e: e.rel)
    return entries, skips


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


def _as_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.replace(",", " ").split() if v.strip())
    if isinstance(value, list):
        return tuple(str(v).strip() for v in value if v is not None and str(v).strip())
    return (str(value),)


def parse_frontmatter(rel: str, lines: list[str]) -> Frontmatter:
    """Read a leading ``---`` YAML block from the document's lines.

    Never raises: malformed YAML or bad values produce a :class:`Frontmatter` whose ``warning``
    names the file and line, with ``end_line`` still covering the block so it is not indexed as
    text.
    """
    if not lines or lines[0].rstrip() != "---":
        return Frontmatter()
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return Frontmatter()
    block = "\n".join(lines[1:end])
    result = Frontmatter(end_line=end + 1)
    try:
        data = YAML(typ="safe", pure=True).load(block)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 2}" if mark is not None else ""
        result.warning = f"{rel}{where}: frontmatter is not valid YAML and was ignored"
        return result
    if not isinstance(data, dict):
        if data is not None:
            result.warning = f"{rel}: frontmatter is not a YAML mapping and was ignored"
        return result
    result.fields = data
    title = data.get("title")
    result.title = str(title).strip() if title not in (None, "") else None
    result.tags = _as_list(data.get("tags"))
    result.aliases = _as_list(data.get("aliases"))
    try:
        result.links = parse_links(Path(rel), data.get("links"))
    except SidecarError as exc:
        result.warning = f"{exc.message} (frontmatter links ignored)"
    return result
