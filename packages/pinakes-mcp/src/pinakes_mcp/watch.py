"""Watching (on by default): re-sync a served KB when its files change (debounced, one at a time).

File events come from ``watchfiles`` with core's filter (:mod:`pinakes_core.index.watching`, which
``pnk watch`` uses too), batched over a debounce window. Each batch runs one incremental ``sync`` in a worker thread
through a second ``KB`` object that shares the served KB's loaded model: the served KB keeps
answering during the sync (SQLite WAL) and picks the result up by the store generation, exactly
as it does for a ``pnk sync`` run by another process. A process-wide lock keeps syncs from ever
overlapping, so a burst of edits never starts a second sync while one is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import anyio.to_thread
from watchfiles import awatch

from pinakes_core import PinakesError, SyncReport
from pinakes_core.index.watching import (
    DEFAULT_DEBOUNCE_MS,
    change_filter,
    folders_changed,
    watched_folders,
)
from pinakes_mcp.served import Registry, ServedKB

__all__ = ["DEFAULT_DEBOUNCE_MS", "Watcher"]

log = logging.getLogger(__name__)


class Watcher:
    """Watches every served KB and runs an incremental sync after each burst of changes.

    Attributes:
        syncs: the number of syncs finished (whatever their outcome), for tests and logs.
    """

    def __init__(self, registry: Registry, *, debounce_ms: int = DEFAULT_DEBOUNCE_MS) -> None:
        self._registry = registry
        self._debounce_ms = debounce_ms
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.syncs = 0

    async def start(self) -> None:
        """Start one watching task per served KB (each first catches up with an initial sync)."""
        for served in self._registry:
            self._tasks.append(
                asyncio.create_task(self._watch(served), name=f"watch:{served.name}")
            )

    async def stop(self) -> None:
        """Stop watching; a sync already running is allowed to finish."""
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _watch(self, served: ServedKB) -> None:
        # The catch-up sync runs on the first (empty) yield, and each folder is watched on
        # its own, made again when folders come or go (see pinakes_core.index.watching).
        while not self._stop.is_set():
            folders = await anyio.to_thread.run_sync(watched_folders, served.root)
            known = {str(folder) for folder in folders}
            first = True
            async for changes in awatch(
                *folders,
                watch_filter=change_filter(),
                debounce=self._debounce_ms,
                stop_event=self._stop,
                rust_timeout=200,
                yield_on_timeout=True,
                recursive=False,
            ):
                if not changes and not first:
                    continue
                first = False
                log.debug("KB %r: %d file event(s)", served.name, len(changes))
                await self._sync_in_thread(served)
                if folders_changed(changes, known):
                    break
            else:
                return

    async def _sync_in_thread(self, served: ServedKB) -> None:
        try:
            await anyio.to_thread.run_sync(self.sync, served)
        except Exception:  # a bug must not end the watching: log it and wait for the next change
            log.exception("KB %r: sync after file changes crashed", served.name)

    def sync(self, served: ServedKB) -> SyncReport | None:
        """Run one incremental sync of ``served`` (blocking; never two at once).

        Returns:
            The report, or ``None`` when the sync failed (logged; the next change retries).
        """
        try:
            report = self._registry.sync(served)
        except PinakesError as exc:
            log.warning("KB %r: sync after file changes failed: %s", served.name, exc)
            return None
        finally:
            self.syncs += 1
        if report.added or report.changed or report.removed or report.renamed:
            log.info(
                "KB %r re-synced: %d added, %d changed, %d removed, %d renamed",
                served.name,
                len(report.added),
                len(report.changed),
                len(report.removed),
                len(report.renamed),
            )
        return report
