"""Title-mention derivation alone, on both backends: its wall time and its statements (issue 38).

A copy of the folder (default: the nushell docs in ``../shared``) is synced once into SQLite and
once into a PostgreSQL schema (the suite's FAKE embedder, as ``pg_sync.py``); then
``pinakes_graph.mentions.derive_mentions`` runs on each store, in a transaction of its own,
``--rounds`` times for everything (what a first sync, a retitle or a removal does) and
``--rounds`` times for ``--changed`` documents (what an edit does). Re-deriving writes the same
edges, so the rounds measure the same work. ``statements`` counts the calls on the connection
(``execute`` and ``executemany``: on PostgreSQL an ``executemany`` is one pipelined batch).

``--compare FILE`` also times another version of ``mentions.py`` on the same stores, its rounds
alternating with the installed module's (so both see the same load)::

    git show 8b45734:packages/pinakes-graph/src/pinakes_graph/mentions.py > /tmp/mentions_old.py
    uv run python benchmarks/pg_mentions.py --folder /tmp/synth10k --compare /tmp/mentions_old.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pinakes_core import KB

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pg_sync import DEFAULT_FOLDER, database, embedder_factory, staged_kb


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


Derive = Callable[..., None]


def load_module(path: Path) -> Derive:
    """``derive_mentions`` of the ``mentions.py`` at ``path``."""
    spec = importlib.util.spec_from_file_location("mentions_compared", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    derive: Derive = module.derive_mentions
    return derive


def derive(
    kb: KB, derive_mentions: Derive, changed: list[str], everything: bool
) -> tuple[float, int]:
    """One derivation in its own transaction: (seconds, statements)."""
    store = kb.store()
    weight = kb.config.graph.title_mention
    with store.transaction() as tx:
        counted = CountingConnection(tx)
        t0 = time.perf_counter()
        derive_mentions(counted, changed, everything=everything, weight=weight)
        seconds = time.perf_counter() - t0
    return seconds, counted.statements


def _edges(kb: KB) -> list[tuple[int, int, float]]:
    rows = kb.store().conn.execute(
        "SELECT src, dst, weight FROM edges WHERE kind = 'title-mention' ORDER BY src, dst"
    )
    return [(int(r[0]), int(r[1]), float(r[2])) for r in rows]


def measure(
    folder: Path, backend: str, url: str, rounds: int, changed: int, versions: dict[str, Derive]
) -> dict[str, Any]:
    with staged_kb(folder, backend, url, embedder_factory("fake", 384)) as kb:
        kb.sync()
        conn = kb.store().conn
        docs = sorted(r[0] for r in conn.execute("SELECT doc_id FROM documents"))
        edges = int(
            conn.execute("SELECT COUNT(*) FROM edges WHERE kind = 'title-mention'").fetchone()[0]
        )
        out: dict[str, Any] = {"documents": len(docs), "title_mention_edges": edges}
        some = docs[:: max(1, len(docs) // changed)][:changed]
        reference = _edges(kb)  # as the sync derived them
        same = True
        for case, args in (("everything", ([], True)), (f"{len(some)} changed", (some, False))):
            runs: dict[str, list[tuple[float, int]]] = {v: [] for v in versions}
            for _ in range(rounds):
                for version, fn in versions.items():
                    runs[version].append(derive(kb, fn, *args))
                    same &= _edges(kb) == reference
            for version, done in runs.items():
                out[f"{case} ({version})"] = {
                    "median_s": round(statistics.median(s for s, _ in done), 3),
                    "runs_s": [round(s, 3) for s, _ in done],
                    "statements": done[0][1],
                }
        out["same_edges"] = same  # every run left the sync's edges and weights, exactly
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--changed", type=int, default=100, help="documents of the edit case")
    parser.add_argument("--url", help="a postgresql:// URL (default: a local server for the run)")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--compare", type=Path, help="another mentions.py to time beside it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import pinakes_graph.mentions

    versions: dict[str, Derive] = {"installed": pinakes_graph.mentions.derive_mentions}
    if args.compare:
        versions["compared"] = load_module(args.compare)
    result: dict[str, Any] = {
        "folder": str(args.folder),
        "module": pinakes_graph.mentions.__file__,
        "compared": str(args.compare) if args.compare else None,
        "load": os.getloadavg()[0],
    }
    with database(args.url) as url:
        for backend in [b for b in args.backends.split(",") if b]:
            print(f"{backend}…", file=sys.stderr)
            result[backend] = measure(
                args.folder, backend, url, args.rounds, args.changed, versions
            )
    result["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"folder {result['folder']}, load {result['load']:.1f}–{result['load_after']:.1f}")
    print(f"installed {result['module']}, compared {result['compared']}")
    for backend in ("sqlite", "postgres"):
        if backend not in result:
            continue
        r = result[backend]
        print(
            f"{backend}: {r['documents']} documents, {r['title_mention_edges']} title-mention "
            f"edges; every run left the sync's edges: {r['same_edges']}"
        )
        for name, m in r.items():
            if isinstance(m, dict):
                print(
                    f"  {name}: {m['median_s']} s (median of {m['runs_s']}), {m['statements']} statements"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
