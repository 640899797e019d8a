"""`pnk link`, `pnk links` and `pnk doctor` through click's runner (DESIGN §2, §6, §13)."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, doc_ids, make_kb
from pinakes_cli.main import cli
from pinakes_core import KB
from pinakes_core.read.sidecar import read_sidecar
from pinakes_core.uri import is_ulid, new_ulid

SRC_ID = new_ulid()
COMMENTED = (
    "# Sidecar of src.md: hand-edited, keep my comments.\n"
    f"id: {SRC_ID}   # identity, do not touch\n"
    "title: Source   # shown in results\n"
    "tags: [alpha, beta]\n"
    "\n"
    "# authored links below\n"
    "links:\n"
    "  - to: dst.md\n"
    "    rel: cites   # the paper\n"
)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_kb(
        tmp_path / "kb",
        {
            "src.md": "# Source\n\nLinks to [[other]].\n",
            "src.md.pnk.yaml": COMMENTED,
            "dst.md": "# Destination\n\nd.\n",
            "other.md": "# Other\n\no.\n",
        },
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    return root


def test_link_preserves_a_commented_sidecar_outside_the_added_lines(root: Path) -> None:
    side = root / "src.md.pnk.yaml"
    before = side.read_text(encoding="utf-8")
    code, out, err = run("--kb", str(root), "link", "src.md", "other.md", "--rel", "Depends On")
    assert code == 0, err
    after = side.read_text(encoding="utf-8")
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    assert {op for op, *_ in ops} <= {"equal", "insert"}, list(difflib.unified_diff(old, new))
    added = [line for op, _, _, j1, j2 in ops if op == "insert" for line in new[j1:j2]]
    kept = [line for op, _, _, j1, j2 in ops if op == "equal" for line in new[j1:j2]]
    assert "".join(kept) == before  # byte-for-byte outside the added lines
    kb_id = KB.open(root).config.kb.id
    other = doc_ids(root)["other.md"]
    assert "".join(added) == f"  - to: pnk://{kb_id}/{other}\n    rel: depends-on\n"
    # The YAML diff is printed.
    assert "--- a/src.md.pnk.yaml" in out and "+++ b/src.md.pnk.yaml" in out
    assert f"+  - to: pnk://{kb_id}/{other}" in out
    assert "+    rel: depends-on" in out
    # The next sync indexes it as an authored edge.
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        rels = {(n.path, n.rel) for n in kb.links("src.md", direction="out").neighbours}
    assert ("other.md", "depends-on") in rels


def test_link_refuses_duplicates_self_links_and_unknown_targets(root: Path) -> None:
    side = root / "src.md.pnk.yaml"
    before = side.read_text(encoding="utf-8")
    # A second identical link (relation normalised the same) is refused.
    code, _, _ = run("--kb", str(root), "link", "src.md", "other.md", "--rel", "uses")
    assert code == 0
    mid = side.read_text(encoding="utf-8")
    code, _, err = run("--kb", str(root), "link", "src.md", "other.md", "--rel", "Uses")
    assert code == 1 and "already links" in err
    code, _, err = run("--kb", str(root), "link", "src.md", "src.md", "--rel", "cites")
    assert code == 1 and "itself" in err
    code, _, err = run("--kb", str(root), "link", "src.md", "nowhere.md", "--rel", "cites")
    assert code == 1 and "nowhere.md" in err
    assert side.read_text(encoding="utf-8") == mid != before
    # A new relation to the same target is a different link.
    dst = doc_ids(root)["dst.md"]
    code, _, _ = run("--kb", str(root), "link", "src.md", dst, "--rel", "supersedes")
    assert code == 0


def test_link_refuses_a_duplicate_written_as_a_path(root: Path) -> None:
    code, _, _ = run("--kb", str(root), "link", "src.md", "dst.md", "--rel", "cites")
    assert code == 1


def test_links_json_shape(root: Path) -> None:
    code, out, err = run("--kb", str(root), "links", "src.md", "--json", "--depth", "10")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {
        "doc_id",
        "title",
        "rel",
        "depth",
        "depth_asked",
        "neighbours",
        "frontier",
        "unresolved",
        "confidence",
        "truncated",
    }
    assert (data["depth"], data["depth_asked"]) == (3, 10)
    assert data["confidence"] is None and data["truncated"] is False
    assert {(n["path"], n["rel"], n["direction"]) for n in data["neighbours"]} == {
        ("dst.md", "cites", "out"),
        ("other.md", "links-to", "out"),
    }
    for n in data["neighbours"]:
        assert set(n) >= {"doc_id", "title", "rel", "direction", "distance", "score"}


def test_doctor_json_and_fix(root: Path) -> None:
    shutil.copy(root / "dst.md", root / "copy.md")
    shutil.copy(root / "dst.md.pnk.yaml", root / "copy.md.pnk.yaml")
    (root / "gone.md.pnk.yaml").write_text(f"id: {new_ulid()}\n")
    code, out, err = run("--kb", str(root), "doctor", "--json")
    assert code == 0, err
    report = json.loads(out)
    checks = {f["check"]: f for f in report["findings"]}
    assert checks["duplicate-ids"]["fixable"] is True
    assert "copy.md.pnk.yaml" in checks["duplicate-ids"]["items"][0]
    assert checks["orphan-sidecars"]["items"] == ["gone.md.pnk.yaml"]
    assert "hubs" in checks and "zero-link-documents" not in checks
    assert report["fixed"] == []

    original = read_sidecar(root / "dst.md.pnk.yaml").id
    code, out, _ = run("--kb", str(root), "doctor", "--fix", "--json")
    assert code == 0
    fixed = json.loads(out)["fixed"]
    fresh = read_sidecar(root / "copy.md.pnk.yaml").id
    assert is_ulid(fresh) and fresh != original
    assert read_sidecar(root / "dst.md.pnk.yaml").id == original
    assert any("copy.md.pnk.yaml" in line and fresh in line for line in fixed)
    assert (root / "gone.md.pnk.yaml").exists(), "orphans are removed only with --yes"

    code, out, _ = run("--kb", str(root), "doctor", "--fix", "--yes", "--json")
    assert code == 0
    assert not (root / "gone.md.pnk.yaml").exists()
    assert any("gone.md.pnk.yaml" in line for line in json.loads(out)["fixed"])
    assert (root / "dst.md.pnk.yaml").exists() and (root / "copy.md.pnk.yaml").exists()
