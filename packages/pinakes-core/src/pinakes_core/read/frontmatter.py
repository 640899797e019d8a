"""A document's frontmatter: YAML or TOML at its top, or an outliner's ``key:: value`` lines (DESIGN §2).

:func:`parse_frontmatter` reads the title, id, tags, aliases, description, links and other
fields a document's frontmatter gives, under the KB's ``[frontmatter]`` key names. Frontmatter
that fails to parse is a warning (:attr:`Frontmatter.warning`); the document is still indexed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinakes_core.config import FrontmatterConfig
from pinakes_core.errors import SidecarError
from pinakes_core.intake import (
    MAX_YAML_BYTES,
    YamlLimitError,
    check_yaml,
    without_surrogates,
    yaml_loader,
)
from pinakes_core.read.sections import frontmatter_block
from pinakes_core.read.sidecar import LinkSpec, parse_links

__all__ = ["MAX_DESCRIPTION_CHARS", "PAGE_PROPERTY", "Frontmatter", "parse_frontmatter"]

#: A Logseq page property (or an Obsidian Dataview field): ``key:: value``, the value may be empty.
PAGE_PROPERTY = re.compile(r"([A-Za-z][\w-]*)::(?: (.*))?")
#: Lines at most read as a page's opening properties.
MAX_PROPERTY_LINES = 100
#: Longest frontmatter description kept (longer ones are cut with "…").
MAX_DESCRIPTION_CHARS = 1_000
_PAGE_REF = re.compile(r"#?\[\[([^\[\]\n]+)\]\]")


@dataclass
class Frontmatter:
    """What Pinakes reads from a document's frontmatter: YAML, TOML or Logseq page properties."""

    title: str | None = None
    id: str | None = None  # the document's own id, as written (see pinakes_core.read.identity)
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    # The page's summary and the 1-based lines (first, last) its key occupies in the block.
    description: str | None = None
    description_lines: tuple[int, int] = (0, 0)
    links: tuple[LinkSpec, ...] = ()
    end_line: int = 0  # number of lines the frontmatter block occupies (0 when absent)
    warning: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # the whole mapping (field filters)


def _scalars(value: Any) -> Iterator[Any]:
    """The scalars in ``value``, nested lists flattened, mappings and ``!!binary`` left out.

    ``tags: [[a, b]]`` or ``title: [[My Note]]`` (an Obsidian link left unquoted) loads as a
    nested list; its words are meant, not Python's ``"[['My Note']]"``.
    """
    if isinstance(value, list | tuple | set):
        for item in value:
            yield from _scalars(item)
    elif value is not None and not isinstance(value, dict | bytes):  # !!binary is no text
        yield value


def _as_list(value: Any, *, words: bool = True) -> tuple[str, ...]:
    """A list value, or a string of items: ``tags: a b, c`` (``words``: split at spaces too).

    An alias is a name and may hold spaces: ``aliases: Project Keel`` is one alias, and only a
    comma separates two (``aliases: Keel, The Keel Project``).
    """
    if isinstance(value, str):
        return tuple(
            v.strip()
            for v in (value.replace(",", " ").split() if words else value.split(","))
            if v.strip()
        )
    return tuple(str(v).strip() for v in _scalars(value) if str(v).strip())


def _first(data: dict[str, Any], keys: list[str]) -> Any:
    """The value of the first of ``keys`` present in ``data`` (``None`` when none is)."""
    return next((data[key] for key in keys if data.get(key) is not None), None)


def parse_frontmatter(
    rel: str, lines: list[str], keys: FrontmatterConfig | None = None
) -> Frontmatter:
    """Read a leading frontmatter block from the document's lines.

    YAML between ``---`` lines, TOML between ``+++`` lines (Hugo, Zola), or Logseq's page
    properties (``key:: value`` lines at the top).
    ``keys`` names the frontmatter keys holding the id, title, tags and aliases (default: the
    ``[frontmatter]`` defaults, ``id``, ``title``, ``tags``, ``aliases``).

    Never raises: malformed YAML or TOML or bad values produce a :class:`Frontmatter` whose
    ``warning`` names the file and line, with ``end_line`` still covering the block so it is not
    indexed as text.
    """
    keys = keys or FrontmatterConfig()
    found = frontmatter_block(lines)
    if found is None:
        return _page_properties(lines, keys)
    fence, start, end = found
    block = "\n".join(lines[start + 1 : end])
    result = Frontmatter(end_line=end + 1)
    data = _load_toml(rel, block, result) if fence == "+++" else _load_yaml(rel, block, result)
    if data is None:
        return result
    result.fields = data
    title = " ".join(str(part) for part in _scalars(_first(data, keys.title))).strip()
    result.title = title or None
    own_id = _first(data, keys.id)
    if isinstance(own_id, str | int) and not isinstance(own_id, bool) and str(own_id).strip():
        result.id = str(own_id).strip()
    result.tags = tuple(t for key in keys.tags for t in _as_list(data.get(key)))
    result.aliases = tuple(a for key in keys.aliases for a in _as_list(data.get(key), words=False))
    _read_description(result, data, keys.description, lines[:end], start)
    try:
        result.links = parse_links(Path(rel), data.get("links"))
    except SidecarError as exc:
        result.warning = f"{exc.message} (frontmatter links ignored)"
    return result


def _read_description(
    result: Frontmatter, data: dict[str, Any], keys: list[str], block: list[str], start: int
) -> None:
    """Set ``result.description`` from the first of ``keys`` with text, and the lines it spans.

    ``block`` is the document's lines up to the closing fence, the opening one at ``start``.
    The text is the value's string scalars joined, whitespace collapsed, cut at
    :data:`MAX_DESCRIPTION_CHARS`. Its lines run from the key's own line over the indented or
    blank lines after it (a folded ``>-`` value); a key not found at a line's start (a nested or
    flow mapping) spans the whole block.
    """
    for key in keys:
        # Text only: ``summary: false`` (a theme's switch), a number or a date is no account.
        words = (v for v in _scalars(data.get(key)) if isinstance(v, str))
        text = " ".join(" ".join(words).split())
        if not text:
            continue
        if len(text) > MAX_DESCRIPTION_CHARS:
            text = text[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
        result.description = text
        opener = re.compile(rf"{re.escape(key)}[ \t]*[:=]")
        first = next((i for i in range(start + 1, len(block)) if opener.match(block[i])), None)
        if first is None:
            result.description_lines = (start + 1, len(block) + 1)
            return
        last = first + 1
        while last < len(block) and (not block[last].strip() or block[last][:1] in " \t"):
            last += 1
        while last > first + 1 and not block[last - 1].strip():
            last -= 1
        result.description_lines = (first + 1, last)
        return


def _page_properties(lines: list[str], keys: FrontmatterConfig) -> Frontmatter:
    """A Logseq page's properties: the ``key:: value`` lines it opens with, read as frontmatter.

    ``tags`` and aliases (the ``[frontmatter] aliases`` keys and Logseq's own ``alias``) are
    lists of page references (``[[deep work]], #books, focus``); the title is the whole value.
    The lines stay text (``end_line`` 0): their ``[[links]]`` are found as any text's are, and a
    note that merely opens with ``Note:: …`` loses nothing from search. Logseq's ``id::`` is a
    block-reference id, not the note's identity, so no id is taken from them.
    """
    data: dict[str, Any] = {}
    for line in lines[:MAX_PROPERTY_LINES]:
        match = PAGE_PROPERTY.fullmatch(line.rstrip())
        if match is None:
            break
        data.setdefault(match.group(1).lower(), (match.group(2) or "").strip())
    if not data:
        return Frontmatter()
    result = Frontmatter(fields=data)
    title = str(_first(data, keys.title) or "").strip()
    whole = _PAGE_REF.fullmatch(title)
    result.title = (whole.group(1).strip() if whole else title) or None
    result.tags = tuple(t for key in keys.tags for t in _page_refs(data.get(key)))
    result.aliases = tuple(
        a for key in dict.fromkeys([*keys.aliases, "alias"]) for a in _page_refs(data.get(key))
    )
    return result


def _page_refs(value: str | None) -> list[str]:
    """``[[Smith, John]] [[b]], #c, d e`` → ``["Smith, John", "b", "c", "d e"]``."""
    text = value or ""
    refs = [m.group(1).strip() for m in _PAGE_REF.finditer(text)]
    rest = _PAGE_REF.sub(",", text)
    refs += [v.strip().removeprefix("#").strip() for v in rest.split(",")]
    return [r for r in refs if r]


def _load_yaml(rel: str, block: str, result: Frontmatter) -> dict[str, Any] | None:
    """A YAML frontmatter block's mapping, or ``None`` with ``result.warning`` set if unusable."""
    # Imported here: a sync with nothing changed parses no YAML (issue 14).
    from ruamel.yaml.error import YAMLError

    try:
        check_yaml(block)
        data = without_surrogates(yaml_loader().load(block))
    except YamlLimitError as exc:
        result.warning = f"{rel}: frontmatter was ignored: {exc}"
        return None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        why = f" ({problem})" if isinstance(problem, str) and problem else ""
        result.warning = f"{rel}{where}: frontmatter is not valid YAML and was ignored{why}"
        return None
    if not isinstance(data, dict):
        if data is not None:
            result.warning = f"{rel}: frontmatter is not a YAML mapping and was ignored"
        return None
    return data


def _load_toml(rel: str, block: str, result: Frontmatter) -> dict[str, Any] | None:
    """A TOML frontmatter block's table, or ``None`` with ``result.warning`` set if unusable."""
    import tomllib

    if len(block.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        result.warning = (
            f"{rel}: frontmatter was ignored: it is over {MAX_YAML_BYTES:,} bytes, "
            "more than any frontmatter needs"
        )
        return None
    try:
        return tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:
        result.warning = f"{rel}: frontmatter is not valid TOML and was ignored ({exc})"
    except RecursionError:  # arrays nested thousands deep
        result.warning = f"{rel}: frontmatter was ignored: it is nested too deeply"
    return None
