"""Sync's removal of unused vectors on PostgreSQL: ``NOT IN`` against ``NOT EXISTS`` (issue 38).

Inside one transaction, as a first sync on PostgreSQL is (nothing analysed yet), a fresh KB
schema gets ``--chunks`` chunks (1,280 characters of text each) and as many vectors of
``--dim`` dimensions plus 100 unused ones; then sync's statement (``index/sync.py``) and the
same deletion written as two ``NOT EXISTS`` run under ``EXPLAIN ANALYZE``, each rolled back,
and their time and plan are printed. The server is the dev group's (tests/core/pg_server.py).

Usage::

    uv run python benchmarks/pg_vector_gc.py --chunks 27000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STATEMENTS = {
    "NOT IN (sync's)": "DELETE FROM vectors WHERE embed_hash NOT IN "
    "(SELECT embed_hash FROM chunks UNION SELECT embed_hash FROM node_vectors)",
    "NOT EXISTS": "DELETE FROM vectors v WHERE NOT EXISTS "
    "(SELECT 1 FROM chunks c WHERE c.embed_hash = v.embed_hash) AND NOT EXISTS "
    "(SELECT 1 FROM node_vectors n WHERE n.embed_hash = v.embed_hash)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=27_000)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer  # type: ignore[import-not-found]

    from pinakes_core.index.pgstore import PostgresStore

    server = PgServer().start()
    try:
        store = PostgresStore.open(server.url, "vectorgc")
        store.hold_writes()  # one transaction, as a sync's
        raw = store.raw
        raw.execute(
            "INSERT INTO documents(doc_id, path, title, content_hash, mtime_ns, size, "
            "synced_at) VALUES ('d', 'd.md', 'd', 'h', 0, 0, 0)"
        )
        raw.execute(
            "INSERT INTO chunks(doc_id, ordinal, heading_path, text, embed_hash, start_line, "
            "end_line, tokens, tsv, length) SELECT 'd', i, '[]', repeat(md5(i::text), 40), "
            "md5(i::text), 1, 1, 1, ''::tsvector, 0 FROM generate_series(1, %s) i",
            (args.chunks,),
        )
        raw.execute(
            "INSERT INTO vectors SELECT md5(i::text), (SELECT array_agg(random())::real[]::vector "
            "FROM generate_series(1, %s) WHERE i > 0) FROM generate_series(1, %s) i",
            (args.dim, args.chunks + 100),
        )
        print(f"{args.chunks} chunks, {args.chunks + 100} vectors of {args.dim} dimensions")
        for name, query in STATEMENTS.items():
            raw.execute("SAVEPOINT gc")
            t0 = time.perf_counter()
            plan = [r[0] for r in raw.execute("EXPLAIN (ANALYZE, COSTS off) " + query)]
            seconds = time.perf_counter() - t0
            raw.execute("ROLLBACK TO SAVEPOINT gc")
            shape = next(
                (p.strip() for p in plan if "SubPlan" in p or "Anti Join" in p), plan[0].strip()
            )
            print(f"{name:16s} {seconds:8.3f} s  {shape}")
        raw.rollback()
        store.close()
    finally:
        server.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
