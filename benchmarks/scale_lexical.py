"""BM25 and the no-change walk at a million chunks, without embedding anything (issue 14).

The KB is ``benchmarks/scale.py``'s clone (nushell-docs chunked for real, its rows and files
copied until the KB holds ``--chunks`` chunks), but the base is synced with a FAKE hash
embedder (``tests/conftest.py``), so building a 1M-chunk KB takes minutes instead of the real
model's quarter of an hour. FTS rows, documents and files are real; vectors are not, so this
measures only what does not depend on them:

- the BM25 channel with ``[scale] bm25_max_rows`` 0 (every matching row scored) against the
  budgets given: p50 over :data:`scale.QUERIES` and how many of the exact top 10 / top 50 the
  budgeted channel keeps;
- a no-change ``KB.sync`` (median of ``--syncs`` runs, each in a fresh process).

Pass ``--pythonpath DIR`` to time another checkout's ``pinakes_core`` in the same window
(a before/after pair).

    uv run python benchmarks/scale_lexical.py --chunks 1000000 --workdir /tmp/pinakes-lexical
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import scale  # noqa: E402  (a sibling benchmark script)
from conftest import FakeHashEmbedder  # noqa: E402  (the tests' FAKE embedder)
from pinakes_core import KB  # noqa: E402
from pinakes_core.config import ScaleConfig  # noqa: E402


def _embedder() -> FakeHashEmbedder:
    return FakeHashEmbedder(model_id="FAKE-hash-384", dim=384)


def build(work: Path, corpus: Path, chunks: int) -> Path:
    """The clone KB of about ``chunks`` chunks (kept in ``work`` for later runs)."""
    base = scale.build_base(work, corpus, embedder=_embedder())
    root = work / f"kb-{chunks}"
    if not (root / ".pinakes" / "index.db").exists():
        per_copy = KB.open(base, embedder=_embedder()).status().chunks
        copies = max(1, math.ceil(chunks / per_copy))
        # ann_min_chunks out of reach: the vectors are fake, no index is built.
        scale.clone(base, corpus, root, copies, 1.0, 10**12)
        KB.open(root, embedder=_embedder()).sync()
    return root


def bm25_pool(kb: KB, budget: int, query: str) -> tuple[float, list[int]]:
    """One BM25 channel run under ``[scale] bm25_max_rows = budget``: its ms and its pool."""
    kb.config = kb.config.model_copy(update={"scale": ScaleConfig(bm25_max_rows=budget)})
    ctx = kb.query_context(query)
    start = time.perf_counter()
    ctx.bm25(query)
    ms = (time.perf_counter() - start) * 1000
    return ms, [chunk for chunk, _ in ctx.lexical_ranker.pool[query][0]]


def lexical(root: Path, budgets: list[int]) -> dict[str, object]:
    kb = KB.open(root, embedder=_embedder())

    def run(budget: int, query: str) -> tuple[float, list[int]]:
        return bm25_pool(kb, budget, query)

    for query in scale.QUERIES[:2]:
        run(0, query)
    exact = {q: run(0, q) for q in scale.QUERIES}
    out: dict[str, object] = {
        "exact_p50_ms": round(statistics.median(ms for ms, _ in exact.values()), 1)
    }
    for budget in budgets:
        times, top10, top50, pools = [], [], [], 0
        for query in scale.QUERIES:
            ms, got = run(budget, query)
            want = exact[query][1]
            times.append(ms)
            top10.append(len(set(want[:10]) & set(got[:10])) / max(1, len(want[:10])))
            top50.append(len(set(want[:50]) & set(got[:50])) / max(1, len(want[:50])))
            pools += got == want
        out[str(budget)] = {
            "p50_ms": round(statistics.median(times), 1),
            "top10_kept": round(statistics.mean(top10), 3),
            "top50_kept": round(statistics.mean(top50), 3),
            "pool_identical": f"{pools}/{len(scale.QUERIES)}",
        }
    return out


def sync_worker(root: Path) -> None:
    kb = KB.open(root, embedder=_embedder())
    start = time.perf_counter()
    report = kb.sync()
    print(json.dumps({"seconds": time.perf_counter() - start, "unchanged": report.unchanged}))


def no_change_sync(root: Path, runs: int, pythonpath: str | None) -> dict[str, object]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, __file__, "--sync-worker", str(root)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        times.append(result["seconds"])
    return {
        "documents": result["unchanged"],
        "seconds_median": round(statistics.median(times), 2),
        "seconds": [round(t, 2) for t in times],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpora/nushell-docs"))
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--budgets", default="10000,20000", help="bm25_max_rows values to try")
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--pythonpath", help="time this pinakes_core checkout's sync instead")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pinakes-lexical"))
    parser.add_argument("--sync-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sync_worker:
        sync_worker(args.sync_worker)
        return
    root = build(args.workdir, args.corpus.resolve(), args.chunks)
    out: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_1min_before": round(os.getloadavg()[0], 2),
        "chunks": KB.open(root, embedder=_embedder()).status().chunks,
    }
    if not args.pythonpath:
        out["bm25"] = lexical(root, [int(b) for b in args.budgets.split(",")])
    out["no_change_sync"] = no_change_sync(root, args.syncs, args.pythonpath)
    out["load_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
