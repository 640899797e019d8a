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
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from pinakes_core.errors import PinakesError
from pinakes_core.read.documents import never_indexed, path_spec
from pinakes_core.read.sections import section_span
from pinakes_core.read.sidecar import SIDECAR_SUFFIX, atomic_write, locked
from pinakes_core.read.sources import source_type

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
    include = path_spec(kb.config.sync.include)
    exclude = path_spec(kb.config.sync.exclude)
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

    Without ``overwrite`` the note is created exclusively: of several calls creating one new
    path at once, exactly one succeeds and the others are told it exists.

    Raises:
        PathError: if ``path`` is not a confined document path.
        PinakesError: if the file exists and ``overwrite`` is false, it is read-only, or the
            text is too big.
    """
    rel, target = _document_path(kb, path)
    _check_text(text)
    body = text if text.endswith("\n") else text + "\n"
    exists = PinakesError(
        f"{rel} already exists; it was not changed.",
        "Pass overwrite=true to replace it, or append to it instead.",
    )
    with _os_errors(rel):
        existed = target.exists()
        if existed and not overwrite:
            raise exists
        if existed and not target.is_file():
            raise PathError(f"{rel} is a folder, not a note.", _HINT)
        if existed:
            _check_writable(rel, os.stat(target))
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            atomic_write(target, body, exclusive=not existed)
        except FileExistsError:
            if not overwrite:
                raise exists from None
            atomic_write(target, body)  # made meanwhile: overwriting was asked for
    return WriteResult(path=rel, action="overwritten" if existed else "created", chars=len(text))


def append(kb: KB, path: str, text: str, *, section: str | None = None) -> WriteResult:
    """Append ``text`` to the existing note ``path``, or to the end of its ``section``.

    A blank line separates the new text from what was there. Appending to the end writes in
    place (``O_APPEND``), so it never drops bytes another writer (``>>``, an editor) added;
    appending to a section rewrites the note, under a lock other Pinakes writers take too, and
    only if the note did not change since it was read (otherwise it is read again).

    Raises:
        PathError: if ``path`` is not a confined document path.
        PinakesError: if the note does not exist or is read-only, the section is unknown, the
            note is too big to edit a section of, or the text is too big.
    """
    rel, target = _document_path(kb, path)
    _check_text(text)
    if not target.is_file():
        raise PinakesError(
            f"{rel} does not exist.", "Create it with pinakes_write_note, or check the path."
        )
    with _os_errors(rel), locked(target, rel) as before:
        _check_writable(rel, before)
        if section is None:
            _append_in_place(rel, target, text)
            return WriteResult(path=rel, action="appended", chars=len(text))
        limit = kb.config.sync.max_file_mb * 1024 * 1024
        if before.st_size > limit:
            raise PinakesError(
                f"{rel} is {before.st_size / 1048576:.0f} MB, over [sync] max_file_mb = "
                f"{kb.config.sync.max_file_mb:g}; a section of it is not edited.",
                "Append to the end of the note instead (no section).",
            )
        for _ in range(_RETRIES):
            raw = _utf8(rel, target.read_bytes())
            new, chosen = _with_section(rel, raw, text, section)
            now = os.stat(target)
            if (now.st_size, now.st_mtime_ns) == (len(raw.encode("utf-8")), before.st_mtime_ns):
                atomic_write(target, new)
                return WriteResult(path=rel, action="appended", section=chosen, chars=len(text))
            before = now  # another writer (not Pinakes: it holds no lock) added to it: again
    raise PinakesError(
        f"{rel} kept changing while the section was edited; it was not changed.",
        "Try again once the other writer is done.",
    )


#: How often a section append re-reads a note another (non-Pinakes) writer keeps changing.
_RETRIES = 5


def _check_writable(rel: str, info: os.stat_result) -> None:
    """Refuse a note the user made read-only (no write bit at all), even for root."""
    if not info.st_mode & 0o222:
        raise PinakesError(
            f"{rel} is read-only (mode {stat.S_IMODE(info.st_mode):o}); it was not changed.",
            "Make it writable (chmod u+w) if agents may change it.",
        )


def _utf8(rel: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")  # line ends as they are
    except UnicodeDecodeError:
        raise PinakesError(
            f"{rel} is not valid UTF-8; it was not changed.", "Fix its encoding first."
        ) from None


def _line_end(rows: list[str]) -> str:
    """The note's own line end (that of its first line), a newline when it has none."""
    return next(
        (row[len(row.rstrip("\r\n")) :] for row in rows if row.endswith(("\r", "\n"))), "\n"
    )


def _addition(text: str, nl: str) -> str:
    return _NEWLINES.sub("\n", text).strip("\n").replace("\n", nl) + nl


def _append_in_place(rel: str, target: Path, text: str) -> None:
    """Add ``text`` at the end of the note without rewriting a byte of it.

    Only the note's head (for its line-end style) and tail (for the blank line before the new
    text) are read, so a note of any size costs the same.
    """
    fd = os.open(target, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, min(size, _PROBE), 0)
        tail = os.pread(fd, min(size, 8), max(0, size - 8))
        # A small note is checked whole; of a large one only the head is read, for its line ends.
        head_text = _utf8(rel, head) if size <= _PROBE else head.decode("utf-8", "ignore")
        nl = _line_end(_LINE.findall(head_text))
        ends = tail.decode("utf-8", "ignore")
        if not head_text.strip() and size <= _PROBE:
            sep = ""  # nothing but blank lines yet: the text is the note's first line
        elif ends.endswith(nl + nl):
            sep = ""
        elif ends.endswith(("\n", "\r")):
            sep = nl
        else:
            sep = nl + nl
        data = (sep + _addition(text, nl)).encode("utf-8")
        written = os.write(fd, data)  # one write with O_APPEND: never interleaved, never lost
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


#: Bytes of a note's head read to learn its line-end style (and its encoding, when it is small).
_PROBE = 65536


def _with_section(rel: str, raw: str, text: str, section: str) -> tuple[str, str]:
    """The note with ``text`` added at the end of ``section``, and the section's path."""
    # The file keeps its own bytes and line ends (CRLF, CR): only the new lines are added, in
    # the style of its first line end.
    rows = _LINE.findall(raw)
    nl = _line_end(rows)
    # Lines are counted as the reader counts them: any line end, no BOM.
    span = section_span(_NEWLINES.sub("\n", raw.removeprefix("\ufeff")), section)
    if span is None:
        raise PinakesError(f"{rel} has no heading {section!r}.", "Read it to see its headings.")
    heading, _, end = span
    head = "".join(rows[:end]).rstrip("\r\n")
    tail = "".join(rows[end:]).lstrip("\r\n")
    new = head + nl + nl + _addition(text, nl) + (nl + tail if tail else "")
    return new, " › ".join(heading.path)
