"""The reader's cost (issue 36): added search latency at N passages, and its memory.

On an already synced KB, every query is searched warm with the reader off and on (alternating,
so both see the same machine load), at each ``--top-n``. Reported per N: p50/p95 of the whole
search with and without the reader, of the difference, and of the reader stage alone
(``timings_ms["reader"]``: fetching the passages, tokenising, the ONNX run), and the CPU time
the reader adds (process time, all threads: unlike wall time it barely moves with the load
other processes put on the machine; on an idle machine the added wall time is about it divided
by the reader's threads). Memory: the process's resident set before and after the reader loads,
and its load time.

The reader reads N passages whatever the KB's size, so its cost does not grow with the KB;
the KB only sets the passages' lengths.

Usage::

    uv run python benchmarks/reader_latency.py --kb KB [--questions golden/questions.jsonl]
        [--top-n 10,20] [--limit 60]

Progress goes to stderr, Markdown to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(f"[reader-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), q)), 1)


def rss_mb() -> float:
    return round(psutil.Process(os.getpid()).memory_info().rss / 2**20, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, required=True, help="a synced KB")
    parser.add_argument("--questions", type=Path, default=REPO / "golden" / "questions.jsonl")
    parser.add_argument("--top-n", default="10,20", help="comma-separated reader_top_n values")
    parser.add_argument("--limit", type=int, default=60, help="queries (the first ones)")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the queries")
    args = parser.parse_args(argv)

    from pinakes_core import KB

    queries = [
        json.loads(line)["query"]
        for line in args.questions.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ][: args.limit]
    with KB.open(args.kb) as kb:
        chunks = int(kb.store().conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        for q in queries[:3]:  # warm: model, vectors, calibration
            kb.search(q, reader=False)
        before = rss_mb()
        t0 = time.perf_counter()
        kb.search(queries[0], reader=True)
        load_s = time.perf_counter() - t0
        after = rss_mb()
        rows = []
        for top_n in [int(n) for n in args.top_n.split(",")]:
            retrieval = kb.config.retrieval.model_copy(update={"reader_top_n": top_n})
            kb.config = kb.config.model_copy(update={"retrieval": retrieval})
            off: list[float] = []
            on: list[float] = []
            stage: list[float] = []
            cpu: list[float] = []
            for _ in range(args.rounds):
                for q in queries:
                    c0 = time.process_time()
                    off.append(kb.search(q, reader=False).timings_ms["total"])
                    c1 = time.process_time()
                    result = kb.search(q, reader=True)
                    c2 = time.process_time()
                    on.append(result.timings_ms["total"])
                    stage.append(result.timings_ms.get("reader", 0.0))
                    cpu.append(((c2 - c1) - (c1 - c0)) * 1000)
            added = [b - a for a, b in zip(off, on, strict=True)]
            rows.append((top_n, off, on, added, stage, cpu))
            log(f"N={top_n}: {len(queries)} queries x {args.rounds}")
        peak = round(psutil.Process(os.getpid()).memory_info().rss / 2**20, 1)
    print(
        f"`uv run python benchmarks/reader_latency.py --kb {args.kb} --questions "
        f"{args.questions} --top-n {args.top_n} --limit {args.limit}` — {chunks} chunks, "
        f"{len(queries)} queries, "
        f"{os.cpu_count()} CPUs\n"
    )
    print(
        "| N | search p50 / p95 off (ms) | on (ms) | added p50 / p95 | reader stage p50 / p95 "
        "| added CPU p50 / p95 (ms) |"
    )
    print("|---|---|---|---|---|---|")
    for top_n, off, on, added, stage, cpu in rows:
        print(
            f"| {top_n} | {pct(off, 50)} / {pct(off, 95)} | {pct(on, 50)} / {pct(on, 95)} | "
            f"{pct(added, 50)} / {pct(added, 95)} | {pct(stage, 50)} / {pct(stage, 95)} | "
            f"{pct(cpu, 50)} / {pct(cpu, 95)} |"
        )
    print(f"\nLoad average during the run: {os.getloadavg()[0]:.1f} (1 min).")
    print(
        f"\nMemory: RSS {before} MB before the reader loads, {after} MB after "
        f"(+{round(after - before, 1)} MB; first reranked search {load_s:.2f} s incl. loading), "
        f"{peak} MB at the end."
    )


if __name__ == "__main__":
    main()
