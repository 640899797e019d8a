"""Statements the graph plugin's derivation runs in a first sync, by pass (issue 38).

On PostgreSQL every statement is a round trip; the count, not SQLite's cost per statement, is
what the graph stage of a sync pays there. A copy of the folder (default: the nushell docs in
``../shared``) is synced once, with the suite's FAKE hash embedder, and the statements of the
graph's ``after_sync`` are counted by pass: ``graph`` (each document's nodes and structural
edges), ``links+weights`` (link edges and hub weights), ``mentions`` (title mentions) and
``rest`` (label vectors, stamps).

Two counts: ``calls``, of the store connection's ``execute`` and ``executemany`` (an
``executemany`` counts once: on PostgreSQL psycopg sends its rows in one pipeline), and on
SQLite (default) ``sqlite_statements``, the engine's own (its trace callback: a statement each
time one starts, so an ``executemany`` counts once per row). ``--backend postgres`` counts the
calls on the dev group's server. The few statements before the first document (the settings
stamp read, a full derivation's ``DELETE``) count in ``graph``.

To count an older version of the plugin, put its source first on the path::

    uv run python benchmarks/graph_statements.py
    PYTHONPATH=/tmp/old/packages/pinakes-graph/src uv run python benchmarks/graph_statements.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from pg_sync import DEFAULT_FOLDER, database, embedder_factory, staged_kb


class _Calls:
    """The store's SQLite connection, counting the calls of ``execute`` and ``executemany``."""

    def __init__(self, conn: Any, calls: Counter[str], phase: list[str]) -> None:
        self._conn, self._calls, self._phase = conn, calls, phase

    def execute(self, *args: Any) -> Any:
        self._calls.update([self._phase[0]])
        return self._conn.execute(*args)

    def executemany(self, *args: Any) -> Any:
        self._calls.update([self._phase[0]])
        return self._conn.executemany(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def count(folder: Path, backend: str, url: str) -> dict[str, Any]:
    """Statements per pass of the graph derivation in a first sync of ``folder``."""
    from pinakes_graph import edges

    calls: Counter[str] = Counter()  # execute / executemany calls
    executed: Counter[str] = Counter()  # statements SQLite started (its trace callback)
    phase = ["before"]
    derive, mentions = edges.derive_edges, edges.derive_mentions

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "graph" and phase[0] == "before":
            phase[0] = "graph"
        elif stage == "graph links" and done == 0:
            phase[0] = "links+weights"
        elif stage == "graph links" or stage == "labels":
            phase[0] = "rest"

    def counted_mentions(*args: Any, **kwargs: Any) -> None:
        phase[0] = "mentions"
        mentions(*args, **kwargs)

    def counted_derive(kb: Any, store: Any, *args: Any, **kwargs: Any) -> None:
        report = kwargs.get("progress")

        def tick(stage: str, done: int, total: int) -> None:
            progress(stage, done, total)
            if report is not None:
                report(stage, done, total)

        kwargs["progress"] = tick
        phase[0] = "graph"  # the per-document pass starts with the transaction
        if backend == "sqlite":
            real = store.conn
            real.set_trace_callback(lambda _: executed.update([phase[0]]))
            store.conn = _Calls(real, calls, phase)
            try:
                derive(kb, store, *args, **kwargs)
            finally:
                store.conn = real
                real.set_trace_callback(None)
            return
        from pinakes_core.index.pgstore import PortableConnection

        execute, executemany = PortableConnection.execute, PortableConnection.executemany

        def counted_execute(self: Any, *a: Any, **k: Any) -> Any:
            calls.update([phase[0]])
            return execute(self, *a, **k)

        def counted_executemany(self: Any, *a: Any, **k: Any) -> Any:
            calls.update([phase[0]])
            return executemany(self, *a, **k)

        PortableConnection.execute = counted_execute  # type: ignore[method-assign]
        PortableConnection.executemany = counted_executemany  # type: ignore[method-assign]
        try:
            derive(kb, store, *args, **kwargs)
        finally:
            PortableConnection.execute = execute  # type: ignore[method-assign]
            PortableConnection.executemany = executemany  # type: ignore[method-assign]

    edges.derive_edges = counted_derive  # type: ignore[assignment]
    edges.derive_mentions = counted_mentions  # type: ignore[assignment]
    try:
        with staged_kb(folder, backend, url, embedder_factory("fake", 384)) as kb:
            kb.sync()
            documents = kb.status().documents
    finally:
        edges.derive_edges, edges.derive_mentions = derive, mentions
    return {
        "backend": backend,
        "documents": documents,
        "calls": dict(calls),
        "calls_per_document": {k: round(v / documents, 3) for k, v in calls.items()},
        "sqlite_statements": dict(executed),
        "sqlite_statements_per_document": {k: round(v / documents, 2) for k, v in executed.items()},
        "plugin": edges.__file__,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--url", help="a postgresql:// URL (default: a local server for the run)")
    args = parser.parse_args()
    with database(args.url if args.backend == "postgres" else "unused") as url:
        result = count(args.folder, args.backend, url)
    result["load"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
