"""The derived store: ``.pinakes/index.db`` (DESIGN §3).

Core owns the whole schema, graph tables included: :mod:`pinakes_core.index.tables` makes it,
through sqlite-utils where that states a table exactly, and loads only when a sync opens the
store. There are no migrations: a store whose
``schema_version`` differs from :data:`SCHEMA_VERSION` is deleted and rebuilt from the truth.
Every write that changes what a query can see bumps ``meta.generation``, which lets a long-lived
:class:`~pinakes_core.kb.KB` notice another process's sync with one cheap read.

Why one module of this length (issue 37): the store's lifecycle is one job around one file
set and its invariants: opening and creating it, the generation count readers watch,
transactions, the atomic rebuild-and-swap with reader locks, and collecting old generations.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.derived import (
    STORE_DIR,
    UnsafeStoreError,
    open_nofollow,
    replace_file,
    store_dir,
)
from pinakes_core.errors import IndexMissingError
from pinakes_core.index.lock import _alive

__all__ = [
    "SCHEMA_VERSION",
    "STORE_DIR",
    "OpenStore",
    "Store",
    "VectorMatrix",
    "chunk_count",
    "collect_garbage",
    "disk_full",
    "read_stamp",
    "writable",
    "write_stamp",
]

log = logging.getLogger(__name__)

# 3: frontmatter fields (documents.meta, doc_meta) for field filters (issue 11).
# 4: NER tables (ner_texts, entity_aliases) for pinakes-ner (issue 13).
# 5: the store is a generation file behind the ``index.db`` symlink (rebuilds swap it).
# 6: PDF and code sources (issue 18): documents.source_type/pages/line_count,
#    chunks.page_start/page_end, chunks_fts.idents.
SCHEMA_VERSION = 6
DB_FILE = "index.db"
#: The tantivy BM25 index (:mod:`pinakes_core.index.lexical`) and its stamp, in :data:`STORE_DIR`.
LEXICAL_DIR = "bm25-tantivy"
LEXICAL_STAMP = "bm25-tantivy.json"
#: SQLite page cache per connection, in KiB (SQLite's default is 2 MiB).
PAGE_CACHE_KIB = 65536
_SUFFIXES = ("", "-wal", "-shm", "-journal")
_GENERATION = re.compile(r"^index\.(\d+)\.db$")
# Any file of a generation: its database, WAL, shared memory, journal or readers lock.
_GENERATION_FILE = re.compile(r"^(index\.\d+)\.(?:db(?:-wal|-shm|-journal)?|readers)$")


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

    Layout: ``.pinakes/index.db`` is a symlink naming the current generation's database,
    ``index.<n>.db`` (with its own ``-wal`` and ``-shm``). A rebuild writes generation ``n + 1``
    beside the current one and then swaps the symlink atomically, so a reader never sees a
    half-built store: it finishes on the old generation and notices the swap with one
    ``readlink`` (:meth:`replaced`). Every open store holds a shared ``flock`` on
    ``index.<n>.readers``; a generation that is not current is deleted only by whoever gets the
    exclusive lock on that file, that is once nobody reads it any more.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        rebuilt_from: str | None,
        readers: int,
        pending: bool = False,
    ) -> None:
        self.conn = conn
        #: the generation's database file (``.pinakes/index.<n>.db``).
        self.path = path
        #: the schema version a rebuilt store replaced, or ``None`` when no rebuild happened.
        self.rebuilt_from = rebuilt_from
        self._readers = readers
        #: whether this is a new generation that :meth:`publish` has yet to make current.
        self.pending = pending

    def file_token(self) -> str | None:
        """The identity of the generation's database file (a rebuilt store is a new file).

        The indexes kept beside the store (vector snapshot, ANN, BM25) are stamped with it.
        """
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        return f"{stat.st_dev:x}-{stat.st_ino:x}"

    @staticmethod
    def location(root: Path) -> Path:
        """Return the path of the KB's database (a symlink to the current generation's file).

        Raises:
            UnsafeStoreError: ``.pinakes/`` could lead a write outside the KB (see
                :mod:`pinakes_core.derived`).
        """
        return store_dir(root) / DB_FILE

    @classmethod
    def current(cls, root: Path) -> bool:
        """Return whether the KB at ``root`` has a usable store of this schema version.

        ``False`` for an unsafe ``.pinakes/``: opening or syncing the store then says why.
        """
        try:
            path = cls.location(root)
        except UnsafeStoreError:
            return False
        return path.exists() and cls._read_version(path) == str(SCHEMA_VERSION)

    @classmethod
    def exists(cls, root: Path) -> bool:
        """Return whether the KB at ``root`` has a usable store file (``False`` if unsafe)."""
        try:
            return cls.location(root).exists()
        except UnsafeStoreError:
            return False

    @classmethod
    def files(cls, root: Path) -> list[Path]:
        """Return the current generation's files (database, WAL, shared memory) that exist."""
        pointer = cls.location(root)
        try:
            base = pointer.parent / os.readlink(pointer)
        except OSError:
            base = pointer
        return [p for p in (Path(f"{base}{s}") for s in _SUFFIXES) if p.is_file()]

    @classmethod
    def open(cls, root: Path, *, create: bool = True, rebuild: bool = False) -> Store:
        """Open (and if needed create or rebuild) the store of the KB at ``root``.

        With ``create`` (only a sync, which holds the sync lock, passes it): a missing store is
        created and made current at once, so an interrupted first sync is resumed by the next.
        A store with another ``schema_version``, or any store when ``rebuild`` is asked, is
        rebuilt as a new generation that stays invisible to readers until :meth:`publish`;
        ``rebuilt_from`` records the old version so the caller can say so in one line.

        Raises:
            IndexMissingError: (without ``create``) if the store has another schema version.
            FileNotFoundError: (without ``create``) if there is no store.
        """
        pointer = cls.location(root)
        if not create:
            return cls._attach(root)
        store_dir(root, create=True)
        collect_garbage(pointer.parent)
        rebuilt_from: str | None = None
        if pointer.exists() and not rebuild:
            version = cls._read_version(pointer)
            if version != str(SCHEMA_VERSION):
                rebuilt_from = version or "unknown"
                rebuild = True
            else:
                # The schema module (index/tables.py) loads only for a sync, never a search.
                from pinakes_core.index.tables import ADDED_INDEXES

                store = cls._attach(root)
                store.conn.execute(ADDED_INDEXES)
                return store
        store = cls._create(pointer.parent, rebuilt_from=rebuilt_from)
        if not pointer.exists():
            store.publish()  # nothing to hide: build in place, resumable after a crash
        return store

    @classmethod
    def _attach(cls, root: Path) -> Store:
        """Open the current generation for reading and writing (holding its readers lock).

        A ``.pinakes/`` this process cannot write (another user's KB, a read-only mount) is
        opened read-only: search and show work, and nothing is created there.
        """
        pointer = cls.location(root)
        for _ in range(50):
            try:
                name = _generation_name(pointer)
            except FileNotFoundError:
                raise FileNotFoundError(pointer) from None
            read_only = not writable(pointer.parent, pointer.parent / name)
            readers = _lock_readers(pointer.parent / name, fcntl.LOCK_SH, create=not read_only)
            try:
                if _generation_name(pointer) != name or not (pointer.parent / name).exists():
                    if readers >= 0:
                        os.close(readers)  # swapped meanwhile: look again
                    continue
                version = cls._read_version(pointer.parent / name)
                if version != str(SCHEMA_VERSION):
                    raise IndexMissingError(
                        f"The index {pointer} has schema {version}, this version uses {SCHEMA_VERSION}.",
                        "Run `pnk sync`; it rebuilds the index from the files.",
                    )
                conn = _connect(pointer.parent / name, create=False, read_only=read_only)
            except BaseException:
                if readers >= 0:
                    os.close(readers)
                raise
            return cls(conn, pointer.parent / name, rebuilt_from=None, readers=readers)
        raise IndexMissingError(
            f"The index {pointer} keeps changing under this reader.", "Try again."
        )

    @classmethod
    def _create(cls, store_dir: Path, *, rebuilt_from: str | None) -> Store:
        """Create the next generation's database, empty but for the schema (not yet current)."""
        from pinakes_core.index.tables import create_schema

        numbers = [int(m[1]) for p in store_dir.iterdir() if (m := _GENERATION.match(p.name))]
        path = store_dir / f"index.{max(numbers, default=0) + 1}.db"
        readers = _lock_readers(path, fcntl.LOCK_SH)
        try:
            for suffix in _SUFFIXES:
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            conn = _connect(path, create=True)
            # sqlite-utils and the DDL it cannot state, in one transaction (tables.py).
            create_schema(conn, {"schema_version": str(SCHEMA_VERSION), "generation": "0"})
        except BaseException:
            os.close(readers)
            raise
        return cls(conn, path, rebuilt_from=rebuilt_from, readers=readers, pending=True)

    def publish(self) -> None:
        """Make this generation the current store (one atomic rename), then drop unused ones.

        Readers of the previous generation finish their work on it and switch at their next
        call; its files are deleted once none of them holds it.
        """
        if not self.pending:
            return
        pointer = self.path.parent / DB_FILE
        temp = self.path.parent / f".{DB_FILE}.{os.getpid()}.link"
        temp.unlink(missing_ok=True)
        os.symlink(self.path.name, temp)
        os.replace(temp, pointer)
        _fsync_dir(self.path.parent)
        self.pending = False
        collect_garbage(self.path.parent)

    def replaced(self) -> bool:
        """Return whether another generation has become current since this one was opened."""
        try:
            return _generation_name(self.path.parent / DB_FILE) != self.path.name
        except FileNotFoundError:
            return True

    @staticmethod
    def _read_version(path: Path) -> str | None:
        # A store this process cannot write is read without making a file beside it.
        modes = ("ro",) if writable(path.parent, path) else (_read_only_mode(path),)
        for mode in modes:
            try:
                conn = sqlite3.connect(f"file:{path}?mode={mode}", uri=True)
                try:
                    row = conn.execute(
                        "SELECT value FROM meta WHERE key = 'schema_version'"
                    ).fetchone()
                finally:
                    conn.close()
            except sqlite3.DatabaseError:
                continue
            return str(row[0]) if row else None
        return None

    @staticmethod
    @contextlib.contextmanager
    def _tx(conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # SQLite rolls back by itself on some errors (SQLITE_FULL inside a statement): a
            # ROLLBACK then fails and would hide the error that matters.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Several reads that see one state of the index (one read transaction).

        Inside a transaction already (a sync's own reads), the block simply runs in it.
        """
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a write transaction that also bumps ``meta.generation``; all or nothing."""
        with self._tx(self.conn):
            yield self.conn
            self.conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )

    def close(self) -> None:
        """Close the connection and let go of this generation (it may be deleted now)."""
        self.conn.close()
        if self._readers >= 0:
            os.close(self._readers)
            self._readers = -1

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

    def put_vectors(
        self, conn: sqlite3.Connection, vectors: dict[str, npt.NDArray[np.float32]]
    ) -> None:
        """Store ``vectors`` (embed hash -> vector) inside the caller's transaction.

        A hash already stored keeps its vector (equal hashes are equal texts). Records the
        vectors' dimension in ``meta.dim``. The same method, with the same contract, is
        :meth:`PostgresStore.put_vectors <pinakes_core.index.pgstore.PostgresStore.put_vectors>`,
        so code above the store writes vectors through it on either backend (issue 38).
        """
        conn.executemany(
            "INSERT INTO vectors(embed_hash, vector) VALUES (?, ?) "
            "ON CONFLICT (embed_hash) DO NOTHING",
            [(h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()],
        )
        if vectors:
            dim = next(iter(vectors.values())).shape[0]
            self.set_meta(conn, "dim", str(dim))

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


class OpenStore:
    """One KB's store, opened on first use and kept open between operations (the KB's handle).

    ``opener`` opens it for reading (:meth:`IndexPlace.open <pinakes_core.index.place.IndexPlace.open>`
    without ``create``), raising :class:`~pinakes_core.errors.IndexMissingError` when the KB was
    never synced. :meth:`replaced` tells when another process swapped a rebuilt generation in;
    the holder then closes this one (and everything it loaded from it) before its next operation.
    """

    def __init__(self, opener: Callable[[], Store]) -> None:
        self._opener = opener
        self._store: Store | None = None

    @property
    def is_open(self) -> bool:
        """Whether a store connection is held now."""
        return self._store is not None

    def get(self) -> Store:
        """Return the open store, opening it first if needed.

        Raises:
            IndexMissingError: if the KB was never synced.
        """
        if self._store is None:
            self._store = self._opener()
        return self._store

    def replaced(self) -> bool:
        """Whether the store held has been replaced by another generation (a rebuild)."""
        return self._store is not None and self._store.replaced()

    def close(self) -> None:
        """Close the store connection, if one is held (the next :meth:`get` reopens it)."""
        if self._store is not None:
            self._store.close()
        self._store = None


def lexical_paths(root: Path) -> tuple[Path, Path]:
    """The folder of the KB's tantivy BM25 index and its stamp (here: no tantivy import)."""
    folder = store_dir(root)
    return folder / LEXICAL_DIR, folder / LEXICAL_STAMP


def read_stamp(path: Path) -> dict[str, Any] | None:
    """The JSON stamp of an index kept beside the store (vector snapshot, ANN, BM25).

    ``None`` when it is missing or unreadable: the index is then rebuilt.
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_stamp(path: Path, stamp: dict[str, Any]) -> None:
    """Write an index's stamp atomically (a temp file renamed over it)."""
    replace_file(path, json.dumps(stamp).encode("utf-8"))


def chunk_count(conn: Any) -> int:
    """The number of chunks, read from the row count FTS5 keeps for its own BM25 IDF.

    That count is the first varint of the FTS index's "averages" record, so reading it costs
    nothing at any size, where ``COUNT(*)`` reads the whole chunks table (~45 ms at 1M chunks,
    per query; issue 14). Falls back to ``COUNT(*)`` if the record is missing or unreadable.
    A connection with a ``chunk_count`` of its own (PostgreSQL's, which keeps the count in
    ``meta`` at every write) answers itself.
    """
    own = getattr(conn, "chunk_count", None)
    if own is not None:
        return int(own())
    row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
    if row is not None and isinstance(row[0], bytes):
        value = 0
        for i, byte in enumerate(row[0][:9]):  # SQLite varint: 7 bits a byte, 8 in the 9th
            if i == 8:
                return (value << 8) | byte
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                return value
    return int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the quota) is full: SQLite's ``SQLITE_FULL`` or ENOSPC."""
    if isinstance(exc, sqlite3.OperationalError):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or (
            "disk is full" in str(exc)
        )
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def writable(folder: Path, *files: Path) -> bool:
    """Whether this process may create files in ``folder`` and write ``files`` that exist.

    Asks the OS (permissions, read-only mounts), so it holds for root without
    ``CAP_DAC_OVERRIDE`` too.
    """
    return os.access(folder, os.W_OK | os.X_OK) and all(
        os.access(f, os.W_OK) for f in files if os.path.lexists(f)
    )


def _read_only_mode(path: Path) -> str:
    """The SQLite open mode for a store this process may not write.

    A WAL database is read through its ``-shm``; where none is there to share (nobody has the
    store open), plain ``ro`` would create ``-shm`` and ``-wal`` files (or fail, in a read-only
    folder), so the file is read as immutable: as it was last checkpointed.
    """
    shm = Path(f"{path}-shm")
    return "ro" if os.access(shm, os.R_OK | os.W_OK) else "ro&immutable=1"


def _connect(path: Path, *, create: bool, read_only: bool = False) -> sqlite3.Connection:
    mode = "rwc" if create else "rw"  # a reader never creates an empty database by accident
    if read_only:
        mode = _read_only_mode(path)
    conn = sqlite3.connect(
        f"file:{path}?mode={mode}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=30.0,
    )
    conn.row_factory = sqlite3.Row
    if read_only:
        conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
        return conn
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # SQLite's default page cache is 2 MiB. A BM25 query at 1M chunks reads each scored row's
    # size record and the query words' doclists: pages that recur from query to query, which a
    # 2 MiB cache re-reads from the OS each time (BM25 channel ~12 % slower at 1M chunks;
    # docs/scaling.md). Pages are allocated as read: a small KB never holds more than it is.
    conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
    return conn


def _generation_name(pointer: Path) -> str:
    """The file name the ``index.db`` symlink points at (``index.db`` itself for a plain file)."""
    try:
        return os.readlink(pointer)
    except OSError:
        if pointer.is_file():
            return pointer.name  # a store from before generations (schema 2): read its version
        raise FileNotFoundError(pointer) from None


def _lock_readers(database: Path, operation: int, *, create: bool = True) -> int:
    """Open ``<database stem>.readers`` and ``flock`` it; returns the descriptor.

    Without ``create`` (a read-only store folder) the file is opened for reading if it is
    there (``flock`` needs no write access), and ``-1`` is returned if it is not.

    Raises:
        BlockingIOError: with ``LOCK_NB`` when the lock is held.
    """
    path = database.with_suffix(".readers")
    if not create:
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except OSError:
            return -1
    else:
        fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, operation)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def collect_garbage(store_dir: Path) -> list[str]:
    """Delete the files of generations that are not current and that nobody holds.

    Safe to call from any process at any time: a generation is deleted only under the
    exclusive lock of its readers file, and only after checking, under that lock, that it has
    not become current meanwhile. A store from before generations (a plain ``index.db``) is
    left alone. Returns the names of the generations deleted.
    """
    pointer = store_dir / DB_FILE
    if not pointer.is_symlink():
        return []
    removed = []
    bases = {m[1] for p in store_dir.iterdir() if (m := _GENERATION_FILE.match(p.name))}
    for base in sorted(bases):
        entry = store_dir / f"{base}.db"
        try:
            if _generation_name(pointer) == entry.name:
                continue
            fd = _lock_readers(entry, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (OSError, FileNotFoundError):
            continue
        try:
            if _generation_name(pointer) == entry.name:
                continue
            for suffix in _SUFFIXES:
                Path(f"{entry}{suffix}").unlink(missing_ok=True)
            entry.with_suffix(".readers").unlink(missing_ok=True)
            removed.append(entry.name)
        except OSError as exc:
            log.warning("Pinakes: could not delete the old store %s (%s).", entry, exc)
        finally:
            os.close(fd)
    # The temp pointer link of a publish killed before its rename: its pid is gone. A link is
    # removed, never what it names.
    for leftover in store_dir.glob(f".{DB_FILE}.*.link"):
        pid = leftover.name.split(".")[-2]
        if leftover.is_symlink() and pid.isdigit() and not _alive(int(pid)):
            leftover.unlink(missing_ok=True)
    # The WAL and shared memory of a pre-generation store (schema 2) that a rebuild replaced.
    for suffix in ("-wal", "-shm"):
        Path(f"{pointer}{suffix}").unlink(missing_ok=True)
    if removed:
        log.info("Pinakes: deleted old store generation(s) %s.", ", ".join(removed))
    return removed
