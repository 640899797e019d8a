"""Where a KB's index lives: SQLite files in ``.pinakes/`` or a PostgreSQL schema (issue 38).

:func:`index_place` reads ``[store] backend`` once and gives an :class:`IndexPlace`; the KB,
sync and search use what it opens without asking which engine it is (the contract of the
stores themselves is :mod:`pinakes_core.index.backend`). A place says whether an index exists
and is current, opens it, holds the single-writer lock of a sync, and keeps the engine's own
search indexes up to date after one: for SQLite the vector snapshot, usearch and tantivy files
beside the store (:class:`SqlitePlace`); for PostgreSQL the HNSW index inside the database
(:class:`~pinakes_core.index.pgstore.PostgresPlace`), so a server reading it keeps nothing on
local disk.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pinakes_core.derived import UnsafeStoreError
from pinakes_core.errors import IndexMissingError, IndexWriteError, PinakesError
from pinakes_core.index.backend import database_url
from pinakes_core.index.store import Store, writable

if TYPE_CHECKING:
    from pinakes_core.config import Config, ScaleConfig

__all__ = ["IndexPlace", "SqlitePlace", "index_place"]


@runtime_checkable
class IndexPlace(Protocol):
    """Where one KB's index lives (see the module docstring); :func:`index_place` gives it."""

    #: ``"sqlite"`` or ``"postgres"`` (for messages and measurements, never for branching).
    backend: str
    #: Whether other machines read this index (a database server's): a sync from a folder
    #: holding no document then never empties it (:class:`~pinakes_core.errors.EmptyFolderError`).
    shared: bool

    def exists(self) -> bool:
        """Whether an index of the KB exists there (synced at least once)."""
        ...

    def current(self) -> bool:
        """Whether that index exists and has this version's schema."""
        ...

    def open(self, *, create: bool = True, rebuild: bool = False) -> Any:
        """Open the index (a :class:`StoreLifecycle`); ``create`` and ``rebuild`` only from a sync.

        Raises:
            IndexMissingError: (without ``create``) if there is no current index.
        """
        ...

    def identity(self) -> object | None:
        """What changes when the index is replaced (a rebuild swapped in); ``None`` without one.

        Cheap enough to ask before every tool call of a long-lived server.
        """
        ...

    def size(self) -> int:
        """Bytes the index takes where it lives (0 without one)."""
        ...

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the KB's single-writer lock for a sync.

        Raises:
            LockError: if another sync holds it.
        """
        ...

    def check_writable(self) -> None:
        """Refuse, in one sentence, an index this process cannot write.

        Raises:
            IndexWriteError: if it is read-only for this user.
        """
        ...

    def reader(self) -> Any:
        """A read-only connection to the index, for another KB's reads of it (cross-KB links).

        It runs statements in the common dialect (``?`` placeholders), gives rows by position
        and by column name, raises :data:`~pinakes_core.index.backend.DatabaseErrors`, and has
        ``close()``. It shares nothing with a store this process has open.

        Raises:
            IndexMissingError: if there is no index.
        """
        ...

    def refresh_indexes(
        self, store: Any, scale: ScaleConfig, changed: list[str], removed: list[str]
    ) -> None:
        """Bring the engine's own search indexes up to date, under the sync's lock."""
        ...

    def settle(self, store: Any) -> None:
        """After a sync and its calibration: leave what the next reader maps (SQLite's snapshot)."""
        ...

    def close(self) -> None:
        """Let go of what the place keeps open between questions (a connection, if any)."""
        ...


def index_place(root: Path, config: Config) -> IndexPlace:
    """Where the index of the KB at ``root`` lives, by its ``[store] backend``.

    Raises:
        ConfigError: for ``postgres`` without a database URL (:func:`database_url`).
        PinakesError: for ``postgres`` without the ``pinakes-core[postgres]`` extra.
    """
    if config.store.backend == "sqlite":
        return SqlitePlace(root)
    url = database_url(config, root)
    try:
        from pinakes_core.index.pgstore import PostgresPlace
    except ImportError as exc:
        raise PinakesError(
            f"{root}/pinakes.toml: [store] backend = 'postgres' needs the PostgreSQL driver, "
            f"which is not installed ({exc.name or exc}).",
            "Install the extra: uv pip install 'pinakes-core[postgres]' (or set backend = \"sqlite\").",
        ) from None
    return PostgresPlace(url, config.kb.id)


class SqlitePlace:
    """The SQLite index: ``.pinakes/index.db`` and the search indexes kept beside it."""

    backend = "sqlite"
    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root

    def exists(self) -> bool:
        """See :class:`IndexPlace`."""
        return Store.exists(self.root)

    def current(self) -> bool:
        """See :class:`IndexPlace`."""
        return Store.current(self.root)

    def open(self, *, create: bool = True, rebuild: bool = False) -> Store:
        """See :class:`IndexPlace` (:meth:`Store.open <pinakes_core.index.store.Store.open>`)."""
        if not create and not Store.exists(self.root):
            raise IndexMissingError(
                f"{self.root} has no index yet.", f"Run `pnk sync --kb {self.root}`."
            )
        return Store.open(self.root, create=create, rebuild=rebuild)

    def identity(self) -> tuple[int, int] | None:
        """See :class:`IndexPlace`: device and inode of the current generation's file (one ``stat``)."""
        try:
            stat = os.stat(Store.location(self.root))
        except FileNotFoundError:
            return None
        return stat.st_dev, stat.st_ino

    def reader(self) -> sqlite3.Connection:
        """See :class:`IndexPlace`: the current generation's file opened read-only (``mode=ro``)."""
        path = Store.location(self.root)
        if not path.exists():
            raise IndexMissingError(
                f"{self.root} has no index yet.", f"Run `pnk sync --kb {self.root}`."
            )
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=5
        )
        conn.row_factory = sqlite3.Row
        return conn

    def size(self) -> int:
        """See :class:`IndexPlace`: the current generation's files (database, WAL, shared memory)."""
        try:
            return sum(p.stat().st_size for p in Store.files(self.root))
        except (OSError, UnsafeStoreError):
            return 0

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """See :class:`IndexPlace`: ``.pinakes/sync.lock`` (:func:`pinakes_core.index.lock.sync_lock`)."""
        from pinakes_core.derived import store_dir
        from pinakes_core.index.lock import sync_lock

        with sync_lock(store_dir(self.root, create=True)):
            yield

    def check_writable(self) -> None:
        """See :class:`IndexPlace`: the folder ``.pinakes/`` (or the KB root before the first sync)."""
        store_dir = Store.location(self.root).parent
        folder = store_dir if store_dir.is_dir() else self.root
        if not writable(folder, *Store.files(self.root)):
            state = "has an index" if Store.current(self.root) else "has no current index"
            raise IndexWriteError(
                f"{folder} (or the index in it) is read-only for this user, so the index cannot be written "
                f"(the KB {state}; search and show read it without writing).",
                f"Run `pnk sync` as a user who can write {folder}, or make it writable.",
            )

    def refresh_indexes(
        self, store: Any, scale: ScaleConfig, changed: list[str], removed: list[str]
    ) -> None:
        """See :class:`IndexPlace`: the usearch ANN index, and tantivy's past its threshold."""
        from pinakes_core.index.dense import update_ann
        from pinakes_core.index.lexical import update_lexical

        update_ann(self.root, store, scale, changed=bool(changed or removed))
        # Past the threshold it is kept up to date, below it deleted (tantivy is imported
        # only past it).
        update_lexical(self.root, store, scale, changed=changed, removed=removed)

    def settle(self, store: Any) -> None:
        """See :class:`IndexPlace`: the vector snapshot of the final generation, for the next process to map.

        A no-change sync finds it there already; the model is never loaded for this.
        """
        from pinakes_core.index.dense import load_vectors

        if store.get_meta("dim"):
            load_vectors(self.root, store, int(store.get_meta("dim") or 0))

    def close(self) -> None:
        """See :class:`IndexPlace`: nothing is kept open."""
