"""Debounced file watching that keeps a KB's index in step with its files (``pnk watch``, MCP).

File events come from ``watchfiles`` (Rust ``notify``: inotify, FSEvents,
ReadDirectoryChangesW), batched over a debounce window; dot-folders (``.git``) and the store
(``.pinakes``) are ignored. Each batch runs one incremental sync. Changes made while nothing was
watching are picked up by a catch-up sync on the first (empty) yield: by then the watch is
registered, so a file written during the catch-up either lands in it or raises an event.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pinakes_core.store import STORE_DIR

__all__ = ["DEFAULT_DEBOUNCE_MS", "change_filter", "watch"]

#: quiet time after the last file event before a sync starts; editors save in bursts.
DEFAULT_DEBOUNCE_MS = 1000


def change_filter() -> Any:
    """Return the ``watchfiles`` filter: its defaults (``.git``, caches …) plus the store."""
    from watchfiles import DefaultFilter

    return DefaultFilter(ignore_dirs=(*DefaultFilter.ignore_dirs, STORE_DIR))


def watch(
    root: Path,
    sync: Callable[[int], None],
    *,
    debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    stop: threading.Event | None = None,
) -> None:
    """Call ``sync(events)`` once at start (``events`` 0) and after every burst of changes.

    Blocks until ``stop`` is set (checked every 200 ms) or the process is interrupted.
    """
    from watchfiles import watch as watch_files

    first = True
    for changes in watch_files(
        root,
        watch_filter=change_filter(),
        debounce=debounce_ms,
        stop_event=stop,
        rust_timeout=200,
        yield_on_timeout=True,
        raise_interrupt=False,
    ):
        if not changes and not first:
            continue
        first = False
        sync(len(changes))
