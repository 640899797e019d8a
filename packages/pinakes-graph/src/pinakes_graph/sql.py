"""SQL pieces the graph's batched passes share (edges, mentions)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["marks"]


def marks(values: Sequence[object]) -> str:
    """One ``?`` per value, comma-separated: the placeholders of an ``IN (…)`` list."""
    return ",".join("?" * len(values))
