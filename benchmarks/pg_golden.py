"""The index on PostgreSQL against the SQLite one, channel by channel, on a labelled question set.

A KB synced as usual (SQLite) is copied into a PostgreSQL schema through the store contract
(:func:`pinakes_core.index.backend.copy_index`, one transaction), then every question runs on both:

- ``bm25``: SQLite's BM25 channel (FTS5, as search runs it) against PostgreSQL's BM25 over its
  own tokeniser and stemmer (:meth:`PostgresStore.lexical`) and the stock ``ts_rank_cd``;
- ``dense``: exact cosine in NumPy against pgvector (exact scan below the HNSW threshold);
- ``rrf``: reciprocal rank fusion of each backend's bm25 and dense lists (plain RRF, not
  search's fusion, which runs on SQLite only today).

Recall@5 is over documents: a chunk ranking is read as the order its documents first appear,
as ``pnk eval`` reads search results. Filters in a question are not applied (no backend's
channel sees them here), so the ``filter`` class is not comparable with ``pnk eval``'s.

Usage::

    uv run python benchmarks/pg_golden.py                       # golden/kb, a server of its own
    uv run python benchmarks/pg_golden.py --url postgresql://…  # an existing server
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pinakes_core import KB
from pinakes_core.index.backend import ChunkHit, IndexBackend, SqliteBackend, copy_index
from pinakes_core.manage.eval import load_questions, recall_at
from pinakes_core.search.fusion import rrf

ROOT = Path(__file__).resolve().parents[1]
#: Chunks each channel returns per question (search's default candidates).
CANDIDATES = 50


def _docs(hits: Sequence[ChunkHit]) -> list[str]:
    return list(dict.fromkeys(h.path for h in hits))


def _fused(lexical: Sequence[ChunkHit], dense: Sequence[ChunkHit]) -> list[str]:
    path = {h.chunk_id: h.path for h in [*lexical, *dense]}
    fused = rrf({"bm25": [h.chunk_id for h in lexical], "dense": [h.chunk_id for h in dense]})
    return list(dict.fromkeys(path[c] for c, _ in fused))


def compare(kb: KB, pg: IndexBackend, questions: Path) -> dict[str, Any]:
    """Copy ``kb``'s index into ``pg`` and score both backends' channels on ``questions``."""
    sqlite = SqliteBackend(kb.store(), bm25_max_rows=kb.config.scale.bm25_max_rows)
    started = time.perf_counter()
    copied = copy_index(sqlite, pg)
    copy_s = time.perf_counter() - started
    lists: dict[str, dict[str, list[ChunkHit]]] = {}
    timings: dict[str, list[float]] = {}

    def timed(name: str, job: Callable[[Any, int], list[ChunkHit]], arg: Any) -> list[ChunkHit]:
        t = time.perf_counter()
        out = job(arg, CANDIDATES)
        timings.setdefault(name, []).append((time.perf_counter() - t) * 1000)
        return out

    recalls: dict[str, dict[str, list[float]]] = {}
    for q in load_questions(questions):
        if not q.relevant:
            continue
        vector = kb.embedder.embed_query(q.query)
        lists = {
            "sqlite": {
                "bm25": timed("sqlite bm25", sqlite.lexical, q.query),
                "dense": timed("sqlite dense", sqlite.nearest, vector),
            },
            "postgres": {
                "bm25": timed("postgres bm25", pg.lexical, q.query),
                "ts_rank_cd": timed("postgres ts_rank_cd", pg.ts_rank, q.query),  # type: ignore[attr-defined]
                "dense": timed("postgres dense", pg.nearest, vector),
            },
        }
        rankings = {
            "sqlite bm25": _docs(lists["sqlite"]["bm25"]),
            "postgres bm25": _docs(lists["postgres"]["bm25"]),
            "postgres ts_rank_cd": _docs(lists["postgres"]["ts_rank_cd"]),
            "sqlite dense": _docs(lists["sqlite"]["dense"]),
            "postgres dense": _docs(lists["postgres"]["dense"]),
            "sqlite rrf": _fused(lists["sqlite"]["bm25"], lists["sqlite"]["dense"]),
            "postgres rrf": _fused(lists["postgres"]["bm25"], lists["postgres"]["dense"]),
        }
        for name, docs in rankings.items():
            recalls.setdefault(name, {}).setdefault(q.cls, []).append(
                recall_at(docs, q.relevant, 5)
            )
    return {
        "documents": copied,
        "chunks": pg.chunk_count(),
        "copy_s": round(copy_s, 2),
        "recall@5": {
            name: {c: round(statistics.fmean(v), 3) for c, v in sorted(by_class.items())}
            for name, by_class in recalls.items()
        },
        "questions": {c: len(v) for c, v in sorted(next(iter(recalls.values())).items())},
        "p50_ms": {n: round(statistics.median(v), 2) for n, v in timings.items()},
    }


def render(result: dict[str, Any]) -> str:
    """The result as a Markdown table (rows: backend and channel; columns: classes)."""
    classes = list(result["questions"])
    lines = [
        "| R@5 | " + " | ".join(f"{c} ({result['questions'][c]})" for c in classes) + " | p50 ms |",
        "|---" * (len(classes) + 2) + "|",
    ]
    for name, by_class in result["recall@5"].items():
        p50 = result["p50_ms"].get(name, "")
        cells = " | ".join(f"{by_class[c]:.3f}" for c in classes)
        lines.append(f"| {name} | {cells} | {p50} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Stage and sync the KB, copy it into PostgreSQL, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden" / "kb")
    parser.add_argument("--questions", type=Path, default=ROOT / "golden" / "questions.jsonl")
    parser.add_argument("--url", help="an existing PostgreSQL with pgvector (default: start one)")
    parser.add_argument("--json", type=Path, help="write the result as JSON here too")
    parser.add_argument(
        "--stage", type=Path, help="stage the KB in this folder and keep it (a rerun syncs less)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer

    from pinakes_core.index.pgstore import PostgresStore

    server = None if args.url else PgServer().start()
    url = args.url or server.url  # type: ignore[union-attr]
    with tempfile.TemporaryDirectory(prefix="pnk-pg-golden-") as tmp:
        kb_dir = args.stage or Path(tmp) / "kb"
        if not kb_dir.exists():
            shutil.copytree(args.kb, kb_dir, ignore=shutil.ignore_patterns(".pinakes"))
        kb = KB.open(kb_dir)
        started = time.perf_counter()
        kb.sync()
        print(f"synced (SQLite) in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        pg = PostgresStore.open(url, kb.config.kb.id)
        try:
            result = compare(kb, pg, args.questions)
        finally:
            pg.drop()
            pg.close()
            kb.close()
            if server is not None:
                server.remove()
    print(render(result))
    print(
        f"copied {result['documents']} documents / {result['chunks']} chunks in {result['copy_s']}s"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
