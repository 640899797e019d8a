"""The links API: depth, fan-out and row caps, direction, rel filter, query ranking (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, doc_ids, make_kb, set_config
from pinakes_core import KB, PinakesError
from pinakes_core.uri import new_ulid
from pinakes_graph import traverse

FAN = 5
CHAIN = 6


def _graph_kb(root: Path) -> dict[str, str]:
    ids = {"c0": new_ulid(), "t": new_ulid(), "u": new_ulid(), "v": new_ulid()}
    files: dict[str, str] = {
        "hub.md": "# Hub\n\n" + " ".join(f"[[n{i}]]" for i in range(1, FAN + 1)) + "\n",
        "x.md": "# X\n\nPoints at [[c0]].\n",
        "t.md": "# T\n\nt.\n",
        "u.md": "# U\n\nu.\n",
        "v.md": "# V\n\nv.\n",
        "c0.md": "# c0\n\nNext [[c1]].\n",
        "c0.md.pnk.yaml": (
            f"id: {ids['c0']}\nlinks:\n  - to: pnk://{ids['t']}\n    rel: depends-on\n"
            f"  - to: u.md\n    rel: cites\n  - to: v\n    rel: supersedes\n"
        ),
        "t.md.pnk.yaml": f"id: {ids['t']}\n",
        "u.md.pnk.yaml": f"id: {ids['u']}\n",
        "v.md.pnk.yaml": f"id: {ids['v']}\n",
    }
    for i in range(1, FAN + 1):
        files[f"n{i}.md"] = f"# n{i}\n\nLeaf {i}.\n"
    for i in range(1, CHAIN):
        nxt = f"Next [[c{i + 1}]].\n" if i + 1 < CHAIN else "End.\n"
        files[f"c{i}.md"] = f"# c{i}\n\n{nxt}"
    make_kb(root, files)
    return ids


@pytest.fixture
def kb(tmp_path: Path):
    root = tmp_path / "kb"
    _graph_kb(root)
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


def _paths(result) -> list[str]:
    return [n.path for n in result.neighbours]


def test_depth_is_capped_at_three(kb: KB) -> None:
    result = kb.links("c1.md", direction="out", depth=10)
    assert (result.depth, result.depth_asked) == (3, 10)
    assert [(n.path, n.distance) for n in result.neighbours] == [
        ("c2.md", 1),
        ("c3.md", 2),
        ("c4.md", 3),
    ]
    assert max(n.distance for n in result.neighbours) <= 3
    ids = doc_ids(kb.root)
    assert [(f.doc_id, f.reason, f.path) for f in result.frontier] == [
        (ids["c5.md"], "depth", "c5.md")
    ]
    assert result.neighbours[1].via == ids["c2.md"]


def test_depth_one_is_the_default(kb: KB) -> None:
    result = kb.links("c1.md", direction="out")
    assert (result.depth, result.depth_asked) == (1, 1)
    assert _paths(result) == ["c2.md"]


def test_fanout_is_capped_by_adjacent_k_and_the_overflow_is_on_the_frontier(
    tmp_path: Path,
) -> None:
    root = tmp_path / "kb"
    _graph_kb(root)
    set_config(root, "graph", "adjacent_k = 2")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        result = kb.links("hub.md", direction="out")
    ids = doc_ids(root)
    assert _paths(result) == ["n1.md", "n2.md"]  # equal weights: ties break by path
    assert {(f.doc_id, f.reason, f.path) for f in result.frontier} == {
        (ids[f"n{i}.md"], "fanout", f"n{i}.md") for i in range(3, FAN + 1)
    }
    assert result.truncated is False


def test_row_cap_sets_truncated(kb: KB, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traverse, "MAX_ROWS", 2)
    result = kb.links("hub.md", direction="out")
    assert len(result.neighbours) == 2
    assert result.truncated is True
    assert {f.reason for f in result.frontier} == {"rows"}
    assert len(result.frontier) == FAN - 2
    assert all(f.path.startswith("n") for f in result.frontier)


def test_directions(kb: KB) -> None:
    ids = doc_ids(kb.root)
    out = kb.links("c1.md", direction="out")
    assert [(n.doc_id, n.direction) for n in out.neighbours] == [(ids["c2.md"], "out")]
    into = kb.links("c1.md", direction="in")
    assert [(n.doc_id, n.direction) for n in into.neighbours] == [(ids["c0.md"], "in")]
    both = kb.links("c1.md", direction="both")
    assert {(n.doc_id, n.direction) for n in both.neighbours} == {
        (ids["c2.md"], "out"),
        (ids["c0.md"], "in"),
    }
    with pytest.raises(PinakesError):
        kb.links("c1.md", direction="sideways")


def test_rel_filter_and_edge_weight_ranking_without_query(kb: KB) -> None:
    ids = doc_ids(kb.root)
    result = kb.links("c0.md", rel="depends-on", direction="out")
    assert [(n.doc_id, n.rel) for n in result.neighbours] == [(ids["t.md"], "depends-on")]
    assert result.matched_rel == "depends-on"
    assert kb.links("c0.md", rel="Depends On", direction="out").matched_rel == "depends-on"
    everything = kb.links("c0.md", direction="both")
    # Authored links (2.0) rank before reverse-scan ones (1.0); score = weight / distance.
    assert [(n.path, n.score) for n in everything.neighbours] == [
        ("t.md", 2.0),
        ("u.md", 2.0),
        ("v.md", 2.0),
        ("c1.md", 1.0),
        ("x.md", 1.0),
    ]
    assert everything.confidence is None
    deeper = kb.links("x.md", direction="out", depth=2)
    assert {(n.path, n.distance, n.score) for n in deeper.neighbours} == {
        ("c0.md", 1, 1.0),
        ("t.md", 2, 1.0),
        ("u.md", 2, 1.0),
        ("v.md", 2, 1.0),
        ("c1.md", 2, 0.5),
    }


def test_links_json_shape(kb: KB) -> None:
    data = kb.links("c0.md").model_dump(mode="json")
    assert set(data) >= {
        "doc_id",
        "title",
        "neighbours",
        "frontier",
        "unresolved",
        "confidence",
        "truncated",
        "depth",
        "depth_asked",
    }
    assert set(data["neighbours"][0]) >= {
        "doc_id",
        "title",
        "rel",
        "direction",
        "distance",
        "score",
    }


# -- real model ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_kb(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("model") / "kb"
    _graph_kb(root)
    (root / "t.md").write_text("# Tomatoes\n\nGrowing tomatoes in a sunny garden bed.\n")
    (root / "u.md").write_text("# Kernels\n\nCompiling the Linux kernel with custom flags.\n")
    (root / "v.md").write_text("# Rowing\n\nRowing technique for a racing scull.\n")
    handle = KB.open(root)
    handle.sync()
    yield handle
    handle.close()


@pytest.mark.model
def test_query_ranks_neighbours_by_similarity_and_gives_confidence(model_kb: KB) -> None:
    result = model_kb.links("c0.md", direction="out", query="how do I grow tomato plants")
    assert result.neighbours[0].path == "t.md"
    scores = [n.score for n in result.neighbours]
    assert scores == sorted(scores, reverse=True)
    assert result.confidence is not None and 0.0 <= result.confidence <= 1.0
    other = model_kb.links("c0.md", direction="out", query="sculling oars on a river")
    assert other.neighbours[0].path == "v.md"
    assert model_kb.links("c0.md", direction="out").confidence is None


@pytest.mark.model
def test_free_text_relation_maps_to_a_typed_relation(model_kb: KB) -> None:
    result = model_kb.links("c0.md", rel="relies on", direction="out")
    assert result.matched_rel == "depends-on"
    assert result.rel == "relies-on"
    assert [n.path for n in result.neighbours] == ["t.md"]


@pytest.mark.model
def test_unrelated_verb_raises_listing_the_relations(model_kb: KB) -> None:
    with pytest.raises(PinakesError) as info:
        model_kb.links("c0.md", rel="paints with watercolours")
    text = f"{info.value} {info.value.hint}"
    for rel in ("cites", "depends-on", "supersedes", "links-to"):
        assert rel in text


def test_a_pair_linked_both_ways_is_one_neighbour_shown_both(tmp_path: Path) -> None:
    # `pnk links` listed such a neighbour by whichever direction ranked first (issue 35).
    root = make_kb(
        tmp_path / "kb",
        {"a.md": "# A\n\nSee [[b]].\n", "b.md": "# B\n\nSee [[a]].\n", "c.md": "# C\n\n[[a]]\n"},
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        ids = doc_ids(root)
        both = kb.links("a.md", direction="both")
        assert {(n.doc_id, n.direction) for n in both.neighbours} == {
            (ids["b.md"], "both"),
            (ids["c.md"], "in"),
        }
        # Asked one way, it is that way.
        out = kb.links("a.md", direction="out")
        assert [(n.doc_id, n.direction) for n in out.neighbours] == [(ids["b.md"], "out")]
