"""Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["RRF_K", "rrf"]

#: k = 60 as in the RRF paper; it damps the head of each list so no single channel dominates.
RRF_K = 60


def rrf(
    lists: Mapping[str, Sequence[int]], k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[int, float]]:
    """Fuse ranked lists of ids into one ranking by Σ w / (k + rank), rank counted from 1.

    ``weights`` maps a list's name to its weight (default 1.0 each: plain RRF). The result is
    sorted by descending score, ties broken by the smaller id so the output does not depend on
    the order the lists are given in.
    """
    parts: dict[int, list[float]] = {}
    for name, ranked in lists.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, item in enumerate(ranked, 1):
            parts.setdefault(item, []).append(weight / (k + rank))
    # fsum is correctly rounded whatever the order of its terms, so exact ties stay exact and
    # fall to the id tie-break instead of to the order the channels ran in.
    scores = {item: math.fsum(terms) for item, terms in parts.items()}
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
