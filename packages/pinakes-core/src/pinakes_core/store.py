"""The derived store: ``.pinakes/index.db`` (DESIGN §3).

Core owns the whole schema, graph tables included. There are no migrations: a store whose
``schema_version`` differs from :data:`SCHEMA_VERSION` is deleted and rebuilt from the truth.
Every write that changes what a query can see bumps ``meta.generation``, which lets a long-lived
:class:`~pinakes_core.kb.KB` notice another process's sync with one cheap read.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pinakes_core.errors import IndexMissingError

__all__ = ["SCHEMA_VERSION", "STORE_DIR", "Store", "VectorMatrix"]

log = logging.getLogger(__name__)

# 3: frontmatter fields (documents.meta, doc_meta) for field filters (issue 11).
# 4: NER tables (ner_texts, entity_aliases) for pinakes-ner (issue 13).
SCHEMA_VERSION = 4
STORE_DIR = ".pinakes"
DB_FILE = "index.db"

_SCHEMA = """
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
    meta TEXT NOT NULL DEFAULT '{}'
);
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
CREATE INDEX doc_meta_by_text ON doc_meta(key, value_text COLLATE NOCASE);
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
    UNIQUE (doc_id, ordinal)
);
CREATE INDEX chunks_by_hash ON chunks(embed_hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    title, heading, text, tokenize = 'porter unicode61 remove_diacritics 2'
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
-- NER (pinakes-ner, DESIGN §7): the entities found in each distinct embedded chunk text, so an
-- unchanged text is never run through the model again; a JSON list of [surface, type, count].
CREATE TABLE ner_texts (embed_hash TEXT PRIMARY KEY, entities TEXT NOT NULL);
-- Every normalised surface form of an entity, and the entity node it was merged into.
CREATE TABLE entity_aliases (
    alias TEXT PRIMARY KEY,
    node_id INTEGER NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE
);
CREATE INDEX entity_aliases_by_node ON entity_aliases(node_id);
"""


class VectorMatrix:
    """All chunk vectors as one in-memory float32 matrix (the NumPy tier, DESIGN §3).

    Attributes:
        chunk_ids: int64 chunk id of each row, ascending.
        matrix: float32 ``(rows, dim)`` unit vectors.
    """

    def __init__(self, chunk_ids: npt.NDArray[np.int64], matrix: npt.NDArray[np.float32]) -> None:
        self.chunk_ids = chunk_ids
        self.matrix = matrix

    def __len__(self) -> int:
        return int(self.chunk_ids.shape[0])


class Store:
    """A connection to one KB's derived store.

    Use :meth:`open`; the store directory and file are created on demand.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, rebuilt_from: str | None) -> None:
        self.conn = conn
        self.path = path
        #: the schema version a rebuilt store replaced, or ``None`` when no rebuild happened.
        self.rebuilt_from = rebuilt_from

    @staticmethod
    def location(root: Path) -> Path:
        """Return the database path for the KB at ``root``."""
        return root / STORE_DIR / DB_FILE

    @classmethod
    def current(cls, root: Path) -> bool:
        """Return whether the KB at ``root`` has a store of this schema version."""
        path = cls.location(root)
        return path.exists() and cls._read_version(path) == str(SCHEMA_VERSION)

    @classmethod
    def exists(cls, root: Path) -> bool:
        """Return whether the KB at ``root`` has a store file."""
        return cls.location(root).exists()

    @classmethod
    def open(cls, root: Path, *, create: bool = True, rebuild: bool = False) -> Store:
        """Open (and if needed create or rebuild) the store of the KB at ``root``.

        A store with another ``schema_version`` is deleted and recreated, and ``rebuilt_from``
        records the old version so the caller can say so in one line.
        """
        path = cls.location(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        rebuilt_from: str | None = None
        if path.exists() and not rebuild:
            version = cls._read_version(path)
            if version != str(SCHEMA_VERSION):
                if not create:  # only a sync may rebuild (it holds the lock)
                    raise IndexMissingError(
                        f"The index {path} has schema {version}, this version uses {SCHEMA_VERSION}.",
                        "Run `pnk sync`; it rebuilds the index from the files.",
                    )
                rebuilt_from = version or "unknown"
                rebuild = True
        if rebuild:
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        fresh = not path.exists()
        if fresh and not create:
            raise FileNotFoundError(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if fresh:
            # One script, one transaction: a crash here leaves no half-made schema.
            conn.executescript(
                "BEGIN;\n" + _SCHEMA + f"INSERT INTO meta(key, value) VALUES "
                f"('schema_version', '{SCHEMA_VERSION}'), ('generation', '0');\nCOMMIT;"
            )
        return cls(conn, path, rebuilt_from=rebuilt_from)

    @staticmethod
    def _read_version(path: Path) -> str | None:
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            finally:
                conn.close()
        except sqlite3.DatabaseError:
            return None
        return str(row[0]) if row else None

    @staticmethod
    @contextlib.contextmanager
    def _tx(conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a write transaction that also bumps ``meta.generation``; all or nothing."""
        with self._tx(self.conn):
            yield self.conn
            self.conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def get_meta(self, key: str) -> str | None:
        """Return a ``meta`` value, or ``None`` when unset."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        """Set a ``meta`` value inside the caller's transaction."""
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def generation(self) -> int:
        """Return the store generation (bumped by every committed write)."""
        return int(self.get_meta("generation") or 0)

    def load_vectors(self, dim: int) -> VectorMatrix:
        """Load every chunk vector into one float32 matrix ordered by chunk id."""
        rows = self.conn.execute(
            "SELECT c.chunk_id, v.vector FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash "
            "ORDER BY c.chunk_id"
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(r[1] for r in rows)
        matrix = (
            np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dim)
            if rows
            else np.zeros((0, dim), np.float32)
        )
        return VectorMatrix(ids, matrix)
