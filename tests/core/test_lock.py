"""One sync at a time, through an OS lock that dies with its holder (DESIGN §4, §13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pinakes_core import KB, LockError

# A process that takes the sync lock the way Pinakes does, writes its pid, and sleeps.
HOLDER = """
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
if sys.argv[2] == "with-pid":
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": "h", "started": 0}).encode(), 0)
print("locked", flush=True)
time.sleep(120)
"""


def _hold(kb: KB, mode: str = "with-pid") -> subprocess.Popen[str]:
    lock = kb.root / ".pinakes" / "sync.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), mode], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_live_lock_holder_blocks_sync_and_its_exit_frees_the_lock(kb: KB) -> None:
    holder = _hold(kb)
    try:
        with pytest.raises(LockError) as info:
            kb.sync()
        assert f"pid {holder.pid}" in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    # Killed with the lock held: the kernel released it, nothing is stale.
    assert len(kb.sync().added) == 4


def test_a_holder_that_has_not_written_its_pid_yet_still_holds_the_lock(kb: KB) -> None:
    holder = _hold(kb, mode="no-pid")
    try:
        with pytest.raises(LockError) as info:
            kb.sync()
        assert "has not written its pid yet" in str(info.value)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    "content", ["", "not json", '{"pid": "x"}', "[]", json.dumps({"pid": 1, "host": "elsewhere"})]
)
def test_a_lock_file_nobody_holds_never_blocks(kb: KB, content: str) -> None:
    lock = kb.root / ".pinakes" / "sync.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(content, encoding="utf-8")
    assert len(kb.sync().added) == 4


def test_lock_file_says_who_holds_it_while_a_sync_runs(kb: KB) -> None:
    seen: list[dict[str, object]] = []

    def progress(stage: str, done: int, total: int) -> None:
        if not seen:
            seen.append(json.loads((kb.root / ".pinakes" / "sync.lock").read_text()))

    kb.sync(progress=progress)
    assert seen and seen[0]["pid"] == os.getpid()
    assert abs(float(seen[0]["started"]) - time.time()) < 600  # type: ignore[arg-type]
    # Released: the information is cleared, the file stays (it is the lock's identity).
    assert (kb.root / ".pinakes" / "sync.lock").read_text() == ""


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
    assert len(kb.sync().added) == 4
