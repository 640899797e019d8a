"""What a KB's sync does around :func:`~pinakes_core.index.sync.run_sync`.

Before it, a ``.pinakes/`` this process cannot write is refused in one sentence
(:func:`check_writable`). During it (:func:`sync_folder`), under the sync's lock once the
documents are written, the plugins' ``after_sync`` runs and the approximate dense index and the
tantivy BM25 index are brought up to date; a full disk stops it with a plain error. After it
(:func:`snapshot_vectors`), the vector snapshot of the final store generation is left for the
next process to map. :func:`sync_kb` is the whole of it, as :meth:`KB.sync
<pinakes_core.kb.KB.sync>` runs it: the sync, then the search side's work on the new store (the
confidence self-calibration, given as a callback: this room cannot import search), then the
snapshot, timed in parts.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes_core.config import Config
from pinakes_core.errors import IndexWriteError
from pinakes_core.index.store import OpenStore, Store, disk_full, writable
from pinakes_core.models import SyncReport

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Embedder, LazyEmbedder
    from pinakes_core.index.sync import ProgressFn

__all__ = ["AfterSync", "check_writable", "snapshot_vectors", "sync_folder", "sync_kb"]

#: Called under the sync's lock once the documents are written: ``(store, changed, removed,
#: relinked)`` (the plugins' ``after_sync``).
AfterSync = Callable[[Store, list[str], list[str], list[str]], None]


def sync_kb(
    root: Path,
    config: Config,
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
        store: the KB's store handle.
        embedder: the KB's embedder (loaded only when a chunk needs embedding).
        rebuild: rebuild the store from scratch.
        progress: called with ``(stage, done, total)``.
        after_sync: the plugins' work on the written store, under the sync's lock.
        after_index: the search side's work on the new store, given the number of documents
            added, changed or removed; returns warnings for the report (it never fails a sync).

    Raises:
        IndexWriteError: if ``.pinakes/`` is read-only or the disk filled up.
    """
    started = time.perf_counter()
    check_writable(root)
    store.close()
    report = sync_folder(
        root,
        config,
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
    snapshot_vectors(root, store.get())
    parts["vector snapshot"] = round(time.perf_counter() - t0, 3)
    seconds = round(time.perf_counter() - started, 3)
    return report.model_copy(update={"seconds": seconds, "parts_s": parts})


def check_writable(root: Path) -> None:
    """Refuse, in one sentence, to sync into a ``.pinakes/`` this process cannot write.

    Raises:
        IndexWriteError: if the folder (or the KB root, before the first sync) is read-only.
    """
    store_dir = Store.location(root).parent
    folder = store_dir if store_dir.is_dir() else root
    if not writable(folder, *Store.files(root)):
        state = "has an index" if Store.current(root) else "has no current index"
        raise IndexWriteError(
            f"{folder} (or the index in it) is read-only for this user, so the index cannot be written "
            f"(the KB {state}; search and show read it without writing).",
            f"Run `pnk sync` as a user who can write {folder}, or make it writable.",
        )


def sync_folder(
    root: Path,
    config: Config,
    embedder: Callable[[], Embedder],
    *,
    rebuild: bool,
    model_id: str | None,
    progress: ProgressFn | None,
    after_sync: AfterSync,
) -> SyncReport:
    """Run the sync, then (under its lock) ``after_sync`` and the ANN and tantivy indexes.

    Args:
        root: the KB root.
        config: its config.
        embedder: gives the embedding model (loaded only when a chunk needs embedding).
        rebuild: rebuild the store from scratch.
        model_id: the model's id when it is loaded already (else read from the config).
        progress: called with ``(stage, done, total)``.
        after_sync: the plugins' work on the written store (see :data:`AfterSync`).

    Raises:
        IndexWriteError: if the disk filled up (the index is left consistent).
    """
    from pinakes_core.index.dense import update_ann
    from pinakes_core.index.sync import run_sync

    def after(store: Store, changed: list[str], removed: list[str], relinked: list[str]) -> None:
        after_sync(store, changed, removed, relinked)
        # Last, under the sync's lock: the chunks are final for this sync.
        update_ann(root, store, config.scale, changed=bool(changed or removed))
        # Past the threshold it is kept up to date, below it deleted (tantivy is
        # imported only past it).
        from pinakes_core.index.lexical import update_lexical

        update_lexical(root, store, config.scale, changed=changed, removed=removed)

    try:
        return run_sync(
            root,
            config,
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


def snapshot_vectors(root: Path, store: Store) -> None:
    """Leave the vector snapshot of the store's final generation for the next process to map.

    A no-change sync finds it there already; the model is never loaded for this.
    """
    from pinakes_core.index.dense import load_vectors

    if store.get_meta("dim"):
        load_vectors(root, store, int(store.get_meta("dim") or 0))
