"""The SQLite store's schema through sqlite-utils (issue 38, pinakes_core.index.tables).

sqlite-utils makes the tables it states exactly and the DDL makes the rest; the store that
results must be the store the single DDL script made before (schema version 6): the same
columns, keys, foreign keys with their actions, indexes, constraints, FTS5 table and trigger.
:data:`REFERENCE` is that earlier script, kept here as the test's reading of schema 6.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

from conftest import make_kb
from pinakes_core.index.store import SCHEMA_VERSION, Store
from pinakes_core.index.tables import DDL, TABLES, create_schema

#: The store's schema as one DDL script, as it was before sqlite-utils made part of it.
REFERENCE = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    aliases TEXT NOT NULL DEFAULT '[]',
    content_hash TEXT NOT NULL,
    sidecar_hash TEXT,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sidecar_mtime_ns INTEGER,
    sidecar_size INTEGER,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    synced_at REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    source_type TEXT NOT NULL DEFAULT 'markdown'
        CHECK (source_type IN ('markdown', 'text', 'pdf', 'code')),
    pages TEXT,
    line_count INTEGER
);
CREATE INDEX documents_by_source_type ON documents(source_type);
CREATE TABLE doc_tags (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE INDEX doc_tags_by_tag ON doc_tags(tag);
CREATE TABLE doc_meta (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value_text TEXT NOT NULL,
    value_num REAL
);
CREATE INDEX doc_meta_by_doc ON doc_meta(doc_id);
CREATE INDEX doc_meta_by_lower ON doc_meta(key, lower(value_text));
CREATE INDEX doc_meta_by_num ON doc_meta(key, value_num);
CREATE TABLE chunks (
    chunk_id INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    text TEXT NOT NULL,
    embed_hash TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    page_start INTEGER,
    page_end INTEGER,
    UNIQUE (doc_id, ordinal)
);
CREATE INDEX chunks_by_hash ON chunks(embed_hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    title, heading, text, idents, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_delete_fts AFTER DELETE ON chunks BEGIN
    DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
END;
CREATE TABLE vectors (embed_hash TEXT PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE links (
    src_doc TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    target TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('uri', 'markdown', 'wiki')),
    dst_kb TEXT,
    dst_doc TEXT,
    rel TEXT NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('sidecar', 'frontmatter', 'reverse-scan')),
    reason TEXT
);
CREATE INDEX links_by_src ON links(src_doc);
CREATE INDEX links_by_dst ON links(dst_doc);
CREATE TABLE nodes (
    node_id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('chunk', 'doc', 'tag', 'heading', 'dir', 'entity')),
    key TEXT NOT NULL,
    label TEXT,
    UNIQUE (kind, key)
);
CREATE TABLE edges (
    src INTEGER NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
    dst INTEGER NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    weight REAL NOT NULL,
    PRIMARY KEY (src, dst, kind)
);
CREATE INDEX edges_by_dst ON edges(dst);
CREATE TABLE node_vectors (
    node_id INTEGER PRIMARY KEY REFERENCES nodes(node_id) ON DELETE CASCADE,
    embed_hash TEXT NOT NULL
);
CREATE INDEX node_vectors_by_hash ON node_vectors(embed_hash);
CREATE TABLE ner_texts (embed_hash TEXT PRIMARY KEY, entities TEXT NOT NULL);
CREATE TABLE entity_aliases (
    alias TEXT PRIMARY KEY,
    node_id INTEGER NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE
);
CREATE INDEX entity_aliases_by_node ON entity_aliases(node_id);
"""


def _db(conn: sqlite3.Connection) -> sqlite_utils.Database:
    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def _shape(db: sqlite_utils.Database) -> dict[str, object]:
    """Everything about a schema that decides what rows it takes, read through sqlite-utils."""
    out: dict[str, object] = {}
    for name in db.table_names():
        table = db[name]
        out[name] = {
            "columns": [tuple(c) for c in table.columns],
            "pks": table.pks,
            "foreign_keys": sorted(table.foreign_keys),
            # name, unique, origin (c: CREATE INDEX, u: UNIQUE, pk) and every key column
            "indexes": sorted(
                (i.name, i.unique, i.origin, tuple(x.columns))
                for i, x in zip(
                    sorted(table.indexes, key=lambda i: i.name),
                    sorted(table.xindexes, key=lambda x: x.name),
                    strict=True,
                )
            ),
            "checks": sorted((c.column, c.check) for c in table.checks),
        }
    out["triggers"] = db.triggers_dict
    out["virtual"] = {
        r[0]: r[1]
        for r in db.execute("SELECT name, sql FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL%'")
    }
    return out


def test_the_schema_is_schema_6_table_for_table() -> None:
    made = sqlite3.connect(":memory:", isolation_level=None)
    create_schema(made, {})
    reference = sqlite3.connect(":memory:", isolation_level=None)
    reference.executescript(REFERENCE)
    ours, theirs = _shape(_db(made)), _shape(_db(reference))
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert ours[name] == theirs[name], name
    assert SCHEMA_VERSION == 6  # the same schema: a store made before is not rebuilt


def test_sqlite_utils_makes_what_it_can_state_and_ddl_the_rest() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    create_schema(conn, {})
    # SQLite keeps a statement as written, less IF NOT EXISTS.
    ddl = [sql.replace(" IF NOT EXISTS", "") for sql in DDL]
    marks = ",".join("?" * len(ddl))
    made_by_ddl = {
        r[0] for r in conn.execute(f"SELECT name FROM sqlite_master WHERE sql IN ({marks})", ddl)
    }
    assert made_by_ddl == {
        "documents", "chunks", "chunks_fts", "chunks_delete_fts", "links", "nodes",
        "doc_meta_by_lower",
    }  # fmt: skip
    # sqlite-utils' own SQL quotes every identifier; the tables of TABLES are its.
    for table in TABLES:
        sql = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (table.name,)
        ).fetchone()[0]
        assert sql.startswith(f'CREATE TABLE "{table.name}"'), sql


def test_a_new_store_starts_with_its_version_and_generation(tmp_path: Path) -> None:
    store = Store.open(tmp_path, create=True)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.generation() == 0
        assert not store.conn.in_transaction
        # The store's connection is as _connect left it: sqlite-utils set no PRAGMA on it.
        assert store.conn.execute("PRAGMA recursive_triggers").fetchone()[0] == 0
        assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        store.close()


def test_the_foreign_keys_sqlite_utils_wrote_cascade(tmp_path: Path) -> None:
    store = Store.open(tmp_path, create=True)
    try:
        with store.transaction() as conn:
            conn.execute(
                "INSERT INTO documents(doc_id, path, title, content_hash, mtime_ns, size, "
                "synced_at) VALUES ('d', 'd.md', 'D', 'h', 0, 0, 0)"
            )
            conn.execute("INSERT INTO doc_tags(doc_id, tag) VALUES ('d', 't')")
            conn.execute("INSERT INTO doc_meta(doc_id, key, value_text) VALUES ('d', 'k', 'v')")
            node = conn.execute(
                "INSERT INTO nodes(kind, key) VALUES ('tag', 't') RETURNING node_id"
            ).fetchone()[0]
            other = conn.execute(
                "INSERT INTO nodes(kind, key) VALUES ('tag', 'u') RETURNING node_id"
            ).fetchone()[0]
            conn.execute("INSERT INTO edges VALUES (?, ?, 'shared-tag', 1.0)", (node, other))
            conn.execute("INSERT INTO entity_aliases VALUES ('t', ?)", (node,))
            conn.execute("INSERT INTO node_vectors VALUES (?, 'h')", (node,))
        with store.transaction() as conn:
            conn.execute("DELETE FROM documents")
            conn.execute("DELETE FROM nodes WHERE node_id = ?", (node,))
        for table in ("doc_tags", "doc_meta", "edges", "entity_aliases", "node_vectors"):
            assert store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
        with pytest.raises(sqlite3.IntegrityError):  # a foreign key, not only a cascade
            store.conn.execute("INSERT INTO doc_tags(doc_id, tag) VALUES ('nobody', 't')")
    finally:
        store.close()


def test_a_failure_while_making_the_schema_leaves_nothing_made() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE edges (x)")  # in the way of a table sqlite-utils makes
    with pytest.raises(sqlite3.OperationalError, match="edges"):
        create_schema(conn, {"schema_version": "6"})
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["edges"]
    assert not conn.in_transaction


_SYNC_PROBE = """
import sys
sys.path.insert(0, sys.argv[2])
from conftest import FakeHashEmbedder
from pinakes_core import KB

with KB.open(sys.argv[1], embedder=FakeHashEmbedder()) as kb:
    kb.sync()
print("sqlite_utils" in sys.modules)
"""


def test_only_a_sync_that_makes_the_store_imports_sqlite_utils(tmp_path: Path) -> None:
    # A no-change sync is the git hooks' (DESIGN §14: <= 0.25 s); sqlite-utils would add ~50 ms.
    root = make_kb(tmp_path / "kb")
    tests = Path(__file__).resolve().parents[1]

    def loaded() -> str:
        proc = subprocess.run(
            [sys.executable, "-c", _SYNC_PROBE, str(root), str(tests)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.split()[-1]

    assert loaded() == "True"  # the first sync makes the store
    assert loaded() == "False"  # the next one finds it
