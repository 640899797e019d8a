"""Issue 34, group 3: sentences instead of tracebacks (read-only index, unreadable folders,
a full disk, a document named ``-rf.md``).

Permissions are tested for real, by the kernel: the commands run in a child process that
cannot override them. Run as a normal user, that is the user; run as root (CI containers,
this VM), the child is root *without* ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH``
(``setpriv --bounding-set``), so mode bits bind it as they bind anyone. The full disk is a real
tmpfs of 3 MB mounted in the child's own mount namespace (``unshare -rm``); where that is not
allowed, the SQLite ``max_page_count`` case below still makes SQLite itself answer
``database or disk is full``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from rel_helpers import HERE, env, sync
from rel_ledger import record

from conftest import FakeHashEmbedder, make_kb, scalar
from pinakes_cli.main import cli
from pinakes_core import KB, IndexWriteError
from pinakes_core.index import store as store_module

NOTES: dict[str, str | bytes] = {
    "a.md": "# Alpha\n\nalpha words about leader election\n",
    "b.md": "# Beta\n\nbeta words about log replication\n",
    "sub/s.md": "# Sub\n\nsubfolder words about snapshots\n",
    "-rf.md": "# Dash\n\na note whose name starts with a dash\n",
}


def _drop_caps() -> list[str] | None:
    """The command prefix that makes a child bound by file permissions, or ``None``."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    return prefix if probe.returncode == 0 else None


DROP = _drop_caps()
needs_permissions = pytest.mark.skipif(
    DROP is None, reason="root here, and setpriv cannot drop CAP_DAC_OVERRIDE"
)


def pnk(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``pnk`` (fake embedder) in a child bound by file permissions."""
    assert DROP is not None
    return subprocess.run(
        [*DROP, sys.executable, str(HERE / "fake_pnk.py"), "--kb", str(root), *args],
        env=env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (store files included) and a hash of its bytes."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _users(tree: dict[str, str]) -> dict[str, str]:
    """The user's files of a :func:`_tree` (the store left out)."""
    return {k: v for k, v in tree.items() if not k.startswith(".pinakes/")}


@contextlib.contextmanager
def _modes(*changes: tuple[Path, int]) -> Iterator[None]:
    """Set the modes given, and restore the old ones afterwards (so tmp_path can be removed)."""
    old = [(path, path.stat().st_mode & 0o7777) for path, _ in changes]
    try:
        for path, mode in changes:
            path.chmod(mode)
        yield
    finally:
        for path, mode in reversed(old):
            path.chmod(mode)


def _one_sentence(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, (result.stdout, result.stderr)
    return result.stderr


# -- a read-only .pinakes/ -------------------------------------------------------------------


@needs_permissions
@pytest.mark.parametrize("what", ["folder", "files"])
def test_read_only_index_answers_search_and_show_and_sync_says_why(
    tmp_path: Path, what: str
) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    sync(root)
    store = root / ".pinakes"
    files = [p for p in store.iterdir() if p.is_file() and not p.is_symlink()]
    changes = [(p, 0o444) for p in files]
    if what == "folder":
        changes.append((store, 0o555))
    before = _tree(root)
    with _modes(*changes):
        found = pnk(root, "search", "leader election", "--format", "json")
        assert found.returncode == 0, found.stderr
        assert "Traceback" not in found.stderr
        assert json.loads(found.stdout)["hits"][0]["path"] == "a.md"
        shown = pnk(root, "show", "a.md", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["path"] == "a.md"
        status = pnk(root, "status", "--json")
        assert status.returncode == 0, status.stderr
        refused = pnk(root, "sync", "--json")
        error = json.loads(refused.stdout)["error"]
        _one_sentence(refused)
        assert error["type"] == "IndexWriteError"
        assert str(store) in error["message"] and "read-only" in error["message"]
        assert "search and show" in error["message"]
        human = _one_sentence(pnk(root, "sync"))
        assert "read-only" in human
    assert _tree(root) == before, "a read-only index was written"
    record("issue 34: read-only .pinakes", tried=5)


@needs_permissions
def test_read_only_kb_root_before_the_first_sync_says_why(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    with _modes((root, 0o555)):
        result = pnk(root, "search", "alpha")
        assert "read-only" in _one_sentence(result)
    assert not (root / ".pinakes").exists()
    record("issue 34: read-only .pinakes", tried=1)


# -- a folder or a file made unreadable after it was indexed ----------------------------------


@needs_permissions
@pytest.mark.parametrize(
    ("target", "mode"),
    [("sub", 0o000), ("sub", 0o644), ("sub", 0o311), ("sub/s.md", 0o000)],
    ids=["folder-000", "folder-no-search", "folder-no-list", "file-000"],
)
def test_unreadable_after_indexing_is_skipped_with_a_sentence_and_kept(
    tmp_path: Path, target: str, mode: int
) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    sidecar = root / "sub" / "s.md.pnk.yaml"
    first = sync(root)
    assert "sub/s.md" in first.added
    os.utime(root / "sub" / "s.md", ns=(1_700_000_000_000_000_000,) * 2)  # changed: read it
    before = _tree(root)
    with _modes((root / target, mode)):
        result = pnk(root, "sync", "--json")
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        reasons = {s["path"]: s["reason"] for s in report["skipped"]}
        assert any("cannot be read" in reasons.get(p, "") for p in ("sub", "sub/s.md")), reasons
        assert report["removed"] == [], "a document that cannot be read is not gone"
        again = pnk(root, "sync", "--json")
        assert again.returncode == 0 and json.loads(again.stdout)["removed"] == []
    assert scalar(root, "SELECT COUNT(*) FROM documents WHERE path = 'sub/s.md'") == 1
    assert sidecar.exists()
    assert _users(_tree(root)) == _users(before), "a user file changed"
    after = sync(root)  # readable again: nothing to do for it
    assert after.removed == [] and "sub/s.md" not in after.added
    record("issue 34: unreadable after indexing", tried=2)


# -- a full disk ------------------------------------------------------------------------------


def _unshare_mount() -> list[str] | None:
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt 2>/dev/null || exit 9"],
        capture_output=True,
        check=False,
    )
    return [unshare, "-rm"] if probe.returncode == 0 else None


UNSHARE = _unshare_mount()


@pytest.mark.skipif(UNSHARE is None, reason="no user+mount namespace for a small tmpfs here")
def test_full_disk_during_sync_is_one_sentence_and_search_keeps_working(tmp_path: Path) -> None:
    assert UNSHARE is not None
    mount = tmp_path / "small"
    mount.mkdir()
    script = (
        f"mount -t tmpfs -o size=3m tmpfs {mount} && "
        f"exec {sys.executable} {HERE / 'disk_full_child.py'} {mount}"
    )
    done = subprocess.run(
        [*UNSHARE, "sh", "-c", script],
        env=env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["first"]["rc"] == 0, outcome["first"]
    full = outcome["full"]
    assert "Traceback" not in full["err"], full["err"]
    assert full["rc"] == 1, full
    error = json.loads(full["out"])["error"]
    assert error["type"] == "IndexWriteError"
    assert "disk" in error["message"] and "full" in error["message"]
    assert "unchanged" in error["message"]
    assert outcome["changed"] == [], "a user file changed"
    # New files: only the id skeletons a sync writes for new notes, complete ones.
    assert all(p.endswith(".md.pnk.yaml") for p in outcome["new"]), outcome["new"]
    assert outcome["partial_sidecars"] == []
    assert outcome["integrity"] == "ok"
    search = outcome["search"]
    assert search["rc"] == 0, search["err"]
    assert any(h["path"].startswith("n") for h in json.loads(search["out"])["hits"])
    record("issue 34: full disk", tried=1)


def test_full_database_sqlite_full_is_one_sentence_and_the_next_sync_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own SQLITE_FULL, by a page limit on the store (where no tmpfs can be mounted)."""
    notes = {f"n{i:03d}.md": f"# N {i}\n\n" + f"word{i} " * 400 + "\n" for i in range(120)}
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    sync(root)
    for rel, text in notes.items():
        (root / rel).write_text(text)
    connect = store_module._connect

    def small_connect(path: Path, **kwargs: bool) -> sqlite3.Connection:
        conn = connect(path, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 40}")  # ~160 KB more, then full
        return conn

    monkeypatch.setattr(store_module, "_connect", small_connect)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb, pytest.raises(IndexWriteError) as caught:
        kb.sync()
    assert "full" in caught.value.message and "unchanged" in caught.value.message
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.search("alpha", channels=["bm25"]).hits[0].path == "a.md"
    assert scalar(root, "PRAGMA integrity_check") == "ok"
    monkeypatch.setattr(store_module, "_connect", connect)
    report = sync(root)
    assert report.removed == []
    assert scalar(root, "SELECT COUNT(*) FROM documents") == 121
    record("issue 34: full disk", tried=1)


# -- a document named -rf.md -------------------------------------------------------------------


def test_show_dash_dash_names_a_document_that_starts_with_a_dash(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    sync(root)
    runner = CliRunner()
    shown = runner.invoke(cli, ["--kb", str(root), "show", "--json", "--", "-rf.md"], obj={})
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["path"] == "-rf.md"
    refused = runner.invoke(cli, ["--kb", str(root), "show", "-rf.md"], obj={})
    assert refused.exit_code == 2
    assert "pnk show -- " in refused.stderr, refused.stderr
    for command in ("links", "link"):
        hint = runner.invoke(cli, ["--kb", str(root), command, "-rf.md"], obj={})
        assert f"pnk {command} -- " in hint.stderr, hint.stderr
    record("issue 34: -- before a name", tried=4)
