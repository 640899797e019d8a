"""Issue 34, group 5: silent staleness, small leaks and ambiguous output.

An edit that keeps size and mtime (racily clean), file names holding a line break on the
command line, a numeric filter past a 64-bit float, a ``pnk://`` URI naming another KB, and
``doctor --fix`` next to a symlinked note whose target is missing for a moment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from rel_helpers import sync
from rel_ledger import record

from conftest import FakeHashEmbedder, make_kb
from pinakes_cli.main import cli
from pinakes_core import KB, DocumentNotFoundError

ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def run(*args: str) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout_bytes, result.stderr


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pnk`` in this process embeds with the FAKE hash embedder."""
    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())


# -- racily clean: an edit that keeps size and mtime -------------------------------------------


@pytest.mark.parametrize("what", ["note", "sidecar"])
def test_an_edit_that_keeps_size_and_mtime_is_noticed(tmp_path: Path, what: str) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nthe apple word\n", "b.md": "# B\n\nb\n"})
    (root / "a.md.pnk.yaml").write_text(f"id: {ULID}\ntags: [aaaa]\n")
    sync(root)
    # Written in the same clock tick as the sync read it (a coarse clock, or a tool that
    # puts the mtime back): the size and the mtime are as stored.
    path = root / ("a.md" if what == "note" else "a.md.pnk.yaml")
    stat = path.stat()
    old = path.read_text()
    new = old.replace("apple", "mango") if what == "note" else old.replace("aaaa", "bbbb")
    assert len(new) == len(old)
    path.write_text(new)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.status().stale["changed"] == 1
        report = kb.sync()
        assert report.changed == ["a.md"]
        if what == "note":
            assert [h.path for h in kb.search("mango", k=1).hits] == ["a.md"]
        else:
            assert [h.path for h in kb.search("apple", tags=["bbbb"], k=5).hits] == ["a.md"]
        assert kb.status().stale["changed"] == 0
        assert kb.sync().changed == []  # settled: not re-read for ever
    record("issue 34: staleness and output", tried=1)


def test_a_same_size_same_mtime_edit_of_a_note_is_noticed_by_status_and_sync(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nword one\n"})
    sync(root)
    path = root / "a.md"
    stat = path.stat()
    path.write_text("# A\n\nword two\n")  # same size
    assert path.stat().st_size == stat.st_size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.status().stale == {"new": 0, "changed": 1, "removed": 0}
        assert kb.sync().changed == ["a.md"]
        assert kb.search("two", k=1).hits[0].path == "a.md"
    record("issue 34: staleness and output", tried=1)


# -- names with a line break on the command line -------------------------------------------------


def test_search_null_prints_paths_nul_ended_as_they_are(tmp_path: Path, fake_model: None) -> None:
    files = {"two\nlines.md": "# Odd\n\nkumquat\n", "b.md": "# B\n\nkumquat too\n"}
    root = make_kb(tmp_path / "kb", files)
    assert run("--kb", str(root), "sync")[0] == 0
    for flag in ("-0", "--null"):
        code, out, err = run("--kb", str(root), "search", "kumquat", flag, "--channel", "bm25")
        assert code == 0, err
        assert out.endswith(b"\0") and b"\n" not in out.replace(b"two\nlines", b"")
        assert sorted(out[:-1].split(b"\0")) == [b"b.md", b"two\nlines.md"]
    code, out, err = run("--kb", str(root), "search", "kumquat", "-0", "--format", "files")
    assert code == 0 and out.count(b"\0") == 2
    code, _, err = run("--kb", str(root), "search", "kumquat", "-0", "--format", "json")
    assert code == 2 and "-0/--null" in err
    # Human output keeps one hit on one line, the break written \n.
    code, out, err = run("--kb", str(root), "search", "kumquat", "--channel", "bm25")
    assert code == 0, err
    lines = out.decode().splitlines()
    assert any(line.strip().startswith("1. ") or "two\\nlines.md:" in line for line in lines)
    assert any("two\\nlines.md:" in line for line in lines), lines
    assert not any(line.startswith("lines.md") for line in lines)
    record("issue 34: staleness and output", tried=5)


# -- a numeric filter past a 64-bit float --------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "found"),
    [
        ("year>1e309", False),
        ("year>=1e309", False),
        ("year<1e309", True),
        ("year>-1e309", True),
        ("year<-1e309", False),
        ("year>1e-400", True),  # underflows to 0: a number all the same
    ],
)
def test_a_meta_filter_past_a_float_compares_as_a_number(
    tmp_path: Path, condition: str, found: bool
) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "---\nyear: 2020\n---\n# A\n\nalpha\n"})
    sync(root)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        hits = kb.search("alpha", meta=[condition]).hits
    assert bool(hits) is found, condition
    record("issue 34: staleness and output", tried=1)


# -- a pnk:// URI naming another KB ------------------------------------------------------------


def test_show_refuses_a_uri_that_names_another_kb(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"}, name="mine")
    sync(root)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        doc = kb.resolve("a.md")
        kb_id = kb.config.kb.id
        assert kb.resolve(f"pnk://{doc}") == doc
        assert kb.resolve(f"pnk://mine/{doc}") == doc
        assert kb.resolve(f"pnk://{kb_id}/{doc}") == doc
        with pytest.raises(DocumentNotFoundError) as caught:
            kb.resolve(f"pnk://other-kb/{doc}")
        assert "other-kb" in caught.value.message and "mine" in caught.value.message
        with pytest.raises(DocumentNotFoundError):
            kb.read(f"pnk://{ULID}/{doc}")
    code, out, err = run("--kb", str(root), "show", f"pnk://other-kb/{doc}")
    assert code == 1 and "other-kb" in err and "alpha" not in out.decode(), (out, err)
    code, out, _ = run("--kb", str(root), "show", f"pnk://mine/{doc}")
    assert code == 0 and "alpha" in out.decode()
    record("issue 34: staleness and output", tried=4)


# -- doctor --fix beside a dangling symlink ------------------------------------------------------


def test_doctor_fix_keeps_the_sidecar_of_a_note_whose_symlink_dangles(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    drive = root / ".drive"  # a mount point inside the KB (a dot-folder: not walked itself)
    drive.mkdir()
    (drive / "far.md").write_text("# Far\n\nfar away\n")
    (root / "far.md").symlink_to(drive / "far.md")
    side = root / "far.md.pnk.yaml"
    side.write_text(f"id: {ULID}\ntags: [kept]\n")
    skeleton = root / "gone.md.pnk.yaml"
    skeleton.write_text("id: 01ARZ3NDEKTSV4RRFFQ69G5FAW\n")
    assert sync(root).added == ["a.md", "far.md"]
    (drive / "far.md").unlink()  # the drive is unmounted for a moment
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.doctor(fix=True, remove_orphans=True)
        kb.sync()
    assert side.read_text() == f"id: {ULID}\ntags: [kept]\n", "the sidecar was touched"
    assert not skeleton.exists()  # a real orphan still goes
    checks = {f.check: f for f in report.findings}
    assert "far.md" in checks["dangling-documents"].items
    (drive / "far.md").write_text("# Far\n\nfar away\n")  # mounted again
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert kb.resolve("far.md") == ULID
    record("issue 34: staleness and output", tried=1)


def test_status_and_search_json_stay_valid(tmp_path: Path, fake_model: None) -> None:
    """The racy check reads files during ``status``: its JSON is unchanged in form."""
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n"})
    assert run("--kb", str(root), "sync")[0] == 0
    code, out, err = run("--kb", str(root), "status", "--json")
    assert code == 0, err
    assert json.loads(out)["stale"] == {"new": 0, "changed": 0, "removed": 0}
