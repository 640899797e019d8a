"""One sync at a time; a stale lock is taken over (DESIGN §4, §13)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinakes_core import KB, LockError


def _write_lock(kb: KB, pid: int, host: str | None = None) -> Path:
    lock = kb.root / ".pinakes" / "sync.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(
        json.dumps({"pid": pid, "host": host or socket.gethostname(), "started": time.time()}),
        encoding="utf-8",
    )
    return lock


def test_live_lock_holder_blocks_sync(kb: KB) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock = _write_lock(kb, sleeper.pid)
        with pytest.raises(LockError) as info:
            kb.sync()
        assert str(sleeper.pid) in str(info.value)
        assert lock.exists()  # the live holder's lock is left alone
        assert json.loads(lock.read_text())["pid"] == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()
    # Its holder is now dead: the lock is stale and the next sync takes it over.
    report = kb.sync()
    assert len(report.added) == 4
    assert not lock.exists()


def test_dead_pid_lock_is_taken_over(kb: KB) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = _write_lock(kb, dead.pid)
    report = kb.sync()
    assert len(report.added) == 4
    assert not lock.exists()


@pytest.mark.parametrize("content", ["", "not json", '{"pid": "x"}', "[]"])
def test_unreadable_lock_is_taken_over(kb: KB, content: str) -> None:
    lock = kb.root / ".pinakes" / "sync.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(content, encoding="utf-8")
    assert len(kb.sync().added) == 4
    assert not lock.exists()


def test_lock_from_another_host_is_respected(kb: KB) -> None:
    _write_lock(kb, 1, host="some-other-host.invalid")
    with pytest.raises(LockError):
        kb.sync()


def test_lock_is_released_when_sync_fails(kb: KB) -> None:
    class Boom(RuntimeError):
        pass

    class ExplodingEmbedder:
        model_id = "fake-exploding"
        dim = 8

        def embed_documents(self, texts, progress=None):
            raise Boom

        def embed_query(self, text):
            raise Boom

    with KB.open(kb.root, embedder=ExplodingEmbedder()) as broken, pytest.raises(Boom):
        broken.sync()
    assert not (kb.root / ".pinakes" / "sync.lock").exists()
    assert len(kb.sync().added) == 4
