"""Round-trip editing of ``pinakes.toml``: the user's comments, order and layout survive.

``pnk init --template``, ``pnk upgrade`` and ``pnk schema review`` change the config through
these helpers only. Every change is validated as a whole ``Config`` before the file is replaced
(atomically), so a write never leaves an invalid or half-written ``pinakes.toml``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import AoT, InlineTable, Table
from tomlkit.toml_document import TOMLDocument

from pinakes_core.config import CONFIG_FILE, load_config, validate_config
from pinakes_core.errors import ConfigError
from pinakes_core.read.sidecar import _atomic_write

__all__ = [
    "MISSING",
    "Key",
    "edit_config",
    "flatten",
    "get_path",
    "parse",
    "set_path",
    "unified_diff",
]

#: A dotted key path, e.g. ``("schema", "relation_types", "cites", "inverse")``.
Key = tuple[str, ...]


class _Missing:
    """The value at a key path that is absent (distinct from any TOML value)."""

    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


def parse(text: str, where: str) -> TOMLDocument:
    """Parse TOML text round-trip.

    Raises:
        ConfigError: naming ``where`` if the text is not valid TOML.
    """
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"{where} is not valid TOML: {exc}.") from None


def flatten(data: Any, prefix: Key = ()) -> Iterator[tuple[Key, Any]]:
    """Yield ``(key path, value)`` for every leaf of nested tables.

    Lists and empty tables are leaves; values are plain Python (``unwrap``-ped).
    """
    if isinstance(data, dict) and (data or not prefix):
        for key, value in data.items():
            yield from flatten(value, (*prefix, str(key)))
    else:
        yield prefix, data.unwrap() if hasattr(data, "unwrap") else data


def get_path(data: Any, path: Key) -> Any:
    """Return the plain value at ``path``, or :data:`MISSING`."""
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return MISSING
        data = data[part]
    return data.unwrap() if hasattr(data, "unwrap") else data


def _container(parent: Any, key: str, inline: bool, leaf_parent: bool) -> Any:
    # A table that only holds tables is a super table: no empty ``[schema]`` header is written.
    child = tomlkit.inline_table() if inline else tomlkit.table(is_super_table=not leaf_parent)
    parent[key] = child
    return parent[key]


def _is_super(node: Any) -> bool:
    return isinstance(node, Table) and bool(node.is_super_table())


def set_path(doc: TOMLDocument, path: Key, value: Any, comment: str | None = None) -> None:
    """Set (or with :data:`MISSING`, remove) the value at ``path``, creating tables as needed.

    New tables follow the surrounding style: inside an inline table they are inline, elsewhere
    they are ``[a.b]`` sections. ``comment`` goes on the line above a new key.

    Raises:
        ConfigError: if a key on the way holds a value that is not a table (e.g. a list).
    """
    node: Any = doc
    created: list[Any] = []
    for depth, part in enumerate(path[:-1]):
        if part not in node:
            if value is MISSING:
                return
            inline = isinstance(node, InlineTable) or depth >= 2
            node = _container(node, part, inline, leaf_parent=depth == len(path) - 2)
            created.append(node)
            continue
        node = node[part]
        if not isinstance(node, dict) or isinstance(node, AoT):
            raise ConfigError(
                f"{CONFIG_FILE}: {'.'.join(path[: depth + 1])} is not a table, so "
                f"{'.'.join(path)} cannot be set there.",
                "Edit it by hand.",
            )
    last = path[-1]
    if value is MISSING:
        if last in node:
            del node[last]
        return
    if isinstance(value, dict) and not isinstance(value, Table | InlineTable):
        item: Any
        if _is_super(node):  # [a.b.c] sections: add one more section, the comment inside it
            item = tomlkit.table()
            if comment:
                item.add(tomlkit.comment(comment))
                comment = None
        else:
            item = tomlkit.inline_table()
        for key, inner in value.items():
            item[key] = inner
        value = item
    if comment and last not in node and isinstance(node, Table | Container):
        node.add(tomlkit.comment(comment))
    node[last] = value
    if created and isinstance(node, Table) and not _is_super(node):
        node.add(tomlkit.nl())  # a blank line before whatever section follows
    elif isinstance(value, Table):
        value.add(tomlkit.nl())


def unified_diff(path: str, before: str, after: str) -> str:
    """A unified diff of one file (``a/path`` → ``b/path``); empty when nothing changed."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
        )
    )


def edit_config(
    root: Path, change: Callable[[TOMLDocument], None], *, write: bool
) -> tuple[str, str]:
    """Apply ``change`` to ``<root>/pinakes.toml`` round-trip and validate the result.

    With ``write``, the file is replaced atomically; without, nothing is written (a preview).

    Returns:
        The text before and after.

    Raises:
        ConfigError: if the file does not parse or the changed config does not validate.
    """
    path = root / CONFIG_FILE
    load_config(root)  # the current file must be valid before Pinakes rewrites it
    before = path.read_text(encoding="utf-8")
    doc = parse(before, str(path))
    change(doc)
    after = tomlkit.dumps(doc)
    if after != before:
        after = after.rstrip("\n") + "\n"  # new sections leave blank lines at the end
    validate_config(tomlkit.parse(after).unwrap(), path)
    if write and after != before:
        _atomic_write(path, after)
    return before, after
