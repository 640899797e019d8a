"""Local personalized PageRank by forward push (issue 14), instead of power iteration.

Power iteration multiplies the whole transition matrix ~24 times per query and needs scipy.
Forward push (Andersen, Chung & Lang 2006) keeps an estimate ``p`` and a residual ``r``
(starting at the seeds) and repeatedly moves a node's residual into its estimate — the
``1 - damping`` share stays, the ``damping`` share spreads over its edges by weight — until no
residual exceeds ``epsilon``. Work is spent where mass is: around the heavy seeds (the fused top
hits, matched labels), not on the thin cosine mass every chunk carries. The leftover residuals
are settled in place (each keeps its ``1 - damping`` share), which is what their first push
would give them.

Pushes run in synchronous rounds over all nodes above the threshold at once, with NumPy on the
graph's CSR arrays. A round that spreads over a large share of the edges (the first two or three
of a query, from its ~30,000 seeded chunks) is one sparse product with the adjacency instead,
which adds the same products in the same order, so the result is the same to the last bit
(:func:`spreading_matrix`). The walk matches :func:`pinakes_graph.ppr.personalized_pagerank`:
undirected, weighted, and mass reaching a node without edges returns to the seeds. That return
only rescales the whole vector (the answer with absorbing dead ends, normalised to sum 1, is
the same vector), so push treats dead ends as absorbing and normalises at the end.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EPSILON", "forward_push", "push_pagerank", "spreading_matrix"]

#: Residual below which a node is not pushed. On the 46k-chunk benchmark graph (86k nodes,
#: ppr-rerank's seeds, 20 queries; docs/benchmarks.md) power iteration took 33.5 ms a query and
#: push: 1e-6 → 35.9 ms, top 10 identical 20/20, top-50 overlap 0.989; 3e-6 → 9.6 ms, 20/20,
#: 0.973; 1e-5 → 6.9 ms, 20/20, 0.919; 3e-5 → 1.4 ms, 19/20. The rerank interleaves PPR's
#: head with the fused list, so the head is what must hold.
EPSILON = 3e-6
_MAX_ROUNDS = 200
#: A round over at least this share of the edges is one sparse product over all of them: at
#: 52k chunks (618k edge ends) the product takes ~0.7 ms, gathering a round's edges ~14 ns an
#: edge, so they cost the same near 8 %.
MATRIX_SHARE = 0.08


def forward_push(
    indptr: npt.NDArray[np.int64],
    neighbours: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64],
    seeds: npt.NDArray[np.float64],
    *,
    damping: float,
    epsilon: float = EPSILON,
    degree: npt.NDArray[np.float64] | None = None,
    spreading: Any = None,
) -> npt.NDArray[np.float64]:
    """Approximate personalized PageRank over a CSR graph.

    Args:
        indptr: CSR row pointers (``n + 1``); row ``u`` lists ``u``'s edges (both directions
            of an undirected edge are stored).
        neighbours: the edge targets.
        weights: the edge weights (a node's transition probabilities are its weights over
            their sum).
        seeds: the personalisation vector (non-negative; normalised here).
        damping: probability of following an edge at each step.
        epsilon: push only residuals above this.
        degree: each node's weight sum, when the caller has it (computed otherwise).
        spreading: :func:`spreading_matrix` of the graph, for the rounds that spread over
            more than :data:`MATRIX_SHARE` of the edges (without it every round gathers).

    Returns:
        A probability vector over nodes (all zeros when the seeds are).
    """
    n = seeds.shape[0]
    total = float(seeds.sum())
    if total <= 0:
        return np.zeros(n, dtype=np.float64)
    if degree is None:
        degree = weighted_degree(indptr, weights)
    residual = seeds.astype(np.float64) / total
    estimate = np.zeros(n, dtype=np.float64)
    counts = np.diff(indptr)
    # At least this many edges make a round one product with ``spreading``.
    product_from = MATRIX_SHARE * neighbours.shape[0] if spreading is not None else math.inf
    per_node = np.zeros(n if spreading is not None else 0, dtype=np.float64)
    for _ in range(_MAX_ROUNDS):
        active = np.flatnonzero(residual > epsilon)
        if active.size == 0:
            break
        mass = residual[active]
        residual[active] = 0.0
        estimate[active] += (1.0 - damping) * mass
        spread = counts[active] > 0
        active, mass = active[spread], mass[spread]  # a dead end's share leaves the walk
        if active.size == 0:
            continue
        lengths = counts[active]
        total_edges = int(lengths.sum())
        if total_edges >= product_from and total_edges * 8 >= n:
            # Σ over each target's edges of weight × share, summed from the lowest source as
            # the bincount below sums them; nodes that are not pushed add exact zeros.
            per_node[:] = 0.0
            per_node[active] = damping * mass / degree[active]
            residual += spreading @ per_node
            continue
        # The edge positions of every active node, laid end to end.
        offsets = np.repeat(indptr[active] - np.cumsum(lengths) + lengths, lengths)
        edges = offsets + np.arange(total_edges, dtype=np.int64)
        share = np.repeat(damping * mass / degree[active], lengths) * weights[edges]
        if edges.size * 8 < n:
            np.add.at(residual, neighbours[edges], share)
        else:
            residual += np.bincount(neighbours[edges], weights=share, minlength=n)
    estimate += (1.0 - damping) * residual  # settle what is left where it lies
    return estimate / max(float(estimate.sum()), 1e-300)


def weighted_degree(
    indptr: npt.NDArray[np.int64], weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Each node's sum of edge weights (0 for a node without edges)."""
    counts = np.diff(indptr)
    degree = np.zeros(counts.shape[0], dtype=np.float64)
    rows = np.flatnonzero(counts > 0)
    if rows.size:
        degree[rows] = np.add.reduceat(weights, indptr[rows])
    return degree


def spreading_matrix(graph: Any) -> Any:
    """``graph``'s weighted adjacency, transposed, as a scipy CSR matrix for :func:`forward_push`.

    Row ``v`` holds the weight of every edge ``u → v``, ordered by ``u`` and then by the edge's
    place in ``u``'s row (the order a CSR-to-CSC conversion keeps, parallel edges included):
    the order in which a round's ``bincount`` adds the shares reaching ``v``. Its product with
    the pushed nodes' shares is therefore that round's spread, bit for bit.
    """
    return graph.adjacency().T.tocsr()


def push_pagerank(
    graph: Any, seeds: npt.NDArray[np.float64], *, damping: float, epsilon: float = EPSILON
) -> npt.NDArray[np.float64]:
    """:func:`forward_push` over a :class:`pinakes_graph.cache.Graph`.

    Its weighted degrees and :func:`spreading_matrix` are built on first use and kept on it.
    """
    cached = getattr(graph, "_push_arrays", None)
    if cached is None or cached[0].shape[0] != len(graph):
        degree = weighted_degree(graph.indptr, graph.weights)
        spreading = spreading_matrix(graph)
        cached = (degree, spreading)
        # The graph is immutable once built (a new store generation builds a new one).
        object.__setattr__(graph, "_push_arrays", cached)
    return forward_push(
        graph.indptr,
        graph.neighbours,
        graph.weights,
        seeds,
        damping=damping,
        epsilon=epsilon,
        degree=cached[0],
        spreading=cached[1],
    )
