"""Debounced file watching that keeps a KB's index in step with its files (``pnk watch``, MCP).

File events come from ``watchfiles`` (Rust ``notify``: inotify, FSEvents,
ReadDirectoryChangesW), batched over a debounce window; dot-folders (``.git``) and the store
(``.pinakes``) are ignored. Each batch runs one incremental sync. Changes made while nothing was
watching are picked up by a catch-up sync on the first (empty) yield: by then the watch is
registered, so a file written during the catch-up either lands in it or raises an event.

Each folder of the KB is watched on its own, not recursively: ``notify``'s recursive watch
follows symlinks, so a link to ``/`` or to a home folder made it walk (and try to watch) the
whole tree behind it, and fail on the first folder it may not read. The folders are the ones
sync reads (:func:`watched_folders`); when a batch adds a folder or removes one, the watch is
made again, and its first yield catches up with anything written in between.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pinakes_core.derived import STORE_DIR
from pinakes_core.read.documents import MAX_DEPTH, never_indexed, utf8_name

__all__ = ["DEFAULT_DEBOUNCE_MS", "change_filter", "folders_changed", "watch", "watched_folders"]

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

    while True:
        folders = watched_folders(root)
        known = {str(folder) for folder in folders}
        first = True
        for changes in watch_files(
            *folders,
            watch_filter=change_filter(),
            debounce=debounce_ms,
            stop_event=stop,
            rust_timeout=200,
            yield_on_timeout=True,
            raise_interrupt=False,
            recursive=False,
        ):
            if not changes and not first:
                continue
            first = False
            sync(len(changes))
            if folders_changed(changes, known):
                break  # watch the new set of folders; its first yield catches up
        else:
            return  # stopped or interrupted


def watched_folders(root: Path) -> list[Path]:
    """``root`` and every folder below it that sync reads, each to be watched on its own.

    Symlinks are not followed (a folder a link leads to inside the KB is watched where it
    is), folders sync never indexes (``.git``, ``.pinakes``, ``node_modules``) are left out,
    and so are names that are not UTF-8 and folders deeper than sync's
    :data:`~pinakes_core.read.documents.MAX_DEPTH`.
    """
    found: list[Path] = []
    stack = [(root, 0)]
    while stack:  # iterative: a 1,000-deep tower must not exhaust the recursion limit
        folder, depth = stack.pop()
        found.append(folder)
        if depth >= MAX_DEPTH:
            continue
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if never_indexed(entry.name) or not utf8_name(entry.name):
                        continue
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((Path(entry.path), depth + 1))
        except OSError:  # gone or unreadable since it was listed: nothing to watch in it
            continue
    return found


def folders_changed(changes: set[tuple[Any, str]], known: set[str]) -> bool:
    """Whether a batch of ``watchfiles`` events added a folder or removed a watched one."""
    from watchfiles import Change

    for change, path in changes:
        if change == Change.deleted and path in known:
            return True
        if change == Change.added and os.path.isdir(path) and not os.path.islink(path):
            return True
    return False
