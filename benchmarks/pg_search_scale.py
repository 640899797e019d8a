"""Search on PostgreSQL at a million chunks (issue 38): fill once, then time search.

``fill`` stages golden into ``--home``/kb with ``[store] backend = "postgres"``, starts a
PostgreSQL server of its own in ``--home``/server (kept between runs), syncs the KB into it
with the real model (a real sync: documents, chunks, postings, vectors, graph, calibration),
then clones the synced rows server-side until the schema holds about ``--chunks`` chunks:
copy ``c`` of every document gets the id ``<doc_id>~c`` and the path ``copyNNNN/<path>``, its
chunks the ids ``chunk_id + c × stride`` (stride: the largest chunk id of the sync) and the
hashes ``<embed_hash>~c``, its vectors the original plus Gaussian noise of norm about
``--noise``, renormalised (as ``pg_scale.py`` clones through the store contract, so the two
benchmarks build comparable indexes), its postings the original's under the new chunk id, its
tags, fields and links the original's. The graph (nodes, edges) stays the sync's: the copies
are not linked into it (a sync of copies would add their chunk and document nodes; the
graph channel only walks from the seeds the other channels give, see the report). Secondary
indexes are dropped before the copy and made again after it with the schema's own
definitions, the HNSW index is made by ``PostgresStore.ensure_ann`` as a sync's
``refresh_indexes`` makes it, BM25's counts are taken as ``publish`` takes them, the
generation is bumped, and ``ANALYZE`` runs. A second ``fill`` with the schema already holding
``--chunks`` does nothing (``--refill`` starts over).

``search`` opens the filled KB (nothing is synced) and times, over the golden questions,
``--rounds`` warm rounds each with a fresh query context: the BM25 channel
(``PgLexicalIndex``), the dense channel (pgvector HNSW candidates scored exactly in memory),
and the whole ``KB.search`` as the MCP server runs it (fusion, hits, confidence).

Usage::

    nohup uv run python benchmarks/pg_search_scale.py fill --chunks 1000000 \\
        > /tmp/pgscale-fill.log 2>&1 &
    uv run python benchmarks/pg_search_scale.py search --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pg_scale import emit, summary, timed  # noqa: E402 (benchmarks/ is on the path from here)


def log(message: str) -> None:
    """One line on stderr with the time and the load."""
    load = os.getloadavg()[0]
    print(f"{time.strftime('%H:%M:%S')} [load {load:.2f}] {message}", file=sys.stderr, flush=True)


class Server:
    """A PostgreSQL server (the dev group's binaries) whose data folder is kept in ``home``."""

    def __init__(self, home: Path) -> None:
        from pg_server import PgServer

        home.mkdir(parents=True, exist_ok=True)
        self.pg = PgServer(relocate=False)
        # PgServer makes a temporary folder; this one is kept: point it at ``home``/server.
        os.rmdir(self.pg.folder)
        folder = home / "server"
        folder.mkdir(exist_ok=True)
        if self.pg._user is not None:
            os.chown(folder, *self.pg._user)
        self.pg.folder = folder
        self.pg.data = folder / "data"
        self.pg.url = f"postgresql://postgres@/postgres?host={folder}"

    def start(self, shared_buffers: str | None = None) -> str:
        """Start the server unless it runs (with ``shared_buffers``, when given); returns its URL."""
        import psycopg

        if not (self.pg.data / "postmaster.pid").exists():
            self.pg.start()
        if shared_buffers:
            with psycopg.connect(self.pg.url, autocommit=True) as conn:
                now = conn.execute("SHOW shared_buffers").fetchone()
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
            if now is None or now[0] != shared_buffers:
                self.pg.stop()
                self.pg.start()
                log(f"server restarted with shared_buffers {shared_buffers} (was {now})")
        return self.pg.url


def stage(home: Path, url: str) -> Path:
    """Golden staged in ``home``/kb as a postgres KB, synced (a no-change sync once done)."""
    from eval_sets import stage as mirror
    from eval_sets import use_store

    kb_dir = home / "kb"
    mirror(ROOT / "golden" / "kb", kb_dir)
    use_store(kb_dir, "postgres")
    os.environ["PINAKES_DATABASE_URL"] = url
    return kb_dir


#: The secondary indexes dropped for the copy and made again after it (the schema's own).
_INDEXES = re.compile(r"^(CREATE INDEX .*?;)$", re.M)


def secondary_indexes() -> list[str]:
    """The ``CREATE INDEX`` statements of the store's schema (not the keys)."""
    from pinakes_core.index.pgstore import _SCHEMA

    return _INDEXES.findall(_SCHEMA)


_POSTINGS_KEY = (
    "ALTER TABLE postings ADD CONSTRAINT postings_pkey PRIMARY KEY (lexeme, chunk_id) "
    "INCLUDE (tf, length)"
)

#: A copy's chunk length with ``--jitter``: the original's times 1 ± jitter / 2, fixed by the
#: copy's chunk id (the same in ``chunks`` and in its postings), so copies do not tie.
_LENGTH = "length * (1 + %(jitter)s::float8 * ((abs(hashint8(k_id)) %% 1000) / 999.0 - 0.5))"

_CLONE = """
INSERT INTO documents(doc_id, path, title, tags, aliases, content_hash, sidecar_hash, mtime_ns,
                      size, sidecar_mtime_ns, sidecar_size, chunk_count, synced_at, meta,
                      source_type, pages, line_count)
SELECT d.doc_id || '~' || c, 'copy' || lpad(c::text, 4, '0') || '/' || d.path, title, tags,
       aliases, content_hash, sidecar_hash, mtime_ns, size, sidecar_mtime_ns, sidecar_size,
       chunk_count, synced_at, meta, source_type, pages, line_count
FROM generate_series(%(lo)s::int, %(hi)s::int) c, documents d WHERE d.doc_id NOT LIKE '%%~%%';

INSERT INTO doc_tags(doc_id, tag)
SELECT t.doc_id || '~' || c, tag
FROM generate_series(%(lo)s::int, %(hi)s::int) c, doc_tags t WHERE t.doc_id NOT LIKE '%%~%%';

INSERT INTO doc_meta(doc_id, key, value_text, value_num)
SELECT m.doc_id || '~' || c, key, value_text, value_num
FROM generate_series(%(lo)s::int, %(hi)s::int) c, doc_meta m WHERE m.doc_id NOT LIKE '%%~%%'
ORDER BY c, m.rowid;

INSERT INTO chunks(chunk_id, doc_id, ordinal, heading_path, text, embed_hash, start_line,
                   end_line, tokens, page_start, page_end, idents, tsv, length)
OVERRIDING SYSTEM VALUE
SELECT k.chunk_id + c * %(stride)s::bigint, k.doc_id || '~' || c, ordinal, heading_path, text,
       k.embed_hash || '~' || c, start_line, end_line, tokens, page_start, page_end, idents,
       tsv, {length}
FROM generate_series(%(lo)s::int, %(hi)s::int) c, chunks k WHERE k.chunk_id <= %(stride)s::bigint;

INSERT INTO postings(lexeme, chunk_id, tf, length)
SELECT CASE WHEN c %% %(topics)s::int = 0 OR lexeme = ANY(%(shared)s::text[]) THEN lexeme
            ELSE lexeme || '~' || (c %% %(topics)s::int) END,
       p.chunk_id + c * %(stride)s::bigint, tf, {length}
FROM generate_series(%(lo)s::int, %(hi)s::int) c, postings p WHERE p.chunk_id <= %(stride)s::bigint
  AND (%(drop)s::float8 = 0 OR random() >= %(drop)s::float8);

INSERT INTO links(src_doc, target, kind, dst_kb, dst_doc, rel, origin, reason)
SELECT l.src_doc || '~' || c, target, kind, dst_kb, dst_doc, rel, origin, reason
FROM generate_series(%(lo)s::int, %(hi)s::int) c, links l WHERE l.src_doc NOT LIKE '%%~%%'
ORDER BY c, l.rowid;

-- The original plus noise of norm about sigma (each of dim components N(0, sigma²/dim)),
-- renormalised; one distinct vector per copied chunk hash.
INSERT INTO vectors(embed_hash, vector)
SELECT v.embed_hash || '~' || c,
       l2_normalize(v.vector + (SELECT array_agg(random_normal(0, %(sd)s::float8))::real[]::vector
                                FROM generate_series(1, %(dim)s::int) WHERE c > 0 AND v.vector IS NOT NULL))
FROM generate_series(%(lo)s::int, %(hi)s::int) c, vectors v WHERE v.embed_hash NOT LIKE '%%~%%'
ON CONFLICT (embed_hash) DO NOTHING;
"""


def fill(
    store: Any,
    target: int,
    noise: float,
    batch: int,
    jitter: float = 0.0,
    drop: float = 0.0,
    topics: int = 1,
    vectors: bool = True,
) -> dict[str, Any]:
    """Clone the synced rows server-side until ``store`` holds about ``target`` chunks.

    ``jitter`` and ``drop`` (0: exact copies) make the copies near-duplicates: each copied
    chunk's length scaled by 1 ± jitter / 2, each copied posting dropped with probability
    ``drop``, so the best chunk's copies no longer tie. ``topics`` > 1 gives copy ``c`` a
    vocabulary of its own unless ``c`` is a multiple of it: each lexeme of the sync held by
    at most a tenth of its chunks becomes ``<lexeme>~<c mod topics>`` there (as ``topics``
    subjects that share only their common words), so a question's rarer words hold about
    1 / ``topics`` of the rows they hold in a clone corpus, as in a KB of many subjects.
    ``vectors`` false leaves the copies' vectors out (``--keep-vectors`` brings them).
    """
    from pinakes_core.index.pgstore import _one

    raw = store.raw
    per_copy = int(_one(raw.execute("SELECT count(*) FROM chunks WHERE doc_id NOT LIKE '%~%'"))[0])
    stride = int(
        _one(raw.execute("SELECT max(chunk_id) FROM chunks WHERE doc_id NOT LIKE '%~%'"))[0]
    )
    dim = int(store.get_meta("dim"))
    copies = max(1, round(target / per_copy))
    have = int(_one(raw.execute("SELECT count(*) FROM chunks"))[0])
    done = have // per_copy  # copies present (the original is copy 0)
    out: dict[str, Any] = {"per_copy": per_copy, "copies": copies, "stride": stride, "dim": dim}
    if done >= copies:
        log(f"already filled: {have} chunks ({done} copies)")
        return out
    shared = [
        str(r[0])
        for r in raw.execute(
            "SELECT lexeme FROM postings WHERE chunk_id <= %s GROUP BY lexeme "
            "HAVING count(*) > 0.1 * %s",
            (stride, per_copy),
        )
    ]
    started = time.perf_counter()
    # Consistent by construction: no foreign-key trigger per copied row (postings: 160 a chunk).
    raw.execute("SET session_replication_role = replica")
    raw.execute("ALTER TABLE postings DROP CONSTRAINT IF EXISTS postings_pkey")
    raw.execute("DROP INDEX IF EXISTS vectors_hnsw")
    for statement in secondary_indexes():
        name = statement.split()[2]
        raw.execute(f"DROP INDEX IF EXISTS {name}")
    for lo in range(done, copies, batch):
        hi = min(copies - 1, lo + batch - 1)
        t = time.perf_counter()
        params = {"lo": lo, "hi": hi, "stride": stride, "sd": noise / dim**0.5, "dim": dim}
        params.update(jitter=jitter, drop=drop, topics=topics, shared=shared)
        with raw.transaction():
            for statement in _CLONE.split(";\n\n"):
                if not vectors and "INTO vectors" in statement:
                    continue
                chunk = "k.chunk_id" if "INTO chunks" in statement else "p.chunk_id"
                length = _LENGTH.replace("k_id", f"({chunk} + c * %(stride)s::bigint)")
                raw.execute(statement.replace("{length}", length), params)
        log(f"copies {lo}..{hi} of {copies - 1}: {time.perf_counter() - t:.1f} s")
    out["copy_s"] = round(time.perf_counter() - started, 1)
    raw.execute("SET session_replication_role = origin")
    t = time.perf_counter()
    raw.execute(_POSTINGS_KEY)
    log("postings_pkey: made")
    for statement in secondary_indexes():
        raw.execute(statement.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
        log(f"{statement.split()[2]}: made")
    raw.execute(
        "SELECT setval(pg_get_serial_sequence('chunks', 'chunk_id'), "
        "(SELECT max(chunk_id) FROM chunks))"
    )
    out["indexes_s"] = round(time.perf_counter() - t, 1)
    with store.transaction():  # a generation bump and BM25's counts, as a write takes them
        pass
    raw.execute("VACUUM ANALYZE")
    return out


#: Where ``--keep-vectors`` holds the previous fill's vectors table while the schema is remade.
_KEEP = "pinakes_scale_kept"


def _kept(store: Any) -> bool:
    found = store.raw.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{_KEEP}.vectors",))
    return bool(found.fetchone()[0])


def keep_vectors(store: Any) -> None:
    """Move the filled schema's vectors table, HNSW index and all, aside before a refill.

    A refill for a change of the word layout remakes every table the words touch; the vectors
    (keyed by ``<embed_hash>~<copy>``, one model) do not change, so they and the index built
    on them (10–45 minutes at 1M here, by the load) are kept instead of drawn and built again.
    """
    raw = store.raw
    with raw.transaction():
        raw.execute(f"CREATE SCHEMA IF NOT EXISTS {_KEEP}")
        raw.execute(f"DROP TABLE IF EXISTS {_KEEP}.vectors")
        raw.execute(f'ALTER TABLE "{store.home}".vectors SET SCHEMA {_KEEP}')
    log(f"vectors of {store.home} kept in {_KEEP}")


def bring_vectors(store: Any) -> int:
    """Put the kept vectors in place of the refill's; every chunk must find its vector."""
    from pinakes_core.index.pgstore import _one

    raw = store.raw
    missing = int(
        _one(
            raw.execute(
                f"SELECT count(*) FROM chunks c WHERE NOT EXISTS "
                f"(SELECT 1 FROM {_KEEP}.vectors v WHERE v.embed_hash = c.embed_hash)"
            )
        )[0]
    )
    if missing:
        raise SystemExit(f"{missing} chunks have no kept vector: refill without --keep-vectors")
    with raw.transaction():
        raw.execute("DROP TABLE vectors")
        raw.execute(f'ALTER TABLE {_KEEP}.vectors SET SCHEMA "{store.schema}"')
        raw.execute(f"DROP SCHEMA {_KEEP}")
    count = int(_one(raw.execute("SELECT count(*) FROM vectors"))[0])
    log(f"{count} kept vectors (and their index) brought back")
    drop_orphans(store)
    return count


def drop_orphans(store: Any) -> int:
    """Delete the vectors nothing uses (a kept table's of an older chunking) and their index.

    As a sync forgets them (``FORGET_VECTORS_SQL``: no chunk's and no graph label's). The HNSW
    index would still hold them: a dense search would find them, then lose them in the join to
    the chunks, and its candidates would not be a fill's. ``ensure_ann`` makes the index again
    over the vectors left.
    """
    from pinakes_core.index.sync import FORGET_VECTORS_SQL

    raw = store.raw
    with raw.transaction():
        found = raw.execute(FORGET_VECTORS_SQL).rowcount
        if found:
            raw.execute("DROP INDEX IF EXISTS vectors_hnsw")
    if found:
        raw.execute("VACUUM vectors")
        log(f"{found} vectors no chunk holds deleted; the HNSW index is made again")
    return found


def open_kb(home: Path, url: str) -> Any:
    """The staged KB, its index the server's (``PINAKES_DATABASE_URL``)."""
    from pinakes_core import KB

    os.environ["PINAKES_DATABASE_URL"] = url
    return KB.open(home / "kb")


def sqlite_kb(home: Path, target: int, noise: float) -> tuple[Any, dict[str, Any]]:
    """Golden staged in ``home``/kb-sqlite, synced, cloned through the store contract.

    The SQLite side of the comparison: copies 1… as ``pg_scale.py`` writes them (copy 0 is
    the sync's), one transaction each; below ``[scale]``'s thresholds nothing else is made
    (the vector snapshot is written at the first search, as after a sync).
    """
    import numpy as np

    from eval_sets import stage as mirror
    from pg_scale import copies_of
    from pinakes_core import KB
    from pinakes_core.index.backend import SqliteBackend

    kb_dir = home / "kb-sqlite"
    mirror(ROOT / "golden" / "kb", kb_dir)
    kb = KB.open(kb_dir)
    result: dict[str, Any] = {}
    if not kb.synced:
        t = time.perf_counter()
        kb.sync()
        result["sync_s"] = round(time.perf_counter() - t, 1)
    backend = SqliteBackend(kb.store())
    docs = [d for d in backend.documents() if "~" not in d.doc_id]
    vectors = dict(backend.vectors())
    per_copy = sum(len(d.chunks) for d in docs)
    copies = max(1, round(target / per_copy))
    done = backend.chunk_count() // per_copy
    rng = np.random.default_rng(done)
    t = time.perf_counter()
    with backend.writer():
        for copy in range(done, copies):
            batch, fresh = copies_of(docs, vectors, copy, noise, rng)
            with backend.transaction() as conn:
                for doc in batch:
                    backend.put_document(conn, doc)
                backend.put_vectors(conn, fresh)
    result.update(copies=copies, fill_s=round(time.perf_counter() - t, 1))
    result["chunks"] = backend.chunk_count()
    return kb, result


def cmd_fill(args: argparse.Namespace) -> dict[str, Any]:
    """Stage, sync, clone, index."""
    if args.backend == "sqlite":
        kb, result = sqlite_kb(args.home, args.chunks, args.noise)
        kb.close()
        return result
    url = Server(args.home).start(args.shared_buffers)
    kb_dir = stage(args.home, url)
    kb = open_kb(args.home, url)
    result: dict[str, Any] = {}
    with kb:
        if args.refill and kb.synced:
            if args.keep_vectors:
                keep_vectors(kb.store())
            kb.store().drop()
            kb.close()
            kb = open_kb(args.home, url)
        if not kb.synced or kb.store().chunk_count() == 0:
            t = time.perf_counter()
            report = kb.sync()
            result["sync_s"] = round(time.perf_counter() - t, 1)
            log(f"synced {kb_dir}: {report.chunks_embedded} chunks embedded, {result['sync_s']} s")
        store = kb.store()
        store.raw.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
        store.raw.execute(f"SET max_parallel_maintenance_workers = {args.workers}")
        kept = args.keep_vectors and _kept(store)
        result.update(
            fill(
                store,
                args.chunks,
                args.noise,
                args.batch,
                args.jitter,
                args.drop,
                args.topics,
                vectors=not kept,
            )
        )
        if kept:
            result["vectors_kept"] = bring_vectors(store)
        t = time.perf_counter()
        # As a sync's refresh_indexes makes it (the dimension fixed, then the index).
        made = store.ensure_ann(0 if args.no_ann else kb.config.scale.ann_min_chunks)
        result["hnsw_s"] = round(time.perf_counter() - t, 1)
        log(f"HNSW: {'made' if made else 'not made'} in {result['hnsw_s']} s")
        t = time.perf_counter()
        # As a sync's refresh_indexes makes it: the postings by impact, past bm25_max_rows.
        made = store.ensure_impacts(kb.config.scale.bm25_max_rows)
        result["impacts_s"] = round(time.perf_counter() - t, 1)
        log(f"impact index: {'made' if made else 'not made'} in {result['impacts_s']} s")
        store.raw.execute("ANALYZE")
        result["chunks"] = int(store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        result["documents"] = store.document_count()
        size = store.raw.execute(
            "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relkind = 'r'",
            (store.schema,),
        ).fetchone()[0]
        result["schema_size"] = size
    return result


def cmd_search(args: argparse.Namespace) -> dict[str, Any]:
    """Time the channels and the whole search over the filled KB."""
    import numpy as np

    from pinakes_core.manage.eval import load_questions

    if args.backend == "sqlite":
        from pinakes_core import KB

        kb = KB.open(args.home / "kb-sqlite")
    else:
        kb = open_kb(args.home, Server(args.home).start(args.shared_buffers))
    questions = [q.query for q in load_questions(ROOT / "golden" / "questions.jsonl")]
    questions = questions[: args.queries]
    if args.no_impacts:  # as a store without the impact index: the split past the budget
        from pinakes_core.index.pgsearch import PgLexicalIndex

        PgLexicalIndex.impact_avg = lambda self: 0.0  # type: ignore[method-assign]
    result: dict[str, Any] = {"queries": len(questions), "rounds": args.rounds}
    with kb:
        store = kb.store()
        result["chunks"] = int(store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        searcher = kb.searcher
        channels = args.channels.split(",")
        if "dense" in channels or "search" in channels:
            t = time.perf_counter()
            searcher.vectors()
            result["vectors_load_s"] = round(time.perf_counter() - t, 1)
            log(f"{result['chunks']} chunks; vectors loaded in {result['vectors_load_s']} s")
        update = {}
        if args.budget is not None:
            update["bm25_max_rows"] = args.budget
        if args.ann_min_chunks is not None:
            update["ann_min_chunks"] = args.ann_min_chunks
        if update:
            scale = kb.config.scale.model_copy(update=update)
            kb.config = kb.config.model_copy(update={"scale": scale})
        if args.work_mem:
            store.raw.execute(f"SET work_mem = '{args.work_mem}'")
        if args.ef_search:  # pgvector's HNSW breadth (the store sets 200)
            store.raw.execute(f"SET hnsw.ef_search = {int(args.ef_search)}")
        if args.iterative:  # pgvector 0.8's iterative index scan: off, relaxed_order, strict_order
            store.raw.execute(f"SET hnsw.iterative_scan = {args.iterative}")
        result.update(ef_search=args.ef_search, iterative=args.iterative)
        result["work_mem"] = args.work_mem
        result["ann_min_chunks"] = kb.config.scale.ann_min_chunks
        result["bm25_max_rows"] = kb.config.scale.bm25_max_rows
        result["backend"] = args.backend
        vectors = {q: kb.embedder.embed_query(q) for q in questions}
        times: dict[str, list[float]] = {}
        stages: dict[str, list[float]] = {}
        splits = 0
        best_first: list[tuple[int, int, int]] = []
        for q in questions:
            v = vectors[q]

            def bm25(q: str = q) -> Any:
                return searcher.query_context(q).bm25(q)

            def dense(q: str = q, v: Any = v) -> Any:
                return searcher.query_context(q, embed_query=lambda _: v).dense()

            def search(q: str = q) -> Any:
                found = kb.search(q)
                for name, ms in found.timings_ms.items():
                    stages.setdefault(name, []).append(ms)
                return found

            if "bm25" in channels:
                times.setdefault("bm25", []).extend(timed(bm25, args.rounds))
                index = searcher.lexical()
                splits += getattr(index, "last_split", None) is not None
                info = getattr(index, "last_topk", None)
                if info is not None:
                    best_first.append((info["rounds"], info["read"], info["open"]))
            if "dense" in channels:
                times.setdefault("dense", []).extend(timed(dense, args.rounds))
            if "search" in channels:
                times.setdefault("search", []).extend(timed(search, args.rounds))
        result["bm25_split_queries"] = splits
        if best_first:
            result["bm25_best_first"] = {
                "queries": len(best_first),
                "rounds": summary([float(r[0]) for r in best_first]),
                "postings_read": summary([float(r[1]) for r in best_first]),
                "open": summary([float(r[2]) for r in best_first]),
            }
        if "dense" in channels:
            # The dense channel's top 10 against the exact top 10 over the same matrix.
            matrix = searcher.vectors()
            found = []
            for q in questions:
                v = vectors[q]
                exact = matrix.chunk_ids[np.argsort(-(matrix.matrix @ v))[:10]]
                got = [
                    c for c, _ in searcher.query_context(q, embed_query=lambda _, v=v: v).dense()
                ]
                found.append(len(set(exact.tolist()) & set(got[:10])) / 10)
            result["dense_recall@10"] = round(statistics.fmean(found), 3)
        result["search_stages_ms"] = {n: summary(v) for n, v in stages.items()}
        if args.compare_exact and args.backend == "postgres":
            result["split_vs_exact"] = compare_exact(store, questions, kb.config.scale)
        result["latency_ms"] = {n: summary(v) for n, v in times.items()}
        result["load"] = round(os.getloadavg()[0], 2)
    return result


def compare_exact(store: Any, questions: list[str], scale: Any, k: int = 200) -> dict[str, Any]:
    """BM25 past the budget against every matching row scored, top ``k`` (the channel's 200).

    Past ``bm25_max_rows`` the index reads best first where the store has the impact index
    (``best_first``), and the split otherwise (``split``, also run with the index ignored).
    For each: its time, how many questions got the exact statement's top ``k`` (the same
    chunks in the same order, ``identical``: the same scores too, to the last bit), and for
    the split the top 50's overlap as before.
    """
    from pinakes_core.index.pgsearch import PgLexicalIndex
    from pinakes_core.index.query import fts_phrases

    exact = PgLexicalIndex(store)
    best = PgLexicalIndex(store, max_rows=scale.bm25_max_rows)
    split = PgLexicalIndex(store, max_rows=scale.bm25_max_rows)
    split._impact_avg = 0.0  # the split, as without the index
    arms: dict[str, Any] = {"exact": exact, "split": split}
    if best.impact_avg():
        arms["best_first"] = best
    times: dict[str, list[float]] = {name: [] for name in arms}
    same = {name: 0 for name in arms}
    identical = {name: 0 for name in arms}
    overlap: list[float] = []
    rounds: list[int] = []
    read: list[int] = []
    opened: list[int] = []
    asked = 0
    for q in questions:
        phrases = fts_phrases(q)
        if not phrases:
            continue
        asked += 1
        got: dict[str, list[tuple[int, float]]] = {}
        for name, index in arms.items():
            index.search(phrases, k)  # warm the counts
            t = time.perf_counter()
            got[name] = index.search(phrases, k)
            times[name].append((time.perf_counter() - t) * 1000)
        want = got["exact"]
        for name in arms:
            same[name] += [c for c, _ in got[name]] == [c for c, _ in want]
            identical[name] += got[name] == want
        top = {c for c, _ in want[:50]}
        overlap.append(len(top & {c for c, _ in got["split"][:50]}) / max(len(top), 1))
        info = best.last_topk if "best_first" in arms else None
        if info is not None:
            rounds.append(info["rounds"])
            read.append(info["read"])
            opened.append(info["open"])
        log(
            f"{q[:40]!r}: "
            + ", ".join(f"{n} {times[n][-1]:.0f} ms" for n in arms)
            + (
                f"; {info['rounds']} rounds, {info['read']} read, {info['open']} open"
                if info
                else ""
            )
        )
    out: dict[str, Any] = {"queries": asked, "k": k}
    for name in arms:
        out[name] = {
            "ms": summary(times[name]),
            "same_top_k": same[name],
            "identical": identical[name],
        }
    out["split"]["top50_overlap_mean"] = round(statistics.fmean(overlap), 4) if overlap else None
    if rounds:
        out["best_first"].update(
            rounds=summary([float(r) for r in rounds]),
            postings_read=summary([float(r) for r in read]),
            open=summary([float(r) for r in opened]),
        )
    return out


def main() -> int:
    """Run ``fill`` or ``search``; print the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path("/tmp/pgscale"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--shared-buffers", default="2GB", help="the server's (a restart)")
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fill")
    f.add_argument("--chunks", type=int, default=1_000_000)
    f.add_argument("--noise", type=float, default=1.0)
    f.add_argument("--batch", type=int, default=100, help="copies per transaction")
    f.add_argument("--refill", action="store_true", help="drop the schema and start over")
    f.add_argument("--maintenance-work-mem", default="4GB")
    f.add_argument("--workers", type=int, default=1)
    f.add_argument("--jitter", type=float, default=0.0, help="copies' lengths × 1 ± jitter/2")
    f.add_argument("--drop", type=float, default=0.0, help="drop each copied posting with this p")
    f.add_argument("--no-ann", action="store_true", help="no HNSW index (BM25 only)")
    f.add_argument("--topics", type=int, default=1, help="copies' own vocabularies (see fill)")
    f.add_argument(
        "--keep-vectors", action="store_true", help="with --refill: the old vectors and HNSW"
    )
    s = sub.add_parser("search")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--queries", type=int, default=60)
    s.add_argument("--channels", default="bm25,dense,search")
    s.add_argument("--budget", type=int, help="[scale] bm25_max_rows for the run (0: no split)")
    s.add_argument("--ann-min-chunks", type=int, help="[scale] ann_min_chunks (0: exact)")
    s.add_argument("--work-mem", help="the search connection's work_mem (e.g. 64MB)")
    s.add_argument("--compare-exact", action="store_true", help="split BM25 against exact")
    s.add_argument("--ef-search", type=int, help="pgvector's hnsw.ef_search (the store's: 200)")
    s.add_argument(
        "--iterative", choices=("off", "relaxed_order", "strict_order"), help="hnsw.iterative_scan"
    )
    s.add_argument(
        "--no-impacts", action="store_true", help="BM25 as without the impact index (the split)"
    )
    args = parser.parse_args()
    result = cmd_fill(args) if args.command == "fill" else cmd_search(args)
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
