"""Local PPR by forward push against exact power iteration (issue 14).

Push is an approximation; these tests hold it to the exact answer: to 1e-9 with a tiny
``epsilon`` (so the walk itself — weights, dead ends returning their mass to the seeds — is the
same), and at the default ``epsilon`` to the same top of the ranking on random graphs shaped
like the KB graph (a few hubs, many small documents) and on a real KB's graph.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pinakes_graph")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ppr import _graph, _networkx_ppr, graphs_and_seeds

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_graph import push as push_module
from pinakes_graph.cache import graph_for
from pinakes_graph.ppr import DAMPING, personalized_pagerank
from pinakes_graph.push import EPSILON, forward_push, push_pagerank, spreading_matrix

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_seeds())
def test_push_converges_to_networkx(case) -> None:
    n, edges, seeds = case
    graph = _graph(n, edges)
    ours = push_pagerank(graph, seeds, damping=0.5, epsilon=1e-13)
    np.testing.assert_allclose(ours, _networkx_ppr(n, edges, seeds), atol=1e-9)


def _kb_like_graph(rng: np.random.Generator, docs: int) -> tuple[int, list[tuple[int, int, float]]]:
    """Documents of 2–8 chunks in a chain, a few hub nodes (folders, tags) joining documents
    with light edges, and sparse cross-document links; isolated nodes included."""
    edges: list[tuple[int, int, float]] = []
    node = 0
    heads = []
    for _ in range(docs):
        size = int(rng.integers(2, 9))
        chunk_nodes = list(range(node, node + size))
        heads.append(node)
        edges += [(a, b, 1.0) for a, b in itertools.pairwise(chunk_nodes)]
        node += size
    hubs = list(range(node, node + 12))
    node += 12
    for head in heads:
        for hub in rng.choice(hubs, size=int(rng.integers(1, 3)), replace=False):
            edges.append((head, int(hub), 1.0 / 40))
    for _ in range(docs // 2):
        a, b = rng.choice(heads, 2, replace=False)
        edges.append((int(a), int(b), float(rng.uniform(0.3, 1.0))))
    return node + 3, edges  # three isolated nodes


def _seeds(rng: np.random.Generator, n: int, chunks: np.ndarray) -> np.ndarray:
    """The rerank's personalisation: 0.2 spread by cosine over chunks, 0.8 on two top hits."""
    seeds = np.zeros(n)
    seeds[chunks] = np.maximum(rng.normal(0.25, 0.15, chunks.size), 0.0)
    seeds *= 0.2 / seeds.sum()
    top = rng.choice(chunks, 2, replace=False)
    seeds[top] += [0.5, 0.3]
    return seeds


def _top(scores: np.ndarray, nodes: np.ndarray, k: int) -> list[int]:
    return nodes[np.argsort(-scores[nodes], kind="stable")][:k].tolist()


@pytest.mark.parametrize("seed", range(6))
def test_default_epsilon_keeps_the_exact_top_ranking(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, edges = _kb_like_graph(rng, 400)
    graph = _graph(n, edges)
    transition = graph.transition_t()
    chunks = np.arange(n - 15)  # hubs and isolated nodes are not passages
    for _ in range(5):
        seeds = _seeds(rng, n, chunks)
        exact = personalized_pagerank(transition, seeds, tol=1e-12)
        pushed = push_pagerank(graph, seeds, damping=DAMPING, epsilon=EPSILON)
        assert np.abs(exact - pushed).sum() < 5e-3
        assert _top(pushed, chunks, 10) == _top(exact, chunks, 10)
        assert len(set(_top(pushed, chunks, 50)) & set(_top(exact, chunks, 50))) >= 48


@pytest.fixture
def example_graph(tmp_path: Path) -> Iterator[Any]:
    """The graph of the bundled example KB (synced with the fake embedder)."""
    import shutil

    root = tmp_path / "kb"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".pinakes"))
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        yield graph_for(kb)


def test_push_matches_power_iteration_on_a_real_kb_graph(example_graph: Any) -> None:
    graph = example_graph
    assert len(graph) > 50
    chunks = np.flatnonzero(graph.chunk_id >= 0)
    rng = np.random.default_rng(9)
    for _ in range(10):
        seeds = _seeds(rng, len(graph), chunks)
        exact = personalized_pagerank(graph.transition_t(), seeds, tol=1e-12)
        pushed = push_pagerank(graph, seeds, damping=DAMPING)
        assert _top(pushed, chunks, 10) == _top(exact, chunks, 10)


def test_push_of_nothing_is_nothing() -> None:
    graph = _graph(4, [(0, 1, 1.0)])
    assert not push_pagerank(graph, np.zeros(4), damping=DAMPING).any()


def test_push_handles_dead_ends_in_the_small_kb(tmp_path: Path) -> None:
    # The small KB has a text file without headings: a dead end whose mass returns to the seeds.
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        graph = graph_for(kb)
        seeds = np.zeros(len(graph))
        seeds[np.flatnonzero(graph.chunk_id >= 0)] = 1.0
        exact = personalized_pagerank(graph.transition_t(), seeds, tol=1e-13)
        np.testing.assert_allclose(
            push_pagerank(graph, seeds, damping=DAMPING, epsilon=1e-13), exact, atol=1e-9
        )


# -- rounds as one sparse product: the same vector, bit for bit ---------------------------------


class _CountingProduct:
    """Wraps the spreading matrix and counts the rounds that used it."""

    def __init__(self, matrix) -> None:
        self.matrix = matrix
        self.products = 0

    def __matmul__(self, vector):
        self.products += 1
        return self.matrix @ vector


def _both_ways(graph, seeds, *, epsilon: float = EPSILON):
    """Push by gathering every round, and with the spreading matrix (counting its rounds)."""
    gathered = forward_push(
        graph.indptr, graph.neighbours, graph.weights, seeds, damping=DAMPING, epsilon=epsilon
    )
    spreading = _CountingProduct(spreading_matrix(graph))
    product = forward_push(
        graph.indptr,
        graph.neighbours,
        graph.weights,
        seeds,
        damping=DAMPING,
        epsilon=epsilon,
        spreading=spreading,
    )
    return gathered, product, spreading.products


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_seeds(), st.sampled_from([0.0, 0.3, 1.0]))
def test_product_rounds_equal_gathered_rounds_bit_for_bit(case, share: float) -> None:
    n, edges, seeds = case
    graph = _graph(n, edges)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(push_module, "MATRIX_SHARE", share)
        gathered, product, _ = _both_ways(graph, seeds, epsilon=1e-9)
    np.testing.assert_array_equal(product, gathered)


@pytest.mark.parametrize("seed", range(4))
def test_product_rounds_are_exact_on_kb_shaped_graphs_with_parallel_edges(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, edges = _kb_like_graph(rng, 400)
    edges += edges[: len(edges) // 10]  # parallel edges: a link that is also a title mention
    graph = _graph(n, edges)
    chunks = np.arange(n - 15)
    for _ in range(3):
        gathered, product, products = _both_ways(graph, _seeds(rng, n, chunks))
        assert products >= 1  # the seeded chunks' first round spreads over most edges
        np.testing.assert_array_equal(product, gathered)


def test_push_pagerank_uses_the_product_and_keeps_the_vector_on_a_real_kb(
    example_graph: Any,
) -> None:
    graph = example_graph
    chunks = np.flatnonzero(graph.chunk_id >= 0)
    rng = np.random.default_rng(3)
    for _ in range(5):
        seeds = _seeds(rng, len(graph), chunks)
        gathered, product, products = _both_ways(graph, seeds)
        assert products >= 1
        np.testing.assert_array_equal(product, gathered)
        np.testing.assert_array_equal(push_pagerank(graph, seeds, damping=DAMPING), gathered)
