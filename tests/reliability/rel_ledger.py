"""The suite's tally for docs/reliability.md: what was tried and what went wrong.

Tests call :func:`record`; when ``PINAKES_RELIABILITY_LEDGER`` names a file, each record is
appended to it as one JSON line (``report.py`` sums them into the table). Without it, nothing
is written: the assertions in the tests are what CI checks.
"""

from __future__ import annotations

import json
import os

COUNTS = (
    "tried",
    "inconsistent",
    "hangs",
    "over_memory",
    "foreign_exceptions",
    "escapes",
    "changed_bytes",
    "outside_changed",
)


def record(area: str, *, peak_rss: int = 0, **counts: int) -> None:
    """Add ``counts`` (keys from :data:`COUNTS`) under ``area``; ``peak_rss`` in bytes (max kept)."""
    unknown = set(counts) - set(COUNTS)
    assert not unknown, unknown
    path = os.environ.get("PINAKES_RELIABILITY_LEDGER")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"area": area, "peak_rss": peak_rss, **counts}) + "\n")


def scale(default: int) -> int:
    """``default`` times ``PINAKES_RELIABILITY_SCALE`` (1 in CI; the survey run raises it)."""
    return default * max(1, int(os.environ.get("PINAKES_RELIABILITY_SCALE", "1")))
