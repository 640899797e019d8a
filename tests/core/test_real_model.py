"""Tests with the real offline embedding model: semantics and crash recovery (DESIGN §4, §13)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SMALL_KB, FakeHashEmbedder, db, make_kb
from pinakes_core import KB

N_DOCS = 60
SECTIONS = 12


@pytest.mark.model
def test_real_model_sync_and_semantic_search(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", SMALL_KB)
    with KB.open(root) as kb:
        report = kb.sync()
        assert len(report.added) == len(SMALL_KB)
        assert kb.status().dim == 384
        # No shared content word with the raft text: only the dense channel can find it.
        hits = kb.search("how is a coordinator chosen among servers?", channels=["dense"]).hits
        assert hits[0].path in {"raft.md", "notes/paxos.md"}
        hits = kb.search("reverting a broken release", channels=["dense"]).hits
        assert hits[0].path == "runbooks/deploy.md"
        hits = kb.search("plants need sunlight", channels=["dense"]).hits
        assert hits[0].path == "notes/gardening.txt"
        assert all(h.score > 0 for h in hits)
        assert kb.sync().chunks_embedded == 0


def _corpus() -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {}
    for d in range(N_DOCS):
        parts = [f"# Document {d}\n"]
        for s in range(SECTIONS):
            parts.append(
                f"## Section {s}\n\nDocument {d} section {s} discusses topic {d * SECTIONS + s} "
                f"and the weather in city number {s}.\n"
            )
        files[f"docs/doc{d:02}.md"] = "\n".join(parts)
    return files


def _count_documents(path: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def _per_doc(root: Path) -> dict[str, list[tuple[int, str, int, int]]]:
    conn = db(root)
    try:
        out: dict[str, list[tuple[int, str, int, int]]] = {}
        for r in conn.execute(
            "SELECT d.path, c.ordinal, c.embed_hash, c.start_line, c.end_line "
            "FROM chunks c JOIN documents d USING (doc_id) ORDER BY d.path, c.ordinal"
        ):
            out.setdefault(r[0], []).append((r[1], r[2], r[3], r[4]))
        return out
    finally:
        conn.close()


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.integration
def test_sigkill_mid_sync_is_repaired_by_the_next_sync(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", _corpus())
    store = root / ".pinakes" / "index.db"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pinakes_core import KB; KB.open(sys.argv[1]).sync()",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen = 0
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and child.poll() is None:
            seen = _count_documents(store)
            if 0 < seen < N_DOCS:
                os.kill(child.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
    finally:
        if child.poll() is None and seen == 0:
            child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL, (
        f"the sync was not killed mid-way (rc={child.returncode}, documents={seen}): "
        f"{child.stderr.read().decode()[-2000:] if child.stderr else ''}"
    )
    child.stderr.close()
    killed_docs = _count_documents(store)
    assert 0 < killed_docs < N_DOCS
    assert (root / ".pinakes" / "sync.lock").exists()  # left behind by the dead process

    with KB.open(root) as kb:
        report = kb.sync()  # takes over the stale lock
        total = sum(1 for _ in db(root).execute("SELECT DISTINCT embed_hash FROM chunks"))
        assert report.chunks_embedded < total  # the killed sync's work was kept
        assert len(report.added) + report.unchanged + len(report.changed) == N_DOCS
        assert kb.search("topic 700 weather", k=3).hits

    conn = db(root)
    try:
        paths = [r[0] for r in conn.execute("SELECT path FROM documents")]
        assert sorted(paths) == sorted(set(paths)) and len(paths) == N_DOCS
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0] == chunks
        assert (
            conn.execute(
                "SELECT COUNT(*) FROM chunks c LEFT JOIN vectors v USING (embed_hash) "
                "WHERE v.embed_hash IS NULL"
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute(
                "SELECT COUNT(*) FROM documents d WHERE chunk_count != "
                "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.doc_id)"
            ).fetchone()[0]
            == 0
        )
        dims = {len(v) for (v,) in conn.execute("SELECT vector FROM vectors")}
        assert dims == {384 * 4}
    finally:
        conn.close()
    assert not list((root / "docs").glob(".*.tmp"))  # no half-written sidecar temp files

    # A fresh rebuild of a copy chunks identically (chunking does not depend on the model).
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns(".pinakes"))
    with KB.open(fresh, embedder=FakeHashEmbedder()) as other:
        other.sync()
    assert _per_doc(fresh) == _per_doc(root)
    assert sum(len(v) for v in _per_doc(root).values()) == chunks
