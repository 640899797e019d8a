"""What a KB's sync does around :func:`~pinakes_core.index.sync.run_sync`.

Before it, an index this process cannot write is refused in one sentence
(:meth:`IndexPlace.check_writable <pinakes_core.index.backend.IndexPlace.check_writable>`).
During it (:func:`sync_folder`), under the sync's lock once the documents are written, the
plugins' ``after_sync`` runs and the engine's own search indexes are brought up to date
(:meth:`IndexPlace.refresh_indexes <pinakes_core.index.backend.IndexPlace.refresh_indexes>`:
SQLite's usearch and tantivy files, PostgreSQL's HNSW index); a full disk stops it with a
plain error. After it the place settles what the next reader maps (SQLite's vector snapshot).
:func:`sync_kb` is the whole of it, as :meth:`KB.sync <pinakes_core.kb.KB.sync>` runs it: the
sync, then the search side's work on the new store (the confidence self-calibration, given as
a callback: this room cannot import search), then the settling, timed in parts.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes_core.config import Config
from pinakes_core.errors import IndexWriteError
from pinakes_core.index.store import OpenStore, Store, disk_full
from pinakes_core.models import SyncReport

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Embedder, LazyEmbedder
    from pinakes_core.index.place import IndexPlace
    from pinakes_core.index.sync import ProgressFn

__all__ = ["AfterSync", "sync_folder", "sync_kb"]

#: Called under the sync's lock once the documents are written: ``(store, changed, removed,
#: relinked)`` (the plugins' ``after_sync``).
AfterSync = Callable[[Store, list[str], list[str], list[str]], None]


def sync_kb(
    root: Path,
    config: Config,
    place: IndexPlace,
    store: OpenStore,
    embedder: LazyEmbedder,
    *,
    rebuild: bool,
    progress: ProgressFn | None,
    after_sync: AfterSync,
    after_index: Callable[[int], list[str]],
) -> SyncReport:
    """A KB's whole sync: the files into the store, then the work on the new store, timed.

    The KB's store connection is closed first (a rebuild swaps the file under it) and reopened
    after. ``seconds`` in the report is the whole wall time; ``parts_s`` its parts ("index",
    "self-calibration", "vector snapshot"; issue 35).

    Args:
        root: the KB root.
        config: its config.
        place: where its index lives (:func:`pinakes_core.index.backend.index_place`).
        store: the KB's store handle.
        embedder: the KB's embedder (loaded only when a chunk needs embedding).
        rebuild: rebuild the store from scratch.
        progress: called with ``(stage, done, total)``.
        after_sync: the plugins' work on the written store, under the sync's lock.
        after_index: the search side's work on the new store, given the number of documents
            added, changed or removed; returns warnings for the report (it never fails a sync).

    Raises:
        IndexWriteError: if ``.pinakes/`` is read-only, the disk filled up, or the database
            server only reads (a replica).
    """
    started = time.perf_counter()
    place.check_writable()
    store.close()
    report = sync_folder(
        root,
        config,
        place,
        embedder.get,
        rebuild=rebuild,
        model_id=embedder.loaded.model_id if embedder.loaded is not None else None,
        progress=progress,
        after_sync=after_sync,
    )
    parts = {"index": report.seconds}
    t0 = time.perf_counter()
    warnings = after_index(len(report.added) + len(report.changed) + len(report.removed))
    if warnings:
        report = report.model_copy(update={"warnings": [*report.warnings, *warnings]})
    parts["self-calibration"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    place.settle(store.get())
    parts["vector snapshot"] = round(time.perf_counter() - t0, 3)
    seconds = round(time.perf_counter() - started, 3)
    return report.model_copy(update={"seconds": seconds, "parts_s": parts})


def sync_folder(
    root: Path,
    config: Config,
    place: IndexPlace,
    embedder: Callable[[], Embedder],
    *,
    rebuild: bool,
    model_id: str | None,
    progress: ProgressFn | None,
    after_sync: AfterSync,
) -> SyncReport:
    """Run the sync, then (under its lock) ``after_sync`` and the engine's search indexes.

    Args:
        root: the KB root.
        config: its config.
        place: where its index lives.
        embedder: gives the embedding model (loaded only when a chunk needs embedding).
        rebuild: rebuild the store from scratch.
        model_id: the model's id when it is loaded already (else read from the config).
        progress: called with ``(stage, done, total)``.
        after_sync: the plugins' work on the written store (see :data:`AfterSync`).

    Raises:
        IndexWriteError: if the disk filled up (the index is left consistent).
    """
    from pinakes_core.index.sync import run_sync

    def after(store: Store, changed: list[str], removed: list[str], relinked: list[str]) -> None:
        after_sync(store, changed, removed, relinked)
        # Last, under the sync's lock: the chunks are final for this sync.
        place.refresh_indexes(store, config.scale, changed, removed)

    try:
        return run_sync(
            root,
            config,
            place,
            embedder,
            rebuild=rebuild,
            model_id=model_id,
            progress=progress,
            after_write=after,
        )
    except (sqlite3.OperationalError, OSError) as exc:
        if not disk_full(exc):
            raise
        store_dir = Store.location(root).parent
        raise IndexWriteError(
            f"The disk holding {store_dir} is full, so the sync stopped; the index is "
            "unchanged but for documents it had finished (each is all old or all new), "
            "and search keeps working.",
            "Free some space and run `pnk sync` again; it goes on where this one stopped.",
        ) from None
