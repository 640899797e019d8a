"""Opt-in document writes for agents: create a note, append to a note or a section (issue 11).

Pinakes itself never modifies a document (DESIGN §13); these functions run only when a user
turned agent writes on (``pinakes-mcp --allow-write``). Every path is confined exactly like a
read: KB-relative, no ``..``, not absolute, never through a symlink out of the root, never in a
dot-folder or the store, and it must be a document the KB indexes. Writes are atomic (temp file
and rename); the caller syncs afterwards so the change is searchable.
"""

from __future__ import annotations

import contextlib
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import pathspec
from pydantic import BaseModel, ConfigDict, Field

from pinakes_core.documents import never_indexed
from pinakes_core.errors import PinakesError
from pinakes_core.sections import section_span
from pinakes_core.sidecar import SIDECAR_SUFFIX, atomic_write
from pinakes_core.sources import source_type

if TYPE_CHECKING:
    from pinakes_core.kb import KB

__all__ = ["MAX_WRITE_CHARS", "PathError", "WriteResult", "append", "confine", "write_note"]

#: largest text one write accepts (characters); a note is not a data dump.
MAX_WRITE_CHARS = 200_000

_DRIVE = re.compile(r"^[A-Za-z]:")
_NEWLINES = re.compile(r"\r\n?")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_HINT = "Use a path relative to the KB root, e.g. notes/idea.md (no '..', not absolute)."


class PathError(PinakesError):
    """A client-supplied path is absolute, climbs out of the KB, or is not a document path."""


class WriteResult(BaseModel):
    """What a write did."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(description="the document's KB-relative path")
    action: str = Field(description="created | overwritten | appended")
    section: str | None = Field(default=None, description="the section appended to, if any")
    chars: int = Field(description="characters written by this call")


def confine(root: Path, ref: str, name: str | None = None) -> str:
    """Return ``ref`` as a KB-relative POSIX path, refusing anything that could leave ``root``.

    ``name`` (the KB's name) only makes the messages more specific.

    Raises:
        PathError: for a URI, an absolute or drive path, ``~``, ``..`` or a NUL byte, or a path
            that resolves outside the root (a symlink on the way).
    """
    if not ref.strip() or "\x00" in ref:
        raise PathError("The path is empty or holds a NUL byte.", _HINT)
    if "://" in ref or ref.startswith("file:"):
        raise PathError(f"{ref!r} is not a pnk:// URI or a KB-relative path.", _HINT)
    posix = ref.strip().replace("\\", "/")
    path = PurePosixPath(posix)
    if path.is_absolute() or posix.startswith("~") or _DRIVE.match(posix):
        raise PathError(f"{ref!r} is an absolute path; only KB-relative paths are served.", _HINT)
    if ".." in path.parts:
        raise PathError(f"{ref!r} climbs out of the KB ('..' is not allowed).", _HINT)
    root = root.resolve()
    if not (root / path).resolve().is_relative_to(root):
        kb = f"the KB {name!r}" if name else "the KB"
        raise PathError(f"{ref!r} leads outside {kb} (a symlink).", _HINT)
    return path.as_posix().removeprefix("./")


def _on_disk(root: Path, rel: str) -> str:
    """``rel`` spelled as the file system holds it, component by component.

    A name typed composed (NFC) finds the folder or note macOS stored decomposed (NFD), and the
    other way round, so a write goes into the folder that is there rather than beside a second
    one that looks the same. Components that do not exist yet keep the spelling given.
    """
    parts = PurePosixPath(rel).parts
    here = root
    out: list[str] = []
    for i, part in enumerate(parts):
        if not os.path.lexists(here / part):
            key = unicodedata.normalize("NFC", part)
            try:
                with os.scandir(here) as entries:
                    found = next(
                        (e.name for e in entries if unicodedata.normalize("NFC", e.name) == key),
                        None,
                    )
            except OSError:  # not a folder (yet): nothing to match
                found = None
            if found is None:
                out.extend(parts[i:])
                break
            part = found
        out.append(part)
        here = here / part
    return "/".join(out)


def _document_path(kb: KB, ref: str) -> tuple[str, Path]:
    """``ref``'s KB-relative path, and the file a write changes: where a symlink leads."""
    rel = _on_disk(kb.root, confine(kb.root, ref))
    _check_document(kb, rel)
    root = kb.root.resolve()
    real = (root / rel).resolve()
    if real != root / rel:  # a symlink on the way (confine kept it inside the KB)
        # Writing through the link keeps it a link; the file it leads to must be a note too.
        _check_document(kb, real.relative_to(root).as_posix(), via=rel)
    return rel, real


def _check_document(kb: KB, rel: str, via: str | None = None) -> None:
    shown = f"{via!r} leads to {rel!r}, which" if via else repr(rel)
    parts = PurePosixPath(rel).parts
    folders, name = parts[:-1], parts[-1] if parts else ""
    if any(map(never_indexed, folders)) or name.startswith(".") or rel.endswith(SIDECAR_SUFFIX):
        raise PathError(
            f"{shown} is inside a hidden or package folder (never indexed) or is a sidecar; "
            "notes go in visible folders.",
            _HINT,
        )
    include = pathspec.PathSpec.from_lines("gitignore", kb.config.sync.include)
    exclude = pathspec.PathSpec.from_lines("gitignore", kb.config.sync.exclude)
    if source_type(rel) in ("pdf", "code"):  # never write text over a PDF or a source file
        raise PathError(f"{shown} is a {source_type(rel)} file, not a note.", _HINT)
    if not include.match_file(rel) or exclude.match_file(rel):
        raise PathError(
            f"{shown} is not a document this KB indexes ([sync] include/exclude).",
            "Use a .md path, e.g. notes/idea.md.",
        )


@contextlib.contextmanager
def _os_errors(rel: str) -> Iterator[None]:
    """The file system's refusal (a name too long, a read-only folder) as one sentence."""
    try:
        yield
    except OSError as exc:
        raise PinakesError(
            f"{rel} could not be written: {exc.strerror or exc}.",
            "Use a shorter name or another folder.",
        ) from None


def _check_text(text: str) -> None:
    if len(text) > MAX_WRITE_CHARS:
        raise PinakesError(
            f"The text is {len(text):,} characters; one write takes at most {MAX_WRITE_CHARS:,}.",
            "Split it into several notes.",
        )
    if "\x00" in text:
        raise PinakesError("The text holds a NUL byte.", "Send plain text.")


def write_note(kb: KB, path: str, text: str, *, overwrite: bool = False) -> WriteResult:
    """Create the Markdown note ``path`` (folders made as needed) holding ``text``.

    Raises:
        PathError: if ``path`` is not a confined document path.
        PinakesError: if the file exists and ``overwrite`` is false, or the text is too big.
    """
    rel, target = _document_path(kb, path)
    _check_text(text)
    with _os_errors(rel):
        existed = target.exists()
        if existed and not overwrite:
            raise PinakesError(
                f"{rel} already exists; it was not changed.",
                "Pass overwrite=true to replace it, or append to it instead.",
            )
        if existed and not target.is_file():
            raise PathError(f"{rel} is a folder, not a note.", _HINT)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, text if text.endswith("\n") else text + "\n")
    return WriteResult(path=rel, action="overwritten" if existed else "created", chars=len(text))


def append(kb: KB, path: str, text: str, *, section: str | None = None) -> WriteResult:
    """Append ``text`` to the existing note ``path``, or to the end of its ``section``.

    A blank line separates the new text from what was there.

    Raises:
        PathError: if ``path`` is not a confined document path.
        PinakesError: if the note does not exist, the section is unknown, or the text is too big.
    """
    rel, target = _document_path(kb, path)
    _check_text(text)
    if not target.is_file():
        raise PinakesError(
            f"{rel} does not exist.", "Create it with pinakes_write_note, or check the path."
        )
    # Before the note is read: a 40 MB note took the server from 354 MB to 1.8 GB (issue 34),
    # and a note over the limit is not indexed anyway.
    limit_mb = kb.config.sync.max_file_mb
    size = target.stat().st_size
    if size > limit_mb * 1024 * 1024:
        raise PinakesError(
            f"{rel} is {size / 1048576:.1f} MB, over [sync] max_file_mb = {limit_mb:g}, so it "
            "is not indexed and nothing was appended to it.",
            "Append to a smaller note, or split this one.",
        )
    try:
        raw = target.read_bytes().decode("utf-8")  # line ends as they are
    except UnicodeDecodeError:
        raise PinakesError(
            f"{rel} is not valid UTF-8; it was not changed.", "Fix its encoding first."
        ) from None
    # The file keeps its own bytes and line ends (CRLF, CR): only the new lines are added, in
    # the style of its first line end.
    rows = _LINE.findall(raw)
    nl = next((row[len(row.rstrip("\r\n")) :] for row in rows if row.endswith(("\r", "\n"))), "\n")
    addition = _NEWLINES.sub("\n", text).strip("\n").replace("\n", nl) + nl
    chosen: str | None = None
    if section:
        # Lines are counted as the reader counts them: any line end, no BOM.
        span = section_span(_NEWLINES.sub("\n", raw.removeprefix("\ufeff")), section)
        if span is None:
            raise PinakesError(f"{rel} has no heading {section!r}.", "Read it to see its headings.")
        heading, _, end = span
        chosen = " › ".join(heading.path)
        head = "".join(rows[:end]).rstrip("\r\n")
        tail = "".join(rows[end:]).lstrip("\r\n")
        new = head + nl + nl + addition + (nl + tail if tail else "")
    else:
        new = (raw.rstrip("\r\n") + nl + nl if raw.strip() else "") + addition
    with _os_errors(rel):
        atomic_write(target, new)
    return WriteResult(path=rel, action="appended", section=chosen, chars=len(text))
