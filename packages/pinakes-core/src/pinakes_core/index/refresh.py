"""What a KB's sync does around :func:`~pinakes_core.index.sync.run_sync`.

Before it, a ``.pinakes/`` this process cannot write is refused in one sentence
(:func:`check_writable`). During it (:func:`sync_folder`), under the sync's lock once the
documents are written, the plugins' ``after_sync`` runs and the approximate dense index and the
tantivy BM25 index are brought up to date; a full disk stops it with a plain error. After it
(:func:`snapshot_vectors`), the vector snapshot of the final store generation is left for the
next process to map.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes_core.config import Config
from pinakes_core.errors import IndexWriteError
from pinakes_core.index.store import Store, disk_full, writable
from pinakes_core.models import SyncReport

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Embedder
    from pinakes_core.index.sync import ProgressFn

__all__ = ["AfterSync", "check_writable", "snapshot_vectors", "sync_folder"]

#: Called under the sync's lock once the documents are written: ``(store, changed, removed,
#: relinked)`` (the plugins' ``after_sync``).
AfterSync = Callable[[Store, list[str], list[str], list[str]], None]


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
