"""Personalized PageRank channel: HippoRAG 2's recipe on the KB's free graph (DESIGN §6).

Damping 0.5 (HippoRAG 2, Gutiérrez et al. 2025: half the mass returns to the seeds each step, so
the walk stays near the query's evidence), undirected, weighted. The personalisation vector
holds up to five metadata seeds — tag and heading nodes whose label embedding matches the query,
weighted by match score × 1 / the chunks they connect — plus every chunk node at
max(0, cosine) × 0.05 (HippoRAG 2's passage-node weight; seeding all chunks is what keeps
simple lookups from regressing). Power iteration with scipy.sparse to tolerance.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.index.backend import DatabaseErrors
from pinakes_core.index.query import split_cjk
from pinakes_core.search.context import QueryContext, Ranked
from pinakes_graph.cache import Graph, GraphChannel, best_first, graph_for
from pinakes_graph.mentions import mentioned_titles, title_index
from pinakes_graph.push import push_pagerank

__all__ = [
    "DAMPING",
    "HEAD_DOCUMENTS",
    "PASSAGE_WEIGHT",
    "TAIL_PPR_WEIGHT",
    "PprChannel",
    "PprRerank",
    "personalized_pagerank",
    "query_seeds",
    "seed_vector",
    "seeded_mass",
    "start_seed_vector",
    "with_plugin_seeds",
]

DAMPING = 0.5
#: A title names something specific when its phrase is in at most this share of the chunks…
SPECIFIC_TITLE_SHARE = 0.01
#: … or in at most this many (small KBs).
SPECIFIC_TITLE_MIN = 5
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
        best = best_first(match, MAX_METADATA_SEEDS)
        for i in best:
            if match[i] >= LABEL_MIN:
                node = graph.label_nodes[i]
                seeds[node] += float(match[i]) / max(graph.chunk_count[node], 1.0)
    return seeds


#: Where :func:`start_seed_vector` leaves its job in ``QueryContext.prepared``.
_SEEDS = "pinakes_graph.seed_vector"


def start_seed_vector(ctx: QueryContext) -> None:
    """Start :func:`seed_vector` for ``ctx`` on the dense worker, beside the BM25 channel.

    The seed vector needs only the query vector and the graph's arrays (at 52k chunks its label
    product alone reads ~58 MB and takes ~8 ms), so it can run while the BM25 channel does;
    :func:`query_seeds` takes the result. Nothing is started without a KB, with filters (their
    rows come from SQL, which the worker must not read) or when the dense work was not started.
    """
    if ctx.kb is None or ctx.filters.active or _SEEDS in ctx.prepared:
        return
    graph = graph_for(ctx.kb)
    if len(graph) == 0 or len(ctx.vectors) == 0:  # ``vectors`` loaded here, not on the worker
        return
    job = ctx.on_worker(lambda: seed_vector(graph, ctx))
    if job is not None:
        ctx.prepared[_SEEDS] = (graph, job)


def query_seeds(graph: Graph, ctx: QueryContext) -> npt.NDArray[np.float64]:
    """:func:`seed_vector` of ``graph`` for ``ctx``, computed once.

    The one :func:`start_seed_vector` started, when it did (a copy: callers scale it in place),
    or computed here.
    """
    started = ctx.prepared.get(_SEEDS)
    if started is not None and started[0] is graph:
        seeds: npt.NDArray[np.float64] = started[1].result().copy()
        return seeds
    return seed_vector(graph, ctx)


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

    def prepare(self, ctx: QueryContext) -> None:
        """Start the seed vector beside the first stage (:func:`start_seed_vector`)."""
        start_seed_vector(ctx)

    def rank(self, graph: Graph, ctx: QueryContext) -> Ranked:
        """Rank chunk nodes by their PPR score (filters applied to seeds and output)."""
        seeds = with_plugin_seeds(graph, ctx, query_seeds(graph, ctx))
        scores = personalized_pagerank(graph.transition_t(), seeds)
        chunk_nodes = graph.allowed(ctx, np.flatnonzero((graph.chunk_id >= 0) & (scores > 0)))
        top = chunk_nodes[best_first(scores[chunk_nodes], ctx.candidates)]
        return [(int(graph.chunk_id[i]), float(scores[i])) for i in top]


#: Fused hits that seed the PPR rerank (the best hit of each of the first two documents), and the
#: share of seed mass they carry (the rest goes to every chunk by cosine, as in the channel).
#: Chosen on 2Wiki dev (docs/benchmarks.md).
RERANK_SEEDS = 2
RERANK_SEED_MASS = 0.8
#: Documents whose best hits keep their fused places when ``ppr-rerank`` / ``ppr-auto`` rerank:
#: the graph decides what follows the strongest direct evidence, never what leads. 2Wiki dev
#: recall@5: 91.1 with 0-2, 91.5 with 3; on the golden set 3 keeps every single-hop class as
#: plain hybrid has it (docs/ranking.md).
HEAD_DOCUMENTS = 3
#: After a head, each other candidate scores ``floor × (g + (1 − w)(1 − g) s / floor)``: g is its
#: *document's* PPR mass (the document node's, over the largest among documents outside the
#: head, so in [0, 1]), s its fused score, w this weight. w = 1 orders the tail by PPR mass
#: alone; w = 0 lifts the fused order towards the head by g. Measured on golden multi-hop R@5
#: / 2Wiki dev recall@5: w 0 → 0.852 / 88.0, 0.5 → 0.857 / 91.5, 0.75 → 0.862 / 92.0, 1 → 0.862
#: / 92.1; 0.75 is the smallest weight on that plateau, so the fused score still orders what
#: the graph does not reach. Ordering by each chunk's own mass instead (until 2026-12-01) had
#: 0.809 / 91.5: links and title mentions end at document nodes, and a chunk only gets its
#: share of what its document receives (docs/ranking.md).
TAIL_PPR_WEIGHT = 0.75


def seeded_mass(
    graph: Graph, ctx: QueryContext, seeds: list[tuple[int, float]]
) -> npt.NDArray[np.float64]:
    """PPR mass per node, seeded by ``seeds`` (chunk id, weight) and every chunk by cosine.

    The seeds carry :data:`RERANK_SEED_MASS` of the personalisation in proportion to their
    weights; the rest is :func:`seed_vector`'s. Plugin seeds (pinakes-ner's entities, through the
    ``graph_seeds`` hook) take their share on top (:func:`with_plugin_seeds`). This is the one
    place the rerankers compute PPR: by forward push (:mod:`pinakes_graph.push`), which touches
    only the nodes the mass reaches. The query's own seeds (:func:`seed_vector`) were usually
    started beside the first stage (:func:`start_seed_vector`).
    """
    vector = query_seeds(graph, ctx)
    vector /= max(vector.sum(), 1e-12)
    nodes = [graph.node_of_chunk[c] for c, _ in seeds if c in graph.node_of_chunk]
    if nodes:
        weights = np.array([w for c, w in seeds if c in graph.node_of_chunk], dtype=np.float64)
        total = weights.sum()
        weights = weights / total if total > 0 else np.full(len(nodes), 1.0 / len(nodes))
        vector *= 1.0 - RERANK_SEED_MASS
        vector[nodes] += RERANK_SEED_MASS * weights
    return push_pagerank(graph, with_plugin_seeds(graph, ctx, vector), damping=DAMPING)


def _document_of(graph: Graph, chunk: int) -> int:
    """The document node of ``chunk``, or ``-chunk - 1`` (a key of its own) when it has none."""
    node = graph.node_of_chunk.get(chunk)
    doc = int(graph.doc_of[node]) if node is not None else -1
    return doc if doc >= 0 else -chunk - 1


def _best_per_document(
    graph: Graph, fused: list[tuple[int, float]], count: int
) -> list[tuple[int, float]]:
    """The best hit of each of the first ``count`` distinct documents in ``fused``."""
    best: list[tuple[int, float]] = []
    docs: set[int] = set()
    for chunk, score in fused:
        if len(best) == count:
            break
        doc = _document_of(graph, chunk)
        if doc not in docs:
            docs.add(doc)
            best.append((chunk, score))
    return best


def _specific(ctx: QueryContext, titles: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The titles among ``titles`` that name something specific: rare in the KB's text.

    A title such as "Lothair II" or "Ledger service" is written in a few passages; in a docs
    vault whose pages are titled with everyday words ("where", "sort", "table", "List") the
    same words run through hundreds of passages, and naming two of them says nothing about
    the question needing two documents. A title counts when its phrase occurs in at most
    :data:`SPECIFIC_TITLE_SHARE` of the chunks (at least :data:`SPECIFIC_TITLE_MIN`).
    """
    limit = max(SPECIFIC_TITLE_MIN, SPECIFIC_TITLE_SHARE * ctx.chunk_total)
    out = []
    for key in titles:
        try:
            count = ctx.doc_freq('"' + split_cjk(" ".join(key)) + '"')
        except DatabaseErrors:  # a phrase FTS cannot parse names nothing it could count
            continue
        if count <= limit:
            out.append(key)
    return out


#: How ``explain`` shows the tail rule of ``ppr-auto`` when it ran (``ranking.stages``).
TAIL_BLEND = (
    f"after the head, document PPR mass {TAIL_PPR_WEIGHT:g} + fused score {1 - TAIL_PPR_WEIGHT:g}"
)


def _blend_tail(
    graph: Graph,
    mass: npt.NDArray[np.float64],
    tail: Iterable[int],
    head: list[tuple[int, float]],
    fused: dict[int, float],
    cap: float,
) -> list[tuple[int, float]]:
    """Score the ``tail`` chunks after the head: ``g × cap + (1 − w)(1 − g) × min(s, cap)``.

    g is the PPR mass of the candidate's document node over the largest among the documents
    outside the head (capped at 1), s its fused score (0 for a chunk only the graph found) and
    w :data:`TAIL_PPR_WEIGHT`. The score rises with both and is at most ``cap``, so the head
    stays first. Another passage of a head document keeps its own evidence, ``min(s, cap)``:
    its document is already placed, and its document's mass — the seeds' — says nothing about
    the passage (lifted to ``cap`` they tied with each other and with the best new document).
    A chunk outside the graph has no mass; one without a document node (none today) counts its
    own.
    """

    def doc_mass(chunk: int) -> tuple[int, float]:
        doc = _document_of(graph, chunk)
        if doc >= 0:
            return doc, float(mass[doc])
        node = graph.node_of_chunk.get(chunk)
        return doc, float(mass[node]) if node is not None else 0.0

    head_docs = {_document_of(graph, chunk) for chunk, _ in head}
    docs = {chunk: doc_mass(chunk) for chunk in tail}
    peak = max((m for d, m in docs.values() if d not in head_docs), default=0.0)
    keep = 1.0 - TAIL_PPR_WEIGHT
    out = []
    for chunk, (doc, m) in docs.items():
        s = min(fused.get(chunk, 0.0), cap)
        if doc in head_docs:
            out.append((chunk, s))
            continue
        g = min(m / peak, 1.0) if peak > 0 else 0.0
        out.append((chunk, g * cap + keep * (1.0 - g) * s))
    return out


#: The relational phrasing that does not open the gate alone: two questions in one ("…, and how
#: do I …?") ask about two things the query names itself, which the first stage finds. On the
#: golden set such queries had the same multi-hop R@5 with and without the graph stage (9.5 of
#: 11 either way, one question gained and one lost), so the stage did not earn its cost there;
#: with another relation ("…, and who leads the team that owns it?") the gate still opens.
CONJUNCTION = "two questions"


def _bridging(ctx: QueryContext) -> list[str]:
    """The query's relational phrasings that open :class:`PprRerank`'s gate.

    All of ``QueryShape.relations`` unless the only one is :data:`CONJUNCTION`.
    """
    relations = list(ctx.shape.relations)
    return [] if relations == [CONJUNCTION] else relations


class PprRerank:
    """Rerank the fused hits by PPR mass flowing from the best hits through the graph.

    HippoRAG ranks passages by PPR score directly rather than fusing PPR as one more list; here
    the first-stage best hits play the part of its query-entity seeds, so mass flows from them
    to the documents they link to or name. The best hits of the first ``head`` documents keep
    their places and scores; every other candidate (the fused ones and the graph's best) is
    scored below the last head score, so scores stay in [0, 1] and the documents the head links
    to or names follow it. With ``document_tail`` (``ppr-auto``) that score is its document's
    PPR mass blended with its fused score (:func:`_blend_tail`); otherwise it is its own PPR
    mass, ``last head score × mass / largest mass among them``. ``ppr-rank`` (head 0) is that
    PPR order alone; ``ppr-rerank`` and the gated ``ppr-auto`` keep a head of
    :data:`HEAD_DOCUMENTS`. ``ppr-rerank`` keeps the chunk-mass tail: it also runs on
    single-hop queries, where the document tail cost golden paraphrase R@5 0.889 → 0.861 and
    filter R@5 1.000 → 0.969 (the golden baseline gate).
    ``ppr-auto`` runs only when :meth:`wanted` finds the query multi-hop, so a single-hop query
    keeps the plain hybrid ranking and pays no PPR.
    """

    def __init__(
        self, name: str, *, head: int, gated: bool = False, document_tail: bool = False
    ) -> None:
        self.name = name
        self.head = head
        self.gated = gated
        self.document_tail = document_tail

    def run(self, ctx: QueryContext) -> Ranked:
        """A reranker produces no list of its own."""
        return []

    def prepare(self, ctx: QueryContext) -> None:
        """Start the seed vector beside the first stage when the rerank will need it.

        The gated reranker starts it only for relational phrasing, which alone opens the gate
        (:meth:`wanted`); a query the gate opens for the titles it names computes it in
        :meth:`rerank`, and a single-hop query costs nothing.
        """
        if not self.gated or _bridging(ctx):
            start_seed_vector(ctx)

    def wanted(self, ctx: QueryContext, fused: list[tuple[int, float]]) -> tuple[bool, str]:
        """Whether the query looks multi-hop, and why.

        Multi-hop: relational phrasing (``QueryShape.relations``: a relative clause, a
        participle, a possessive or role of something, a comparison, two questions in one
        beside another of these: :func:`_bridging`) or at least two *specific* document titles
        named in the query (:func:`_specific`).
        """
        if ctx.kb is None or not fused:
            return False, "no graph or no hits"
        reasons = _bridging(ctx)
        graph = graph_for(ctx.kb)
        if graph.titles is None:
            graph.titles = title_index(ctx.kb.store().conn)
        named = len(_specific(ctx, mentioned_titles(ctx.query, graph.titles)))
        if named >= 2:
            reasons.append(f"{named} titles named")
        if reasons:
            tail = "; " + TAIL_BLEND if self.document_tail else ""
            return True, "multi-hop phrasing: " + ", ".join(reasons) + tail
        return False, "single-hop: no relational phrasing and fewer than two titles named"

    def rerank(self, ctx: QueryContext, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Keep the head; everything else follows it by PPR mass from the two best documents."""
        if ctx.kb is None or not fused:
            return fused
        graph = graph_for(ctx.kb)
        if len(graph) == 0:
            return fused
        mass = seeded_mass(graph, ctx, _best_per_document(graph, fused, RERANK_SEEDS))
        chunk_nodes = graph.allowed(ctx, np.flatnonzero((graph.chunk_id >= 0) & (mass > 0)))
        best = chunk_nodes[best_first(mass[chunk_nodes], ctx.candidates)]
        pool = {int(graph.chunk_id[i]): float(mass[i]) for i in best}
        for chunk, _ in fused:
            node = graph.node_of_chunk.get(chunk)
            pool.setdefault(chunk, float(mass[node]) if node is not None else 0.0)
        head = _best_per_document(graph, fused, self.head)
        for chunk, _ in head:
            pool.pop(chunk, None)
        floor = head[-1][1] if head else fused[0][1]
        # Just under the last head score, so the head stays ahead even at equal mass.
        cap = floor * (1.0 - 1e-6)
        if head and self.document_tail:
            tail = _blend_tail(graph, mass, pool, head, dict(fused), cap)
        else:
            peak = max(pool.values(), default=0.0)
            scale = cap / peak if peak > 0 else 0.0
            tail = [(chunk, m * scale) for chunk, m in pool.items()]
        return sorted([*head, *tail], key=lambda kv: (-kv[1], kv[0]))
