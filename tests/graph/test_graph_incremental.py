"""Incremental edge derivation: edits, deletions, renames and late link targets (DESIGN §4, §6)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from graph_helpers import (
    build_fixture,
    edge_map,
    expected_structural,
    node_ids,
    only,
)

from conftest import FakeHashEmbedder, db, doc_ids, write_files
from pinakes_core import KB

STRUCTURAL = ("membership", "sibling", "parent-child", "in-section", "co-located", "shared-tag")


def _sync(root: Path):
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        return kb.sync()


def _owned(edges: dict, doc_id: str) -> dict:
    """Edges whose either end is one of ``doc_id``'s own nodes (doc, chunk, heading)."""

    def mine(key: str) -> bool:
        return key == doc_id or key.startswith((doc_id + ":", doc_id + "#"))

    return {k: v for k, v in edges.items() if mine(k[1]) or mine(k[2])}


@pytest.fixture
def synced(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "kb"
    ids = build_fixture(root)
    _sync(root)
    return root, ids


def test_editing_one_document_leaves_the_others_untouched(
    synced: tuple[Path, dict[str, str]],
) -> None:
    root, ids = synced
    before_nodes = node_ids(root)
    before_edges = edge_map(root)
    text = (root / "guide/c.md").read_text() + "\n## Added\n\nA new section about gamma.\n"
    (root / "guide/c.md").write_text(text)
    report = _sync(root)
    assert report.changed == ["guide/c.md"]
    after_nodes = node_ids(root)
    after_edges = edge_map(root)
    for name in ("a", "intro"):
        doc = ids[name]
        mine_before = {k: v for k, v in before_nodes.items() if k[1].startswith(doc)}
        mine_after = {k: v for k, v in after_nodes.items() if k[1].startswith(doc)}
        assert mine_after == mine_before, f"{name}'s node ids changed"
        assert _owned(after_edges, doc) == {k: v for k, v in _owned(before_edges, doc).items()}, (
            f"{name}'s edges changed"
        )
    # The edited document has its new section and its doc node kept its id.
    assert after_nodes["doc", ids["c"]] == before_nodes["doc", ids["c"]]
    assert ("heading", f"{ids['c']}#Gamma › Added") in after_nodes
    assert only(after_edges, *STRUCTURAL) == pytest.approx(expected_structural(root))


def test_editing_a_title_relabels_the_doc_node(synced: tuple[Path, dict[str, str]]) -> None:
    root, ids = synced
    (root / "guide/c.md").write_text("# Gamma Prime\n\nGamma body text.\n")
    _sync(root)
    conn = db(root)
    try:
        label = conn.execute(
            "SELECT label FROM nodes WHERE kind = 'doc' AND key = ?", (ids["c"],)
        ).fetchone()[0]
        title = conn.execute(
            "SELECT title FROM documents WHERE doc_id = ?", (ids["c"],)
        ).fetchone()[0]
    finally:
        conn.close()
    assert title == "Gamma Prime"
    assert label == title


def test_deleting_a_document_removes_its_nodes_and_reweighs_its_hubs(
    synced: tuple[Path, dict[str, str]],
) -> None:
    root, ids = synced
    (root / "guide/c.md").unlink()
    (root / "guide/c.md.pnk.yaml").unlink()
    report = _sync(root)
    assert report.removed == ["guide/c.md"]
    assert node_ids(root, prefix=ids["c"]) == {}
    edges = edge_map(root)
    assert _owned(edges, ids["c"]) == {}
    # shared: 3 → 2 documents; guide: 2 → 1.
    assert edges["shared-tag", "shared", ids["a"]] == pytest.approx(0.5)
    assert edges["shared-tag", "shared", ids["intro"]] == pytest.approx(0.5)
    assert edges["co-located", "guide", ids["a"]] == pytest.approx(1.0)
    assert only(edges, *STRUCTURAL) == pytest.approx(expected_structural(root))
    # Links that pointed at it are unresolved now and carry no edge.
    assert ("authored", ids["a"], ids["c"]) not in edges
    assert ("reverse-scan", ids["intro"], ids["c"]) not in edges


def test_a_hub_left_empty_is_dropped(synced: tuple[Path, dict[str, str]]) -> None:
    root, _ids = synced
    (root / "intro.md").unlink()
    (root / "intro.md.pnk.yaml").unlink()
    _sync(root)
    nodes = node_ids(root)
    assert ("tag", "beta") not in nodes
    assert ("dir", "") not in nodes


def test_renaming_with_sidecar_moves_between_dir_hubs_and_keeps_the_doc_node(
    synced: tuple[Path, dict[str, str]],
) -> None:
    root, ids = synced
    before = node_ids(root)
    (root / "archive").mkdir()
    shutil.move(root / "guide/c.md", root / "archive/c.md")
    shutil.move(root / "guide/c.md.pnk.yaml", root / "archive/c.md.pnk.yaml")
    report = _sync(root)
    assert [(r.old, r.new) for r in report.renamed] == [("guide/c.md", "archive/c.md")]
    assert doc_ids(root)["archive/c.md"] == ids["c"]
    after = node_ids(root)
    assert after["doc", ids["c"]] == before["doc", ids["c"]]
    edges = edge_map(root)
    assert edges["co-located", "archive", ids["c"]] == pytest.approx(1.0)
    assert ("co-located", "guide", ids["c"]) not in edges
    assert edges["co-located", "guide", ids["a"]] == pytest.approx(1.0)
    assert only(edges, *STRUCTURAL) == pytest.approx(expected_structural(root))
    # The sidecar link "c.md" from guide/a.md still resolves (by file stem), as does [[Gamma]].
    assert edges["authored", ids["a"], ids["c"]] == 2.0
    assert edges["reverse-scan", ids["intro"], ids["c"]] == 1.0


def test_a_link_target_created_later_becomes_an_edge(synced: tuple[Path, dict[str, str]]) -> None:
    root, ids = synced
    text = (root / "intro.md").read_text() + "\nAlso [[Later Note]] and [x](guide/later.md).\n"
    (root / "intro.md").write_text(text)
    _sync(root)
    conn = db(root)
    try:
        pending = conn.execute(
            "SELECT target, reason FROM links WHERE src_doc = ? AND reason IS NOT NULL",
            (ids["intro"],),
        ).fetchall()
    finally:
        conn.close()
    assert {r[0] for r in pending} == {"Later Note", "guide/later.md"}
    before = node_ids(root, prefix=ids["intro"])
    write_files(root, {"guide/later.md": "# Later Note\n\nArrived late.\n"})
    report = _sync(root)
    assert report.added == ["guide/later.md"] and report.changed == []
    later = doc_ids(root)["guide/later.md"]
    edges = edge_map(root)
    assert edges["reverse-scan", ids["intro"], later] == 1.0
    # The relinked document's own nodes were not rebuilt.
    assert node_ids(root, prefix=ids["intro"]) == before
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.links("intro.md").unresolved == []


def test_graph_matches_a_full_rebuild_after_incremental_syncs(
    synced: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = synced
    write_files(root, {"guide/new.md": "---\ntags: [shared, alpha]\n---\n# New\n\n[[Intro]]\n"})
    _sync(root)
    (root / "guide/c.md").write_text("# Gamma\n\nRewritten. [a](a.md)\n")
    _sync(root)

    def named(edges: dict) -> set:
        return {(k, round(v, 9)) for k, v in edges.items()}

    incremental = named(edge_map(root))
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync(rebuild=True)
    assert named(edge_map(root)) == incremental
