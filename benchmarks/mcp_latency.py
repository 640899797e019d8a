"""MCP benchmark (DESIGN §14): warm `pinakes_search` latency and server resident memory.

The corpus (default ``../shared/corpora/nushell-docs``, relative to the repo root) is copied into
a temporary folder, made a KB and synced once with the default model. Then:

1. **latency** — a server built with ``create_server`` around the open KB, driven through
   fastmcp's in-memory ``Client`` (the real MCP protocol, no transport): after warm-up queries,
   every query is timed as a full ``call_tool`` round trip; the tool's own ``server_total`` and
   core's search ``total`` are reported beside it;
2. **memory** — the real ``pinakes-mcp`` executable started over stdio on the same (synced) KB,
   driven by the official MCP SDK client: its resident set size after start-up and after the
   searches, and its peak (``VmHWM``), read from the server process itself.

Usage::

    uv run python benchmarks/mcp_latency.py              # Markdown for docs/benchmarks.md
    uv run python benchmarks/mcp_latency.py --json       # machine-readable
    uv run python benchmarks/mcp_latency.py --quick      # first 150 documents (smoke run)

Progress goes to stderr; the result goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from corpora import QUERIES, copy_corpus  # one corpus copier and query list for both
from memory import proc_memory_mb  # shared with scale.py, which imports this script

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = "../shared/corpora/nushell-docs"
QUICK_DOCS = 150
WARMUP = 5
ROUNDS = 5
K = 8


def log(message: str) -> None:
    print(f"[mcp-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def queries() -> list[str]:
    """The corpus benchmark's nushell queries (one list for both benchmarks)."""
    return list(QUERIES["nushell-docs"])


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), q)), 2)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": pct(values, 50),
        "p95": pct(values, 95),
        "mean": round(statistics.fmean(values), 2),
        "max": round(max(values), 2),
        "n": len(values),
    }


async def measure_latency(kb_root: Path, texts: list[str]) -> dict[str, Any]:
    from fastmcp import Client

    from pinakes_core import KB
    from pinakes_mcp import create_server

    kb = KB.open(kb_root)
    rss_before = psutil.Process().memory_info().rss
    async with Client(create_server([kb])) as client:
        rss_loaded = psutil.Process().memory_info().rss
        for text in texts[:WARMUP]:
            await client.call_tool("pinakes_search", {"query": text, "k": K})
        round_trip: list[float] = []
        server: list[float] = []
        core: list[float] = []
        frontier: list[float] = []
        for _ in range(ROUNDS):
            for text in texts:
                t0 = time.perf_counter()
                result = await client.call_tool("pinakes_search", {"query": text, "k": K})
                round_trip.append((time.perf_counter() - t0) * 1000)
                timings = (result.structured_content or {})["timings_ms"]
                server.append(timings["server_total"])
                core.append(timings["total"])
                frontier.append(timings["frontier"])
        rss_after = psutil.Process().memory_info().rss
    kb.close()
    return {
        "round_trip_ms": summary(round_trip),
        "tool_ms": summary(server),
        "core_search_ms": summary(core),
        "frontier_ms": summary(frontier),
        "in_process_rss_mb": {
            "before_start": round(rss_before / 2**20, 1),
            "after_load": round(rss_loaded / 2**20, 1),
            "after_queries": round(rss_after / 2**20, 1),
        },
    }


async def measure_server_memory(kb_root: Path, texts: list[str]) -> dict[str, Any]:
    """Start ``pinakes-mcp --kb kb_root`` over stdio as a host does, search ``texts``: its memory.

    ``VmRSS`` and ``VmHWM`` (the peak) come from the server process's ``/proc/<pid>/status``
    (``memory.proc_memory_mb``): after ``initialize`` plus the background warm-up (the first
    search waits for it), and after the searches.
    """
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    executable = Path(sys.executable).with_name("pinakes-mcp")
    params = StdioServerParameters(command=str(executable), args=["--kb", str(kb_root)])
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        started = time.perf_counter() - t0
        servers = [
            child
            for child in psutil.Process().children(recursive=True)
            if child.pid not in before and "pinakes-mcp" in " ".join(child.cmdline())
        ]
        server = servers[0]
        loaded_at = proc_memory_mb(server.pid)
        t1 = time.perf_counter()
        await session.call_tool("pinakes_search", {"query": texts[0], "k": K})
        first_s = time.perf_counter() - t1
        warmed = proc_memory_mb(server.pid)
        latencies = []
        for text in texts:
            t2 = time.perf_counter()
            await session.call_tool("pinakes_search", {"query": text, "k": K})
            latencies.append((time.perf_counter() - t2) * 1000)
        after = proc_memory_mb(server.pid)
    return {
        "startup_to_initialized_s": round(started, 2),
        "rss_at_initialize_mb": loaded_at["VmRSS"],
        "first_search_s": round(first_s, 2),
        "rss_after_load_mb": warmed["VmRSS"],
        "rss_after_queries_mb": after["VmRSS"],
        "peak_rss_mb": after["VmHWM"],
        "queries": len(texts),
        "search_ms": summary(latencies),
    }


def run(corpus: Path, limit: int | None) -> dict[str, Any]:
    from pinakes_core import KB

    texts = queries()
    with tempfile.TemporaryDirectory(prefix="pinakes-mcp-bench-") as tmp:
        kb_root = Path(tmp) / corpus.name
        docs = copy_corpus(corpus, kb_root, limit)
        KB.init(kb_root, name="bench")
        log(f"syncing {docs} documents from {corpus} (default model) …")
        t0 = time.perf_counter()
        with KB.open(kb_root) as kb:
            report = kb.sync()
            status = kb.status()
        sync_s = time.perf_counter() - t0
        log(f"synced in {sync_s:.1f}s: {status.documents} documents, {status.chunks} chunks")
        log(f"latency: {WARMUP} warm-up + {ROUNDS} × {len(texts)} queries, in-memory client …")
        latency = asyncio.run(measure_latency(kb_root, texts))
        log("memory: pinakes-mcp over stdio …")
        memory = asyncio.run(measure_server_memory(kb_root, texts))
    return {
        "corpus": corpus.name,
        "documents": status.documents,
        "chunks": status.chunks,
        "model": status.model,
        "sync_s": round(sync_s, 1),
        "sync_added": len(report.added),
        "k": K,
        "latency": latency,
        "server": memory,
        "machine": {
            "python": platform.python_version(),
            "cpus": psutil.cpu_count(),
            "platform": platform.platform(),
        },
        "date": time.strftime("%Y-%m-%d"),
    }


def markdown(result: dict[str, Any]) -> str:
    lat, mem = result["latency"], result["server"]
    rows = [
        ("`call_tool` round trip (in-memory client)", lat["round_trip_ms"]),
        ("tool body (`timings_ms.server_total`)", lat["tool_ms"]),
        ("core hybrid search (`timings_ms.total`)", lat["core_search_ms"]),
        ("frontier (links of the hits)", lat["frontier_ms"]),
    ]
    lines = [
        f"### MCP server — {result['corpus']} ({result['documents']} documents, "
        f"{result['chunks']} chunks, {result['model']})",
        "",
        f"Warm `pinakes_search`, k = {result['k']}, {lat['round_trip_ms']['n']} queries "
        f"({ROUNDS} rounds of the corpus queries after {WARMUP} warm-up), "
        f"{result['machine']['cpus']} CPUs, Python {result['machine']['python']}, "
        f"{result['date']}.",
        "",
        "| measure | p50 ms | p95 ms | mean ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {s['p50']} | {s['p95']} | {s['mean']} | {s['max']} |" for name, s in rows
    ]
    lines += [
        "",
        "| `pinakes-mcp` over stdio | value |",
        "|---|---:|",
        f"| start-up to `initialize` answered (KB already synced) | {mem['startup_to_initialized_s']} s |",
        f"| resident memory after load | {mem['rss_after_load_mb']} MB |",
        f"| resident memory after {mem['queries']} searches | {mem['rss_after_queries_mb']} MB |",
        f"| peak resident memory | {mem['peak_rss_mb']} MB |",
        "",
        f"Sync of the copy before measuring: {result['sync_s']} s.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"default: {DEFAULT_CORPUS}")
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK_DOCS} documents only")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_absolute():
        corpus = (REPO / corpus).resolve()
    if not corpus.is_dir():
        raise SystemExit(f"corpus {args.corpus!r} is not a folder (looked at {corpus})")
    result = run(corpus, QUICK_DOCS if args.quick else None)
    print(json.dumps(result, indent=2) if args.json else markdown(result))


if __name__ == "__main__":
    main()
