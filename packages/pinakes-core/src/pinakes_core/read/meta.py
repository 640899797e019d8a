"""Frontmatter field filters: ``status=draft``, ``priority>2``, ``stage in a,b``, ``due exists``.

Sync flattens each document's frontmatter into ``doc_meta`` rows (one per scalar value, one per
list item), indexed by (key, text) and (key, number), so a field filter is an indexed lookup
inside every channel, like the tag filter. A value compares as a number when the filter's
value is one, else as text (ISO dates then compare in date order); ``=``, ``!=`` and ``in``
ignore case.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pinakes_core.errors import PinakesError

__all__ = [
    "MAX_FIELDS",
    "MAX_ITEMS",
    "MAX_KEY_CHARS",
    "MAX_VALUE_CHARS",
    "MetaFilter",
    "MetaFilterError",
    "flatten",
    "parse_meta_filter",
    "summary",
]

#: limits on what one document's frontmatter contributes (a file's YAML is never trusted).
MAX_FIELDS = 100
MAX_ITEMS = 100
MAX_KEY_CHARS = 100
MAX_VALUE_CHARS = 500

_OPS = ("exists", "in", "!=", ">=", "<=", "=", ">", "<")
_KEY = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_EXISTS = re.compile(rf"^\s*({_KEY})\s+exists\s*$", re.IGNORECASE)
_IN = re.compile(rf"^\s*({_KEY})\s+in\s+(.+)$", re.IGNORECASE)
_CMP = re.compile(rf"^\s*({_KEY})\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*$")
_HINT = (
    "Write key=value, key!=value, key>value, key<value (also >=, <=), 'key in a,b' or 'key exists'."
)


#: A number written in decimal (not "inf" or "nan", which stay text).
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


class MetaFilterError(PinakesError):
    """A frontmatter field filter is not written in a form Pinakes understands."""


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class MetaFilter:
    """One frontmatter field condition.

    Attributes:
        key: the field name (lower-cased, as stored).
        op: one of ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``exists``.
        values: the value(s) compared against (empty for ``exists``).
    """

    key: str
    op: str
    values: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.op == "exists":
            return f"{self.key} exists"
        if self.op == "in":
            return f"{self.key} in {','.join(self.values)}"
        return f"{self.key}{self.op}{self.values[0]}"

    def sql(self) -> tuple[str, list[object]]:
        """Return a condition over ``documents d`` and its parameters.

        Text equality ignores case as ``lower()`` does (ASCII on SQLite, every letter on
        PostgreSQL); both stores index ``doc_meta(key, lower(value_text))`` for it.
        """
        base = "d.doc_id IN (SELECT doc_id FROM doc_meta WHERE key = ?"
        if self.op == "exists":
            return base + ")", [self.key]
        if self.op == "in":
            marks = ",".join(["lower(?)"] * len(self.values))
            return (
                f"{base} AND lower(value_text) IN ({marks}))",
                [self.key, *self.values],
            )
        value = self.values[0]
        if self.op == "!=":
            # No value of the field equals it (a document without the field qualifies too).
            # NOT EXISTS, not NOT IN (SELECT …): PostgreSQL plans it as an anti join, where a
            # NOT IN whose rows outgrow work_mem is a rescan of them per document.
            return (
                "NOT EXISTS (SELECT 1 FROM doc_meta m WHERE m.doc_id = d.doc_id AND m.key = ? "
                "AND lower(m.value_text) = lower(?))",
                [self.key, value],
            )
        if self.op == "=":
            return f"{base} AND lower(value_text) = lower(?))", [self.key, value]
        number = _number(value)
        if number is None and _DECIMAL.fullmatch(value):
            # Past a 64-bit float (1e309): compared as the infinity it rounds to, not as text
            # ("2020" > "1e309" as text, so year>1e309 matched every year).
            number = float(value)
        if number is not None:
            return f"{base} AND value_num {self.op} ?)", [self.key, number]
        return f"{base} AND value_text {self.op} ?)", [self.key, value]


def parse_meta_filter(text: str) -> MetaFilter:
    """Parse one filter such as ``status=draft``, ``priority>2``, ``stage in a,b``, ``due exists``.

    Raises:
        MetaFilterError: naming the filter and the accepted forms.
    """
    if len(text) > MAX_KEY_CHARS + MAX_VALUE_CHARS * 4:
        raise MetaFilterError(f"The field filter {text[:40]!r}… is too long.", _HINT)
    match = _EXISTS.match(text)
    if match:
        return MetaFilter(match.group(1).lower(), "exists")
    match = _IN.match(text)
    if match:
        values = tuple(v.strip() for v in match.group(2).split(",") if v.strip())
        if not values:
            raise MetaFilterError(f"The field filter {text!r} lists no values after 'in'.", _HINT)
        return MetaFilter(match.group(1).lower(), "in", values)
    match = _CMP.match(text)
    if match and match.group(3):
        return MetaFilter(match.group(1).lower(), match.group(2), (match.group(3),))
    raise MetaFilterError(f"The field filter {text!r} is not understood.", _HINT)


def _scalar(value: Any) -> tuple[str, float | None] | None:
    if isinstance(value, bool):
        return ("true" if value else "false"), None
    if isinstance(value, int | float):
        number = float(value)
        if not math.isfinite(number):
            return None
        return (str(value), number)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat(), None
    if isinstance(value, str):
        text = value.strip()[:MAX_VALUE_CHARS]
        return text, _number(text)
    return None


def _fields(
    fields: Mapping[Any, Any],
) -> Iterator[tuple[str, bool, list[tuple[str, float | None]], list[Any]]]:
    """Yield ``(key, is_list, [(text, number), …], originals)`` per usable field, in limits."""
    for count, (raw_key, value) in enumerate(fields.items()):
        if count >= MAX_FIELDS:
            return
        key = str(raw_key).strip().lower()
        if not key or len(key) > MAX_KEY_CHARS:
            continue
        is_list = isinstance(value, list)
        items = value[:MAX_ITEMS] if is_list else [value]
        kept = [
            (row, item)
            for row, item in zip(map(_scalar, items), items, strict=True)
            if row is not None
        ]
        if kept:
            yield key, is_list, [row for row, _ in kept], [item for _, item in kept]


def flatten(fields: Mapping[Any, Any]) -> Iterator[tuple[str, str, float | None]]:
    """Yield ``(key, text, number)`` rows for a frontmatter mapping, within the limits.

    Scalars give one row, lists one per scalar item; nested mappings and ``null`` give none.
    Keys are lower-cased; an over-long key is skipped.
    """
    for key, _, rows, _ in _fields(fields):
        for text, number in rows:
            yield key, text, number


def _json_value(text: str, number: float | None, original: Any) -> object:
    if isinstance(original, bool | int | float) and number is not None:
        return original
    return text


def summary(fields: Mapping[Any, Any]) -> dict[str, object]:
    """Return the JSON-safe fields a read shows: what :func:`flatten` keeps, lists kept as lists.

    Numbers and booleans stay JSON numbers and booleans; dates become ISO strings.
    """
    out: dict[str, object] = {}
    for key, is_list, rows, originals in _fields(fields):
        values = [
            _json_value(text, number, original)
            for (text, number), original in zip(rows, originals, strict=True)
        ]
        out[key] = values if is_list else values[0]
    return out
