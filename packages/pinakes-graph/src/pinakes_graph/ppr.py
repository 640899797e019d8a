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
from pinakes_graph.cache import Graph, GraphChannel, graph_for

__all__ = [
    "DAMPING",
    "PASSAGE_WEIGHT",
    "PprChannel",
    "personalized_pagerank",
    "seed_vector",
    "with_plugin_seeds",
]

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
    tol: float = 1e-7,
    max_iter: int = 200,
) -> npt.NDArray[np.float64]:
    """Personalized PageRank by power iteration.

    Args:
        transition_t: the transposed row-stochastic transition matrix (rows of isolated nodes
            are zero; their mass returns to the seeds, as networkx does for dangling nodes).
        seeds: the personalisation vector (any non-negative weights; normalised here).
        damping: probability of following an edge at each step.
        tol: stop when the L1 change falls below this (with damping 0.5 the error halves each
            step, so 1e-7 takes ~24 iterations; rankings are stable long before).
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
    # max(0, cos) for chunk nodes; other nodes hold -1 there, which the clamp zeroes.
    seeds = np.maximum(graph.chunk_cosine(ctx), 0.0) * PASSAGE_WEIGHT
    if graph.label_nodes.size and graph.label_vectors.shape[1] == ctx.query_vector.shape[0]:
        match = graph.label_vectors @ ctx.query_vector
        best = np.argsort(-match)[:MAX_METADATA_SEEDS]
        for i in best:
            if match[i] >= LABEL_MIN:
                node = graph.label_nodes[i]
                seeds[node] += float(match[i]) / max(graph.chunk_count[node], 1.0)
    return seeds


def with_plugin_seeds(
    graph: Graph, ctx: QueryContext, seeds: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Add the seeds plugins give through the ``graph_seeds`` hook (pinakes-ner's entities).

    Each plugin seed is ``(node_id, mass)``: its share of the whole personalisation; the
    channel's own seeds are scaled to the rest. Without plugin seeds ``seeds`` is returned as is.
    """
    if ctx.kb is None:
        return seeds
    from pinakes_core.plugins import plugin_manager

    pairs = [
        p for group in plugin_manager().hook.graph_seeds(kb=ctx.kb, query=ctx.query) for p in group
    ]
    if not pairs or graph.node_ids.size == 0:
        return seeds
    ids = np.array([node for node, _ in pairs], dtype=np.int64)
    mass = np.array([m for _, m in pairs], dtype=np.float64)
    index = np.clip(np.searchsorted(graph.node_ids, ids), 0, graph.node_ids.size - 1)
    present = graph.node_ids[index] == ids
    if not present.any():
        return seeds
    share = min(float(mass[present].sum()), 1.0)
    total = seeds.sum()
    out: npt.NDArray[np.float64] = seeds * ((1.0 - share) / total) if total > 0 else seeds * 0.0
    np.add.at(out, index[present], mass[present])
    return out


class PprChannel(GraphChannel):
    """The ``ppr`` retrieval channel: chunks ranked by PPR mass from the query's seeds."""

    name = "ppr"

    def rank(self, graph: Graph, ctx: QueryContext) -> Ranked:
        """Rank chunk nodes by their PPR score (filters applied to seeds and output)."""
        seeds = with_plugin_seeds(graph, ctx, seed_vector(graph, ctx))
        scores = personalized_pagerank(graph.transition_t(), seeds)
        chunk_nodes = graph.allowed(ctx, np.flatnonzero((graph.chunk_id >= 0) & (scores > 0)))
        top = chunk_nodes[np.argsort(-scores[chunk_nodes], kind="stable")[: ctx.candidates]]
        return [(int(graph.chunk_id[i]), float(scores[i])) for i in top]


#: Fused hits that seed the PPR rerank, and the share of seed mass they carry (the rest goes to
#: every chunk by cosine, as in the channel).
RERANK_SEEDS = 2
RERANK_SEED_MASS = 0.8


class PprRerank:
    """Rerank by PPR mass seeded from the fused top hits.

    HippoRAG ranks passages by PPR score directly rather than fusing PPR as one more list; here
    the first-stage top hits play the part of its query-entity seeds, so mass flows from them to
    the documents they link to or name. ``ppr-rank`` returns that PPR order as is (strongest on
    multi-hop sets, but it can push a direct answer out of the top 5); ``ppr-rerank`` interleaves
    it with the fused order — fused 1, PPR 1, fused 2, PPR 2, … — so the fused head keeps its
    places and the graph's best candidates take the slots in between.
    """

    def __init__(self, name: str, *, interleave: bool) -> None:
        self.name = name
        self.interleave = interleave

    def run(self, ctx: QueryContext) -> Ranked:
        """A reranker produces no list of its own."""
        return []

    def rerank(self, ctx: QueryContext, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Rerank ``fused`` plus the graph's best chunks by PPR mass."""
        if ctx.kb is None or not fused:
            return fused
        graph = graph_for(ctx.kb)
        if len(graph) == 0:
            return fused
        seeds = seed_vector(graph, ctx)
        seeds /= max(seeds.sum(), 1e-12)
        top = [graph.node_of_chunk[c] for c, _ in fused[:RERANK_SEEDS] if c in graph.node_of_chunk]
        if top:
            weights = np.array([s for c, s in fused[:RERANK_SEEDS] if c in graph.node_of_chunk])
            seeds *= 1.0 - RERANK_SEED_MASS
            seeds[top] += RERANK_SEED_MASS * weights / weights.sum()
        scores = personalized_pagerank(graph.transition_t(), with_plugin_seeds(graph, ctx, seeds))
        chunk_nodes = graph.allowed(ctx, np.flatnonzero((graph.chunk_id >= 0) & (scores > 0)))
        best = chunk_nodes[np.argsort(-scores[chunk_nodes], kind="stable")[: ctx.candidates]]
        ranked = [(int(graph.chunk_id[i]), float(scores[i])) for i in best]
        if not self.interleave:
            return ranked
        merged: dict[int, float] = {}
        for pair in zip(fused, ranked, strict=False):
            for chunk, _ in pair:
                merged.setdefault(chunk, 1.0 / (len(merged) + 1))  # rank-based score
        tail = [c for c, _ in [*fused, *ranked] if c not in merged]
        for chunk in tail:
            merged.setdefault(chunk, 1.0 / (len(merged) + 1))
        return list(merged.items())
