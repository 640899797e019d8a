"""Bounded graph expansion: hubs expand once, fan-out cap, membership exclusion, depth, query
ranking, roots first, filters, and the ``expand`` channel in a search (DESIGN §6)."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, make_kb, set_config
from pinakes_core import KB
from pinakes_core.search.context import Filters, QueryContext
from pinakes_graph import expand as expand_mod
from pinakes_graph.cache import EDGE_KINDS, KINDS, Graph, graph_for
from pinakes_graph.expand import MAX_HOPS, ROOTS, ExpandChannel, expand


def _para(word: str) -> str:
    # About 20 WordPiece tokens: with chunk_tokens = 32 every paragraph is its own chunk.
    return f"zeta {word} the quick brown fox jumps over the lazy dog and then rests near the old stone wall"


def _open(root: Path, files: dict[str, str], graph: str | None = None) -> KB:
    make_kb(root, files)
    set_config(root, "sync", "chunk_tokens = 32")
    if graph:
        set_config(root, "graph", graph)
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    return handle


def _ctx(kb: KB, query: str = "zeta", filters: Filters | None = None, candidates: int = 50):
    return QueryContext(
        query=query,
        conn=kb.store().conn,
        filters=filters or Filters(),
        candidates=candidates,
        vectors=kb.vectors,
        embed_query=kb.embedder.embed_query,
        kb=kb,
    )


def _chunks(kb: KB) -> dict[tuple[str, int], int]:
    """``(path, ordinal) → chunk_id``."""
    rows = kb.store().conn.execute(
        "SELECT d.path, c.ordinal, c.chunk_id FROM chunks c JOIN documents d USING (doc_id)"
    )
    return {(r[0], int(r[1])): int(r[2]) for r in rows}


def _where(kb: KB) -> dict[int, tuple[str, int]]:
    return {cid: key for key, cid in _chunks(kb).items()}


def _node_index(kb: KB, kind: str, key: str) -> int:
    """Index of a stored node in ``graph_for(kb)`` (nodes are laid out by node_id)."""
    ids = [int(r[0]) for r in kb.store().conn.execute("SELECT node_id FROM nodes ORDER BY node_id")]
    node = (
        kb.store()
        .conn.execute("SELECT node_id FROM nodes WHERE kind = ? AND key = ?", (kind, key))
        .fetchone()
    )
    return ids.index(int(node[0]))


def _run(
    kb: KB, roots: list[tuple[str, int]], fanout: int = 8, **ctx_args
) -> list[tuple[int, float]]:
    chunks = _chunks(kb)
    ctx = _ctx(kb, **ctx_args)
    ctx.seeds = [(chunks[r], 1.0 / (60 + i)) for i, r in enumerate(roots, 1)]
    return expand(graph_for(kb), ctx, fanout)


def _expanded(kb: KB, out: list[tuple[int, float]], n_roots: int) -> list[tuple[str, int]]:
    where = _where(kb)
    return [where[c] for c, _ in out[n_roots:]]


def _docs(items: list[tuple[str, int]]) -> set[str]:
    return {path for path, _ in items}


# -- fixture KBs ------------------------------------------------------------------------------------

CHAIN = {
    # Links a → b → c → d; a shares tag t1 with h, and h → i → j; a shares its folder with sib,
    # and sib → echo → xray. inbound links to a. Every other document is alone in its folder.
    "a/a.md": "---\ntags: [t1]\n---\n# A\n\nzeta alpha starts here, see [[b]].\n",
    "a/sib.md": "# Sib\n\nzeta sierra sits next to alpha, see [[echo]].\n",
    "b/b.md": "# B\n\nzeta bravo continues, see [[c]].\n",
    "c/c.md": "# C\n\nzeta charlie continues, see [[d]].\n",
    "d/d.md": "# D\n\nzeta delta is three hops away.\n",
    "h/h.md": "---\ntags: [t1]\n---\n# H\n\nzeta hotel shares a tag, see [[i]].\n",
    "i/i.md": "# I\n\nzeta india continues, see [[j]].\n",
    "j/j.md": "# J\n\nzeta juliet is beyond reach.\n",
    "echo/echo.md": "# Echo\n\nzeta echo continues, see [[xray]].\n",
    "xray/xray.md": "# Xray\n\nzeta xray is beyond reach.\n",
    "inbound/inbound.md": "# Inbound\n\nzeta inbound points at [[a]].\n",
}

FLAT = {
    # Six chunks without headings: only sibling edges join them; m links to n.
    "m/m.md": "\n\n".join(_para(f"mike{i}") for i in range(6)) + "\n\nSee [[n]].\n",
    "n/n.md": "# N\n\nzeta november body.\n",
}

FAN = {
    "r/r.md": "# R\n\nzeta root links [[g]].\n",
    "g/g.md": "\n\n".join(_para(f"golf{i} " + "fox " * i) for i in range(6)) + "\n",
    "s/s.md": "# S\n\nzeta second root links " + " ".join(f"[[l{i}]]" for i in range(5)) + ".\n",
    **{f"l{i}/l{i}.md": f"# L{i}\n\nzeta leaf {i} " + "fox " * i + "\n" for i in range(5)},
    "p/p.md": "---\ntags: [many]\n---\n# P\n\nzeta papa is tagged many.\n",
    "q/q.md": "---\ntags: [many]\n---\n# Q\n\nzeta quebec is tagged many.\n",
    **{
        f"t{i}/t{i}.md": f"---\ntags: [many]\n---\n# T{i}\n\nzeta tango {i} " + "fox " * i + "\n"
        for i in range(5)
    },
}

SECTIONS = {
    # Headings: in-section and parent/child edges join chunks of one document.
    "s/s.md": (
        "# Top\n\n"
        + _para("intro")
        + "\n\n## Part one\n\n"
        + "\n\n".join(_para(f"one{i}") for i in range(3))
        + "\n\n### Deep\n\n"
        + _para("deep")
        + "\n\n## Part two\n\n"
        + "\n\n".join(_para(f"two{i}") for i in range(3))
        + "\n"
    ),
    "o/o.md": "# Other\n\nzeta other doc, see [[s]].\n",
}


@pytest.fixture
def chain_kb(tmp_path: Path):
    handle = _open(tmp_path / "chain", CHAIN)
    yield handle
    handle.close()


@pytest.fixture
def flat_kb(tmp_path: Path):
    handle = _open(tmp_path / "flat", FLAT)
    yield handle
    handle.close()


@pytest.fixture
def fan_kb(tmp_path: Path):
    handle = _open(tmp_path / "fan", FAN)
    yield handle
    handle.close()


@pytest.fixture
def sections_kb(tmp_path: Path):
    handle = _open(tmp_path / "sections", SECTIONS)
    yield handle
    handle.close()


def test_fixture_shapes(chain_kb: KB, flat_kb: KB, fan_kb: KB) -> None:
    """The fixtures are what the other tests assume (links resolved, chunk counts)."""
    for kb in (chain_kb, flat_kb, fan_kb):
        unresolved = (
            kb.store()
            .conn.execute("SELECT COUNT(*) FROM links WHERE reason IS NOT NULL")
            .fetchone()[0]
        )
        assert unresolved == 0
    assert sorted(o for p, o in _chunks(flat_kb) if p == "m/m.md") == list(range(6))
    assert sorted(o for p, o in _chunks(fan_kb) if p == "g/g.md") == list(range(6))
    assert all(o == 0 for p, o in _chunks(chain_kb))
    assert MAX_HOPS == 2


# -- depth accounting ---------------------------------------------------------------------------------


def test_two_link_hops_are_reached_three_are_not(chain_kb: KB) -> None:
    reached = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    assert {"b/b.md", "c/c.md"} <= reached
    assert "d/d.md" not in reached


def test_tag_hub_pass_through_is_free(chain_kb: KB) -> None:
    reached = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    # a -t1- h is one hop, h → i the second; i → j would be a third.
    assert {"h/h.md", "i/i.md"} <= reached
    assert "j/j.md" not in reached


def test_folder_hub_pass_through_is_free(chain_kb: KB) -> None:
    reached = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    assert {"a/sib.md", "echo/echo.md"} <= reached
    assert "xray/xray.md" not in reached


def test_links_are_followed_against_their_direction(chain_kb: KB) -> None:
    reached = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    assert "inbound/inbound.md" in reached
    # From d, the chain is walked backwards: c (1 hop) and b (2 hops), never a (3 hops).
    back = _docs(_expanded(chain_kb, _run(chain_kb, [("d/d.md", 0)]), 1))
    assert {"c/c.md", "b/b.md"} <= back
    assert "a/a.md" not in back


def test_exact_reach_from_a(chain_kb: KB) -> None:
    reached = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    assert reached == {
        "a/sib.md",
        "b/b.md",
        "c/c.md",
        "h/h.md",
        "i/i.md",
        "echo/echo.md",
        "inbound/inbound.md",
    }


def test_one_hop_bound(chain_kb: KB, monkeypatch) -> None:
    monkeypatch.setattr(expand_mod, "MAX_HOPS", 1)
    reached = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    assert reached == {"a/sib.md", "b/b.md", "h/h.md", "inbound/inbound.md"}


# -- membership exclusion ---------------------------------------------------------------------------


def test_root_document_chunks_only_come_through_structural_edges(flat_kb: KB) -> None:
    got = _expanded(flat_kb, _run(flat_kb, [("m/m.md", 0)]), 1)
    own = sorted(o for p, o in got if p == "m/m.md")
    # Siblings one and two structural hops away; never the rest of the document via membership.
    assert own == [1, 2]
    assert ("n/n.md", 0) in got


def test_root_document_from_the_middle(flat_kb: KB) -> None:
    got = _expanded(flat_kb, _run(flat_kb, [("m/m.md", 3)]), 1)
    assert sorted(o for p, o in got if p == "m/m.md") == [1, 2, 4, 5]


def test_a_linked_document_contributes_through_membership(flat_kb: KB) -> None:
    # Root in n: m is a linked (non-root) document, so its best chunks come via membership.
    got = _expanded(flat_kb, _run(flat_kb, [("n/n.md", 0)], fanout=3), 1)
    assert len([o for p, o in got if p == "m/m.md"]) >= 3


def _structural_distance(graph: Graph, start: int) -> dict[int, int]:
    """Distance over sibling / parent-child edges and in-section hubs (a hub costs nothing)."""
    dist = {start: 0}
    queue = deque([start])
    hops = {EDGE_KINDS["sibling"], EDGE_KINDS["parent-child"]}
    while queue:
        node = queue.popleft()
        nbrs, _, kinds = graph.adjacent(node)
        step: set[int] = set()
        for m, k in zip(nbrs.tolist(), kinds.tolist(), strict=True):
            if k in hops:
                step.add(m)
            elif k == EDGE_KINDS["in-section"]:
                members, _, mkinds = graph.adjacent(m)
                step |= {
                    x
                    for x, mk in zip(members.tolist(), mkinds.tolist(), strict=True)
                    if mk == EDGE_KINDS["in-section"] and graph.kind[x] == KINDS["chunk"]
                }
        for m in step:
            if m not in dist:
                dist[m] = dist[node] + 1
                queue.append(m)
    return dist


@pytest.mark.parametrize("fanout", [1, 2, 8])
def test_root_document_chunks_are_within_two_structural_hops(sections_kb: KB, fanout: int) -> None:
    chunks = _chunks(sections_kb)
    ordinals = sorted(o for p, o in chunks if p == "s/s.md")
    assert len(ordinals) >= 8
    graph = graph_for(sections_kb)
    for root in ordinals:
        dist = _structural_distance(graph, graph.node_of_chunk[chunks["s/s.md", root]])
        got = _expanded(sections_kb, _run(sections_kb, [("s/s.md", root)], fanout=fanout), 1)
        own = [o for p, o in got if p == "s/s.md"]
        assert own, "structural edges should reach some chunk of the root document"
        for o in own:
            assert dist.get(graph.node_of_chunk[chunks["s/s.md", o]], 99) <= MAX_HOPS, (root, o)
        # The other document is linked: it is reached through the link, not excluded.
        assert ("o/o.md", 0) in got


# -- fan-out ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fanout", [1, 2, 3])
def test_a_linked_document_contributes_at_most_fanout_chunks(
    fan_kb: KB, monkeypatch, fanout: int
) -> None:
    monkeypatch.setattr(expand_mod, "MAX_HOPS", 1)
    ctx_query = "zeta fox golf0 golf1 golf2 golf3 golf4 golf5"
    out = _run(fan_kb, [("r/r.md", 0)], fanout=fanout, query=ctx_query)
    got = [o for p, o in _expanded(fan_kb, out, 1) if p == "g/g.md"]
    assert len(got) == fanout
    # ... and they are g's best chunks by query cosine.
    ctx = _ctx(fan_kb, ctx_query)
    chunks = _chunks(fan_kb)
    cos = {
        o: float(ctx.dense_scores[ctx.rows_of(np.array([chunks["g/g.md", o]]))[0]])
        for o in range(6)
    }
    best = sorted(cos.values(), reverse=True)[:fanout]
    assert sorted((cos[o] for o in got), reverse=True) == pytest.approx(best)


@pytest.mark.parametrize("fanout", [1, 2, 3])
def test_a_document_follows_at_most_fanout_links(fan_kb: KB, monkeypatch, fanout: int) -> None:
    monkeypatch.setattr(expand_mod, "MAX_HOPS", 1)
    got = _docs(_expanded(fan_kb, _run(fan_kb, [("s/s.md", 0)], fanout=fanout), 1)) - {"s/s.md"}
    assert len(got) == fanout
    assert got <= {f"l{i}/l{i}.md" for i in range(5)}


@pytest.mark.parametrize("fanout", [1, 2, 3])
def test_a_tag_hub_contributes_at_most_fanout_documents(fan_kb: KB, fanout: int) -> None:
    got = _docs(_expanded(fan_kb, _run(fan_kb, [("p/p.md", 0)], fanout=fanout), 1))
    members = {"q/q.md"} | {f"t{i}/t{i}.md" for i in range(5)}
    assert got <= members
    # Expanded once (from p at depth 1): its members reached at depth 1 may not re-open it.
    assert len(got) == fanout


@pytest.mark.parametrize("fanout", [1, 2])
def test_no_node_contributes_more_than_fanout(fan_kb: KB, monkeypatch, fanout: int) -> None:
    calls: list[int] = []
    real_reach = expand_mod._Walk.reach
    real_docs = expand_mod._Walk.docs_from

    def reach(self, nodes, depth):
        calls.append(len(nodes))
        return real_reach(self, nodes, depth)

    def docs_from(self, doc, banned):
        out = real_docs(self, doc, banned)
        assert len(out) <= fanout
        return out

    monkeypatch.setattr(expand_mod._Walk, "reach", reach)
    monkeypatch.setattr(expand_mod._Walk, "docs_from", docs_from)
    roots = [("r/r.md", 0), ("s/s.md", 0), ("p/p.md", 0), ("g/g.md", 2)]
    out = _run(fan_kb, roots, fanout=fanout)
    assert calls and max(calls) <= fanout
    assert len(out) > len(roots)


def test_adjacent_k_from_the_config_caps_the_channel(tmp_path: Path, monkeypatch) -> None:
    kb = _open(tmp_path / "kb", FAN, graph="adjacent_k = 1")
    try:
        assert kb.config.graph.adjacent_k == 1
        captured = {}
        real = expand_mod.expand

        def spy(graph, ctx, fanout):
            captured["fanout"] = fanout
            return real(graph, ctx, fanout)

        monkeypatch.setattr(expand_mod, "expand", spy)
        kb.search("zeta leaf", channels=["bm25", "dense", "expand"])
        assert captured["fanout"] == 1
    finally:
        kb.close()


# -- hubs expand once -------------------------------------------------------------------------------


def test_a_hub_expands_once_with_several_roots(fan_kb: KB, monkeypatch) -> None:
    hub = _node_index(fan_kb, "tag", "many")
    seen: list[int] = []
    real = Graph.adjacent

    def adjacent(self, node):
        seen.append(int(node))
        return real(self, node)

    monkeypatch.setattr(Graph, "adjacent", adjacent)
    out = _run(fan_kb, [("p/p.md", 0), ("q/q.md", 0), ("t0/t0.md", 0)], fanout=2)
    assert seen.count(hub) == 1
    # Three roots reach the hub; the hub still hands out at most adjacent_k documents.
    got = _docs(_expanded(fan_kb, out, 3)) - {"p/p.md", "q/q.md", "t0/t0.md"}
    assert len(got) <= 2


def test_a_folder_hub_expands_once(chain_kb: KB, monkeypatch) -> None:
    hub = _node_index(chain_kb, "dir", "a")
    seen: list[int] = []
    real = Graph.adjacent

    def adjacent(self, node):
        seen.append(int(node))
        return real(self, node)

    monkeypatch.setattr(Graph, "adjacent", adjacent)
    _run(chain_kb, [("a/a.md", 0), ("a/sib.md", 0)])
    assert seen.count(hub) == 1


# -- ordering ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query", ["zeta", "zeta fox", "zeta golf3 fox fox", "leaf tango quick", "papa quebec"]
)
def test_expanded_chunks_are_ranked_by_query_cosine(fan_kb: KB, query: str) -> None:
    roots = [("r/r.md", 0), ("s/s.md", 0), ("p/p.md", 0)]
    out = _run(fan_kb, roots, fanout=3, query=query)
    ctx = _ctx(fan_kb, query)
    ids = np.array([c for c, _ in out[len(roots) :]], dtype=np.int64)
    assert ids.size
    cos = ctx.dense_scores[ctx.rows_of(ids)]
    assert np.all(np.diff(cos) <= 1e-6)
    assert np.all(cos > 0)
    np.testing.assert_allclose([s for _, s in out[len(roots) :]], cos, rtol=1e-6)


def test_roots_lead_in_seed_order(fan_kb: KB) -> None:
    chunks = _chunks(fan_kb)
    ctx = _ctx(fan_kb, "zeta fox")
    seeds = [
        (chunks["p/p.md", 0], 0.5),
        (chunks["g/g.md", 4], 0.4),
        (chunks["r/r.md", 0], 0.3),
        (chunks["g/g.md", 1], 0.2),
    ]
    ctx.seeds = seeds
    out = expand(graph_for(fan_kb), ctx, 2)
    assert out[: len(seeds)] == seeds
    ids = [c for c, _ in out]
    assert len(ids) == len(set(ids))  # a root is never listed again as an expansion
    assert len(out) > len(seeds)


def test_only_the_first_roots_are_roots(fan_kb: KB) -> None:
    chunks = _chunks(fan_kb)
    every = sorted(chunks.values())
    assert len(every) > ROOTS + 2
    ctx = _ctx(fan_kb, "zeta fox")
    ctx.seeds = [(c, 1.0 / (i + 60)) for i, c in enumerate(every, 1)]
    out = expand(graph_for(fan_kb), ctx, 2)
    assert out[:ROOTS] == ctx.seeds[:ROOTS]
    ids = [c for c, _ in out]
    assert len(ids) == len(set(ids))


def test_candidates_cap_the_list(fan_kb: KB) -> None:
    out = _run(fan_kb, [("r/r.md", 0), ("s/s.md", 0), ("p/p.md", 0)], fanout=8, candidates=5)
    assert len(out) == 5


def test_no_seeds_no_expansion(fan_kb: KB) -> None:
    ctx = _ctx(fan_kb)
    assert expand(graph_for(fan_kb), ctx, 8) == []
    ctx.seeds = [(10_000_000, 1.0)]  # a chunk the graph does not know
    assert expand(graph_for(fan_kb), ctx, 8) == []


# -- filters ----------------------------------------------------------------------------------------


def test_filters_keep_filtered_out_chunks_out(chain_kb: KB) -> None:
    unfiltered = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)]), 1))
    assert "b/b.md" in unfiltered and len(unfiltered) > 1
    got = _docs(_expanded(chain_kb, _run(chain_kb, [("a/a.md", 0)], filters=Filters(path="b")), 1))
    assert got == {"b/b.md"}
    ids = {r[0]: r[1] for r in chain_kb.store().conn.execute("SELECT path, doc_id FROM documents")}
    allowed = ("a/a.md", "b/b.md", "c/c.md", "i/i.md")
    got = _docs(
        _expanded(
            chain_kb,
            _run(
                chain_kb, [("a/a.md", 0)], filters=Filters(doc_ids=tuple(ids[p] for p in allowed))
            ),
            1,
        )
    )
    assert got == {"b/b.md", "c/c.md", "i/i.md"}


def test_filtered_search_never_expands_outside_the_filter(chain_kb: KB) -> None:
    result = chain_kb.search("zeta alpha", channels=["bm25", "dense", "expand"], path="a/")
    assert result.hits
    assert {h.path for h in result.hits} <= {"a/a.md", "a/sib.md"}


# -- the channel in a search ---------------------------------------------------------------------------


def test_search_with_expand_channel(chain_kb: KB, monkeypatch) -> None:
    captured = {}
    real = ExpandChannel.run

    def spy(self, ctx):
        out = real(self, ctx)
        captured["ctx"], captured["out"] = ctx, out
        return out

    monkeypatch.setattr(ExpandChannel, "run", spy)
    result = chain_kb.search("zeta alpha", channels=["bm25", "dense", "expand"], explain=True)
    ctx, out = captured["ctx"], captured["out"]
    # The after-fusion stage starts from the fused first stage: the plain hybrid ranking.
    hybrid = chain_kb.search("zeta alpha", channels=["bm25", "dense"], k=5)
    assert [round(s, 6) for _, s in ctx.seeds[: len(hybrid.hits)]] == [h.score for h in hybrid.hits]
    head = ctx.seeds[:ROOTS]
    assert out[: len(head)] == head
    assert all("expand" in h.ranks for h in result.hits)
    assert any(h.ranks["expand"] is not None for h in result.hits)
    assert "expand" in result.timings_ms


def test_graph_channel_expand_in_config(tmp_path: Path) -> None:
    make_kb(tmp_path / "kb", CHAIN)
    set_config(tmp_path / "kb", "retrieval", 'graph_channel = "expand"')
    kb = KB.open(tmp_path / "kb", embedder=FakeHashEmbedder())
    try:
        kb.sync()
        result = kb.search("zeta alpha", explain=True)
        assert set(result.hits[0].ranks) == {"bm25", "dense", "expand"}
    finally:
        kb.close()


def test_expand_on_a_single_line_kb(tmp_path: Path) -> None:
    kb = _open(tmp_path / "kb", {"one.md": "Just one line about raft.\n"})
    try:
        hybrid = kb.search("raft", channels=["bm25", "dense"])
        graph = kb.search("raft", channels=["bm25", "dense", "expand"])
        assert [(h.doc_id, h.chunk) for h in graph.hits] == [
            (h.doc_id, h.chunk) for h in hybrid.hits
        ]
    finally:
        kb.close()


@pytest.mark.parametrize("fanout", [1, 2])
def test_root_documents_do_not_use_up_a_hubs_fanout(fan_kb: KB, fanout: int) -> None:
    # p and q are roots and both carry tag "many"; the query makes them the hub's best members.
    roots = [("p/p.md", 0), ("q/q.md", 0)]
    out = _run(fan_kb, roots, fanout=fanout, query="zeta papa quebec tagged many")
    got = _docs(_expanded(fan_kb, out, 2)) & {f"t{i}/t{i}.md" for i in range(5)}
    assert len(got) == fanout


def test_expand_channel_without_a_kb_or_a_graph(tmp_path: Path) -> None:
    kb = _open(tmp_path / "empty", {})
    try:
        ctx = _ctx(kb)
        ctx.seeds = [(1, 1.0)]
        assert ExpandChannel().run(ctx) == []  # no documents: an empty graph
        ctx.kb = None
        assert ExpandChannel().run(ctx) == []
        assert kb.search("zeta", channels=["bm25", "dense", "expand"]).hits == []
    finally:
        kb.close()
