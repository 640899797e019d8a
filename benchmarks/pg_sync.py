"""Sync and search of one folder on the two index backends: SQLite against PostgreSQL (issue 38).

The folder (default: the nushell docs in ``../shared``) is copied twice into fresh temporary
folders, made a KB, and synced once into ``.pinakes/`` (SQLite) and once into a PostgreSQL
schema, in this process, one after the other: the first sync, a sync with nothing changed, and
a sync after one file changed, each timed by wall clock with the report's parts. Then every
query of ``--queries`` runs ``--rounds`` times on each KB (the default channels: BM25, dense,
graph) and the p50 / p95 of the warm searches are printed.

By default the embedder is the suite's FAKE hash model (``--dim`` dimensions), so what is
timed is the store's own cost and not the model's, which is the same on both backends;
``--embedder real`` uses the configured model (add its embedding time to both). The
PostgreSQL server is the dev group's (tests/core/pg_server.py) on a Unix socket, unless
``--url`` names another.

Usage::

    uv run python benchmarks/pg_sync.py                      # nushell docs, fake embedder
    uv run python benchmarks/pg_sync.py --folder PATH --embedder real --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pinakes_core import KB

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FOLDER = ROOT.parent / "shared" / "corpora" / "nushell-docs"
QUERIES = (
    "how do I define a custom command",
    "pipeline input and output types",
    "parse a json file into a table",
    "environment variables in config",
    "how to sort a table by column",
    "string interpolation",
    "loop over a list with each",
    "error make custom errors",
    "register a plugin",
    "dataframe group by aggregation",
)


@contextmanager
def database(url: str | None) -> Iterator[str]:
    """``url``, or a fresh local server's for the run (stopped and deleted after)."""
    if url:
        yield url
        return
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer

    server = PgServer().start()
    try:
        yield server.url
    finally:
        server.remove()


@contextmanager
def staged_kb(folder: Path, backend: str, url: str, embedder: Callable[[], Any]) -> Iterator[KB]:
    """A KB of a fresh copy of ``folder`` on ``backend``, not synced; closed, its PostgreSQL
    schema dropped and the copy deleted after (a run leaves no index behind)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"pnk-pgsync-{backend}-"))
    try:
        root = tmp / "kb"
        shutil.copytree(folder, root, ignore=shutil.ignore_patterns(".pinakes", ".git"))
        KB.init(root).close()
        if backend == "postgres":
            with (root / "pinakes.toml").open("a") as f:
                f.write(f'\n[store]\nbackend = "postgres"\nurl = "{url}"\n')
        kb = KB.open(root, embedder=embedder())
        try:
            yield kb
        finally:
            kb.close()
        if backend == "postgres":
            from pinakes_core.index.pgstore import PostgresStore

            store = PostgresStore.open(url, kb.config.kb.id, create=False)
            store.drop()
            store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def embedder_factory(kind: str, dim: int) -> Callable[[], Any]:
    if kind == "real":
        return lambda: None
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import FakeHashEmbedder

    return lambda: FakeHashEmbedder(model_id=f"fake-hash-{dim}", dim=dim)


def timed_sync(kb: KB) -> dict[str, Any]:
    """One sync: its wall time, the report's parts, and ``stages_s``: for each progress stage,
    the seconds from its first tick to its last (the graph plugin's "graph links" spans its
    link, weight and title-mention passes)."""
    ticks: dict[str, list[float]] = {}

    def progress(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        ticks.setdefault(stage, [now, now])[1] = now

    t0 = time.perf_counter()
    report = kb.sync(progress=progress)
    return {
        "seconds": round(time.perf_counter() - t0, 2),
        "parts_s": report.parts_s,
        "stages_s": {stage: round(b - a, 2) for stage, (a, b) in ticks.items()},
        "added": len(report.added),
        "changed": len(report.changed),
    }


def measure(
    folder: Path, backend: str, url: str, embedder: Callable[[], Any], rounds: int
) -> dict[str, Any]:
    """First, no-change and one-change sync of a copy of ``folder``, then warm search latency."""
    with staged_kb(folder, backend, url, embedder) as kb:
        root = kb.root
        out: dict[str, Any] = {}

        def sync(name: str) -> None:
            out[name] = timed_sync(kb)
            print(f"{backend} {name}: {json.dumps(out[name])}", file=sys.stderr, flush=True)

        sync("first")
        sync("no change")  # the first sync's sidecars are racily clean here
        sync("no change, again")
        target = sorted(root.rglob("*.md"))[0]
        target.write_text(target.read_text() + "\n\nOne more line for the benchmark.\n")
        sync("one change")
        status = kb.status()
        out["documents"], out["chunks"] = status.documents, status.chunks
        times = []
        for query in QUERIES:
            kb.search(query, k=10)  # warm: model, vectors, caches
        for _ in range(rounds):
            for query in QUERIES:
                t0 = time.perf_counter()
                kb.search(query, k=10)
                times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        out["search_ms"] = {
            "p50": round(statistics.median(times), 1),
            "p95": round(times[int(0.95 * (len(times) - 1))], 1),
        }
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--embedder", choices=("fake", "real"), default="fake")
    parser.add_argument("--dim", type=int, default=384, help="the fake embedder's dimensions")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", help="a postgresql:// URL (default: a local server for the run)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--backends",
        default="sqlite,postgres",
        help="which backends to run, in this order (comma-separated)",
    )
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    embedder = embedder_factory(args.embedder, args.dim)
    result: dict[str, Any] = {
        "folder": str(args.folder),
        "embedder": args.embedder,
        "load": os.getloadavg()[0],
    }
    with database(args.url) as url:
        for backend in backends:
            print(f"{backend}…", file=sys.stderr)
            result[backend] = measure(args.folder, backend, url, embedder, args.rounds)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"folder {result['folder']}, embedder {args.embedder}, load {result['load']:.1f}")
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    print("| | " + " | ".join(names[b] for b in backends) + " |")
    print("|---" * (len(backends) + 1) + "|")
    for key in ("first", "no change", "no change, again", "one change"):
        row = [f"{result[b][key]['seconds']} s" for b in backends]
        print(f"| {key} sync | " + " | ".join(row) + " |")
    for key in ("p50", "p95"):
        row = [f"{result[b]['search_ms'][key]} ms" for b in backends]
        print(f"| search {key} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
