"""The SQLite store's tables, made through sqlite-utils where it expresses them exactly (issue 38).

DESIGN §12 names sqlite-utils for the SQLite store. It makes the store's schema: every table
whose columns, keys and foreign keys its ``create_table`` states exactly (:data:`TABLES`), the
rows a new store starts with, and every index on plain columns (``create_index``). The rest stays
DDL (:data:`DDL`), each statement with the construct sqlite-utils' public API cannot state:

* ``documents``: ``CHECK (source_type IN (...))`` and the column constraint ``path ... UNIQUE``;
* ``chunks``: the table constraint ``UNIQUE (doc_id, ordinal)``;
* ``links``: ``CHECK`` on ``kind`` and on ``origin``;
* ``nodes``: ``CHECK`` on ``kind`` and ``UNIQUE (kind, key)``;
* ``chunks_fts``: a standalone FTS5 table with columns of its own (``title``, ``heading``,
  ``idents`` are no columns of ``chunks``) and the tokenizer ``porter unicode61
  remove_diacritics 2``; ``enable_fts`` makes an external-content index over an existing
  table's columns;
* the trigger ``chunks_delete_fts`` (sqlite-utils makes only ``enable_fts``' own triggers);
* the index ``doc_meta_by_lower`` on the expression ``lower(value_text)`` (``create_index``
  quotes every entry as a column name).

A unique index would hold ``chunks`` and ``nodes`` to the same rows as their ``UNIQUE``
constraints, but it is another schema object; the tables stay as they were, so a store made
before this module is the same store (``SCHEMA_VERSION`` unchanged). A test
(tests/core/test_store_tables.py) compares what this module makes, table by table, with that
earlier DDL.

Only schema creation imports sqlite-utils (0.06-0.13 s with its bytecode cached, 0.45 s without;
a new store takes ~0.1 s more to make than with one DDL script): a first sync or a rebuild. The rest of the store stays raw SQL on
purpose, measured in ``benchmarks/sqlite_utils_writes.py`` and docs/scaling.md ("The SQLite
store on sqlite-utils"): every search, every no-change sync and every document a sync writes.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = ["ADDED_INDEXES", "DDL", "TABLES", "Table", "create_schema", "database"]


@dataclass(frozen=True)
class Table:
    """A table sqlite-utils' ``create_table`` makes exactly.

    Attributes:
        name: the table.
        columns: column name -> Python type (``str`` TEXT, ``int`` INTEGER, ``float`` REAL,
            ``bytes`` BLOB), in order.
        pk: the primary key column or columns; ``None`` for a rowid table without one.
        not_null: the columns declared ``NOT NULL``.
        cascade: ``(column, other table, other column)`` foreign keys, ``ON DELETE CASCADE``.
        indexes: ``(index name, columns)`` on plain columns.
    """

    name: str
    columns: dict[str, type]
    pk: str | tuple[str, ...] | None
    not_null: tuple[str, ...] = ()
    cascade: tuple[tuple[str, str, str], ...] = ()
    indexes: tuple[tuple[str, tuple[str, ...]], ...] = ()


#: Indexes a store of this schema version may lack (made before them): a sync adds them, once
#: (raw DDL: it runs at every sync, a no-change one too, which never imports sqlite-utils).
#: ``doc_meta_by_lower`` serves the field filters' case-blind equality (:meth:`MetaFilter.sql
#: <pinakes_core.read.meta.MetaFilter.sql>`), which older stores indexed with ``COLLATE NOCASE``.
ADDED_INDEXES = "CREATE INDEX IF NOT EXISTS doc_meta_by_lower ON doc_meta(key, lower(value_text))"

_DOCUMENTS = """CREATE TABLE documents (
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
    pages TEXT,  -- PDFs: JSON list, the line of each page's "[page N]" marker
    line_count INTEGER  -- PDFs: lines of the indexed (extracted) text
)"""

_CHUNKS = """CREATE TABLE chunks (
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
)"""

_CHUNKS_FTS = """CREATE VIRTUAL TABLE chunks_fts USING fts5(
    title, heading, text, idents, tokenize = 'porter unicode61 remove_diacritics 2'
)"""

_CHUNKS_DELETE_FTS = """CREATE TRIGGER chunks_delete_fts AFTER DELETE ON chunks BEGIN
    DELETE FROM chunks_fts WHERE rowid = old.chunk_id;
END"""

_LINKS = """CREATE TABLE links (
    src_doc TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    target TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('uri', 'markdown', 'wiki')),
    dst_kb TEXT,
    dst_doc TEXT,
    rel TEXT NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('sidecar', 'frontmatter', 'reverse-scan')),
    reason TEXT
)"""

_NODES = """CREATE TABLE nodes (
    node_id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('chunk', 'doc', 'tag', 'heading', 'dir', 'entity')),
    key TEXT NOT NULL,
    label TEXT,
    UNIQUE (kind, key)
)"""

#: The DDL sqlite-utils cannot state (the module docstring says which construct, each).
DDL: tuple[str, ...] = (
    _DOCUMENTS,
    _CHUNKS,
    _CHUNKS_FTS,
    _CHUNKS_DELETE_FTS,
    _LINKS,
    _NODES,
    ADDED_INDEXES,
)

#: The tables sqlite-utils makes, and their indexes.
TABLES: tuple[Table, ...] = (
    Table("meta", {"key": str, "value": str}, pk="key", not_null=("value",)),
    Table(
        "doc_tags",
        {"doc_id": str, "tag": str},
        pk=("doc_id", "tag"),
        not_null=("doc_id", "tag"),
        cascade=(("doc_id", "documents", "doc_id"),),
        indexes=(("doc_tags_by_tag", ("tag",)),),
    ),
    Table(
        "doc_meta",
        {"doc_id": str, "key": str, "value_text": str, "value_num": float},
        pk=None,
        not_null=("doc_id", "key", "value_text"),
        cascade=(("doc_id", "documents", "doc_id"),),
        indexes=(("doc_meta_by_doc", ("doc_id",)), ("doc_meta_by_num", ("key", "value_num"))),
    ),
    Table("vectors", {"embed_hash": str, "vector": bytes}, pk="embed_hash", not_null=("vector",)),
    Table(
        "edges",
        {"src": int, "dst": int, "kind": str, "weight": float},
        pk=("src", "dst", "kind"),
        not_null=("src", "dst", "kind", "weight"),
        cascade=(("src", "nodes", "node_id"), ("dst", "nodes", "node_id")),
        indexes=(("edges_by_dst", ("dst",)),),
    ),
    Table(
        "node_vectors",
        {"node_id": int, "embed_hash": str},
        pk="node_id",
        not_null=("embed_hash",),
        cascade=(("node_id", "nodes", "node_id"),),
        indexes=(("node_vectors_by_hash", ("embed_hash",)),),
    ),
    # NER (pinakes-ner, DESIGN §7): the entities found in each distinct embedded chunk text,
    # so an unchanged text is never run through the model again; a JSON list of
    # [surface, type, count].
    Table(
        "ner_texts", {"embed_hash": str, "entities": str}, pk="embed_hash", not_null=("entities",)
    ),
    # Every normalised surface form of an entity, and the entity node it was merged into.
    Table(
        "entity_aliases",
        {"alias": str, "node_id": int},
        pk="alias",
        not_null=("node_id",),
        cascade=(("node_id", "nodes", "node_id"),),
        indexes=(("entity_aliases_by_node", ("node_id",)),),
    ),
)

#: Indexes on plain columns of the DDL tables (``create_index`` states them).
_DDL_INDEXES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("documents", "documents_by_source_type", ("source_type",)),
    ("chunks", "chunks_by_hash", ("embed_hash",)),
    ("links", "links_by_src", ("src_doc",)),
    ("links", "links_by_dst", ("dst_doc",)),
)

# The order the tables are made in: a foreign key's table comes before the tables naming it.
_ORDER = (
    "meta",
    _DOCUMENTS,
    "doc_tags",
    "doc_meta",
    ADDED_INDEXES,
    _CHUNKS,
    _CHUNKS_FTS,
    _CHUNKS_DELETE_FTS,
    "vectors",
    _LINKS,
    _NODES,
    "edges",
    "node_vectors",
    "ner_texts",
    "entity_aliases",
)


def database(conn: sqlite3.Connection) -> Database:
    """sqlite-utils over the store's own connection: its transaction, nothing of its own.

    ``recursive_triggers`` would set a PRAGMA on the store's connection and ``execute_plugins``
    would run sqlite-utils' plugins on it; both are off.
    """
    from sqlite_utils import Database

    return Database(conn, recursive_triggers=False, execute_plugins=False)


def create_schema(conn: sqlite3.Connection, rows: dict[str, str]) -> None:
    """Make every table, index and trigger of an empty store, and its first ``meta`` ``rows``.

    One transaction: a crash leaves no half-made schema.
    """
    from sqlite_utils.db import ForeignKey

    db = database(conn)
    tables = {t.name: t for t in TABLES}
    with db.atomic():
        for step in _ORDER:
            table = tables.get(step)
            if table is None:
                db.execute(step)
                continue
            db.create_table(
                table.name,
                dict(table.columns),
                pk=table.pk,
                not_null=table.not_null,
                foreign_keys=[
                    ForeignKey(table.name, column, other, other_column, on_delete="CASCADE")
                    for column, other, other_column in table.cascade
                ],
            )
            for name, columns in table.indexes:
                db.table(table.name).create_index(columns, index_name=name)
        for table_name, name, columns in _DDL_INDEXES:
            db.table(table_name).create_index(columns, index_name=name)
        db.table("meta").insert_all({"key": k, "value": v} for k, v in rows.items())
