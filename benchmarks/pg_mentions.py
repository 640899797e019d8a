"""Title-mention derivation alone, on both backends: its wall time and its statements (issue 38).

A copy of the folder (default: the nushell docs in ``../shared``) is synced once into SQLite and
once into a PostgreSQL schema (the suite's FAKE embedder, as ``pg_sync.py``); then
``pinakes_graph.mentions.derive_mentions`` runs on each store, in a transaction of its own,
``--rounds`` times for everything (what a first sync, a retitle or a removal does) and
``--rounds`` times for ``--changed`` documents (what an edit does). Re-deriving writes the same
edges, so the rounds measure the same work. ``statements`` counts the calls on the connection
(``execute`` and ``executemany``: on PostgreSQL an ``executemany`` is one pipelined batch).

To compare with another version of the module, put its ``src`` folder first on ``PYTHONPATH``
(the printed ``module`` says which one ran)::

    uv run python benchmarks/pg_mentions.py --folder /tmp/synth10k --json
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
from pathlib import Path
from typing import Any

from pinakes_core import KB

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pg_sync import DEFAULT_FOLDER, database, embedder_factory


class CountingConnection:
    """The store's connection, counting the statements sent through it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements = 0

    def execute(self, *args: Any) -> Any:
        self.statements += 1
        return self.conn.execute(*args)

    def executemany(self, *args: Any) -> Any:
        self.statements += 1
        return self.conn.executemany(*args)


def derive(kb: KB, changed: list[str], everything: bool) -> tuple[float, int]:
    """One derivation in its own transaction: (seconds, statements)."""
    from pinakes_graph.mentions import derive_mentions

    store = kb.store()
    weight = kb.config.graph.title_mention
    with store.transaction() as tx:
        counted = CountingConnection(tx)
        t0 = time.perf_counter()
        derive_mentions(counted, changed, everything=everything, weight=weight)  # type: ignore[arg-type]
        seconds = time.perf_counter() - t0
    return seconds, counted.statements


def measure(folder: Path, backend: str, url: str, rounds: int, changed: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"pnk-mentions-{backend}-"))
    try:
        root = tmp / "kb"
        shutil.copytree(folder, root, ignore=shutil.ignore_patterns(".pinakes", ".git"))
        KB.init(root).close()
        if backend == "postgres":
            with (root / "pinakes.toml").open("a") as f:
                f.write(f'\n[store]\nbackend = "postgres"\nurl = "{url}"\n')
        kb = KB.open(root, embedder=embedder_factory("fake", 384)())
        kb.sync()
        conn = kb.store().conn
        docs = sorted(r[0] for r in conn.execute("SELECT doc_id FROM documents"))
        edges = int(
            conn.execute("SELECT COUNT(*) FROM edges WHERE kind = 'title-mention'").fetchone()[0]
        )
        out: dict[str, Any] = {"documents": len(docs), "title_mention_edges": edges}
        some = docs[:: max(1, len(docs) // changed)][:changed]
        for name, args in (("everything", ([], True)), (f"{len(some)} changed", (some, False))):
            runs = [derive(kb, *args) for _ in range(rounds)]
            out[name] = {
                "median_s": round(statistics.median(s for s, _ in runs), 3),
                "runs_s": [round(s, 3) for s, _ in runs],
                "statements": runs[0][1],
            }
        kb.close()
        if backend == "postgres":
            from pinakes_core.index.pgstore import PostgresStore

            store = PostgresStore.open(url, kb.config.kb.id, create=False)
            store.drop()
            store.close()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--changed", type=int, default=100, help="documents of the edit case")
    parser.add_argument("--url", help="a postgresql:// URL (default: a local server for the run)")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import pinakes_graph.mentions

    result: dict[str, Any] = {
        "folder": str(args.folder),
        "module": pinakes_graph.mentions.__file__,
        "load": os.getloadavg()[0],
    }
    with database(args.url) as url:
        for backend in [b for b in args.backends.split(",") if b]:
            print(f"{backend}…", file=sys.stderr)
            result[backend] = measure(args.folder, backend, url, args.rounds, args.changed)
    result["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"folder {result['folder']}, load {result['load']:.1f}–{result['load_after']:.1f}")
    print(f"module {result['module']}")
    for backend in ("sqlite", "postgres"):
        if backend not in result:
            continue
        r = result[backend]
        print(
            f"{backend}: {r['documents']} documents, {r['title_mention_edges']} title-mention edges"
        )
        for name, m in r.items():
            if isinstance(m, dict):
                print(
                    f"  {name}: {m['median_s']} s (median of {m['runs_s']}), {m['statements']} statements"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
