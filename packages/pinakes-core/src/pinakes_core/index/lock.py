"""The sync lock: one sync at a time per KB (DESIGN §4, §13).

The lock is an OS lock (``flock``) on ``.pinakes/sync.lock``, so it is taken atomically and the
kernel releases it when its holder exits, however it exits: a stale lock cannot exist and is
never "taken over". The file keeps the holder's pid, host and start time as information only,
for the message another sync prints. The file itself is never deleted: a process waiting on a
deleted lock file would lock a file nobody else sees.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from pinakes_core.derived import open_nofollow
from pinakes_core.errors import LockError, PinakesError

__all__ = ["sync_lock", "sync_running"]

LOCK_FILE = "sync.lock"


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (for other pid files: ledger, hooks)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(fd: int) -> str:
    """Who holds the lock, from the file's information (best effort)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(info['pid'])} on {info['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its pid yet"


@contextlib.contextmanager
def sync_lock(store_dir: Path) -> Iterator[None]:
    """Hold ``<store_dir>/sync.lock`` for the duration of the block.

    Raises:
        LockError: if another process holds the lock.
        PinakesError: if ``store_dir`` exists and is not a folder.
    """
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise PinakesError(
            f"{store_dir} is not a folder; Pinakes keeps the KB's index there.",
            "Move that file away and sync again.",
        ) from None
    path = store_dir / LOCK_FILE
    # Never through a link: a committed `sync.lock` link would truncate the file it names.
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockError(
                f"Another sync ({_holder(fd)}) holds {path}.",
                "Wait for it to finish; the lock is released when that process exits.",
            ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def sync_running(store_dir: Path) -> bool:
    """Return whether some process holds the sync lock of ``store_dir`` right now.

    Used to explain an empty or thin result while a (first) sync is still indexing. It asks
    the OS lock itself (a shared, non-blocking try), never the pid in the file.
    """
    try:
        fd = open_nofollow(store_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
