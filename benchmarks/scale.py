"""Search latency at scale: hybrid vs the graph channels on a ~50k-chunk KB (DESIGN §14).

The KB is N copies of a corpus in sibling folders. Copies have the same embedded texts, so
vectors are embedded once and reused by text hash; FTS, chunks, nodes and edges are real and N
times larger. Latency is the warm ``KB.search`` call (median and p95 over the queries, after
warm-up), measured for each channel configuration on the same KB object.

    uv run python benchmarks/scale.py --corpus ../shared/corpora/nushell-docs --copies 7
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pinakes_core import KB

QUERIES = [
    "how do I define a custom command",
    "read a csv file into a table",
    "set an environment variable for the session",
    "filter rows of a table where a column matches",
    "sort a list by a column descending",
    "convert a table to json",
    "what is the difference between a list and a table",
    "run an external command and capture its output",
    "loop over the lines of a file",
    "configure the prompt colours",
    "create a new module and export a command",
    "handle errors with try and catch",
    "parse a date string into a datetime",
    "group rows by a column and count them",
    "how do closures capture variables",
    "join two tables on a key",
    "what are the rules for variable scoping",
    "how to write a plugin for nushell",
    "open a url and read the response body",
    "split a string into a list of words",
]
#: Queries the default's graph gate lets through (relational phrasing), to time the PPR stage
#: when it runs: the queries above are single-hop, so the default skips it on all of them.
GATED_QUERIES = [
    "which is the command that reads csv files, and can it write them too?",
    "what does the command that sorts a table do with null values",
    "how do I use the output of a command that lists files in a loop",
    "which flags does the command that opens a url accept",
    "what is the type of the value returned by the command that parses json",
]
CONFIGS = {
    "hybrid": ["bm25", "dense"],
    "hybrid+expand": ["bm25", "dense", "expand"],
    "hybrid+ppr": ["bm25", "dense", "ppr"],
    "hybrid+ppr-rerank (always on)": ["bm25", "dense", "ppr-rerank"],
    "hybrid+ppr-auto (default: gated)": ["bm25", "dense", "ppr-auto"],
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpora/nushell-docs"))
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries")
    parser.add_argument("--workdir", type=Path, help="keep the KB here (default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pinakes-scale-"))
    root = work / "kb"
    if not (root / "pinakes.toml").exists():
        root.mkdir(parents=True, exist_ok=True)
        KB.init(root, name="scale")
        config = (
            (root / "pinakes.toml")
            .read_text()
            .replace("[sync]\n", "[sync]\nwrite_sidecars = false\n", 1)
        )
        (root / "pinakes.toml").write_text(config)
    kb = KB.open(root)
    timings: dict[str, float] = {}
    for copy in range(args.copies):
        target = root / f"copy{copy}"
        if not target.exists():
            shutil.copytree(
                args.corpus, target, ignore=shutil.ignore_patterns(".pinakes", "*.pnk.yaml")
            )
            target.chmod(0o755)
        t0 = time.perf_counter()
        report = kb.sync()
        timings[f"sync copy {copy}"] = round(time.perf_counter() - t0, 1)
        print(
            f"copy {copy}: {len(report.added)} added, {report.chunks_embedded} embedded, "
            f"{report.chunks_reused} reused, {report.seconds:.1f}s",
            file=sys.stderr,
        )
    status = kb.status()
    results = {}
    for name, channels in CONFIGS.items():
        for q in QUERIES[:3]:
            kb.search(q, channels=channels)  # warm-up: model, matrix, graph cache
        t0 = time.perf_counter()
        kb.search("warm", channels=channels)
        latencies = []
        for _ in range(args.rounds):
            for q in QUERIES:
                start = time.perf_counter()
                kb.search(q, channels=channels)
                latencies.append((time.perf_counter() - start) * 1000)
        results[name] = {
            "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(percentile(latencies, 95), 1),
        }
        if "ppr-auto" in channels:
            gated = []
            for _ in range(args.rounds):
                for q in GATED_QUERIES:
                    start = time.perf_counter()
                    kb.search(q, channels=channels)
                    gated.append((time.perf_counter() - start) * 1000)
            results[name + ", gated queries"] = {
                "p50_ms": round(statistics.median(gated), 1),
                "p95_ms": round(percentile(gated, 95), 1),
            }
    out = {
        "documents": status.documents,
        "chunks": status.chunks,
        "store_mb": round(status.store_bytes / 1048576, 1),
        "sync_seconds": timings,
        "latency": results,
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"{status.documents} documents, {status.chunks} chunks, store {out['store_mb']} MB")
    print("| configuration | p50 ms | p95 ms |\n|---|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['p50_ms']} | {r['p95_ms']} |")


if __name__ == "__main__":
    main()
