"""Paired A/B of the warm query path's speed-ups at scale (issue 14), in one process.

As in ``gated_ab.py``: this VM's speed drifts between runs minutes apart, so the variants
alternate query by query, in random order, on one warm KB object, and the report is each
variant's p50 and the median of the per-query differences. ``old`` undoes the changes named
by ``--undo`` (default: all of them) through small patches; ``new`` is the code as it is:

- ``phrase-counts``: FTS phrase row counts kept by the KB for its store generation instead of
  counted again by every query;
- ``word-sets``: near-duplicate folding reads each distinct passage text's words once (and
  equal texts are duplicates without reading them) instead of once per copy.

Every query's hits (path, chunk, score, folded duplicates) and confidence must be the same in
both variants; the script stops with an error otherwise. Times are each search's own
``timings_ms["total"]``. One BLAS thread, as ``pnk`` and ``pinakes-mcp`` run::

    OPENBLAS_NUM_THREADS=1 uv run python benchmarks/query_ab.py --kb /tmp/scale50k/kb \\
        --rounds 5 [--configs hybrid,default,gated]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pinakes_core import KB
from pinakes_core.search import hits as core_hits
from pinakes_core.search.searcher import Searcher
from scale import GATED_QUERIES, QUERIES  # a sibling benchmark script

CONFIGS: dict[str, tuple[list[str] | None, list[str]]] = {
    "hybrid": (["bm25", "dense"], QUERIES),
    "default": (None, QUERIES),
    "gated": (["bm25", "dense", "ppr-auto"], GATED_QUERIES),
}


def _undo_phrase_counts() -> Callable[[], None]:
    """Every query counts its phrases' rows again."""
    new = Searcher.phrase_counts

    def apply() -> None:
        Searcher.phrase_counts = lambda self: {}  # type: ignore[method-assign]

    def restore() -> None:
        Searcher.phrase_counts = new  # type: ignore[method-assign]

    apply.restore = restore  # type: ignore[attr-defined]
    return apply


def _undo_word_sets() -> Callable[[], None]:
    """Every row reads its own words; equal texts are compared word by word."""
    new_words, new_duplicate = core_hits._Row.words, core_hits._duplicate

    def words(self: Any) -> frozenset[str]:
        if "_words" not in self.__dict__:
            self.__dict__["_words"] = frozenset(core_hits.words(self.text.lower()))
        return self.__dict__["_words"]  # type: ignore[no-any-return]

    def duplicate(a: Any, b: Any) -> bool:
        small, large = sorted((len(a.text), len(b.text)))
        if small < 0.8 * large:
            return False
        if not a.words or not b.words:
            return bool(a.text.strip() == b.text.strip())
        small, large = sorted((len(a.words), len(b.words)))
        if small < 0.9 * large:
            return False
        return len(a.words & b.words) / len(a.words | b.words) >= core_hits.DUPLICATE_JACCARD

    def apply() -> None:
        core_hits._Row.words = property(words)  # type: ignore[assignment,method-assign]
        core_hits._duplicate = duplicate

    def restore() -> None:
        core_hits._Row.words = new_words  # type: ignore[method-assign]
        core_hits._duplicate = new_duplicate

    apply.restore = restore  # type: ignore[attr-defined]
    return apply


UNDO: dict[str, Callable[[], Callable[[], None]]] = {
    "phrase-counts": _undo_phrase_counts,
    "word-sets": _undo_word_sets,
}


def _signature(result: Any) -> tuple[Any, ...]:
    hits = tuple((h.path, h.chunk, h.score, tuple(h.duplicates or ())) for h in result.hits)
    return (hits, result.confidence)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--configs", default="hybrid,default")
    parser.add_argument("--undo", default=",".join(UNDO), help="changes the old variant undoes")
    parser.add_argument("--stage", help="also the paired median of this timings_ms entry")
    args = parser.parse_args()
    patches = [UNDO[name]() for name in args.undo.split(",") if name]

    def use(variant: str) -> None:
        for patch in patches:
            patch() if variant == "old" else patch.restore()  # type: ignore[attr-defined]

    kb = KB.open(args.kb)
    for name in args.configs.split(","):
        channels, queries = CONFIGS[name]
        for q in queries[:3]:  # warm-up: model, matrix, graph
            for variant in ("old", "new"):
                use(variant)
                kb.search(q, channels=channels)
        times: dict[str, list[float]] = {"old": [], "new": []}
        stage: dict[str, list[float]] = {"old": [], "new": []}
        rng = random.Random(14)
        for _ in range(args.rounds):
            for q in queries:
                order = ["old", "new"]
                rng.shuffle(order)
                seen = {}
                for variant in order:
                    use(variant)
                    result = kb.search(q, channels=channels)
                    times[variant].append(result.timings_ms["total"])
                    if args.stage:
                        stage[variant].append(result.timings_ms.get(args.stage, 0.0))
                    seen[variant] = _signature(result)
                if seen["old"] != seen["new"]:
                    sys.exit(f"{name}: the variants ranked {q!r} differently")
        use("new")
        paired = [b - a for a, b in zip(times["old"], times["new"], strict=True)]
        print(
            f"{name}: {len(paired)} pairs, load {os.getloadavg()[0]:.2f}, p50 old "
            f"{statistics.median(times['old']):.1f} ms, new {statistics.median(times['new']):.1f}"
            f" ms, paired median {statistics.median(paired):+.1f} ms; rankings identical"
        )
        if args.stage:
            diffs = [b - a for a, b in zip(stage["old"], stage["new"], strict=True)]
            print(
                f"  {args.stage}: p50 old {statistics.median(stage['old']):.2f} ms, new "
                f"{statistics.median(stage['new']):.2f} ms, paired {statistics.median(diffs):+.2f}"
            )


if __name__ == "__main__":
    main()
