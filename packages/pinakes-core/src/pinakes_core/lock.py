"""The sync lock: one sync at a time per KB, with stale-lock takeover (DESIGN §4, §13)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from pinakes_core.errors import LockError

__all__ = ["sync_lock", "sync_running"]

LOCK_FILE = "sync.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def sync_lock(store_dir: Path) -> Iterator[None]:
    """Hold ``<store_dir>/sync.lock`` for the duration of the block.

    The lock file records pid, host and start time. A lock left by a dead process on this host
    (or an unreadable one) is taken over.

    Raises:
        LockError: if a live process holds the lock.
    """
    store_dir.mkdir(parents=True, exist_ok=True)
    path = store_dir / LOCK_FILE
    payload = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()})
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = json.loads(path.read_text())
                pid, host = int(holder["pid"]), str(holder["host"])
            except (OSError, ValueError, KeyError, TypeError):
                pid, host = -1, socket.gethostname()
            if host == socket.gethostname() and (pid <= 0 or not _alive(pid)):
                path.unlink(missing_ok=True)  # stale: its owner is gone
                continue
            raise LockError(
                f"Another sync (pid {pid} on {host}) holds {path}.",
                "Wait for it to finish; delete the file only if that process is really gone.",
            ) from None
        with os.fdopen(fd, "w") as handle:
            handle.write(payload)
        break
    else:
        raise LockError(f"Could not take the sync lock {path}.", "Try again.")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def sync_running(store_dir: Path) -> bool:
    """Return whether a live process on this host holds the sync lock of ``store_dir``.

    Used to explain an empty or thin result while a (first) sync is still indexing.
    """
    try:
        holder = json.loads((store_dir / LOCK_FILE).read_text())
        pid, host = int(holder["pid"]), str(holder["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return host != socket.gethostname() or (pid > 0 and _alive(pid))
