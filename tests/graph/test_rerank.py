"""Graph rerankers: ``link-rerank`` (a bonus for neighbours of the top documents) and
``salience`` (an authored in-degree prior) (DESIGN §6, "also evaluated")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, make_kb, query_context
from pinakes_core import KB
from pinakes_core.search.context import QueryContext
from pinakes_graph import rerank as rerank_mod
from pinakes_graph.rerank import LINK_BONUS, SALIENCE, TOP_DOCS, LinkRerank, Salience

FILES = {
    # Link rerank: top links to y1 (text link), y2 links to top (authored), z links to x only.
    "top.md": "# Top\n\nzeta apple apple apple, see [[y1]] and [[nowhere]].\n",
    "w1.md": "# W1\n\nzeta apple filler one.\n",
    "w2.md": "# W2\n\nzeta apple filler two.\n",
    "x.md": "# X\n\nzeta apple banana, unlinked to the top.\n",
    "y1.md": "# Y1\n\nzeta banana linked from the top.\n",
    "y2.md": "---\nlinks:\n  - to: top.md\n    rel: cites\n---\n# Y2\n\nzeta banana links to the top.\n",
    "z.md": "# Z\n\nzeta cherry, see [[x]].\n",
    # Salience: hub has authored in-links from a1 and a2 (a1 twice), a text link from a3.
    "hub.md": "# Hub\n\nzeta hub of the authored links.\n",
    "a1.md": (
        "---\nlinks:\n  - to: hub.md\n    rel: cites\n---\n# A1\n\nzeta first author, also [[hub]].\n"
    ),
    "a1.md.pnk.yaml": "links:\n  - to: hub.md\n    rel: depends-on\n",
    "a2.md": "---\nlinks:\n  - to: hub.md\n    rel: cites\n---\n# A2\n\nzeta second author.\n",
    "a3.md": "# A3\n\nzeta third writer mentions [[hub]] in text only.\n",
}


@pytest.fixture
def kb(tmp_path: Path):
    root = make_kb(tmp_path / "kb", FILES)
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


def _ctx(kb: KB, query: str = "zeta") -> QueryContext:
    ctx: QueryContext = query_context(kb, query)
    return ctx


def _chunk(kb: KB) -> dict[str, int]:
    """path → chunk id of each (one-chunk) document."""
    rows = kb.store().conn.execute(
        "SELECT d.path, c.chunk_id FROM chunks c JOIN documents d USING (doc_id) WHERE c.ordinal = 0"
    )
    return {r[0]: int(r[1]) for r in rows}


def _paths(kb: KB, fused: list[tuple[int, float]]) -> list[str]:
    back = {c: p for p, c in _chunk(kb).items()}
    return [back[c] for c, _ in fused]


def test_fixture_links(kb: KB) -> None:
    rows = (
        kb.store()
        .conn.execute(
            "SELECT s.path, d.path, l.origin FROM links l JOIN documents s ON s.doc_id = l.src_doc "
            "JOIN documents d ON d.doc_id = l.dst_doc WHERE l.reason IS NULL"
        )
        .fetchall()
    )
    links = {(r[0], r[1], r[2]) for r in rows}
    assert ("top.md", "y1.md", "reverse-scan") in links
    assert ("y2.md", "top.md", "frontmatter") in links
    assert ("a1.md", "hub.md", "sidecar") in links
    assert ("a1.md", "hub.md", "frontmatter") in links
    assert ("a3.md", "hub.md", "reverse-scan") in links
    unresolved = (
        kb.store().conn.execute("SELECT target FROM links WHERE reason IS NOT NULL").fetchall()
    )
    assert [r[0] for r in unresolved] == ["nowhere"]
    assert len(_chunk(kb)) == len([p for p in FILES if p.endswith(".md")])


# -- link-rerank ------------------------------------------------------------------------------------


def _link_fused(kb: KB) -> list[tuple[int, float]]:
    c = _chunk(kb)
    # Top documents: top, w1, w2. x (unlinked) sits just above y1 (linked from top).
    return [
        (c["top.md"], 0.05),
        (c["w1.md"], 0.045),
        (c["w2.md"], 0.042),
        (c["x.md"], 0.039),
        (c["y1.md"], 0.0385),
        (c["z.md"], 0.037),
        (c["y2.md"], 0.03),
    ]


def test_link_rerank_defaults() -> None:
    assert TOP_DOCS == 3
    assert LINK_BONUS == 0.03
    assert LinkRerank.name == "link-rerank"


def test_link_rerank_boosts_only_neighbours_of_top_documents(kb: KB) -> None:
    fused = _link_fused(kb)
    out = dict(LinkRerank().rerank(_ctx(kb), fused))
    before = dict(fused)
    c = _chunk(kb)
    bonus = LINK_BONUS * 0.05
    for path in ("y1.md", "y2.md"):  # either direction of the link counts
        assert out[c[path]] == pytest.approx(before[c[path]] + bonus)
    for path in ("top.md", "w1.md", "w2.md", "x.md", "z.md"):  # z links to x, not to a top doc
        assert out[c[path]] == before[c[path]]


def test_link_rerank_moves_a_linked_document_up(kb: KB, monkeypatch) -> None:
    fused = _link_fused(kb)
    order = _paths(kb, fused)
    assert order.index("x.md") + 1 == order.index("y1.md")
    # The default bonus (0.03 × 0.05 = 0.0015) is just enough to pass x (0.039 vs 0.0385).
    got = _paths(kb, LinkRerank().rerank(_ctx(kb), fused))
    assert got.index("y1.md") < got.index("x.md")
    monkeypatch.setattr(rerank_mod, "LINK_BONUS", 10.0)
    got = _paths(kb, LinkRerank().rerank(_ctx(kb), fused))
    assert got[:2] == ["y1.md", "y2.md"]
    assert got[2:] == [p for p in order if p not in ("y1.md", "y2.md")]


def test_link_rerank_with_zero_bonus_changes_nothing(kb: KB, monkeypatch) -> None:
    monkeypatch.setattr(rerank_mod, "LINK_BONUS", 0.0)
    fused = _link_fused(kb)
    assert LinkRerank().rerank(_ctx(kb), fused) == fused


def test_link_rerank_ignores_links_between_top_documents(kb: KB, monkeypatch) -> None:
    monkeypatch.setattr(rerank_mod, "LINK_BONUS", 10.0)
    c = _chunk(kb)
    fused = [(c["top.md"], 0.05), (c["y1.md"], 0.04), (c["y2.md"], 0.03), (c["x.md"], 0.02)]
    # All of top, y1 and y2 are top documents: none is a neighbour, and x links to none of them.
    assert LinkRerank().rerank(_ctx(kb), fused) == fused


def test_link_rerank_edge_cases(kb: KB) -> None:
    assert LinkRerank().rerank(_ctx(kb), []) == []
    assert LinkRerank().run(_ctx(kb)) == []
    c = _chunk(kb)
    assert LinkRerank().rerank(_ctx(kb), [(c["x.md"], 0.1)]) == [(c["x.md"], 0.1)]


def test_link_rerank_in_a_search(kb: KB, monkeypatch) -> None:
    query = "zeta apple banana"
    monkeypatch.setattr(rerank_mod, "TOP_DOCS", 1)
    hybrid = kb.search(query, channels=["bm25", "dense"], k=20)
    monkeypatch.setattr(rerank_mod, "LINK_BONUS", 0.0)
    same = kb.search(query, channels=["bm25", "dense", "link-rerank"], k=20, explain=True)
    assert [(h.path, h.score) for h in same.hits] == [(h.path, h.score) for h in hybrid.hits]
    assert "link-rerank" in same.timings_ms
    monkeypatch.setattr(rerank_mod, "LINK_BONUS", 10.0)
    boosted = kb.search(query, channels=["bm25", "dense", "link-rerank"], k=20)
    top = hybrid.hits[0].path
    conn = kb.store().conn
    neighbours = {
        r[0]
        for r in conn.execute(
            "SELECT d.path FROM links l JOIN documents s ON s.doc_id = l.src_doc "
            "JOIN documents d ON d.doc_id = l.dst_doc WHERE l.reason IS NULL AND s.path = ? "
            "UNION SELECT s.path FROM links l JOIN documents s ON s.doc_id = l.src_doc "
            "JOIN documents d ON d.doc_id = l.dst_doc WHERE l.reason IS NULL AND d.path = ?",
            (top, top),
        )
    } - {top}
    assert neighbours
    assert [h.path for h in boosted.hits] != [h.path for h in hybrid.hits]
    in_hits = [h.path for h in hybrid.hits if h.path in neighbours]
    # Every neighbour of the top document now leads, in its previous relative order.
    assert [h.path for h in boosted.hits[: len(in_hits)]] == in_hits
    rest = [h.path for h in boosted.hits[len(in_hits) :]]
    assert rest == [h.path for h in hybrid.hits if h.path not in neighbours]


# -- salience -------------------------------------------------------------------------------------------


def test_salience_defaults() -> None:
    assert SALIENCE == 0.006
    assert Salience.name == "salience"


def test_salience_multiplies_by_the_authored_in_degree_prior(kb: KB) -> None:
    c = _chunk(kb)
    fused = [(c["a1.md"], 0.05), (c["hub.md"], 0.04), (c["top.md"], 0.03), (c["a3.md"], 0.02)]
    out = dict(Salience().rerank(_ctx(kb), fused))
    # hub: authored links from a1 (sidecar and frontmatter: one source) and a2; a3's text link
    # does not count. top: one authored link (from y2).
    assert out[c["hub.md"]] == pytest.approx(0.04 * (1 + SALIENCE * math.log1p(2)))
    assert out[c["top.md"]] == pytest.approx(0.03 * (1 + SALIENCE * math.log1p(1)))
    assert out[c["a1.md"]] == 0.05
    assert out[c["a3.md"]] == 0.02


def test_salience_can_reorder(kb: KB, monkeypatch) -> None:
    c = _chunk(kb)
    fused = [(c["a1.md"], 0.05), (c["hub.md"], 0.04), (c["a3.md"], 0.02)]
    assert Salience().rerank(_ctx(kb), fused) == [
        (c["a1.md"], 0.05),
        (c["hub.md"], pytest.approx(0.04 * (1 + SALIENCE * math.log1p(2)))),
        (c["a3.md"], 0.02),
    ]
    monkeypatch.setattr(rerank_mod, "SALIENCE", 1.0)
    got = [cid for cid, _ in Salience().rerank(_ctx(kb), fused)]
    assert got == [c["hub.md"], c["a1.md"], c["a3.md"]]  # 0.04 × (1 + ln 3) ≈ 0.084 > 0.05


def test_salience_edge_cases(kb: KB) -> None:
    assert Salience().rerank(_ctx(kb), []) == []
    assert Salience().run(_ctx(kb)) == []


def test_salience_in_a_search(kb: KB) -> None:
    query = "zeta hub authored"
    hybrid = kb.search(query, channels=["bm25", "dense"], k=20)
    result = kb.search(query, channels=["bm25", "dense", "salience"], k=20, explain=True)
    assert "salience" in result.timings_ms
    degree = {"hub.md": 2, "top.md": 1}
    expected = {
        h.path: h.score * (1 + SALIENCE * math.log1p(degree.get(h.path, 0))) for h in hybrid.hits
    }
    got = {h.path: h.score for h in result.hits}
    assert got.keys() == expected.keys()
    for path, score in got.items():
        assert score == pytest.approx(expected[path], abs=2e-6)
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
