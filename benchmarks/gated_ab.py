"""Paired A/B of the graph stage's speed-ups at scale (issue 14), in one process.

This VM's speed drifts by 2-3x between runs minutes apart, so separate before/after runs of
``scale.py`` compare the machine more than the code. Here the variants alternate query by
query, in random order, on the same warm KB object, and the report is the median of the
per-query differences:

- ``old``: the graph stage as before 0c9d472: the seed vector computed in the reranker (no
  ``prepare``), every forward-push round by gathering edges (no spreading matrix);
- ``new``: the code as it is;
- ``blas1`` (``--blas1``): ``new`` with OpenBLAS limited to one thread for the whole process
  (through numpy's bundled ``scipy_openblas``, as ``OPENBLAS_NUM_THREADS=1`` would), to
  measure what OpenBLAS's spinning helper threads cost the single-threaded work after the
  dense worker's products.

Run on the KB ``scale.py --copies 8 --workdir DIR`` built::

    uv run python benchmarks/gated_ab.py --kb /tmp/scale50k/kb --rounds 8 [--single] [--blas1]

Rankings are the same in every variant (tests/graph/test_push.py, test_ppr.py); only time
differs.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pinakes_core import KB
from pinakes_graph import ppr, push
from scale import GATED_QUERIES, QUERIES  # a sibling benchmark script

CHANNELS = ["bm25", "dense", "ppr-auto"]


def _openblas() -> Any:
    """numpy's bundled OpenBLAS, or ``None`` (another BLAS: ``--blas1`` is unavailable)."""
    import numpy as np

    found = glob.glob(
        os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "libscipy_openblas*.so")
    )
    return ctypes.CDLL(found[0]) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--single", action="store_true", help="the 20 single-hop queries")
    parser.add_argument("--blas1", action="store_true", help="also new with one BLAS thread")
    args = parser.parse_args()

    blas = _openblas() if args.blas1 else None
    setter = getattr(blas, "scipy_openblas_set_num_threads64_", None)
    threads = blas.scipy_openblas_get_num_threads64_() if setter is not None else 0
    variants = ["old", "new"] + (["blas1"] if setter is not None else [])
    prepare, forward_push = ppr.PprRerank.prepare, push.forward_push

    def gathering(*a: Any, spreading: Any = None, **k: Any) -> Any:
        return forward_push(*a, **k)

    def use(name: str) -> None:
        ppr.PprRerank.prepare = prepare  # type: ignore[method-assign]
        push.forward_push = forward_push
        if setter is not None:
            setter(1 if name == "blas1" else threads)
        if name == "old":
            ppr.PprRerank.prepare = lambda self, ctx: None  # type: ignore[method-assign]
            push.forward_push = gathering

    queries = QUERIES if args.single else GATED_QUERIES
    kb = KB.open(args.kb)
    for q in queries[:3] + GATED_QUERIES[:2]:  # warm-up: model, matrix, graph, spreading matrix
        for name in variants:
            use(name)
            kb.search(q, channels=CHANNELS)
    times: dict[str, list[float]] = {name: [] for name in variants}
    rng = random.Random(14)
    for _ in range(args.rounds):
        for q in queries:
            order = list(variants)
            rng.shuffle(order)
            for name in order:
                use(name)
                start = time.perf_counter()
                kb.search(q, channels=CHANNELS)
                times[name].append((time.perf_counter() - start) * 1000)
    use("new")
    if setter is not None:
        setter(threads)
    kind = "single-hop" if args.single else "gated"
    print(f"{kind} queries, {len(times['old'])} per variant, load {os.getloadavg()[0]:.2f}")
    for name in variants:
        line = f"  {name:5s} p50 {statistics.median(times[name]):6.1f} ms"
        if name != "old":
            base = "old" if name == "new" else "new"
            paired = [a - b for a, b in zip(times[name], times[base], strict=True)]
            line += f"   paired median vs {base}: {statistics.median(paired):+.1f} ms"
        print(line)


if __name__ == "__main__":
    main()
