"""The store contract: one interface, two implementations (issue 38, docs/scaling.md).

The derived index sits behind three layers of contract:

* :class:`~pinakes_core.index.place.IndexPlace` (:mod:`pinakes_core.index.place`) is where a
  KB's index lives: the SQLite files in ``.pinakes/`` or a schema in a PostgreSQL database.
* :class:`StoreLifecycle` is what every caller of an open store relies on (transactions that
  bump the generation, ``meta``, vectors, generations and their swap), and its ``conn``: a
  connection that runs the SQL both engines speak (see below). The SQLite
  :class:`~pinakes_core.index.store.Store` and
  :class:`~pinakes_core.index.pgstore.PostgresStore` both meet it.
* :class:`IndexBackend` adds the operations on the index's content written differently per
  engine: a document with its chunks, links and vectors, reading them back, BM25 and
  nearest-vector search. :class:`SqliteBackend` implements it over a ``Store``.

**One schema, one dialect.** PostgreSQL's tables mirror SQLite's column for column (JSON kept
as text; ``links`` and ``doc_meta`` have a ``rowid`` column as SQLite's implicit one), so the
code above the store writes its SQL once, in the common dialect of SQLite >= 3.35 and
PostgreSQL: ``?`` placeholders (the PostgreSQL connection rewrites them, nothing else),
``INSERT ... ON CONFLICT``, ``RETURNING``, no SQLite-only functions, rows read by position or
column name. A statement that fails raises a member of :data:`DatabaseErrors` on either engine.
What the engines do differently (FTS5 against postings, vector snapshots and usearch against
pgvector) is reached through the store and its place, never by asking which engine it is.

Why one module of this length (issue 37): the contract (records and protocols) and its
reference implementation over SQLite sit side by side, so every method of the contract has its
reading next to it; :mod:`pinakes_core.index.pgstore` is the other implementation.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from pinakes_core.errors import ConfigError, PinakesError
from pinakes_core.index.query import split_cjk
from pinakes_core.index.store import Store, VectorMatrix

if TYPE_CHECKING:
    from pinakes_core.config import Config

__all__ = [
    "DATABASE_URL_ENV",
    "ChunkHit",
    "ChunkRecord",
    "DatabaseError",
    "DatabaseErrors",
    "DocumentRecord",
    "IndexBackend",
    "LinkRecord",
    "SqliteBackend",
    "StoreLifecycle",
    "StoreUnavailableError",
    "content_of",
    "copy_index",
    "database_url",
]

#: The environment variable that names the PostgreSQL database (so no secret is committed).
DATABASE_URL_ENV = "PINAKES_DATABASE_URL"


class StoreUnavailableError(PinakesError):
    """The database server of a ``[store] backend = "postgres"`` KB cannot be reached."""


class DatabaseError(PinakesError):
    """A statement the PostgreSQL server refused (the driver's error is its ``__cause__``)."""


#: What a failed statement raises on either engine: catch these, not ``sqlite3.Error`` alone,
#: where the statement may run on PostgreSQL.
DatabaseErrors: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError)


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk of a document as the index holds it.

    Attributes:
        ordinal: the chunk's place in its document, from 0.
        heading_path: the headings above it, outermost first.
        text: the chunk's text.
        embed_hash: the key of its vector (equal texts share one vector).
        start_line: first line in the file (1-based).
        end_line: last line in the file.
        tokens: its length in the embedding model's tokens.
        idents: the parts of the code identifiers in it, space-separated (lexical only).
        page_start: a PDF chunk's first page, else ``None``.
        page_end: a PDF chunk's last page, else ``None``.
    """

    ordinal: int
    heading_path: tuple[str, ...]
    text: str
    embed_hash: str
    start_line: int
    end_line: int
    tokens: int
    idents: str = ""
    page_start: int | None = None
    page_end: int | None = None


@dataclass(frozen=True)
class LinkRecord:
    """One outgoing link of a document, as sync reads it (targets resolved later)."""

    target: str
    kind: str
    rel: str
    origin: str


@dataclass(frozen=True)
class DocumentRecord:
    """A document with everything the index keeps of it.

    Attributes:
        fields: the flattened frontmatter ``(key, value_text, value_num)`` rows of filters.
        meta: the frontmatter summary shown with a document.
        pages: a PDF's line of each page's ``[page N]`` marker (else ``None``).
        line_count: a PDF's lines of extracted text (else ``None``).
    """

    doc_id: str
    path: str
    title: str
    content_hash: str
    mtime_ns: int
    size: int
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    source_type: str = "markdown"
    meta: dict[str, Any] = field(default_factory=dict)
    fields: tuple[tuple[str, str, float | None], ...] = ()
    chunks: tuple[ChunkRecord, ...] = ()
    links: tuple[LinkRecord, ...] = ()
    sidecar_hash: str | None = None
    sidecar_mtime_ns: int | None = None
    sidecar_size: int | None = None
    #: PDFs: the line of each page's "[page N]" marker, and the lines of the extracted text.
    pages: tuple[int, ...] | None = None
    line_count: int | None = None
    #: the title is only the file's name (a PDF, a text file): it is running text of the
    #: first chunk, not a name the title column weighs (issue 35, item 7).
    file_named: bool = False

    @property
    def names(self) -> str:
        """The document's names as the lexical index holds them: title, then aliases."""
        return "\n".join(self.aliases if self.file_named else [self.title, *self.aliases])

    def row(self) -> dict[str, Any]:
        """Its ``documents`` row on either engine, column → value (JSON columns as text).

        ``synced_at`` is left to the writer (the clock of its engine).
        """
        return {
            "doc_id": self.doc_id,
            "path": self.path,
            "title": self.title,
            "tags": json.dumps(list(self.tags)),
            "aliases": json.dumps(list(self.aliases)),
            "content_hash": self.content_hash,
            "sidecar_hash": self.sidecar_hash,
            "mtime_ns": self.mtime_ns,
            "size": self.size,
            "sidecar_mtime_ns": self.sidecar_mtime_ns,
            "sidecar_size": self.sidecar_size,
            "chunk_count": len(self.chunks),
            "meta": json.dumps(self.meta),
            "source_type": self.source_type,
            "pages": None if self.pages is None else json.dumps(list(self.pages)),
            "line_count": self.line_count,
        }


@dataclass(frozen=True)
class ChunkHit:
    """One search result: a chunk, its document, and the backend's raw score (higher is better)."""

    chunk_id: int
    doc_id: str
    path: str
    ordinal: int
    score: float


@runtime_checkable
class StoreLifecycle(Protocol):
    """What callers rely on of an open store, whatever its engine (see the module docstring)."""

    @property
    def rebuilt_from(self) -> str | None:
        """The schema version a rebuild replaced, or ``None`` when none happened."""
        ...

    @property
    def pending(self) -> bool:
        """Whether this is a rebuilt generation that :meth:`publish` has yet to make current."""
        ...

    def file_token(self) -> str | None:
        """The identity of this store generation (indexes kept beside it are stamped with it)."""
        ...

    def publish(self) -> None:
        """Make a rebuilt generation current (a no-op for a store that is current already)."""
        ...

    def replaced(self) -> bool:
        """Whether another generation became current since this one was opened."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A write transaction, all or nothing, that bumps the generation; yields the connection."""
        ...

    def close(self) -> None:
        """Close the connection and let go of the generation."""
        ...

    def get_meta(self, key: str) -> str | None:
        """A ``meta`` value, or ``None`` when unset."""
        ...

    def set_meta(self, conn: Any, key: str, value: str) -> None:
        """Set a ``meta`` value inside the caller's transaction (``conn`` from :meth:`transaction`)."""
        ...

    def generation(self) -> int:
        """The store generation, bumped by every committed write."""
        ...

    def load_vectors(self, dim: int) -> VectorMatrix:
        """Every chunk vector as one float32 matrix, rows ordered by chunk id."""
        ...


@runtime_checkable
class IndexBackend(StoreLifecycle, Protocol):
    """The index's content operations that differ between engines (see the module docstring)."""

    #: ``"sqlite"`` or ``"postgres"``.
    backend: str

    def writer(self, *, wait: float = 30.0) -> contextlib.AbstractContextManager[None]:
        """Hold the single-writer lock of this KB's index for the block.

        Raises:
            LockError: if another writer still holds it after ``wait`` seconds.
        """
        ...

    def put_document(self, conn: Any, doc: DocumentRecord) -> None:
        """Write ``doc`` (replacing any document of its id or path) in ``conn``'s transaction."""
        ...

    def delete_document(self, conn: Any, doc_id: str) -> None:
        """Remove a document with its chunks, tags, fields and links (in the transaction)."""
        ...

    def put_vectors(self, conn: Any, vectors: dict[str, npt.NDArray[np.float32]]) -> None:
        """Store vectors by embed hash; an existing one is kept (in the transaction)."""
        ...

    def documents(self) -> Iterator[DocumentRecord]:
        """Every document with its chunks and links, ordered by path."""
        ...

    def vectors(self) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        """Every stored vector by embed hash."""
        ...

    def document_count(self) -> int:
        """The number of documents."""
        ...

    def chunk_count(self) -> int:
        """The number of chunks."""
        ...

    def lexical(self, text: str, k: int) -> list[ChunkHit]:
        """The ``k`` best chunks for ``text`` by BM25, best first."""
        ...

    def nearest(self, vector: npt.NDArray[np.float32], k: int) -> list[ChunkHit]:
        """The ``k`` chunks whose vectors have the highest cosine to ``vector``, best first."""
        ...


def database_url(config: Config, root: Any) -> str:
    """The PostgreSQL URL of a KB: ``PINAKES_DATABASE_URL`` if set, else ``[store] url``.

    Raises:
        ConfigError: if neither names a database.
    """
    url = os.environ.get(DATABASE_URL_ENV) or config.store.url
    if not url:
        raise ConfigError(
            f"{root}/pinakes.toml: [store] backend = 'postgres' names no database.",
            f"Set {DATABASE_URL_ENV} (or [store] url) to a postgresql:// URL.",
        )
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            f"{DATABASE_URL_ENV} is {url!r}, not a postgresql:// URL.",
            "Fix the variable or unset it.",
        )
    return url


def content_of(store: Any) -> IndexBackend:
    """The content operations of an open store (:class:`IndexBackend`).

    A :class:`~pinakes_core.index.pgstore.PostgresStore` is its own; a SQLite
    :class:`~pinakes_core.index.store.Store` has :class:`SqliteBackend` over it.
    """
    return store if isinstance(store, IndexBackend) else SqliteBackend(store)


# -- SQLite ---------------------------------------------------------------------------------


class SqliteBackend:
    """:class:`IndexBackend` over the SQLite :class:`~pinakes_core.index.store.Store`.

    Sync writes every document through :meth:`put_document`; :meth:`lexical` is the BM25
    channel of search itself (FTS5, :meth:`pinakes_core.index.bm25.Bm25.rank`).
    """

    backend = "sqlite"

    def __init__(self, store: Store, *, bm25_max_rows: int = 20_000) -> None:
        self.store = store
        self._bm25_max_rows = bm25_max_rows
        self._matrix: tuple[int, VectorMatrix] | None = None

    # StoreLifecycle: the Store's own.
    @property
    def rebuilt_from(self) -> str | None:
        """See :class:`StoreLifecycle`."""
        return self.store.rebuilt_from

    @property
    def pending(self) -> bool:
        """See :class:`StoreLifecycle`."""
        return self.store.pending

    def file_token(self) -> str | None:
        """See :class:`StoreLifecycle`."""
        return self.store.file_token()

    def publish(self) -> None:
        """See :class:`StoreLifecycle`."""
        self.store.publish()

    def replaced(self) -> bool:
        """See :class:`StoreLifecycle`."""
        return self.store.replaced()

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """See :class:`StoreLifecycle`."""
        return self.store.transaction()

    def close(self) -> None:
        """See :class:`StoreLifecycle`."""
        self.store.close()

    def get_meta(self, key: str) -> str | None:
        """See :class:`StoreLifecycle`."""
        return self.store.get_meta(key)

    def set_meta(self, conn: Any, key: str, value: str) -> None:
        """See :class:`StoreLifecycle`."""
        self.store.set_meta(conn, key, value)

    def generation(self) -> int:
        """See :class:`StoreLifecycle`."""
        return self.store.generation()

    def load_vectors(self, dim: int) -> VectorMatrix:
        """See :class:`StoreLifecycle`."""
        return self.store.load_vectors(dim)

    # IndexBackend.
    @contextlib.contextmanager
    def writer(self, *, wait: float = 30.0) -> Iterator[None]:
        """The KB's sync lock (``.pinakes/sync.lock``, :func:`pinakes_core.index.lock.sync_lock`).

        It does not wait: a held lock fails at once, as a second ``pnk sync`` does.
        """
        from pinakes_core.index.lock import sync_lock

        with sync_lock(self.store.path.parent):
            yield

    def put_document(self, conn: Any, doc: DocumentRecord) -> None:
        """See :class:`IndexBackend` (the SQL of ``sync._write_document``)."""
        conn.execute("DELETE FROM documents WHERE doc_id = ? OR path = ?", (doc.doc_id, doc.path))
        row = doc.row()
        conn.execute(
            f"INSERT INTO documents({', '.join(row)}, synced_at) "
            f"VALUES ({', '.join('?' * len(row))}, ?)",
            (*row.values(), time.time()),
        )
        conn.executemany(
            "INSERT INTO doc_tags(doc_id, tag) VALUES (?, ?)", [(doc.doc_id, t) for t in doc.tags]
        )
        conn.executemany(
            "INSERT INTO doc_meta(doc_id, key, value_text, value_num) VALUES (?, ?, ?, ?)",
            [(doc.doc_id, *row) for row in doc.fields],
        )
        names = split_cjk(doc.names)
        for chunk in doc.chunks:
            cur = conn.execute(
                "INSERT INTO chunks(doc_id, ordinal, heading_path, text, embed_hash, start_line, "
                "end_line, tokens, page_start, page_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    doc.doc_id,
                    chunk.ordinal,
                    json.dumps(list(chunk.heading_path)),
                    chunk.text,
                    chunk.embed_hash,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.tokens,
                    chunk.page_start,
                    chunk.page_end,
                ),
            )
            conn.execute(
                "INSERT INTO chunks_fts(rowid, title, heading, text, idents) VALUES (?, ?, ?, ?, ?)",
                (
                    cur.lastrowid,
                    names,
                    split_cjk(" › ".join(chunk.heading_path)),
                    split_cjk(chunk.text),
                    chunk.idents,
                ),
            )
        conn.executemany(
            "INSERT INTO links(src_doc, target, kind, rel, origin) VALUES (?, ?, ?, ?, ?)",
            [(doc.doc_id, x.target, x.kind, x.rel, x.origin) for x in doc.links],
        )

    def delete_document(self, conn: Any, doc_id: str) -> None:
        """See :class:`IndexBackend` (chunks, tags, fields and links go by cascade)."""
        conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))

    def put_vectors(self, conn: Any, vectors: dict[str, npt.NDArray[np.float32]]) -> None:
        """See :class:`IndexBackend` (:meth:`Store.put_vectors <pinakes_core.index.store.Store.put_vectors>`)."""
        self.store.put_vectors(conn, vectors)

    def documents(self) -> Iterator[DocumentRecord]:
        """See :class:`IndexBackend`."""
        conn = self.store.conn
        tags = _grouped(conn.execute("SELECT doc_id, tag FROM doc_tags ORDER BY doc_id, tag"))
        fields = _grouped(
            conn.execute(
                "SELECT doc_id, key, value_text, value_num FROM doc_meta ORDER BY doc_id, rowid"
            )
        )
        links = _grouped(
            conn.execute(
                "SELECT src_doc, target, kind, rel, origin FROM links "
                "WHERE origin != 'reverse-scan' ORDER BY src_doc, rowid"
            )
        )
        chunks = _grouped(
            conn.execute(
                "SELECT c.doc_id, c.ordinal, c.heading_path, c.text, c.embed_hash, c.start_line, "
                "c.end_line, c.tokens, f.idents, c.page_start, c.page_end FROM chunks c "
                "JOIN chunks_fts f ON f.rowid = c.chunk_id ORDER BY c.doc_id, c.ordinal"
            )
        )
        for r in conn.execute(
            "SELECT doc_id, path, title, content_hash, mtime_ns, size, tags, aliases, "
            "source_type, meta, sidecar_hash, sidecar_mtime_ns, sidecar_size, pages, line_count "
            "FROM documents ORDER BY path"
        ).fetchall():
            doc_id = str(r[0])
            yield DocumentRecord(
                doc_id=doc_id,
                path=str(r[1]),
                title=str(r[2]),
                content_hash=str(r[3]),
                mtime_ns=int(r[4]),
                size=int(r[5]),
                tags=tuple(t[0] for t in tags.get(doc_id, [])),
                aliases=tuple(json.loads(r[7])),
                source_type=str(r[8]),
                meta=json.loads(r[9]),
                fields=tuple((str(f[0]), str(f[1]), f[2]) for f in fields.get(doc_id, [])),
                chunks=tuple(_chunk_record(c) for c in chunks.get(doc_id, [])),
                links=tuple(LinkRecord(*map(str, x)) for x in links.get(doc_id, [])),
                sidecar_hash=r[10],
                sidecar_mtime_ns=r[11],
                sidecar_size=r[12],
                pages=None if r[13] is None else tuple(json.loads(r[13])),
                line_count=r[14],
            )

    def vectors(self) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        """See :class:`IndexBackend`."""
        for h, blob in self.store.conn.execute("SELECT embed_hash, vector FROM vectors"):
            yield str(h), np.frombuffer(blob, dtype=np.float32).copy()

    def document_count(self) -> int:
        """See :class:`IndexBackend`."""
        return int(self.store.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def chunk_count(self) -> int:
        """See :class:`IndexBackend`."""
        return int(self.store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def lexical(self, text: str, k: int) -> list[ChunkHit]:
        """See :class:`IndexBackend`: the BM25 channel of search (FTS5)."""
        from pinakes_core.index.bm25 import Bm25

        ranker = Bm25(self.store.conn, candidates=k, max_rows=self._bm25_max_rows)
        return self._hits(ranker.rank(text))

    def nearest(self, vector: npt.NDArray[np.float32], k: int) -> list[ChunkHit]:
        """See :class:`IndexBackend`: exact cosine over every chunk vector (the NumPy tier).

        The matrix is loaded once per store generation, as :class:`~pinakes_core.kb.KB` does.
        """
        generation = self.generation()
        if self._matrix is None or self._matrix[0] != generation:
            dim = int(self.get_meta("dim") or vector.shape[0])
            self._matrix = (generation, self.load_vectors(dim))
        matrix = self._matrix[1]
        if not len(matrix):
            return []
        scores = matrix.matrix @ np.asarray(vector, dtype=np.float32)
        top = np.lexsort((matrix.chunk_ids, -scores))[:k]
        return self._hits([(int(matrix.chunk_ids[i]), float(scores[i])) for i in top])

    def _hits(self, ranked: list[tuple[int, float]]) -> list[ChunkHit]:
        if not ranked:
            return []
        ids = [c for c, _ in ranked]
        rows = {
            int(r[0]): r
            for r in self.store.conn.execute(
                "SELECT c.chunk_id, c.doc_id, d.path, c.ordinal FROM chunks c "
                f"JOIN documents d ON d.doc_id = c.doc_id WHERE c.chunk_id IN ({','.join('?' * len(ids))})",
                ids,
            )
        }
        return [
            ChunkHit(c, str(rows[c][1]), str(rows[c][2]), int(rows[c][3]), s)
            for c, s in ranked
            if c in rows
        ]


def _no_embedder(text: str) -> npt.NDArray[np.float32]:
    raise RuntimeError("the lexical channel embeds nothing")  # pragma: no cover


def _grouped(rows: Iterable[Any]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault(str(r[0]), []).append(tuple(r[1:]))
    return out


def _chunk_record(r: tuple[Any, ...]) -> ChunkRecord:
    return ChunkRecord(
        ordinal=int(r[0]),
        heading_path=tuple(json.loads(r[1])),
        text=str(r[2]),
        embed_hash=str(r[3]),
        start_line=int(r[4]),
        end_line=int(r[5]),
        tokens=int(r[6]),
        idents=str(r[7] or ""),
        page_start=r[8],
        page_end=r[9],
    )


def copy_index(
    source: IndexBackend,
    target: IndexBackend,
    *,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Copy every document and vector of ``source`` into ``target`` in one transaction.

    Documents of ``target`` that ``source`` lacks are removed, so readers of ``target`` see
    the old index or the new one, never half of one. Returns the number of documents written.
    """
    written = 0
    with target.writer(), target.transaction() as conn:
        keep = set()
        for doc in source.documents():
            target.put_document(conn, doc)
            keep.add(doc.doc_id)
            written += 1
            if progress is not None and written % 500 == 0:
                progress(written)
        for old in [d.doc_id for d in target.documents() if d.doc_id not in keep]:
            target.delete_document(conn, old)
        batch: dict[str, npt.NDArray[np.float32]] = {}
        for h, v in source.vectors():
            batch[h] = v
            if len(batch) >= 1000:
                target.put_vectors(conn, batch)
                batch = {}
        target.put_vectors(conn, batch)
    return written


def _conforms(store: Store, sqlite: SqliteBackend) -> tuple[StoreLifecycle, IndexBackend]:
    """Never called: mypy checks here that the SQLite classes meet the contract."""
    return store, sqlite
