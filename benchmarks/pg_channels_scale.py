"""Latency of search's own BM25 and dense channels at a given size: SQLite against PostgreSQL.

``benchmarks/pg_scale.py`` times the two stores' contract reads (``lexical``, ``nearest``); this
times the channels as search runs them, through a :class:`~pinakes_core.search.searcher.Searcher`
over each store: on SQLite FTS5 with its rare/common split past ``[scale] bm25_max_rows`` and
the exact NumPy scan; on PostgreSQL :class:`~pinakes_core.index.pgsearch.PgLexicalIndex` (the
postings, plus the multi-word phrases' term) and pgvector's HNSW candidates scored exactly.
The KB (default golden, synced with the real model) is cloned as ``pg_scale.py`` clones it
(each copy's documents under their own paths, vectors with Gaussian noise) into a fresh SQLite
store and a PostgreSQL schema; every question runs ``--rounds`` warm times per channel, each
with a fresh query context (the KB's shared phrase counts kept, as a server keeps them).

Usage::

    uv run python benchmarks/pg_channels_scale.py --chunks 50000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pinakes_core import KB
from pinakes_core.index.backend import SqliteBackend
from pinakes_core.index.store import Store
from pinakes_core.manage.eval import load_questions
from pinakes_core.search.searcher import Searcher

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    """Clone, fill both stores, time the channels through their searchers, print the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden" / "kb")
    parser.add_argument("--questions", type=Path, default=ROOT / "golden" / "questions.jsonl")
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--noise", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from pg_server import PgServer

    from pg_scale import emit, fill, summary, timed
    from pinakes_core.index.pgstore import PostgresStore

    kb = KB.open(args.kb)
    kb.sync()
    base = SqliteBackend(kb.store())
    docs = list(base.documents())
    vectors = dict(base.vectors())
    per_copy = sum(len(d.chunks) for d in docs)
    copies = max(1, round(args.chunks / per_copy))
    questions = [q.query for q in load_questions(args.questions)][: args.queries]
    query_vectors = {q: kb.embedder.embed_query(q) for q in questions}
    config = kb.config.model_copy(
        update={"scale": kb.config.scale.model_copy(update={"ann_min_chunks": 1})}
    )
    result: dict[str, Any] = {"chunks": per_copy * copies, "copies": copies}
    server = PgServer().start()
    with tempfile.TemporaryDirectory(prefix="pnk-pg-channels-") as tmp:
        try:
            sqlite = Store.open(Path(tmp), create=True)
            pg = PostgresStore.open(server.url, kb.config.kb.id)
            result["fill_s"] = {
                "sqlite": round(fill(SqliteBackend(sqlite), docs, vectors, copies, args.noise), 1),
                "postgres": round(fill(pg, docs, vectors, copies, args.noise), 1),
            }
            pg.conn.execute("ANALYZE")
            started = time.perf_counter()
            pg.ensure_ann(1)
            result["hnsw_build_s"] = round(time.perf_counter() - started, 1)
            sqlite_config = kb.config.model_copy(
                update={"scale": kb.config.scale.model_copy(update={"ann_min_chunks": 0})}
            )
            searchers = {
                "sqlite": Searcher(
                    Path(tmp), lambda: sqlite_config, lambda: sqlite, lambda: kb.embedder
                ),
                "postgres": Searcher(Path(tmp), lambda: config, lambda: pg, lambda: kb.embedder),
            }
            times: dict[str, list[float]] = {}
            for name, searcher in searchers.items():
                searcher.vectors()  # loaded once, as a server loads them
                for q in questions:

                    def bm25(s: Searcher = searcher, q: str = q) -> Any:
                        return s.query_context(q).bm25(q)

                    def dense(s: Searcher = searcher, q: str = q) -> Any:
                        v = query_vectors[q]
                        return s.query_context(q, embed_query=lambda _: v).dense()

                    times.setdefault(f"{name} bm25", []).extend(timed(bm25, args.rounds))
                    times.setdefault(f"{name} dense", []).extend(timed(dense, args.rounds))
            result["latency_ms"] = {n: summary(v) for n, v in times.items()}
            pg.drop()
            pg.close()
            sqlite.close()
        finally:
            server.remove()
            kb.close()
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
