"""Sidecars: ``<file>.pnk.yaml`` beside each document (DESIGN §2, §13).

Sidecars are the user's files, and untrusted input. They are read only when they are regular
files inside the KB (a symlink out of it is refused, as for documents), at most 256 KB, and YAML
that cannot blow up when loaded (:func:`~pinakes_core.intake.check_yaml`). Pinakes writes them
only through :func:`write_sidecar` and :func:`append_link`, which edit the text minimally (see
``_yamledit``: line ends, BOM, markers, quoting, long lines and comments stay as the user wrote
them), check the result parses to exactly the intended data, and replace the file atomically
under a temp-file lock that lets the next sync remove what a killed write left. A sidecar that
fails to parse is never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinakes_core.config import normalise_rel
from pinakes_core.errors import PinakesError, SidecarError, UnsafeFileError
from pinakes_core.intake import (
    MAX_YAML_BYTES,
    YamlLimitError,
    check_yaml,
    inside,
    read_limited,
    without_surrogates,
    yaml_loader,
)
from pinakes_core.uri import is_ulid

if TYPE_CHECKING:
    from ruamel.yaml import YAML

__all__ = [
    "SIDECAR_SUFFIX",
    "LinkSpec",
    "Sidecar",
    "append_link",
    "atomic_write",
    "edit_sidecar",
    "read_sidecar",
    "remove_leftover",
    "sidecar_path",
    "write_sidecar",
    "write_skeleton",
]

SIDECAR_SUFFIX = ".pnk.yaml"


def sidecar_path(document: Path) -> Path:
    """Return the sidecar path of ``document`` (full file name + ``.pnk.yaml``)."""
    return document.with_name(document.name + SIDECAR_SUFFIX)


@dataclass(frozen=True)
class LinkSpec:
    """One authored link: a raw target and its relation."""

    to: str
    rel: str = "links-to"
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sidecar:
    """The Pinakes-relevant content of a sidecar (other keys are kept but not interpreted)."""

    id: str | None
    title: str | None = None
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    links: tuple[LinkSpec, ...] = ()


def _clip(value: Any) -> str:
    """``repr`` of a user value, shortened for a one-sentence message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _str_list(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return tuple(str(v).strip() for v in value if str(v).strip())
    raise SidecarError(f"{path}: key {key!r} must be a list of strings, got {_clip(value)}.")


def parse_links(path: Path, value: Any) -> tuple[LinkSpec, ...]:
    """Validate a ``links:`` value (from a sidecar or frontmatter) into :class:`LinkSpec` items.

    Raises:
        SidecarError: if an entry is neither a string nor a mapping with a string ``to``.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SidecarError(f"{path}: key 'links' must be a list of {{to, rel}} entries.")
    links = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            links.append(LinkSpec(to=item.strip()))
            continue
        if not isinstance(item, Mapping) or not isinstance(item.get("to"), str):
            raise SidecarError(
                f"{path}: links[{i}] needs a string 'to:' target, got {_clip(item)}."
            )
        rel = item.get("rel", "links-to")
        extra = {str(k): v for k, v in item.items() if k not in ("to", "rel")}
        links.append(LinkSpec(to=item["to"].strip(), rel=normalise_rel(str(rel)), extra=extra))
    return tuple(links)


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SidecarError(f"{path} is not UTF-8 text.", "Re-save it as UTF-8.") from None


def _read_text(path: Path, root: Path | None) -> str:
    try:
        return _decode(path, read_limited(path, limit=MAX_YAML_BYTES, root=root))
    except UnsafeFileError as exc:
        raise SidecarError(exc.message, exc.hint) from None


def _load(path: Path, text: str) -> Any:
    """Load sidecar YAML round-trip, after checking it cannot blow up (``check_yaml``)."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        check_yaml(text)
        return _yaml().load(text)
    except YamlLimitError as exc:
        raise SidecarError(
            f"{path}: the YAML was not loaded: {exc}.",
            "Simplify the file; Pinakes leaves this document out until then.",
        ) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise SidecarError(
            f"{path}{where}: malformed YAML: {exc.problem}.",
            "Fix the YAML; Pinakes leaves this document out until then.",
        ) from None
    except YAMLError as exc:
        raise SidecarError(f"{path}: malformed YAML: {_clip(str(exc))}.") from None


def read_sidecar(path: Path, raw: bytes | None = None, *, root: Path | None = None) -> Sidecar:
    """Read and validate a sidecar file.

    Args:
        path: the sidecar.
        raw: its bytes, when the caller has read them already.
        root: the KB root (resolved); when given, a sidecar that is a symlink leading out of the
            KB is refused, as documents are.

    Raises:
        SidecarError: if the file is not a regular file, over 256 KB, not YAML, too complex to
            load safely, not a mapping, or holds an invalid value; the message names the file
            and, for syntax errors, the line.
    """
    text = _read_text(path, root) if raw is None else _decode(path, raw)
    data = without_surrogates(_load(path, text))  # a copy: only read here
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SidecarError(f"{path}: a sidecar must be a YAML mapping, got {type(data).__name__}.")
    doc_id = data.get("id")
    if doc_id is not None and (not isinstance(doc_id, str) or not is_ulid(doc_id)):
        raise SidecarError(
            f"{path}: key 'id' has bad value {_clip(doc_id)}; it must be a 26-character ULID.",
            "Delete the line and Pinakes mints a new id on the next sync.",
        )
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise SidecarError(f"{path}: key 'title' must be a string, got {_clip(title)}.")
    return Sidecar(
        id=doc_id,
        title=title,
        tags=_str_list(path, "tags", data.get("tags")),
        aliases=_str_list(path, "aliases", data.get("aliases")),
        links=parse_links(path, data.get("links")),
    )


def _yaml() -> YAML:
    # ruamel loads only when a sidecar is read or written, never to open or search a KB
    # (issue 14, start-up cost); likewise _yamledit and ruamel's comment types below.
    yaml = yaml_loader(round_trip=True)
    yaml.preserve_quotes = True
    return yaml


#: Every temp file an atomic write makes is ``.pnk-<random>.tmp``: short, so a document name
#: of up to 255 bytes still gets one (issue 34), and one pattern for the sync to clean.
TEMP_PREFIX = ".pnk-"

#: How long a writer waits for another Pinakes process editing the same file.
LOCK_WAIT_S = 30.0


@contextlib.contextmanager
def locked(path: Path, what: str) -> Iterator[os.stat_result]:
    """Hold an exclusive ``flock`` on the file ``path`` for a read-modify-write; yields its stat.

    Every Pinakes process editing the file (a sidecar's links, a note's section) takes this
    lock, so their edits queue instead of overwriting each other (issue 34). An atomic write
    replaces the file, so a waiter checks, once it holds the lock, that it locked the file now
    at ``path`` and otherwise locks the new one.

    Raises:
        PinakesError: if another process kept the file locked for :data:`LOCK_WAIT_S`.
        FileNotFoundError: if ``path`` does not exist.
    """
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise PinakesError(
                            f"{what} is being edited by another process; it was not changed.",
                            "Try again in a moment.",
                        ) from None
                    time.sleep(0.005)
            now = os.stat(path)
            if now.st_ino == os.fstat(fd).st_ino and now.st_dev == os.fstat(fd).st_dev:
                yield now
                return
        finally:
            os.close(fd)


def _locked_temp(directory: Path) -> tuple[int, str]:
    """Create a temp file in ``directory`` and hold an exclusive lock on it.

    The lock tells :func:`remove_leftover` that the file belongs to a live writer. A cleaner
    may delete the file between its creation and the lock; then a new one is made.
    """
    for _ in range(10):
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)
    raise OSError(f"could not create a temp file in {directory}")


def _atomic_write(
    path: Path, text: str, *, mode: int | None = None, exclusive: bool = False
) -> None:
    """Replace ``path`` with ``text`` atomically (temp file, fsync, rename).

    With ``exclusive``, create ``path`` only if nothing is there (``FileExistsError``
    otherwise), still whole or not at all.

    A symlink at ``path`` is replaced, never followed: a link planted in a KB between a check
    and the rename cannot send the write outside it. Callers that mean to write through a
    link (the user's own fleet registry) resolve the path first.

    ``mode``: the permission bits to give the file (default: the replaced file's, or what a
    new file gets).
    """
    fd, tmp = _locked_temp(path.parent)
    try:
        if mode is None:
            try:  # keep the replaced file's mode (mkstemp makes 0600), else a new file's
                mode = stat.S_IMODE(os.stat(path).st_mode)
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
            if exclusive:
                # A hard link fails if anything is at `path` already, so of several writers
                # creating one new note exactly one succeeds, with its whole text.
                os.link(tmp, path, follow_symlinks=False)
                os.unlink(tmp)
            else:
                os.replace(tmp, path)  # still locked: a cleaner never sees it unlocked
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_leftover(path: Path) -> bool:
    """Delete a temp file an interrupted sidecar write left, unless a live writer holds it.

    Returns:
        Whether the file was removed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a writer is still at work
        if os.stat(path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
            return False
        path.unlink()
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _target(path: Path, root: Path | None) -> Path:
    """The file a sidecar write replaces: the sidecar itself, or the file its symlink names."""
    if root is None or not path.is_symlink():
        return path
    real = Path(os.path.realpath(path))
    if not inside(real, root):
        raise SidecarError(
            f"{path} is a symlink leading outside the KB; Pinakes does not write through it.",
            "Replace the symlink with a file inside the KB.",
        )
    return real


#: Write a text file atomically (temp file in the same folder, fsync, rename); public for the
#: agent write tools (:mod:`pinakes_core.manage.writing`) and host config merging.
atomic_write = _atomic_write


def write_skeleton(path: Path, doc_id: str) -> None:
    """Create a new sidecar holding only ``id:``; never touches an existing file.

    Raises:
        FileExistsError: if a sidecar (or a symlink, even a broken one) exists at ``path``.
    """
    if path.exists() or path.is_symlink():
        raise FileExistsError(path)
    _atomic_write(path, f"id: {doc_id}\n")


def _rewrite(
    path: Path,
    edit: Callable[[str], str | None],
    change: Callable[[Any], Any],
    root: Path | None,
) -> tuple[str, str]:
    """Edit a sidecar and replace it atomically; returns its text before and after.

    The file is read once and validated; a malformed sidecar is never overwritten. ``edit``
    makes a minimal textual edit (or returns ``None`` for a layout it does not handle, when the
    file is re-dumped round-trip with ``change`` instead). Either result must parse to exactly
    the data ``change`` makes of the original, or nothing is written. Other processes editing
    the same sidecar wait for this one (:func:`locked`), so no edit is lost.
    """
    target = _target(path, root)
    with locked(target, str(path)):
        return _rewrite_locked(path, target, edit, change, root)


def _rewrite_locked(
    path: Path,
    target: Path,
    edit: Callable[[str], str | None],
    change: Callable[[Any], Any],
    root: Path | None,
) -> tuple[str, str]:
    from ruamel.yaml.error import YAMLError

    from pinakes_core.read._yamledit import plain_data, redump

    original = _read_text(target, root)
    read_sidecar(path, original.encode("utf-8"))
    expected = plain_data(change(_load(path, original)))
    for attempt in (edit, lambda text: redump(text, change)):
        try:
            text = attempt(original)
        except (YAMLError, ValueError):  # redump's load cannot build a value (2024-02-30)
            continue
        if text is None:
            continue
        try:
            check_yaml(text)
            if plain_data(_yaml().load(text)) == expected:
                break
        except (YAMLError, YamlLimitError):
            pass
    else:
        raise SidecarError(
            f"{path}: Pinakes could not edit this sidecar without changing other values; it was left as it was.",
            "Make the change by hand.",
        )
    _atomic_write(target, text, mode=stat.S_IMODE(os.stat(target).st_mode))
    return original, text


def write_sidecar(path: Path, update: Mapping[str, Any], *, root: Path | None = None) -> str:
    """Set top-level keys of an existing sidecar, keeping everything else byte-for-byte.

    Only the changed values are rewritten, in place, in the file's own style (line ends, BOM,
    markers, quoting and comments stay); a new key is added after the last one. The result is
    parsed again before it replaces the file atomically. Returns the new text.

    Args:
        path: the sidecar.
        update: the keys to set (scalars or lists of scalars are edited in place).
        root: the KB root (resolved): a sidecar symlinked out of the KB is refused.

    Raises:
        SidecarError: if the existing sidecar cannot be parsed (it is then left untouched).
    """
    from ruamel.yaml.comments import CommentedMap

    from pinakes_core.read._yamledit import set_keys

    def change(data: Any) -> Any:
        data = CommentedMap() if data is None else data
        for key, value in update.items():
            data[key] = value
        return data

    return _rewrite(path, lambda text: set_keys(text, update), change, root)[1]


def append_link(
    path: Path, entry: Mapping[str, Any], *, root: Path | None = None
) -> tuple[str, str]:
    """Append one entry to the sidecar's ``links:`` list, keeping everything else as it was.

    Creates ``links:`` when absent. The new entry follows the list's own style (block or flow,
    its indentation, the file's line ends); nothing else in the file changes. The write is
    atomic and validated by parsing the result.

    Args:
        path: the sidecar.
        entry: the link (``to``, ``rel`` and optional extra scalar keys).
        root: the KB root (resolved): a sidecar symlinked out of the KB is refused.

    Returns:
        The sidecar text before and after.

    Raises:
        SidecarError: if the sidecar cannot be parsed (it is then left untouched).
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    from pinakes_core.read._yamledit import append_to_list

    def change(data: Any) -> Any:
        data = CommentedMap() if data is None else data
        if data.get("links") is None:
            data["links"] = CommentedSeq()
        data["links"].append(CommentedMap(entry))
        return data

    return _rewrite(path, lambda text: append_to_list(text, "links", entry), change, root)


def edit_sidecar(
    path: Path, change: Callable[[Any], Any], *, root: Path | None = None
) -> tuple[str, str]:
    """Let ``change`` edit the round-trip-parsed sidecar, then write it back atomically.

    ``change`` receives the parsed mapping (``None`` for an empty file) and returns the data to
    write; comments, order and quoting of everything it leaves alone are kept, and the result
    must parse to exactly what ``change`` made. ``ask --write-suggestions`` and ``pnk review``
    use it (a link alone is appended by :func:`append_link`, which edits the text minimally).

    Returns:
        The sidecar text before and after.

    Raises:
        SidecarError: if the sidecar cannot be parsed (it is then left untouched).
    """
    return _rewrite(path, lambda text: None, change, root)
