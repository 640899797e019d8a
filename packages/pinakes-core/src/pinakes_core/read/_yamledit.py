"""Minimal textual edits of a YAML mapping: append to a list, set a key (DESIGN §2, §13).

A sidecar is the user's file. Re-dumping it through a YAML emitter loses what the emitter does
not model: CRLF line ends, a BOM, ``---``/``...`` markers, ``~`` in flow lists, long lines
(re-wrapped), a trailing comment (moved). So edits are made on the text instead: the file is
composed once to learn where each node starts and ends, and only the bytes that must change are
inserted or replaced, in the file's own line ending and indentation. Every function here returns
``None`` when the layout is one it does not edit textually; the caller then falls back to a
re-dump, and validates whichever result by parsing it again.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["append_to_list", "plain_data", "set_keys"]

_NULL_TAG = "tag:yaml.org,2002:null"
_SEQ_ITEM = re.compile(r"^(?P<indent> *)- +(?P<rest>\S)")
_KEY_LINE = re.compile(r"^(?P<indent> *)[^\s#-][^:]*:\s*(#.*)?$")
_FLOW_UNSAFE = re.compile(r"[,\[\]{}#]|: ")


def plain_data(value: Any) -> Any:
    """Return ``value`` (as loaded by ruamel) as plain dicts, lists and scalars, for comparing."""
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _newline(text: str) -> str:
    first = re.search(r"\r\n|\r|\n", text)
    return first.group(0) if first else "\n"


def sequence_style(text: str) -> tuple[int, int]:
    """Return ``(sequence, offset)`` indents as the file's first block sequence has them.

    ``links:`` followed by ``  - to: x`` is offset 2, sequence 4; the default is (4, 2).
    """
    for above, line in itertools.pairwise(text.splitlines()):
        key, item = _KEY_LINE.match(above), _SEQ_ITEM.match(line)
        if key and item:
            offset = len(item["indent"]) - len(key["indent"])
            return offset + (item.start("rest") - len(item["indent"])), offset
    return 4, 2


def _scalar(value: Any, *, flow: bool = False) -> str | None:
    """Render one scalar as YAML that loads back to the same value, or ``None``."""
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    if not isinstance(value, str):
        return None
    if value and "\n" not in value and not (flow and _FLOW_UNSAFE.search(value)):
        try:
            loaded = YAML(typ="safe", pure=True).load(value)
        except (YAMLError, ValueError, KeyError, IndexError):  # `2024-13-45`: quote it
            loaded = None
        if loaded == value and isinstance(loaded, str) and value == value.strip():
            return value
    return _double_quoted(value)


# What YAML allows unescaped in a double-quoted scalar (its printable set, minus " and \).
# NEL and the Unicode line and paragraph separators are escaped too: YAML 1.1 readers fold them.
# A raw string, so that the regex reads the escapes: a literal \x5d (``]``) ended the class.
_PRINTABLE = re.compile(
    r"[\t\x20-\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_ESCAPES = {"\n": "\\n", "\r": "\\r", '"': '\\"', "\\": "\\\\", "\x00": "\\0"}


def _double_quoted(value: str) -> str:
    """``value`` as a YAML double-quoted scalar; non-printable characters are escaped."""
    out = []
    for char in value:
        if _PRINTABLE.fullmatch(char):
            out.append(char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def _flow(value: Any) -> str | None:
    """Render a scalar, a list of scalars or a mapping of scalars in flow style."""
    if isinstance(value, Mapping):
        parts = []
        for key, item in value.items():
            k, v = _scalar(str(key), flow=True), _scalar(item, flow=True)
            if k is None or v is None:
                return None
            parts.append(f"{k}: {v}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list | tuple):
        items = [_scalar(v, flow=True) for v in value]
        return None if any(i is None for i in items) else "[" + ", ".join(map(str, items)) + "]"
    return _scalar(value)


def _compose(text: str) -> Node | None:
    """The root node, or ``None`` for a document with no content (``---`` alone is one)."""
    root: Node | None = YAML(typ="rt").compose(text)
    if isinstance(root, ScalarNode) and root.tag == _NULL_TAG and not root.value:
        return None
    return root


def _content_end(node: Node) -> int:
    """Index just past the last character that belongs to ``node`` (not trailing comments)."""
    if isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        return _content_end(last[1] if isinstance(node, MappingNode) else last)
    return int(node.end_mark.index)


def _line_after(text: str, pos: int) -> int:
    """The start of the line after the one holding ``pos`` (``pos`` itself at a line start)."""
    if pos == 0 or text[pos - 1] in "\r\n":
        return pos
    match = re.compile(r"\r\n|\r|\n").search(text, pos)
    return match.end() if match else len(text)


def _insert_lines(text: str, pos: int, lines: Sequence[str], nl: str) -> str:
    block = "".join(line + nl for line in lines)
    if pos == len(text) and text and text[-1] not in "\r\n":
        block = nl + block
    return text[:pos] + block + text[pos:]


def _key_of(root: MappingNode, key: str) -> tuple[Node, Node] | None:
    for k, v in root.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def _block_item(entry: Mapping[str, Any], dash: int, keys: int) -> list[str] | None:
    lines: list[str] = []
    for i, (key, value) in enumerate(entry.items()):
        k, v = _scalar(str(key)), _scalar(value)
        if k is None or v is None:
            return None
        lead = " " * dash + "-" + " " * (keys - dash - 1) if i == 0 else " " * keys
        lines.append(f"{lead}{k}: {v}")
    return lines


def append_to_list(text: str, key: str, entry: Mapping[str, Any]) -> str | None:
    """Return ``text`` with ``entry`` (a mapping of scalars) appended to the top-level list ``key``.

    The list is created (block style, indented like the file's other lists) when the key is
    absent or null. Returns ``None`` for layouts not edited textually.
    """
    nl = _newline(text)
    root = _compose(text)
    sequence, offset = sequence_style(text)
    if root is None:
        if text.strip(" \t\r\n\ufeff") and not _only_markers(text):
            return None
        pos = _document_end(text)
        item = _block_item(entry, offset, sequence)
        return None if item is None else _insert_lines(text, pos, [f"{key}:", *item], nl)
    if not isinstance(root, MappingNode) or root.flow_style or not root.value:
        return None
    column = int(root.value[0][0].start_mark.column)
    found = _key_of(root, key)
    if found is None:
        pos = _line_after(text, _content_end(root))
        item = _block_item(entry, column + offset, column + sequence)
        return (
            None if item is None else _insert_lines(text, pos, [f"{' ' * column}{key}:", *item], nl)
        )
    key_node, value = found
    if isinstance(value, ScalarNode) and value.tag == _NULL_TAG:
        item = _block_item(entry, column + offset, column + sequence)
        if item is None:
            return None
        start, end = int(value.start_mark.index), int(value.end_mark.index)
        pos = _line_after(text, max(end, int(key_node.end_mark.index)))
        text = _insert_lines(text, pos, item, nl)
        if end > start:  # an explicit ``~`` / ``null``: the value is now the list
            text = text[:start].rstrip(" ") + text[end:]
        return text
    if not isinstance(value, SequenceNode):
        return None
    if value.flow_style:
        flow = _flow(entry)
        if flow is None:
            return None
        if value.value:
            pos = _content_end(value.value[-1])
            return text[:pos] + ", " + flow + text[pos:]
        close = text.rfind("]", int(value.start_mark.index), int(value.end_mark.index))
        return None if close < 0 else text[:close] + flow + text[close:]
    first, last = value.value[0], value.value[-1]
    line_start = (
        max(
            text.rfind("\n", 0, first.start_mark.index), text.rfind("\r", 0, first.start_mark.index)
        )
        + 1
    )
    prefix = text[line_start : first.start_mark.index]
    if prefix.strip() != "-" or "\t" in prefix:
        return None
    dash, keys = prefix.index("-"), len(prefix)
    pos = _line_after(text, _content_end(last))
    if isinstance(last, MappingNode) and last.flow_style:
        flow = _flow(entry)
        return None if flow is None else _insert_lines(text, pos, [prefix + flow], nl)
    item = _block_item(entry, dash, keys)
    return None if item is None else _insert_lines(text, pos, item, nl)


def set_keys(text: str, update: Mapping[str, Any]) -> str | None:
    """Return ``text`` with the top-level keys in ``update`` set (replaced in place or appended).

    Values must be scalars or lists of scalars. Returns ``None`` for layouts not edited
    textually.
    """
    for key, value in update.items():
        edited = _set_key(text, key, value)
        if edited is None:
            return None
        text = edited
    return text


def _set_key(text: str, key: str, value: Any) -> str | None:
    nl = _newline(text)
    root = _compose(text)
    if root is None:
        if text.strip(" \t\r\n\ufeff") and not _only_markers(text):
            return None
        rendered = _flow(value)
        k = _scalar(key)
        if rendered is None or k is None:
            return None
        return _insert_lines(text, _document_end(text), [f"{k}: {rendered}"], nl)
    if not isinstance(root, MappingNode) or root.flow_style or not root.value:
        return None
    found = _key_of(root, key)
    column = int(root.value[0][0].start_mark.column)
    if found is None:
        rendered, k = _flow(value), _scalar(key)
        if rendered is None or k is None:
            return None
        pos = _line_after(text, _content_end(root))
        return _insert_lines(text, pos, [f"{' ' * column}{k}: {rendered}"], nl)
    key_node, old = found
    start, end = int(old.start_mark.index), int(old.end_mark.index)
    if isinstance(old, ScalarNode) and old.style not in ("|", ">"):
        rendered = _flow(value)
        if rendered is None:
            return None
        if start == end:  # an empty (null) value: write after the colon
            start = end = int(key_node.end_mark.index)
            colon = text.find(":", start)
            if colon < 0:
                return None
            start = end = colon + 1
            rendered = " " + rendered
        return text[:start] + rendered + text[end:]
    if isinstance(old, SequenceNode) and old.flow_style:
        rendered = _flow(value)
        return None if rendered is None else text[:start] + rendered + text[end:]
    return None


def _only_markers(text: str) -> bool:
    """Whether ``text`` holds nothing but comments and ``---``/``...`` markers."""
    for line in re.split(r"\r\n|\r|\n", text.lstrip("\ufeff")):
        bare = line.strip()
        if bare and not bare.startswith("#") and bare not in ("---", "..."):
            return False
    return True


def _document_end(text: str) -> int:
    """Where to add content to an empty document: before a ``...`` end marker, else at the end."""
    match = re.search(r"(?m)^\.\.\.[ \t]*(#.*)?(\r\n|\r|\n|$)", text)
    return match.start() if match else len(text)


def redump(text: str, change: Any) -> str:
    """Parse ``text`` round-trip, apply ``change(data) -> data`` and dump it (the fallback)."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 20  # never re-wrap a long line
    sequence, offset = sequence_style(text)
    yaml.indent(mapping=2, sequence=sequence, offset=offset)
    data = change(yaml.load(text))
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    out = buffer.getvalue()
    nl = _newline(text)
    if nl != "\n":
        out = out.replace("\n", nl)
    if text.startswith("\ufeff") and not out.startswith("\ufeff"):
        out = "\ufeff" + out
    return out
