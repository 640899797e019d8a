"""Sidecars: ``<file>.pnk.yaml`` beside each document (DESIGN §2, §13).

Sidecars are the user's files. Pinakes reads them with a round-trip YAML parser and writes them
only through :func:`write_sidecar`, which keeps comments, key order and formatting and replaces
the file atomically. A sidecar that fails to parse is never overwritten.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from pinakes_core.errors import SidecarError
from pinakes_core.uri import is_ulid

__all__ = [
    "SIDECAR_SUFFIX",
    "LinkSpec",
    "Sidecar",
    "append_link",
    "atomic_write",
    "edit_sidecar",
    "normalise_rel",
    "read_sidecar",
    "sidecar_path",
    "write_sidecar",
    "write_skeleton",
]

SIDECAR_SUFFIX = ".pnk.yaml"


def sidecar_path(document: Path) -> Path:
    """Return the sidecar path of ``document`` (full file name + ``.pnk.yaml``)."""
    return document.with_name(document.name + SIDECAR_SUFFIX)


def normalise_rel(rel: str) -> str:
    """Normalise a relation name to lower-kebab case (``"Depends On"`` → ``"depends-on"``)."""
    words = "".join(c if c.isalnum() else " " for c in rel.strip().lower()).split()
    return "-".join(words) or "links-to"


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


_SEQ_ITEM = re.compile(r"^(?P<indent> *)- +(?P<rest>\S)")
_KEY_LINE = re.compile(r"^(?P<indent> *)[^\s#-][^:]*:\s*(#.*)?$")


def _sequence_style(text: str) -> tuple[int, int]:
    """Return ruamel's ``(sequence, offset)`` indents as the file's first block sequence has them.

    ``links:`` followed by ``  - to: x`` is offset 2, sequence 4; the default is (4, 2).
    """
    lines = text.splitlines()
    for above, line in itertools.pairwise(lines):
        key, item = _KEY_LINE.match(above), _SEQ_ITEM.match(line)
        if key and item:
            offset = len(item["indent"]) - len(key["indent"])
            return offset + (item.start("rest") - len(item["indent"])), offset
    return 4, 2


def _yaml(text: str = "") -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    sequence, offset = _sequence_style(text)
    yaml.indent(mapping=2, sequence=sequence, offset=offset)
    return yaml


def _str_list(path: Path, key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return tuple(str(v).strip() for v in value if str(v).strip())
    raise SidecarError(f"{path}: key {key!r} must be a list of strings, got {value!r}.")


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
            raise SidecarError(f"{path}: links[{i}] needs a string 'to:' target, got {item!r}.")
        rel = item.get("rel", "links-to")
        extra = {str(k): v for k, v in item.items() if k not in ("to", "rel")}
        links.append(LinkSpec(to=item["to"].strip(), rel=normalise_rel(str(rel)), extra=extra))
    return tuple(links)


def _read_text(path: Path, raw: bytes | None = None) -> str:
    try:
        return (path.read_bytes() if raw is None else raw).decode("utf-8")
    except UnicodeDecodeError:
        raise SidecarError(f"{path} is not UTF-8 text.", "Re-save it as UTF-8.") from None


def read_sidecar(path: Path, raw: bytes | None = None) -> Sidecar:
    """Read and validate a sidecar file (``raw``: its bytes, when the caller has read them).

    Raises:
        SidecarError: if the file is not YAML, not a mapping, or holds an invalid value; the
            message names the file and, for syntax errors, the line.
    """
    text = _read_text(path, raw)
    try:
        data = _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise SidecarError(
            f"{path}{where}: malformed YAML: {exc.problem}.",
            "Fix the YAML; Pinakes leaves this document out until then.",
        ) from None
    except YAMLError as exc:
        raise SidecarError(f"{path}: malformed YAML: {exc}.") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SidecarError(f"{path}: a sidecar must be a YAML mapping, got {type(data).__name__}.")
    doc_id = data.get("id")
    if doc_id is not None and (not isinstance(doc_id, str) or not is_ulid(doc_id)):
        raise SidecarError(
            f"{path}: key 'id' has bad value {doc_id!r}; it must be a 26-character ULID.",
            "Delete the line and Pinakes mints a new id on the next sync.",
        )
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise SidecarError(f"{path}: key 'title' must be a string, got {title!r}.")
    return Sidecar(
        id=doc_id,
        title=title,
        tags=_str_list(path, "tags", data.get("tags")),
        aliases=_str_list(path, "aliases", data.get("aliases")),
        links=parse_links(path, data.get("links")),
    )


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600: keep the replaced file's mode, else a normal file's.
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Write a text file atomically (temp file in the same folder, fsync, rename); public for the
#: agent write tools (:mod:`pinakes_core.writing`) and host config merging.
atomic_write = _atomic_write


def write_skeleton(path: Path, doc_id: str) -> None:
    """Create a new sidecar holding only ``id:``; never touches an existing file.

    Raises:
        FileExistsError: if a sidecar already exists at ``path``.
    """
    if path.exists():
        raise FileExistsError(path)
    _atomic_write(path, f"id: {doc_id}\n")


def _rewrite(path: Path, change: Callable[[Any], Any]) -> tuple[str, str]:
    """Parse a sidecar round-trip, let ``change`` edit the data, write it back atomically.

    The file is validated first and read once; a malformed sidecar is never overwritten.
    Returns the text before and after.
    """
    original = _read_text(path)
    read_sidecar(path, original.encode("utf-8"))
    yaml = _yaml(original)
    data = change(yaml.load(original))
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    text = buffer.getvalue()
    _atomic_write(path, text)
    return original, text


def write_sidecar(path: Path, update: Mapping[str, Any]) -> str:
    """Set top-level keys of an existing sidecar, keeping everything else byte-for-byte.

    The file is parsed round-trip (comments, order and quoting kept), the keys in ``update`` are
    set, and the result replaces the file atomically. Returns the new text.

    Raises:
        SidecarError: if the existing sidecar cannot be parsed (it is then left untouched).
    """
    from ruamel.yaml.comments import CommentedMap

    def change(data: Any) -> Any:
        data = CommentedMap() if data is None else data
        for key, value in update.items():
            data[key] = value
        return data

    return _rewrite(path, change)[1]


def append_link(path: Path, entry: Mapping[str, Any]) -> tuple[str, str]:
    """Append one entry to the sidecar's ``links:`` list, keeping everything else as it was.

    Creates ``links:`` when absent. The write is atomic and round-trip preserving.

    Returns:
        The sidecar text before and after.

    Raises:
        SidecarError: if the sidecar cannot be parsed (it is then left untouched).
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    def change(data: Any) -> Any:
        data = CommentedMap() if data is None else data
        if data.get("links") is None:
            data["links"] = CommentedSeq()
        data["links"].append(CommentedMap(entry))
        return data

    return _rewrite(path, change)


def edit_sidecar(path: Path, change: Callable[[Any], Any]) -> tuple[str, str]:
    """Let ``change`` edit the round-trip-parsed sidecar, then write it back atomically.

    ``change`` receives the parsed mapping (``None`` for an empty file) and returns the data to
    write; comments, order and quoting of everything it leaves alone are kept. This is the
    writer behind :func:`append_link`; ``ask --write-suggestions`` and ``pnk review`` use it.

    Returns:
        The sidecar text before and after.

    Raises:
        SidecarError: if the sidecar cannot be parsed (it is then left untouched).
    """
    return _rewrite(path, change)
