"""Reading untrusted input within limits (DESIGN §13).

Every file in a KB folder is untrusted: what it is (a regular file, not a FIFO or a device),
how big it is and where it leads are checked while it is read, never taken from an earlier
``stat``. YAML (frontmatter and sidecars) is scanned as an event stream before anything is
composed from it, so an alias bomb or a deep nest is refused after a bounded amount of work
instead of being expanded in memory.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pinakes_core.errors import UnsafeFileError

if TYPE_CHECKING:
    from ruamel.yaml import YAML

__all__ = [
    "MAX_GITIGNORE_BYTES",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "YamlLimitError",
    "check_yaml",
    "clip",
    "display_name",
    "inside",
    "normal_tag",
    "read_limited",
    "spellings",
    "without_surrogates",
    "yaml_loader",
]

#: The largest .gitignore read: a hand-written ignore file is far smaller.
MAX_GITIGNORE_BYTES = 1 << 20

#: The largest YAML text (a sidecar, a frontmatter block) that is parsed at all. A sidecar of
#: this size holds some three thousand links; the pure-Python parser takes seconds beyond it.
MAX_YAML_BYTES = 256 << 10
#: The most nodes a YAML text may hold once every alias is expanded. Anything that walks the
#: loaded data (validation, ``str()``, error messages) is bounded by this number, which is what
#: defeats "billion laughs" alias bombs. A sidecar with 3,000 links has about 15,000 nodes.
MAX_YAML_NODES = 20_000
#: The deepest nesting of YAML collections accepted (composing is recursive in ruamel).
MAX_YAML_DEPTH = 64

_READ_BLOCK = 1 << 20
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def display_name(name: str) -> str:
    r"""Return a file name that is safe to print and to store.

    Names that are not valid UTF-8 arrive from the OS with surrogate escapes; they are shown
    with ``\xNN`` escapes for the undecodable bytes.
    """
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Return whether the already resolved ``path`` lies at or under the resolved ``root``."""
    path, root = os.fspath(path), os.fspath(root)
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def _too_big(shown: str, limit: int) -> UnsafeFileError:
    return UnsafeFileError(
        f"{shown} is over the {limit / 1048576:g} MB read limit and was not read.",
        "Split the file or raise [sync] max_file_mb.",
    )


def read_limited(
    path: Path, *, limit: int, root: Path | None = None, name: str | None = None
) -> bytes:
    """Return the bytes of the regular file at ``path``, reading at most ``limit`` bytes.

    The size limit is applied while reading, so a file that grows, or lies about its size
    (``/proc``, a device), never makes Pinakes read more than ``limit`` + 1 bytes. FIFOs,
    sockets and devices are refused before any byte is read, and opening never blocks.

    Args:
        path: the file.
        limit: the most bytes accepted.
        root: when given (resolved), the file must resolve to a path inside it: a symlink
            leading out of the KB is refused.
        name: how to name the file in messages (default: ``path``).

    Raises:
        UnsafeFileError: the file is not a regular file, is over ``limit``, or leads out of
            ``root``.
        OSError: the file cannot be opened or read.
    """
    shown = display_name(name or str(path))
    target = os.path.realpath(path) if root is not None else os.fspath(path)
    if root is not None and not inside(target, root):
        raise UnsafeFileError(
            f"{shown} leads outside the KB (through a symlink); it is not read.",
            "Replace the symlink with a file inside the KB.",
        )
    before = os.stat(target)
    if not stat.S_ISREG(before.st_mode):
        raise UnsafeFileError(
            f"{shown} is not a regular file (a FIFO, socket, device or folder); it is not read.",
            "Replace it with a regular file.",
        )
    flags = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | (_O_NOFOLLOW if root is not None else 0)
    fd = os.open(target, flags)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise UnsafeFileError(f"{shown} changed while it was opened; it is not read.")
        if now.st_size > limit:
            raise _too_big(shown, limit)
        parts: list[bytes] = []
        total = 0
        while True:
            block = os.read(fd, min(_READ_BLOCK, limit + 1 - total))
            if not block:
                break
            parts.append(block)
            total += len(block)
            if total > limit:
                raise _too_big(shown, limit)
        return b"".join(parts)
    finally:
        os.close(fd)


_LEADING = re.compile(r"^[ \t?-]*", re.MULTILINE)


def _surely_within(text: str, max_nodes: int, max_depth: int) -> bool:
    """A cheap proof, for most real YAML, that the event scan would find nothing.

    Without an anchor (``&``) no alias can repeat anything. Every node but the first is
    introduced by an indicator (``:`` for a key's value, ``-`` for an item, ``,`` in a flow,
    ``[``/``{`` for a flow collection, ``?`` for a complex key), each of which introduces at
    most three (a collection, a key, a value), which bounds the node count. Every level of
    nesting needs a flow opener or, in block style, more indentation or another ``-``/``?`` at
    the start of a line; their counts bound the depth.
    """
    if "&" in text:
        return False
    indicators = sum(text.count(c) for c in ":-,[{?")
    if 3 * indicators + 2 >= max_nodes:
        return False
    flow = text.count("[") + text.count("{")
    deepest = max((len(lead) for lead in _LEADING.findall(text)), default=0)
    return flow + deepest + 1 < max_depth


_SURROGATE = re.compile("[\ud800-\udfff]")


def spellings(name: str) -> tuple[str, ...]:
    """``name`` as given, then in Unicode's composed (NFC) and decomposed (NFD) forms, once each.

    A file named on macOS is stored decomposed ("cafe" + U+0301) while the name typed for it is
    composed: a path lookup tries every spelling.
    """
    return tuple(dict.fromkeys((name, *(unicodedata.normalize(f, name) for f in ("NFC", "NFD")))))


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked with ``…``."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def normal_tag(tag: str) -> str:
    """A tag as stored and filtered on: no ``#`` before or ``/`` after, composed (NFC), lower-case.

    ``#Project/``, ``project`` and a decomposed spelling are one tag; ``""`` is none.
    """
    return unicodedata.normalize("NFC", tag.strip().lstrip("#").strip().rstrip("/")).lower()


@overload
def without_surrogates(value: str) -> str: ...
@overload
def without_surrogates(value: Any) -> Any: ...
def without_surrogates(value: Any) -> Any:
    r"""``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    No encoder accepts a lone surrogate (SQLite's UTF-8 neither), and YAML's ``"\ud800"``
    escape loads as one: a frontmatter title written so would fail the whole sync. Mappings
    and lists are copied (as plain ``dict`` and ``list``); other values are returned as they
    are.
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    return value


class YamlLimitError(ValueError):
    """A YAML text is too large, too deeply nested, or expands to too many nodes."""


def check_yaml(
    text: str,
    *,
    max_bytes: int = MAX_YAML_BYTES,
    max_nodes: int = MAX_YAML_NODES,
    max_depth: int = MAX_YAML_DEPTH,
) -> None:
    """Refuse YAML whose loading would take unbounded memory or recursion.

    Most real YAML is cleared by a cheap count first (no anchor, few brackets, shallow
    indentation: see ``_surely_within``). The rest is scanned as a stream of parser events,
    without composing it: each scalar or collection counts one node, and each alias counts the
    whole size of the node it repeats, so the count is the size of the fully expanded data.
    The scan stops at the first limit crossed.

    Raises:
        YamlLimitError: with a sentence saying which limit was crossed.
        ruamel.yaml.error.YAMLError: if the text is not YAML at all (the caller reports it).
    """
    if len(text) > max_bytes:  # characters ≥ bytes / 4; the caller bounds the bytes read
        raise YamlLimitError(f"it is over {max_bytes // 1024} KB of YAML")
    if not _surely_within(text, max_nodes, max_depth):
        _scan_events(text, max_nodes, max_depth)


def yaml_loader(*, round_trip: bool = False) -> YAML:
    """A ruamel ``YAML`` for untrusted text (safe, or round-trip with ``round_trip``).

    ruamel builds scalars with Python's own constructors, which raise ``ValueError``,
    ``KeyError`` or ``IndexError`` on values that parse but cannot be built: a date such as
    ``2024-02-30``, ``!!int foo``, ``!!bool maybe``, an integer of over 4,300 digits. One such
    value would fail the whole file (or the whole sync); this loader keeps it as the text it is
    written as, which is what a YAML 1.2 reader (no timestamps) makes of ``2024-02-30`` anyway.
    Call :func:`check_yaml` first, as ever.
    """
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt") if round_trip else YAML(typ="safe", pure=True)
    yaml.Constructor = _lenient(yaml.Constructor)
    return yaml


@functools.cache
def _lenient(base: type) -> type:
    from ruamel.yaml.nodes import ScalarNode

    class Lenient(base):  # type: ignore[misc]
        def construct_non_recursive_object(self, node: Any, tag: str | None = None) -> Any:
            try:
                return super().construct_non_recursive_object(node, tag)
            except (ValueError, KeyError, IndexError, OverflowError):
                if isinstance(node, ScalarNode):
                    return str(node.value)
                raise

    Lenient.__name__ = f"Lenient{base.__name__}"
    return Lenient


def _scan_events(text: str, max_nodes: int, max_depth: int) -> None:
    """The event scan of :func:`check_yaml` (see there)."""
    # ruamel loads only when YAML is read: opening a KB and searching it need none (issue 14).
    from ruamel.yaml import YAML
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        NodeEvent,
    )

    total = 0
    sizes: dict[str, int] = {}
    open_at: list[tuple[int, str | None]] = []  # (total when the collection opened, anchor)
    for event in YAML(typ="safe", pure=True).parse(text):
        if isinstance(event, AliasEvent):
            if any(anchor == event.anchor for _, anchor in open_at):
                # ``&a [*a]`` builds a list that holds itself: anything walking it never ends.
                raise YamlLimitError(
                    f"the alias *{event.anchor} repeats a collection inside itself"
                )
            total += sizes.get(str(event.anchor), 1)
        elif isinstance(event, CollectionStartEvent):
            total += 1
            open_at.append((total - 1, event.anchor))
            if len(open_at) > max_depth:
                raise YamlLimitError(f"it nests collections more than {max_depth} deep")
        elif isinstance(event, CollectionEndEvent):
            start, anchor = open_at.pop()
            if anchor is not None:
                sizes[str(anchor)] = total - start
        elif isinstance(event, NodeEvent):  # a scalar
            total += 1
            if event.anchor is not None:
                sizes[str(event.anchor)] = 1
        if total > max_nodes:
            raise YamlLimitError(
                f"it expands to more than {max_nodes:,} nodes (aliases repeating aliases)"
            )
