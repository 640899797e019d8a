"""Personalized PageRank: a differential test against networkx, properties, the cached graph and
the ``ppr`` channel end to end (DESIGN §6, "PPR channel")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pinakes_graph")

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_kb, set_config
from pinakes_core import KB
from pinakes_core.search.context import Filters, QueryContext
from pinakes_core.search.fusion import query_shape
from pinakes_graph import cache as graph_cache
from pinakes_graph.cache import Graph, best_first, graph_for
from pinakes_graph.ppr import (
    DAMPING,
    TAIL_PPR_WEIGHT,
    PprChannel,
    PprRerank,
    _blend_tail,
    personalized_pagerank,
    query_seeds,
    seed_vector,
    start_seed_vector,
)

# -- an in-memory Graph built from an edge list, exactly as cache._build lays out its CSR ---------


def _graph(n: int, edges: list[tuple[int, int, float]]) -> Graph:
    """A ``Graph`` of ``n`` chunk nodes whose undirected adjacency holds ``edges``."""
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    weight = np.array([e[2] for e in edges], dtype=np.float64)
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    w = np.concatenate([weight, weight])
    order = np.argsort(a, kind="stable")
    a, b, w = a[order], b[order], w[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, a + 1, 1)
    indptr = np.cumsum(indptr)
    return Graph(
        kind=np.zeros(n, dtype=np.int8),
        chunk_id=np.arange(n, dtype=np.int64),
        doc_of=np.full(n, -1, dtype=np.int64),
        indptr=indptr,
        neighbours=b,
        weights=w,
        edge_kind=np.zeros(b.shape[0], dtype=np.int8),
        members={},
        node_of_chunk={i: i for i in range(n)},
        label_nodes=np.zeros(0, dtype=np.int64),
        label_vectors=np.zeros((0, 1), dtype=np.float32),
        chunk_count=np.zeros(n, dtype=np.float64),
    )


def _independent_transition_t(n: int, edges: list[tuple[int, int, float]]) -> np.ndarray:
    """Dense transposed row-stochastic matrix: symmetric adjacency, row-normalise, transpose."""
    adjacency = np.zeros((n, n))
    for u, v, w in edges:
        adjacency[u, v] += w
        adjacency[v, u] += w
    degree = adjacency.sum(axis=1)
    rows = np.divide(
        adjacency, degree[:, None], out=np.zeros_like(adjacency), where=degree[:, None] > 0
    )
    return rows.T


@st.composite
def weighted_graphs(draw, max_nodes: int = 12):
    """A small weighted undirected simple graph (no self-loops, isolated nodes allowed)."""
    n = draw(st.integers(min_value=1, max_value=max_nodes))
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    chosen = (
        draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    )
    weights = draw(
        st.lists(
            st.floats(min_value=0.01, max_value=10.0, allow_nan=False),
            min_size=len(chosen),
            max_size=len(chosen),
        )
    )
    return n, [(u, v, w) for (u, v), w in zip(chosen, weights, strict=True)]


@st.composite
def graphs_and_seeds(draw):
    """A graph and a non-negative, non-zero personalisation (mass on some nodes only)."""
    n, edges = draw(weighted_graphs())
    support = draw(
        st.lists(st.integers(min_value=0, max_value=n - 1), min_size=1, max_size=n, unique=True)
    )
    seeds = np.zeros(n)
    for node in support:
        seeds[node] = draw(st.floats(min_value=0.001, max_value=5.0, allow_nan=False))
    return n, edges, seeds


def _networkx_ppr(n: int, edges: list[tuple[int, int, float]], seeds: np.ndarray) -> np.ndarray:
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_weighted_edges_from(edges)
    personalization = {i: float(s) for i, s in enumerate(seeds) if s > 0}
    scores = nx.pagerank(
        graph,
        alpha=0.5,
        personalization=personalization,
        weight="weight",
        tol=1e-13,
        max_iter=10_000,
    )
    return np.array([scores[i] for i in range(n)])


# -- 1. differential test against networkx -------------------------------------------------------


def test_default_damping_is_half() -> None:
    assert DAMPING == 0.5


def test_matches_networkx_on_a_hand_built_graph_with_isolated_nodes() -> None:
    # A path 0-1-2-3, a triangle 4-5-6 and isolated 7 and 8; mass on 1, 5 and isolated 8 only.
    edges = [(0, 1, 1.0), (1, 2, 2.5), (2, 3, 0.3), (4, 5, 1.0), (5, 6, 4.0), (4, 6, 0.5)]
    seeds = np.zeros(9)
    seeds[[1, 5, 8]] = [0.2, 1.0, 0.4]
    graph = _graph(9, edges)
    ours = personalized_pagerank(graph.transition_t(), seeds, damping=0.5, tol=1e-13)
    theirs = _networkx_ppr(9, edges, seeds)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    assert ours[7] == 0.0  # isolated and unseeded: nothing ever reaches it
    assert ours[8] > 0.0


@pytest.mark.parametrize("seed", range(8))
def test_matches_networkx_on_random_graphs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 30))
    density = rng.uniform(0.05, 0.4)
    edges = [
        (u, v, float(rng.uniform(0.05, 5.0)))
        for u in range(n)
        for v in range(u + 1, n)
        if rng.random() < density
    ]
    seeds = np.zeros(n)
    support = rng.choice(n, size=int(rng.integers(1, max(2, n // 3))), replace=False)
    seeds[support] = rng.uniform(0.01, 3.0, size=support.size)
    ours = personalized_pagerank(_graph(n, edges).transition_t(), seeds, tol=1e-13, max_iter=1000)
    np.testing.assert_allclose(ours, _networkx_ppr(n, edges, seeds), atol=1e-6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_seeds())
def test_matches_networkx_property(case) -> None:
    n, edges, seeds = case
    ours = personalized_pagerank(_graph(n, edges).transition_t(), seeds, tol=1e-13, max_iter=1000)
    np.testing.assert_allclose(ours, _networkx_ppr(n, edges, seeds), atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(weighted_graphs())
def test_transition_matrix_is_the_transposed_row_normalised_adjacency(case) -> None:
    n, edges = case
    matrix = _graph(n, edges).transition_t().toarray()
    np.testing.assert_allclose(matrix, _independent_transition_t(n, edges), atol=1e-12)
    # Columns of nodes with edges sum to one; columns of isolated nodes are zero.
    sums = matrix.sum(axis=0)
    connected = {u for u, _, _ in edges} | {v for _, v, _ in edges}
    for i in range(n):
        assert sums[i] == pytest.approx(1.0 if i in connected else 0.0, abs=1e-12)


# -- 2. properties ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(graphs_and_seeds(), st.floats(min_value=0.05, max_value=0.95))
def test_output_is_a_probability_vector(case, damping: float) -> None:
    n, edges, seeds = case
    scores = personalized_pagerank(_graph(n, edges).transition_t(), seeds, damping=damping)
    assert scores.shape == (n,)
    assert np.all(scores >= 0.0)
    assert scores.sum() == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(graphs_and_seeds(), st.floats(min_value=0.01, max_value=1000.0))
def test_seed_scale_does_not_matter(case, factor: float) -> None:
    n, edges, seeds = case
    matrix = _graph(n, edges).transition_t()
    np.testing.assert_allclose(
        personalized_pagerank(matrix, seeds * factor),
        personalized_pagerank(matrix, seeds),
        atol=1e-9,
    )


@settings(max_examples=40, deadline=None)
@given(weighted_graphs())
def test_isolated_only_seed_keeps_all_mass(case) -> None:
    n, edges = case
    graph = _graph(n + 1, edges)  # node n has no edge
    seeds = np.zeros(n + 1)
    seeds[n] = 3.0
    scores = personalized_pagerank(graph.transition_t(), seeds)
    assert scores[n] == pytest.approx(1.0, abs=1e-12)
    assert np.all(scores[:n] == 0.0)


@settings(max_examples=30, deadline=None)
@given(weighted_graphs())
def test_zero_seeds_give_zeros(case) -> None:
    n, edges = case
    scores = personalized_pagerank(_graph(n, edges).transition_t(), np.zeros(n))
    assert scores.shape == (n,)
    assert not scores.any()


def test_mass_stays_in_the_seeds_component() -> None:
    edges = [(0, 1, 1.0), (1, 2, 1.0), (3, 4, 1.0)]
    seeds = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    scores = personalized_pagerank(_graph(5, edges).transition_t(), seeds)
    assert scores[3] == scores[4] == 0.0
    assert scores[0] > scores[1] > scores[2] > 0.0


# -- 3. the cached graph and transition matrix -------------------------------------------------------


def test_the_tail_follows_its_documents_ppr_mass_below_the_head() -> None:
    # Chunks 0-3, 7, 8; document nodes 4 (chunks 0, 7 and 8: the head's), 5 (chunk 1) and 6
    # (chunks 2, 3).
    graph = _graph(9, [])
    graph.doc_of = np.array([4, 5, 6, 6, -1, -1, -1, 4, 4], dtype=np.int64)
    # Chunk 1 holds much mass itself, but its document little; document 6 receives the most
    # (links end at document nodes) while its passages hold little each. The head's document
    # holds more than any.
    mass = np.array([0.3, 0.5, 0.01, 0.01, 0.6, 0.1, 0.4, 0.01, 0.01])
    fused = {0: 0.9, 1: 0.6, 2: 0.3, 3: 0.2, 7: 0.5}
    pool = {c: float(mass[c]) for c in (1, 2, 3, 7, 8)}
    cap = 0.9 * (1 - 1e-6)
    tail = dict(_blend_tail(graph, mass, pool, [(0, 0.9)], fused, cap))
    assert tail[2] == pytest.approx(cap) and tail[3] == pytest.approx(cap)  # g = 1
    g = 0.1 / 0.4  # document 5 over the largest document outside the head
    assert tail[1] == pytest.approx(g * cap + (1 - TAIL_PPR_WEIGHT) * (1 - g) * 0.6)
    # Other passages of the head's document keep their own evidence, not its mass.
    assert tail[7] == pytest.approx(0.5) and tail[8] == 0.0
    assert max(tail.values()) <= cap < 0.9


def test_transition_matrix_is_built_once() -> None:
    graph = _graph(4, [(0, 1, 1.0), (2, 3, 2.0)])
    first = graph.transition_t()
    assert graph.transition_t() is first


def test_transition_matrix_is_built_once_without_rebuilding(monkeypatch) -> None:
    from scipy import sparse

    graph = _graph(3, [(0, 1, 1.0), (1, 2, 1.0)])
    calls = []
    real = sparse.csr_matrix

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sparse, "csr_matrix", counting)
    graph.transition_t()
    graph.transition_t()
    graph.transition_t()
    assert len(calls) == 1


PPR_FILES = {
    "raft/raft.md": (
        "---\ntags: [consensus]\n---\n# Raft\n\nRaft elects a leader with randomized timeouts.\n\n"
        "## Log\n\nThe leader replicates the log to followers. See [[paxos]].\n"
    ),
    "paxos/paxos.md": (
        "---\ntags: [consensus]\n---\n# Paxos\n\nPaxos reaches agreement with acceptors.\n"
    ),
    "garden/tomatoes.md": "# Tomatoes\n\nTomatoes need full sun and regular watering.\n",
    "ops/deploy.md": "# Deploy\n\nRoll the pods one by one after the migration.\n",
}


@pytest.fixture
def ppr_kb(tmp_path: Path):
    root = make_kb(tmp_path / "kb", PPR_FILES)
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


def test_graph_for_is_cached_per_generation(ppr_kb: KB) -> None:
    first = graph_for(ppr_kb)
    assert graph_for(ppr_kb) is first
    matrix = first.transition_t()
    assert graph_for(ppr_kb).transition_t() is matrix
    generation = ppr_kb.store().generation()
    (ppr_kb.root / "ops" / "deploy.md").write_text(
        "# Deploy\n\nRoll the pods, then check the dashboards.\n", encoding="utf-8"
    )
    ppr_kb.sync()
    assert ppr_kb.store().generation() != generation
    second = graph_for(ppr_kb)
    assert second is not first
    assert graph_for(ppr_kb) is second
    assert second.transition_t() is not matrix


def test_graph_for_reads_one_snapshot_while_another_process_syncs(ppr_kb: KB) -> None:
    """A sync committing between the graph's reads (nodes, then edges) changes nothing it sees."""
    store = ppr_kb.store()
    real = store.conn
    nodes = real.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]

    class Between:
        """The store's connection; another KB syncs a new document before the edges are read."""

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def execute(self, sql: str, *args):  # type: ignore[no-untyped-def]
            if sql.startswith("SELECT src, dst"):
                (ppr_kb.root / "late.md").write_text("# Late\n\nSee [[Deploy]].\n")
                KB.open(ppr_kb.root, embedder=FakeHashEmbedder()).sync()
            return real.execute(sql, *args)

    graph_cache._CACHE.pop(ppr_kb, None)
    store.conn = Between()
    try:
        graph = graph_for(ppr_kb)
    finally:
        store.conn = real
    assert len(graph.node_ids) == nodes  # the snapshot of the first read
    assert real.execute("SELECT COUNT(*) FROM nodes").fetchone()[0] > nodes
    assert graph_for(ppr_kb) is not graph  # the next generation's


def test_graph_for_builds_once_per_generation(ppr_kb: KB, monkeypatch) -> None:
    builds = []
    real = graph_cache._build

    def counting(store):
        builds.append(1)
        return real(store)

    monkeypatch.setattr(graph_cache, "_build", counting)
    graph_cache._CACHE.pop(ppr_kb, None)
    for _ in range(3):
        graph_for(ppr_kb)
    assert len(builds) == 1
    ppr_kb.search("raft leader", channels=["bm25", "dense", "ppr"])
    assert len(builds) == 1
    (ppr_kb.root / "garden" / "beans.md").write_text("# Beans\n\nBeans climb.\n", encoding="utf-8")
    ppr_kb.sync()
    graph_for(ppr_kb)
    graph_for(ppr_kb)
    assert len(builds) == 2


def test_graphs_of_two_kbs_are_separate(ppr_kb: KB, tmp_path: Path) -> None:
    root = make_kb(tmp_path / "other", {"x.md": "# X\n\nx text.\n"})
    other = KB.open(root, embedder=FakeHashEmbedder())
    try:
        other.sync()
        assert graph_for(other) is not graph_for(ppr_kb)
        assert len(graph_for(other)) < len(graph_for(ppr_kb))
    finally:
        other.close()


# -- 5. the channel end to end ---------------------------------------------------------------------


def test_search_hits_carry_ppr_ranks(ppr_kb: KB) -> None:
    result = ppr_kb.search("raft leader log", channels=["bm25", "dense", "ppr"], explain=True)
    assert result.hits
    assert all("ppr" in hit.ranks for hit in result.hits)
    ranked = [hit for hit in result.hits if hit.ranks["ppr"] is not None]
    assert ranked, "no hit was ranked by the ppr channel"
    for hit in ranked:
        assert hit.channel_scores is not None and hit.channel_scores["ppr"] > 0
    assert "ppr" in result.timings_ms


def test_ppr_channel_scores_are_ppr_mass(ppr_kb: KB, monkeypatch) -> None:
    captured = {}
    real = PprChannel.run

    def spy(self, ctx):
        out = real(self, ctx)
        captured["ctx"], captured["out"] = ctx, out
        return out

    monkeypatch.setattr(PprChannel, "run", spy)
    ppr_kb.search("raft leader log", channels=["bm25", "dense", "ppr"])
    out = captured["out"]
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)
    # Chunks only, each once, and their mass is at most the whole distribution.
    ids = [c for c, _ in out]
    assert len(ids) == len(set(ids))
    conn = ppr_kb.store().conn
    known = {r[0] for r in conn.execute("SELECT chunk_id FROM chunks")}
    assert set(ids) <= known
    assert sum(scores) <= 1.0 + 1e-9


def test_ppr_channel_respects_filters(ppr_kb: KB, monkeypatch) -> None:
    captured = {}
    real = PprChannel.run

    def spy(self, ctx):
        captured["out"] = out = real(self, ctx)
        return out

    monkeypatch.setattr(PprChannel, "run", spy)
    result = ppr_kb.search("raft leader log", channels=["bm25", "dense", "ppr"], path="raft/")
    assert {hit.path for hit in result.hits} == {"raft/raft.md"}
    conn = ppr_kb.store().conn
    paths = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT c.chunk_id, d.path FROM chunks c JOIN documents d USING (doc_id)"
        )
    }
    assert captured["out"]
    assert {paths[c] for c, _ in captured["out"]} == {"raft/raft.md"}


def test_single_line_kb_degrades_to_plain_hybrid(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"one.md": "Just one line about raft.\n"})
    handle = KB.open(root, embedder=FakeHashEmbedder())
    try:
        handle.sync()
        hybrid = handle.search("raft", channels=["bm25", "dense"])
        graph = handle.search("raft", channels=["bm25", "dense", "ppr"], explain=True)
        assert [(h.doc_id, h.chunk) for h in graph.hits] == [
            (h.doc_id, h.chunk) for h in hybrid.hits
        ]
        assert len(graph.hits) == 1
    finally:
        handle.close()


def test_kb_without_documents_has_an_empty_graph(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {})
    handle = KB.open(root, embedder=FakeHashEmbedder())
    try:
        handle.sync()
        assert len(graph_for(handle)) == 0
        result = handle.search("anything", channels=["bm25", "dense", "ppr"], explain=True)
        assert result.hits == []
    finally:
        handle.close()


def test_graph_channel_setting_adds_ppr_to_default_searches(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", PPR_FILES)
    set_config(root, "retrieval", 'graph_channel = "ppr"')
    handle = KB.open(root, embedder=FakeHashEmbedder())
    try:
        handle.sync()
        result = handle.search("raft leader", explain=True)
        assert result.hits
        assert set(result.hits[0].ranks) == {"bm25", "dense", "ppr"}
        assert "ppr" in result.timings_ms
    finally:
        handle.close()


def test_graph_channel_is_off_by_default(ppr_kb: KB) -> None:
    result = ppr_kb.search("raft leader", explain=True)
    assert set(result.hits[0].ranks) == {"bm25", "dense"}


def test_ppr_channel_without_a_kb(ppr_kb: KB) -> None:
    ctx = QueryContext(
        query="raft",
        conn=ppr_kb.store().conn,
        filters=Filters(),
        candidates=50,
        vectors=ppr_kb.vectors,
        embed_query=ppr_kb.embedder.embed_query,
    )
    assert PprChannel().run(ctx) == []


@given(
    st.lists(st.integers(min_value=0, max_value=6), min_size=0, max_size=60),
    st.integers(min_value=0, max_value=70),
)
def test_best_first_is_the_stable_sorts_head(values: list[int], k: int) -> None:
    array = np.asarray(values, dtype=np.float64)  # few distinct values: many ties
    expected = np.argsort(-array, kind="stable")[:k]
    assert best_first(array, k).tolist() == expected.tolist()


def _expected_cosine(graph: Graph, ctx: QueryContext) -> list[float]:
    out = []
    for chunk in graph.chunk_id.tolist():
        row = int(ctx.rows_of(np.array([chunk]))[0]) if chunk >= 0 else -1
        out.append(float(ctx.dense_scores[row]) if row >= 0 else -1.0)
    return out


def test_chunk_cosine_follows_the_matrix_of_each_query(ppr_kb: KB) -> None:
    graph = graph_for(ppr_kb)
    ctx = ppr_kb.query_context("paxos acceptors")
    assert graph.chunk_cosine(ctx).tolist() == pytest.approx(_expected_cosine(graph, ctx))
    # Another handle on the same store has its own matrix: the rows are looked up again.
    other = KB.open(ppr_kb.root, embedder=FakeHashEmbedder())
    try:
        theirs = other.query_context("tomatoes need sun")
        assert theirs.vectors is not ctx.vectors
        assert graph.chunk_cosine(theirs).tolist() == pytest.approx(_expected_cosine(graph, theirs))
        assert graph._vector_rows[0] is theirs.vectors.chunk_ids
    finally:
        other.close()


# -- the seed vector, started beside the first stage ----------------------------------------------

RELATIONAL = "which protocol does the leader that replicates the log rely on"


def _ranked(result) -> list[tuple[str, int, float]]:
    return [(h.path, h.chunk, h.score) for h in result.hits]


def test_seed_vector_started_on_the_worker_is_the_one_computed_inline(ppr_kb: KB) -> None:
    ctx = ppr_kb.query_context(RELATIONAL)
    graph = graph_for(ppr_kb)
    start_seed_vector(ctx)
    assert ctx.prepared == {}  # the dense work was not started: nothing to overlap
    ctx.start_dense()
    start_seed_vector(ctx)
    assert ctx.prepared
    first = query_seeds(graph, ctx)
    np.testing.assert_array_equal(first, seed_vector(graph, ctx))
    first[:] = 0.0  # callers scale their copy in place
    np.testing.assert_array_equal(query_seeds(graph, ctx), seed_vector(graph, ctx))
    filtered = ppr_kb.query_context(RELATIONAL, filters=Filters(tags=("consensus",)))
    filtered.start_dense()
    start_seed_vector(filtered)
    assert filtered.prepared == {}  # filtered rows come from SQL, which the worker never reads


@pytest.mark.parametrize("channel", ["ppr-auto", "ppr-rerank", "ppr"])
def test_starting_the_seed_vector_early_changes_no_ranking(
    ppr_kb: KB, monkeypatch: pytest.MonkeyPatch, channel: str
) -> None:
    started: list[str] = []
    real = start_seed_vector

    def recording(ctx: QueryContext) -> None:
        started.append(ctx.query)
        real(ctx)

    monkeypatch.setattr("pinakes_graph.ppr.start_seed_vector", recording)
    channels = ["bm25", "dense", channel]
    early = ppr_kb.search(RELATIONAL, channels=channels, explain=True)
    assert started == [RELATIONAL]
    if channel == "ppr-auto":
        assert early.ranking is not None and early.ranking.stages[channel].startswith("ran")
    monkeypatch.setattr(PprRerank, "prepare", lambda self, ctx: None)
    monkeypatch.setattr(PprChannel, "prepare", lambda self, ctx: None, raising=False)
    inline = ppr_kb.search(RELATIONAL, channels=channels, explain=True)
    assert _ranked(inline) == _ranked(early)


def test_the_gate_starts_no_seed_vector_for_a_single_hop_query(
    ppr_kb: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    monkeypatch.setattr("pinakes_graph.ppr.start_seed_vector", started.append)
    result = ppr_kb.search("raft leader timeouts", channels=["bm25", "dense", "ppr-auto"])
    assert result.hits and started == []


def test_two_questions_in_one_open_the_gate_only_with_another_relation(ppr_kb: KB) -> None:
    channels = ["bm25", "dense", "ppr-auto"]
    conjunction = "how does raft elect a leader, and what does the log store?"
    bridged = "how does raft elect a leader, and which protocol does the log that it keeps use?"
    assert query_shape(conjunction).relations == ("two questions",)
    assert set(query_shape(bridged).relations) > {"two questions"}
    alone = ppr_kb.search(conjunction, channels=channels, explain=True)
    plain = ppr_kb.search(conjunction, channels=["bm25", "dense"])
    assert alone.ranking is not None
    assert alone.ranking.stages["ppr-auto"].startswith("skipped: single-hop")
    assert [(h.path, h.chunk, h.score) for h in alone.hits] == [
        (h.path, h.chunk, h.score) for h in plain.hits
    ]
    with_relation = ppr_kb.search(bridged, channels=channels, explain=True)
    assert with_relation.ranking is not None
    reason = with_relation.ranking.stages["ppr-auto"]
    assert reason.startswith("ran: multi-hop phrasing") and "two questions" in reason
