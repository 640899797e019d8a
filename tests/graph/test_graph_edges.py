"""Edge derivation on a hand-built KB: every edge kind and weight (DESIGN §6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from graph_helpers import (
    SEP,
    build_fixture,
    edge_map,
    expected_structural,
    only,
)

from conftest import FakeHashEmbedder, db, doc_ids, set_config, write_files
from pinakes_core import KB

STRUCTURAL = ("membership", "sibling", "parent-child", "in-section", "co-located", "shared-tag")


def _sync(root: Path) -> None:
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()


def _chunks(root: Path, doc_id: str) -> list[tuple[int, tuple[str, ...]]]:
    conn = db(root)
    try:
        return [
            (r[0], tuple(json.loads(r[1])))
            for r in conn.execute(
                "SELECT ordinal, heading_path FROM chunks WHERE doc_id = ? ORDER BY ordinal",
                (doc_id,),
            )
        ]
    finally:
        conn.close()


@pytest.fixture
def synced(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "kb"
    ids = build_fixture(root)
    _sync(root)
    return root, ids


def test_fixture_shape_is_what_the_expectations_assume(synced: tuple[Path, dict[str, str]]) -> None:
    root, ids = synced
    assert doc_ids(root) == {
        "intro.md": ids["intro"],
        "guide/a.md": ids["a"],
        "guide/c.md": ids["c"],
    }
    a = _chunks(root, ids["a"])
    part_one = [o for o, h in a if h == ("Alpha", "Part one")]
    assert len(part_one) >= 3, "the long section must split into several chunks"
    assert any(h == ("Alpha", "Part one", "Deep") for _, h in a)
    intro = _chunks(root, ids["intro"])
    assert intro[0][1] == (), "the preamble is a chunk with no heading"


def test_every_structural_edge_matches_an_independent_derivation(
    synced: tuple[Path, dict[str, str]],
) -> None:
    root, _ = synced
    assert only(edge_map(root), *STRUCTURAL) == pytest.approx(expected_structural(root))


def test_edge_kinds_present_and_nothing_else(synced: tuple[Path, dict[str, str]]) -> None:
    root, _ = synced
    kinds = {k[0] for k in edge_map(root)}
    assert kinds <= {*STRUCTURAL, "authored", "reverse-scan", "title-mention"}
    assert kinds >= {*STRUCTURAL, "authored", "reverse-scan"}


def test_hand_counted_weights(synced: tuple[Path, dict[str, str]]) -> None:
    root, ids = synced
    edges = edge_map(root)
    a, c, intro = ids["a"], ids["c"], ids["intro"]
    # Tags: shared on all three (frontmatter '#shared', sidecars), alpha on a, beta on intro.
    for doc in (a, c, intro):
        assert edges["shared-tag", "shared", doc] == pytest.approx(1 / 3)
    assert edges["shared-tag", "alpha", a] == pytest.approx(1.0)
    assert edges["shared-tag", "beta", intro] == pytest.approx(1.0)
    # Folders: guide holds two documents, the root one.
    assert edges["co-located", "guide", a] == pytest.approx(0.5)
    assert edges["co-located", "guide", c] == pytest.approx(0.5)
    assert edges["co-located", "", intro] == pytest.approx(1.0)
    # In-section: the whole of a is under "Alpha"; "Part one" includes its "Deep" subsection.
    chunks = _chunks(root, a)
    part_one = [o for o, h in chunks if h[:2] == ("Alpha", "Part one")]
    for o in part_one:
        assert edges["in-section", f"{a}#Alpha{SEP}Part one", f"{a}:{o}"] == pytest.approx(
            1 / len(part_one)
        )
    for o, _ in chunks:
        assert edges["in-section", f"{a}#Alpha", f"{a}:{o}"] == pytest.approx(1 / len(chunks))
    deep = next(o for o, h in chunks if h[-1:] == ("Deep",))
    first_part_one = min(part_one)
    assert edges["in-section", f"{a}#Alpha{SEP}Part one{SEP}Deep", f"{a}:{deep}"] == 1.0
    # Parent-child: Deep hangs under the first chunk of Part one; Part one's first chunk under
    # the first chunk of Alpha; the H1 of intro under its preamble chunk.
    assert edges["parent-child", f"{a}:{first_part_one}", f"{a}:{deep}"] == 1.0
    assert edges["parent-child", f"{a}:0", f"{a}:{first_part_one}"] == 1.0
    assert edges["parent-child", f"{intro}:0", f"{intro}:1"] == 1.0
    # Siblings: adjacent ordinals only, and one fewer than chunks per document.
    siblings = [k for k in edges if k[0] == "sibling" and k[1].startswith(a)]
    assert len(siblings) == len(chunks) - 1
    assert all(int(k[2].rsplit(":", 1)[1]) == int(k[1].rsplit(":", 1)[1]) + 1 for k in siblings)
    # Membership: doc → every chunk, 1.0.
    assert sum(1 for k in edges if k[0] == "membership" and k[1] == a) == len(chunks)


def test_link_edges_authored_and_reverse_scan(synced: tuple[Path, dict[str, str]]) -> None:
    root, ids = synced
    links = {k: v for k, v in edge_map(root).items() if k[0] in ("authored", "reverse-scan")}
    assert links == {
        # sidecar link (rel cites) and frontmatter link (rel depends-on) of guide/a.md
        ("authored", ids["a"], ids["c"]): 2.0,
        ("authored", ids["a"], ids["intro"]): 2.0,
        # Markdown link and wikilink in intro.md's text
        ("reverse-scan", ids["intro"], ids["a"]): 1.0,
        ("reverse-scan", ids["intro"], ids["c"]): 1.0,
    }
    conn = db(root)
    try:
        rels = {
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT src_doc, rel, origin FROM links WHERE src_doc = ?", (ids["a"],)
            )
        }
    finally:
        conn.close()
    assert rels == {(ids["a"], "cites", "sidecar"), (ids["a"], "depends-on", "frontmatter")}


def test_node_kinds_keys_and_labels(synced: tuple[Path, dict[str, str]]) -> None:
    root, ids = synced
    conn = db(root)
    try:
        nodes = {(r[0], r[1]): r[2] for r in conn.execute("SELECT kind, key, label FROM nodes")}
    finally:
        conn.close()
    assert nodes["doc", ids["a"]] == "Alpha"
    assert nodes["dir", "guide"] == "guide"
    assert ("dir", "") in nodes
    assert {k for kind, k in nodes if kind == "tag"} == {"shared", "alpha", "beta"}
    headings = {k for kind, k in nodes if kind == "heading" and k.startswith(ids["a"])}
    assert headings == {
        f"{ids['a']}#Alpha",
        f"{ids['a']}#Alpha{SEP}Part one",
        f"{ids['a']}#Alpha{SEP}Part one{SEP}Deep",
        f"{ids['a']}#Alpha{SEP}Part two",
    }
    chunk_count = len(_chunks(root, ids["a"]))
    assert sum(1 for kind, k in nodes if kind == "chunk" and k.startswith(ids["a"] + ":")) == (
        chunk_count
    )


def test_a_third_document_damps_every_edge_of_its_tag(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    build_fixture(root)
    write_files(root, {"x.md": "---\ntags: [pair]\n---\n# X\n\nx.\n", "y.md": "# Y\n\ny.\n"})
    set_config(root, "graph", "")
    _sync(root)
    ids = doc_ids(root)
    edges = edge_map(root)
    assert edges["shared-tag", "pair", ids["x.md"]] == pytest.approx(1.0)
    write_files(root, {"y.md": "---\ntags: [pair]\n---\n# Y\n\ny.\n"})
    _sync(root)
    edges = edge_map(root)
    assert [edges["shared-tag", "pair", ids[p]] for p in ("x.md", "y.md")] == [0.5, 0.5]
    write_files(root, {"z.md": "---\ntags: [pair]\n---\n# Z\n\nz.\n"})
    _sync(root)
    ids = doc_ids(root)
    edges = edge_map(root)
    pair = {k: v for k, v in edges.items() if k[:2] == ("shared-tag", "pair")}
    assert set(pair) == {("shared-tag", "pair", ids[p]) for p in ("x.md", "y.md", "z.md")}
    assert all(v == pytest.approx(1 / 3) for v in pair.values())
    # The root folder grew too: every co-located edge of "" is re-weighed.
    root_dir = [v for k, v in edges.items() if k[:2] == ("co-located", "")]
    assert len(root_dir) == 4 and all(v == pytest.approx(1 / 4) for v in root_dir)


def test_configured_weights_take_effect(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    weights = {
        "membership": 0.5,
        "sibling": 0.25,
        "parent_child": 0.75,
        "in_section": 3.0,
        "co_located": 4.0,
        "shared_tag": 6.0,
    }
    graph = "\n".join(f"{k} = {v}" for k, v in weights.items())
    ids = build_fixture(root, graph=graph + "\nauthored = 5.0\nreverse_scan = 0.5")
    _sync(root)
    edges = edge_map(root)
    assert only(edges, *STRUCTURAL) == pytest.approx(expected_structural(root, weights))
    assert edges["shared-tag", "shared", ids["a"]] == pytest.approx(2.0)
    assert edges["authored", ids["a"], ids["c"]] == 5.0
    assert edges["reverse-scan", ids["intro"], ids["a"]] == 0.5
