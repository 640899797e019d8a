"""Personalized PageRank channel: HippoRAG 2's recipe on the KB's free graph (DESIGN §6).

Damping 0.5 (HippoRAG 2, Gutiérrez et al. 2025: half the mass returns to the seeds each step, so
the walk stays near the query's evidence), undirected, weighted. The personalisation vector
holds up to five metadata seeds — tag and heading nodes whose label embedding matches the query,
weighted by match score × 1 / the chunks they connect — plus every chunk node at
max(0, cosine) × 0.05 (HippoRAG 2's passage-node weight; seeding all chunks is what keeps
simple lookups from regressing). Power iteration with scipy.sparse to tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.channels import QueryContext, Ranked
from pinakes_graph.cache import Graph, graph_for

__all__ = ["DAMPING", "PASSAGE_WEIGHT", "PprChannel", "personalized_pagerank", "seed_vector"]

DAMPING = 0.5
PASSAGE_WEIGHT = 0.05
MAX_METADATA_SEEDS = 5
#: A tag/heading label must match the query at least this well to seed (all-MiniLM-L6-v2 cosine).
LABEL_MIN = 0.35


def personalized_pagerank(
    transition_t: Any,
    seeds: npt.NDArray[np.float64],
    *,
    damping: float = DAMPING,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> npt.NDArray[np.float64]:
    """Personalized PageRank by power iteration.

    Args:
        transition_t: the transposed row-stochastic transition matrix (rows of isolated nodes
            are zero; their mass returns to the seeds, as networkx does for dangling nodes).
        seeds: the personalisation vector (any non-negative weights; normalised here).
        damping: probability of following an edge at each step.
        tol: stop when the L1 change falls below this.
        max_iter: iteration cap.

    Returns:
        A probability vector over nodes.
    """
    total = seeds.sum()
    if total <= 0:
        return np.zeros_like(seeds)
    s: npt.NDArray[np.float64] = seeds / total
    p = s.copy()
    for _ in range(max_iter):
        spread = np.asarray(transition_t @ p, dtype=np.float64)
        lost = 1.0 - spread.sum()  # mass sitting on nodes without edges
        nxt: npt.NDArray[np.float64] = (1.0 - damping) * s + damping * (spread + lost * s)
        if np.abs(nxt - p).sum() < tol:
            return nxt
        p = nxt
    return p


def seed_vector(graph: Graph, ctx: QueryContext) -> npt.NDArray[np.float64]:
    """The personalisation vector for the query in ``ctx``."""
    seeds = np.zeros(len(graph), dtype=np.float64)
    chunk_nodes = np.flatnonzero(graph.chunk_id >= 0)
    rows = ctx.rows_of(graph.chunk_id[chunk_nodes])
    if ctx.dense_scores.size:
        cosine = np.where(rows >= 0, ctx.dense_scores[np.clip(rows, 0, None)], 0.0)
        seeds[chunk_nodes] = np.maximum(cosine, 0.0) * PASSAGE_WEIGHT
    if graph.label_nodes.size and graph.label_vectors.shape[1] == ctx.query_vector.shape[0]:
        match = graph.label_vectors @ ctx.query_vector
        best = np.argsort(-match)[:MAX_METADATA_SEEDS]
        for i in best:
            if match[i] >= LABEL_MIN:
                node = graph.label_nodes[i]
                seeds[node] += float(match[i]) / max(graph.chunk_count[node], 1.0)
    return seeds


class PprChannel:
    """The ``ppr`` retrieval channel: chunks ranked by PPR mass from the query's seeds."""

    name = "ppr"
    after_fusion = True

    def run(self, ctx: QueryContext) -> Ranked:
        """Rank chunk nodes by their PPR score (filters applied to seeds and output)."""
        if ctx.kb is None:
            return []
        graph = graph_for(ctx.kb)
        if len(graph) == 0:
            return []
        scores = personalized_pagerank(graph.transition_t(), seed_vector(graph, ctx))
        chunk_nodes = np.flatnonzero((graph.chunk_id >= 0) & (scores > 0))
        if ctx.allowed_rows is not None:
            rows = ctx.rows_of(graph.chunk_id[chunk_nodes])
            keep = (rows >= 0) & ctx.allowed_rows[np.clip(rows, 0, None)]
            chunk_nodes = chunk_nodes[keep]
        top = chunk_nodes[np.argsort(-scores[chunk_nodes], kind="stable")[: ctx.candidates]]
        return [(int(graph.chunk_id[i]), float(scores[i])) for i in top]
