"""The derived folder ``.pinakes/`` cannot lead a write outside the KB (issue 34, group 1).

A cloned notes repository can commit ``.pinakes`` (or anything in it) as a symbolic link, or
commit index files. For every path a synced KB has under ``.pinakes/`` (and the folder itself),
replaced by a link to a folder outside the KB, to the KB root, to ``/dev/null``, to a user's
file outside and to a note inside: sync, rebuild, search, a schema suggestion (``pnk link``) and
a hook sync are refused with one sentence, and no byte outside ``.pinakes/`` changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from rel_helpers import sync
from rel_ledger import record

from conftest import FakeHashEmbedder
from pinakes_core import KB, SyncReport
from pinakes_core.derived import UnsafeStoreError, store_problems
from pinakes_core.manage.hooks import run_hook_sync
from pinakes_core.paid.suggestions import record_schema_suggestion

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: What a link may point at: (name, target given the holding folder and the KB root).
TARGETS: dict[str, Callable[[Path, Path], Path]] = {
    "outside-folder": lambda home, kb: home,
    "outside-file": lambda home, kb: home / ".bashrc",
    "kb-root": lambda home, kb: kb,
    "dev-null": lambda home, kb: Path(os.devnull),
    "user-note": lambda home, kb: kb / "a.md",
}


def _snapshot(home: Path) -> dict[str, str]:
    """Every file under ``home`` except the KB's ``.pinakes/``: path -> content hash (or link)."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(home):  # never follows links
        if Path(folder).name == ".pinakes" or ".pinakes" in Path(folder).parts:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if d != ".pinakes"]
        for name in [*files, *dirs]:
            path = Path(folder) / name
            if path.is_symlink():
                seen[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synced KB (notes, a sidecar, a PDF in the extraction cache) to copy for each case."""
    kb = tmp_path_factory.mktemp("template") / "kb"
    kb.mkdir()
    KB.init(kb)
    (kb / "a.md").write_text("# Alpha\n\nRaft elects a leader by majority vote.\n")
    (kb / "b.md").write_text("# Beta\n\nSee [alpha](a.md) for elections.\n")
    shutil.copy(FIXTURES / "pdf" / "table.pdf", kb / "table.pdf")
    sync(kb)
    record_schema_suggestion(kb, "relation", "depends-on", source="a.md")
    return kb


def _derived_paths(kb: Path) -> list[str]:
    """Every path under ``.pinakes/`` of the synced template, the folder itself first."""
    paths = [".pinakes"]
    for folder, dirs, files in os.walk(kb / ".pinakes"):
        for name in sorted([*dirs, *files]):
            paths.append(str((Path(folder) / name).relative_to(kb)))
    return paths


def _case(template: Path, tmp: Path, inside: str, target: str) -> tuple[Path, Path]:
    """A fresh copy of the KB, in a home folder with a user's files, one path made a link."""
    home = tmp / "home"
    home.mkdir(parents=True)
    (home / ".bashrc").write_text("export PATH=$PATH:$HOME/bin\n")
    (home / "taxes-2025.pdf").write_bytes(b"%PDF-1.4 private\n")
    (home / "docs").mkdir()
    (home / "docs" / "report.docx").write_bytes(b"PK\x03\x04 private\n")
    kb = home / "kb"
    shutil.copytree(template, kb, symlinks=True)
    victim = kb / inside
    if victim.is_dir() and not victim.is_symlink():
        shutil.rmtree(victim)
    else:
        victim.unlink()
    victim.symlink_to(TARGETS[target](home, kb))
    return home, kb


def _operations(kb: Path) -> dict[str, Callable[[], object]]:
    def search() -> object:
        with KB.open(kb, embedder=FakeHashEmbedder()) as opened:
            return opened.search("leader election", k=3)

    return {
        "sync": lambda: sync(kb),
        "rebuild": lambda: sync(kb, rebuild=True),
        "search": search,
        "link": lambda: record_schema_suggestion(kb, "relation", "x; rm -rf ~", source="a.md"),
    }


def test_every_derived_path_as_a_link_is_refused_and_nothing_outside_changes(
    template: Path, tmp_path: Path
) -> None:
    paths = _derived_paths(template)
    assert any(p.startswith(".pinakes/cache/extract") for p in paths)  # the PDF cache is there
    assert ".pinakes/sync.lock" in paths
    tried = changed = 0
    for n, inside in enumerate(paths):
        if inside == ".pinakes/index.db":  # the store's own link; replaced below as a file too
            continue
        for target in TARGETS:
            home, kb = _case(template, tmp_path / f"{n}-{target}", inside, target)
            before = _snapshot(home)
            for operation, call in _operations(kb).items():
                tried += 1
                with pytest.raises(UnsafeStoreError) as refused:
                    call()
                message = str(refused.value)
                assert "symbolic link" in message, (inside, target, operation, message)
                assert "\n" not in message.split(" Pinakes writes")[0]
                after = _snapshot(home)
                if after != before:
                    changed += 1
                assert after == before, (inside, target, operation)
            # A hook sync (what `git pull` runs) records the refusal, writes nothing.
            outcome = run_hook_sync(kb, sync=partial(_sync_once, kb), wait_s=1)
            assert outcome["ok"] is False
            assert "symbolic link" in str(outcome["error"])
            assert _snapshot(home) == before
    record("derived folder links", tried=tried, outside_changed=changed, escapes=changed)


def _sync_once(root: Path) -> SyncReport:
    """What ``pnk hooks sync`` hands the hook sync: open the KB, sync it, close it."""
    with KB.open(root) as handle:
        return handle.sync()


def test_the_store_pointer_aimed_elsewhere_is_refused(template: Path, tmp_path: Path) -> None:
    """``index.db`` is ours only while it names a generation file beside it."""
    for target in TARGETS:
        home, kb = _case(template, tmp_path / target, ".pinakes/index.db", target)
        before = _snapshot(home)
        for call in _operations(kb).values():
            with pytest.raises(UnsafeStoreError):
                call()
        assert _snapshot(home) == before
    record("derived folder links", tried=len(TARGETS) * 4)


def test_a_hard_link_or_a_fifo_inside_is_refused(template: Path, tmp_path: Path) -> None:
    home, kb = _case(template, tmp_path / "hard", ".pinakes/sync.lock", "dev-null")
    (kb / ".pinakes" / "sync.lock").unlink()
    os.link(home / ".bashrc", kb / ".pinakes" / "sync.lock")
    before = _snapshot(home)
    with pytest.raises(UnsafeStoreError, match="hard links"):
        sync(kb)
    assert _snapshot(home) == before
    (kb / ".pinakes" / "sync.lock").unlink()
    os.mkfifo(kb / ".pinakes" / "sync.lock")
    with pytest.raises(UnsafeStoreError, match="not a plain file"):
        sync(kb)
    assert _snapshot(home) == before
    record("derived folder links", tried=2)


def test_a_committed_index_is_refused_and_doctor_says_so(template: Path, tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    kb = tmp_path / "clone"
    shutil.copytree(template, kb, symlinks=True)
    git = ["git", "-C", str(kb), "-c", "user.email=t@e.st", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-f", ".pinakes/index.1.db", "a.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "oops"], check=True)
    with pytest.raises(UnsafeStoreError, match="committed to git") as refused:
        sync(kb)
    assert "git rm -r --cached .pinakes" in str(refused.value)
    with KB.open(kb, embedder=FakeHashEmbedder()) as opened:
        report = opened.doctor()
    assert [f.check for f in report.findings] == ["unsafe-index-folder"]
    assert "committed to git" in report.findings[0].items[0]
    subprocess.run([*git, "rm", "-q", "-r", "--cached", ".pinakes"], check=True)
    assert store_problems(kb) == []
    assert sync(kb) is not None  # and it syncs again
    record("derived folder links", tried=1)


def test_cleanup_deletes_only_names_it_makes(template: Path, tmp_path: Path) -> None:
    """A stranger's file in the extraction cache (or beside the store) survives a sync."""
    kb = tmp_path / "kb"
    shutil.copytree(template, kb, symlinks=True)
    stranger = kb / ".pinakes" / "cache" / "extract" / "notes-i-keep.txt"
    stranger.write_text("mine\n")
    (kb / "table.pdf").unlink()  # its cache entry is collected, the stranger is not
    sync(kb)
    assert stranger.read_text() == "mine\n"
    assert not [p for p in stranger.parent.iterdir() if p.name.endswith(".jsonl")]
    record("derived folder links", tried=1)


def test_a_killed_publishs_temp_link_is_ours_and_the_next_sync_removes_it(
    template: Path, tmp_path: Path
) -> None:
    """``.index.db.<pid>.link`` naming a generation is the store's own (a rebuild killed -9)."""
    kb = tmp_path / "kb"
    shutil.copytree(template, kb, symlinks=True)
    leftover = kb / ".pinakes" / f".index.db.{2**22 + 7}.link"
    leftover.symlink_to(os.readlink(kb / ".pinakes" / "index.db"))
    assert store_problems(kb) == []
    sync(kb)
    assert not os.path.lexists(leftover)
    # The same name aimed outside is no pointer of ours.
    leftover.symlink_to(tmp_path)
    with pytest.raises(UnsafeStoreError):
        sync(kb)
    record("derived folder links", tried=2)
