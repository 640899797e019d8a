"""Throughput of 1, 2 and 4 MCP servers serving one KB whose index is in PostgreSQL (issue 38).

A KB (default: ``golden/kb``) is copied into a temporary folder with ``[store] backend =
"postgres"`` and synced once with the configured model. Then, for each server count N, N real
``pinakes-mcp --transport http`` processes start, each on a "machine" folder that holds only
the KB's ``pinakes.toml`` (no documents, no local index): the database is all they share. A
bounded load on loopback (``--concurrency`` clients per server, each waiting for its answer
before asking again) sends ``pinakes_search`` calls round-robin to the servers for
``--seconds``; answers per second and the latency p50 / p95 of the calls are printed. Every
server answers warm queries before the clock starts.

On this 2-core machine N servers share the same two cores (and the database's), so more
servers cannot add CPU here; what the run shows is that they serve one index correctly side by
side and what a call costs through HTTP. The PostgreSQL server is the dev group's
(tests/core/pg_server.py) unless ``--url`` names one.

Usage::

    uv run python benchmarks/pg_mcp_throughput.py [--kb golden/kb] [--servers 1,2,4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastmcp import Client

from pinakes_core import KB
from pinakes_core.manage.eval import load_questions

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_servers(
    count: int, config: Path, tmp: Path, url: str
) -> list[tuple[subprocess.Popen[bytes], str]]:
    """``count`` ``pinakes-mcp`` HTTP servers, each on a folder holding only ``config``."""
    servers = []
    for n in range(count):
        machine = tmp / f"machine-{count}-{n}"
        machine.mkdir()
        shutil.copyfile(config, machine / "pinakes.toml")
        port = free_port()
        command = [str(Path(sys.executable).with_name("pinakes-mcp")), "--transport", "http"]
        command += ["--port", str(port), "--kb", str(machine), "--no-watch"]
        command += ["--log-level", "WARNING"]
        process = subprocess.Popen(command, env={**os.environ, "PINAKES_DATABASE_URL": url})
        servers.append((process, f"http://127.0.0.1:{port}/mcp"))
    return servers


async def ready(address: str, timeout: float = 180.0) -> None:
    """Wait until the server at ``address`` answers a search (model and index loaded)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with Client(address) as client:
                await client.call_tool("pinakes_search", {"query": "warm up", "k": 1})
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def load(
    addresses: list[str], queries: list[str], seconds: float, concurrency: int
) -> dict[str, Any]:
    """``concurrency`` clients per server asking in a loop for ``seconds``; calls and latencies."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds
    texts = itertools.cycle(queries)

    async def worker(address: str) -> None:
        async with Client(address) as client:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                await client.call_tool("pinakes_search", {"query": next(texts), "k": 5})
                latencies.append((time.perf_counter() - t0) * 1000)

    started = time.monotonic()
    await asyncio.gather(*(worker(a) for a in addresses for _ in range(concurrency)))
    wall = time.monotonic() - started
    latencies.sort()
    return {
        "calls": len(latencies),
        "per_second": round(len(latencies) / wall, 1),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden" / "kb")
    parser.add_argument("--questions", type=Path, default=ROOT / "golden" / "questions.jsonl")
    parser.add_argument("--servers", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=2, help="clients per server")
    parser.add_argument("--url", help="a postgresql:// URL (default: a local server for the run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    queries = [q.query for q in load_questions(args.questions)]
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer

    server = None if args.url else PgServer().start()
    url = args.url or server.url  # type: ignore[union-attr]
    tmp = Path(tempfile.mkdtemp(prefix="pnk-pgmcp-"))
    result: dict[str, Any] = {"kb": str(args.kb), "load": os.getloadavg()[0], "runs": {}}
    try:
        root = tmp / "kb"
        shutil.copytree(args.kb, root, ignore=shutil.ignore_patterns(".pinakes"))
        with (root / "pinakes.toml").open("a") as f:
            f.write(f'\n[store]\nbackend = "postgres"\nurl = "{url}"\n')
        with KB.open(root) as kb:
            t0 = time.perf_counter()
            kb.sync()
            result["sync_s"] = round(time.perf_counter() - t0, 1)
        for count in (int(n) for n in args.servers.split(",")):
            servers = start_servers(count, root / "pinakes.toml", tmp, url)
            try:
                addresses = [a for _, a in servers]
                asyncio.run(asyncio.wait_for(asyncio.gather(*(ready(a) for a in addresses)), 300))
                print(f"{count} server(s) ready", file=sys.stderr)
                result["runs"][count] = asyncio.run(
                    load(addresses, queries, args.seconds, args.concurrency)
                )
            finally:
                for process, _ in servers:
                    process.terminate()
                    process.wait(30)
        with KB.open(root) as kb:
            from pinakes_core.index.pgstore import PostgresStore

            store = PostgresStore.open(url, kb.config.kb.id, create=False)
            store.drop()
            store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if server is not None:
            server.remove()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"KB {result['kb']}, load {result['load']:.1f}, sync {result['sync_s']} s")
    print("| servers | calls/s | p50 ms | p95 ms |\n|---|---|---|---|")
    for count, run in result["runs"].items():
        print(f"| {count} | {run['per_second']} | {run['p50_ms']} | {run['p95_ms']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
