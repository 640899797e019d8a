"""Channel latency of the two index backends at a given size: SQLite against PostgreSQL.

A synced KB (default: golden, staged and synced with the real model) is cloned through the
store contract until it holds about ``--chunks`` chunks, once into a fresh SQLite store and
once into a PostgreSQL schema, with the same records: each copy's documents under their own
ids and paths, each copy's chunk vectors the originals plus Gaussian noise (σ ``--noise``,
renormalised) under their own hashes, so every chunk has a distinct vector. Then every question
of the set runs ``--rounds`` times on each backend's BM25 channel (``lexical``) and dense
channel (``nearest``, exact on both; PostgreSQL also with its HNSW index), and the p50 / p95 of
the warm calls are printed. The channels alone: not search, which runs on SQLite only today.

Usage::

    uv run python benchmarks/pg_scale.py --chunks 50000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pinakes_core import KB
from pinakes_core.index.backend import DocumentRecord, IndexBackend, SqliteBackend
from pinakes_core.index.store import Store
from pinakes_core.manage.eval import load_questions

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = 50


def copies_of(
    docs: list[DocumentRecord], vectors: dict[str, Any], copy: int, noise: float, rng: Any
) -> tuple[list[DocumentRecord], dict[str, Any]]:
    """Copy ``copy`` of the documents and their vectors (copy 0 is the original)."""
    if copy == 0:
        return docs, vectors
    out, fresh = [], {}
    for doc in docs:
        chunks = []
        for c in doc.chunks:
            h = f"{c.embed_hash}~{copy}"
            if h not in fresh:
                v = vectors[c.embed_hash] + rng.normal(
                    0, noise / np.sqrt(len(vectors[c.embed_hash])), len(vectors[c.embed_hash])
                )
                fresh[h] = (v / np.linalg.norm(v)).astype(np.float32)
            chunks.append(dataclasses.replace(c, embed_hash=h))
        out.append(
            dataclasses.replace(
                doc,
                doc_id=f"{doc.doc_id}~{copy}",
                path=f"copy{copy:04d}/{doc.path}",
                chunks=tuple(chunks),
            )
        )
    return out, fresh


def fill(
    target: IndexBackend,
    docs: list[DocumentRecord],
    vectors: dict[str, Any],
    copies: int,
    noise: float,
) -> float:
    """Write ``copies`` copies into ``target``, one transaction per copy; returns seconds."""
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    with target.writer():
        for copy in range(copies):
            batch, fresh = copies_of(docs, vectors, copy, noise, rng)
            with target.transaction() as conn:
                for doc in batch:
                    target.put_document(conn, doc)
                target.put_vectors(conn, fresh)
    return time.perf_counter() - started


def timed(job: Callable[[], Any], rounds: int) -> list[float]:
    """Milliseconds of each of ``rounds`` warm calls (after one warm-up)."""
    job()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        job()
        out.append((time.perf_counter() - t) * 1000)
    return out


def summary(values: list[float]) -> dict[str, float]:
    """p50 and p95 in ms, and how many values."""
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "n": len(ordered),
    }


def emit(result: dict[str, Any], path: Path | None) -> int:
    """Print ``result`` as JSON, and write it to ``path`` too if one is given; returns 0."""
    text = json.dumps(result, indent=2)
    print(text)
    if path is not None:
        path.write_text(text)
    return 0


def main() -> int:
    """Clone, fill both backends, time the channels, print the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden" / "kb")
    parser.add_argument("--questions", type=Path, default=ROOT / "golden" / "questions.jsonl")
    parser.add_argument("--stage", type=Path, help="stage (and keep) the synced KB here")
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--noise", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer

    from pinakes_core.index.pgstore import PostgresStore

    with tempfile.TemporaryDirectory(prefix="pnk-pg-scale-") as tmp:
        kb_dir = args.stage or Path(tmp) / "kb"
        if not kb_dir.exists():
            shutil.copytree(args.kb, kb_dir, ignore=shutil.ignore_patterns(".pinakes"))
        kb = KB.open(kb_dir)
        kb.sync()
        base = SqliteBackend(kb.store())
        docs = list(base.documents())
        vectors = dict(base.vectors())
        per_copy = sum(len(d.chunks) for d in docs)
        copies = max(1, round(args.chunks / per_copy))
        questions = [q.query for q in load_questions(args.questions)][: args.queries]
        query_vectors = [kb.embedder.embed_query(q) for q in questions]
        server = PgServer().start()
        result: dict[str, Any] = {"chunks": per_copy * copies, "copies": copies}
        try:
            sqlite = SqliteBackend(Store.open(Path(tmp) / "sqlite", create=True))
            pg = PostgresStore.open(server.url, kb.config.kb.id)
            result["fill_s"] = {
                "sqlite": round(fill(sqlite, docs, vectors, copies, args.noise), 1),
                "postgres": round(fill(pg, docs, vectors, copies, args.noise), 1),
            }
            pg.conn.execute("ANALYZE")
            backends: dict[str, IndexBackend] = {"sqlite": sqlite, "postgres": pg}
            times: dict[str, list[float]] = {}
            for name, store in backends.items():
                for q, v in zip(questions, query_vectors, strict=True):
                    times.setdefault(f"{name} bm25", []).extend(
                        timed(lambda s=store, q=q: s.lexical(q, CANDIDATES), args.rounds)
                    )
                    times.setdefault(f"{name} dense (exact)", []).extend(
                        timed(lambda s=store, v=v: s.nearest(v, CANDIDATES), args.rounds)
                    )
            started = time.perf_counter()
            pg.ensure_ann(1)
            result["hnsw_build_s"] = round(time.perf_counter() - started, 1)
            exact = {
                i: [h.chunk_id for h in pg.nearest(v, 10)] for i, v in enumerate(query_vectors)
            }
            for v in query_vectors:
                times.setdefault("postgres dense (HNSW)", []).extend(
                    timed(lambda v=v: pg.nearest(v, CANDIDATES), args.rounds)
                )
            # recall@10 of the HNSW answer against the exact one (computed before the index)
            found = [
                len(set(exact[i]) & {h.chunk_id for h in pg.nearest(v, 10)}) / 10
                for i, v in enumerate(query_vectors)
            ]
            result["hnsw_recall@10"] = round(statistics.fmean(found), 3)
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
