"""Checking and sanitising what callers pass to :class:`~pinakes_core.kb.KB` (DESIGN §13).

Text is sanitised, never refused: lone surrogates (which no encoder accepts) become U+FFFD, so
any string a caller can build searches safely. Everything else that cannot
mean what the caller wants (``k=0``, ``tags="time"``, ``path=".."``, ``modified_after=nan``) is
a :class:`~pinakes_core.errors.PinakesError` naming the argument, its value and the fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from pinakes_core.errors import PinakesError
from pinakes_core.intake import without_surrogates
from pinakes_core.uri import SCHEME, is_ulid, parse_uri

__all__ = [
    "MAX_K",
    "MAX_LIST",
    "MAX_QUERY_CHARS",
    "check_depth",
    "check_k",
    "clean_doc_ids",
    "clean_list",
    "clean_path",
    "clean_query",
    "clean_source_types",
    "clean_text",
    "clean_time",
]

#: The most hits one search returns.
MAX_K = 1_000
#: Queries longer than this are cut to it (DESIGN §13 asks that 10,000 characters work; the
#: embedding model reads the first 512 tokens whatever the length).
MAX_QUERY_CHARS = 100_000
#: The most items in a list argument (tags, doc_ids, entities, concepts, channels).
MAX_LIST = 1_000
#: Longest item of a list argument, path prefix or document reference.
_MAX_ITEM_CHARS = 4_096
# Times are compared as integer nanoseconds (SQLite's signed 64 bits reach 2262-04-11); the
# bound stays a little inside so that seconds × 1e9 never rounds past it.
_MAX_SECONDS = 9.2e9
_DRIVE = re.compile(r"^[A-Za-z]:")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def clean_text(value: Any, name: str) -> str:
    """Return ``value`` as text that every encoder accepts.

    Raises:
        PinakesError: if ``value`` is not a string.
    """
    if not isinstance(value, str):
        raise PinakesError(
            f"{name} must be a string, got {type(value).__name__} {_shown(value)}.",
            f"Pass {name} as text.",
        )
    return without_surrogates(value)


def clean_query(value: Any) -> str:
    """Return the query sanitised and cut to :data:`MAX_QUERY_CHARS` characters.

    Raises:
        PinakesError: if the query is not a string.
    """
    return clean_text(value, "query")[:MAX_QUERY_CHARS]


def check_k(value: Any, default: int) -> int:
    """Return the number of hits asked (``default`` for ``None``).

    Raises:
        PinakesError: unless ``value`` is ``None`` or an integer from 1 to :data:`MAX_K`.
    """
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise PinakesError(
            f"k must be a whole number from 1 to {MAX_K}, got {_shown(value)}.",
            f"Omit k for the default ({default}).",
        )
    return value


def check_depth(value: Any) -> int:
    """Return a link depth as asked: an integer of at least 1 (at most 3 is served).

    Raises:
        PinakesError: for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PinakesError(
            f"depth must be a whole number of at least 1, got {_shown(value)}.",
            "Use depth=1 and look before going deeper (at most 3 is served).",
        )
    return value


def clean_list(value: Any, name: str) -> tuple[str, ...]:
    """Return a list argument (tags, entities, concepts, channels) as sanitised strings.

    Raises:
        PinakesError: for a bare string (``tags="time"``, which would otherwise be read letter
            by letter), a non-string item, or more than :data:`MAX_LIST` items.
    """
    if value is None:
        return ()
    if isinstance(value, str | bytes):
        raise PinakesError(
            f"{name} must be a list of strings, got the single string {_shown(value)}.",
            f"Wrap it in a list: {name}=[{_shown(value)}].",
        )
    if not isinstance(value, Iterable):
        raise PinakesError(
            f"{name} must be a list of strings, got {type(value).__name__} {_shown(value)}."
        )
    items = list(value)
    if len(items) > MAX_LIST:
        raise PinakesError(f"{name} has {len(items)} items; at most {MAX_LIST} are accepted.")
    cleaned = []
    for item in items:
        text = clean_text(item, f"each item of {name}").strip()
        if len(text) > _MAX_ITEM_CHARS:
            raise PinakesError(
                f"An item of {name} is {len(text)} characters long; at most {_MAX_ITEM_CHARS}."
            )
        if text:
            cleaned.append(text)
    return tuple(cleaned)


def clean_doc_ids(value: Any) -> tuple[str, ...]:
    """Return document ULIDs from ULIDs or ``pnk://`` URIs.

    Raises:
        PinakesError: for anything that is neither (a path, say).
    """
    ids = []
    for item in clean_list(value, "doc_ids"):
        if item.startswith(SCHEME):
            ids.append(parse_uri(item).doc_id)
        elif is_ulid(item.upper()):
            ids.append(item.upper())
        else:
            raise PinakesError(
                f"doc_ids holds {_shown(item)}, which is not a document ULID or pnk:// URI.",
                "Use the doc_id of a search hit; filter by folder with path=.",
            )
    return tuple(ids)


def clean_path(value: Any) -> str | None:
    """Return a KB-relative POSIX folder/file prefix, or ``None`` for no path filter.

    Raises:
        PinakesError: for an absolute path, a drive, ``~`` or any ``..`` part.
    """
    if value is None:
        return None
    text = clean_text(value, "path").strip().replace("\\", "/")
    if len(text) > _MAX_ITEM_CHARS:
        raise PinakesError(
            f"The path filter is {len(text)} characters long; at most {_MAX_ITEM_CHARS}."
        )
    parts = PurePosixPath(text).parts
    if text.startswith(("/", "~")) or _DRIVE.match(text) or ".." in parts:
        raise PinakesError(
            f"The path filter {_shown(value)} is not a folder inside the KB.",
            "Use a prefix relative to the KB root, e.g. 'runbooks/'.",
        )
    while text.startswith("./"):
        text = text[2:].lstrip("/")
    if text in ("", "."):
        return None
    return text


def clean_time(value: Any, name: str) -> float | None:
    """Return a UNIX time from seconds or a ``datetime``, held to what the store can compare.

    Times before 1678 or after 2261 are moved to those bounds (nothing is older or newer).

    Raises:
        PinakesError: for NaN, infinities, or anything that is not a number or a datetime.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        try:
            seconds = value.timestamp()
        except (OverflowError, ValueError, OSError):
            seconds = -_MAX_SECONDS if value.year < 1970 else _MAX_SECONDS
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise PinakesError(
                f"{name} must be a finite UNIX time or a datetime, got {_shown(value)}.",
                "Pass seconds since 1970, or a datetime.",
            )
    else:
        raise PinakesError(
            f"{name} must be a UNIX time or a datetime, got {type(value).__name__} {_shown(value)}.",
            "Pass seconds since 1970, or a datetime.",
        )
    return max(-_MAX_SECONDS, min(_MAX_SECONDS, seconds))


def clean_source_types(value: str | Iterable[str]) -> tuple[str, ...]:
    """Validate a ``source_type`` filter (one name or several); the names, each once.

    Raises:
        PinakesError: for a name that is not a source type.
    """
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names:  # the usual case: no filter, and no need to load read.sources (issue 37)
        return ()
    from pinakes_core.read.sources import SOURCE_TYPES

    for name in names:
        if name not in SOURCE_TYPES:
            raise PinakesError(
                f"source type {name!r} is not one of {', '.join(SOURCE_TYPES)}.",
                "Pick one of those, e.g. --source-type pdf.",
            )
    return tuple(dict.fromkeys(names))
