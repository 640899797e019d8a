"""Search's own channels on PostgreSQL against SQLite, on a labelled question set (issue 38).

Where ``benchmarks/pg_golden.py`` compares the two stores' contract reads
(``PostgresStore.lexical`` / ``nearest`` against ``SqliteBackend``), this runs the channels
search runs: a :class:`~pinakes_core.search.searcher.Searcher` over each store builds each
question's :class:`~pinakes_core.search.context.QueryContext` (with the question's filters,
so the ``filter`` class is comparable with ``pnk eval``'s) and reads its BM25 list (FTS5 on
SQLite; :class:`~pinakes_core.index.pgsearch.PgLexicalIndex` on PostgreSQL) and its dense list
(exact NumPy on SQLite; on PostgreSQL the vectors in memory, pgvector's candidates past
``--ann-min-chunks``), and their plain RRF. Recall@5 over documents, as ``pnk eval`` reads
search results; p50 per channel in ms (the query embedded before timing).

The KB is synced on SQLite (a KB already synced is reused) and copied into a PostgreSQL schema
through the store contract (:func:`~pinakes_core.index.backend.copy_index`).

Usage::

    uv run python benchmarks/pg_channels.py                        # golden/kb, its own server
    uv run python benchmarks/pg_channels.py --url postgresql://…   # an existing server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pinakes_core import KB
from pinakes_core.index.backend import SqliteBackend, copy_index
from pinakes_core.manage.eval import QuestionFilters, load_questions, recall_at
from pinakes_core.search.context import Filters
from pinakes_core.search.fusion import rrf
from pinakes_core.search.searcher import Searcher

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pg_golden import render  # the same table: rows per store and channel, columns per class

ROOT = Path(__file__).resolve().parents[1]


def compare(kb: KB, pg: Any, questions: Path, *, ann_min_chunks: int = 0) -> dict[str, Any]:
    """Copy ``kb``'s index into ``pg`` and score both stores' search channels on ``questions``.

    ``pg`` is a ``PostgresStore`` (its ``conn`` runs the search side's ``?`` SQL).
    """
    copy_index(SqliteBackend(kb.store()), pg)
    if ann_min_chunks:
        pg.ensure_ann(ann_min_chunks)
    config = kb.config.model_copy(
        update={"scale": kb.config.scale.model_copy(update={"ann_min_chunks": ann_min_chunks})}
    )
    searchers = {
        "sqlite": kb.searcher,
        "postgres": Searcher(kb.root, lambda: config, lambda: pg, lambda: kb.embedder),
    }
    names: dict[str, dict[int, str]] = {
        "sqlite": {
            int(r[0]): str(r[1])
            for r in kb.store().conn.execute(
                "SELECT c.chunk_id, d.path FROM chunks c JOIN documents d USING (doc_id)"
            )
        },
        "postgres": {
            int(r[0]): str(r[1])
            for r in pg.conn.execute(
                "SELECT c.chunk_id, d.path FROM chunks c JOIN documents d USING (doc_id)"
            )
        },
    }
    recalls: dict[str, dict[str, list[float]]] = {}
    timings: dict[str, list[float]] = {}
    for q in load_questions(questions):
        if not q.relevant:
            continue
        f = q.filters or QuestionFilters()
        filters = Filters(
            tags=tuple(f.tags),
            path=f.path,
            doc_ids=tuple(f.doc_ids),
            modified_after=f.modified_after,
            modified_before=f.modified_before,
        )
        vector = kb.embedder.embed_query(q.query)
        for side, searcher in searchers.items():
            lists = {}
            for channel in ("bm25", "dense"):
                ctx = searcher.query_context(
                    q.query, filters=filters, embed_query=lambda _, v=vector: v
                )
                started = time.perf_counter()
                ranked = ctx.bm25(q.query) if channel == "bm25" else ctx.dense()
                timings.setdefault(f"{side} {channel}", []).append(
                    (time.perf_counter() - started) * 1000
                )
                lists[channel] = [c for c, _ in ranked]
            fused = [c for c, _ in rrf(lists)]
            for channel, ids in (*lists.items(), ("rrf", fused)):
                docs = list(dict.fromkeys(names[side][c] for c in ids))
                recalls.setdefault(f"{side} {channel}", {}).setdefault(q.cls, []).append(
                    recall_at(docs, q.relevant, 5)
                )
    return {
        "chunks": pg.chunk_count(),
        "recall@5": {
            name: {c: round(statistics.fmean(v), 3) for c, v in sorted(by_class.items())}
            for name, by_class in sorted(recalls.items())
        },
        "questions": {c: len(v) for c, v in sorted(next(iter(recalls.values())).items())},
        "p50_ms": {n: round(statistics.median(v), 2) for n, v in sorted(timings.items())},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Sync the KB (SQLite), copy it into PostgreSQL, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden" / "kb")
    parser.add_argument("--questions", type=Path, default=ROOT / "golden" / "questions.jsonl")
    parser.add_argument("--url", help="an existing PostgreSQL with pgvector (default: start one)")
    parser.add_argument(
        "--ann-min-chunks", type=int, default=0, help="pgvector's HNSW from this size (0: exact)"
    )
    parser.add_argument("--json", type=Path, help="write the result as JSON here too")
    parser.add_argument(
        "--no-sync", action="store_true", help="use the KB's index as it is (a staged copy)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer

    from pinakes_core.index.pgstore import PostgresStore

    server = None if args.url else PgServer().start()
    url = args.url or server.url  # type: ignore[union-attr]
    kb = KB.open(args.kb)
    if not args.no_sync:
        kb.sync()
    store = PostgresStore.open(url, kb.config.kb.id)
    try:
        result = compare(kb, store, args.questions, ann_min_chunks=args.ann_min_chunks)
    finally:
        store.drop()
        store.close()
        kb.close()
        if server is not None:
            server.remove()
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
