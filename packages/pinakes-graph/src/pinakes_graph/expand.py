"""Bounded graph expansion channel (DESIGN §6, "ship first").

Roots are the first-stage fused top chunks. Expansion walks at most two logical hops — a hop is a
move between content units (chunk or document); membership (chunk ↔ its document) and hub
pass-throughs (tag, folder, heading section) cost nothing. Chunk neighbours are ranked by
cosine to the query; a document or hub reached contributes its member chunks, query-ranked; each
node expands at most ``[graph] adjacent_k`` neighbours, and every hub or document expands once
globally (visited-node dedup). A root's own document never contributes its chunks through
membership: those are not new evidence.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pinakes_core.search.context import QueryContext, Ranked
from pinakes_graph.cache import EDGE_KINDS, KINDS, Graph, GraphChannel

__all__ = ["ExpandChannel", "expand"]

MAX_HOPS = 2
ROOTS = 10
ROOTS_FIRST = True
_CHUNK_HOPS = np.array([EDGE_KINDS["sibling"], EDGE_KINDS["parent-child"]], dtype=np.int8)
_DOC_LINKS = np.array(
    [EDGE_KINDS["authored"], EDGE_KINDS["reverse-scan"], EDGE_KINDS["title-mention"]], dtype=np.int8
)
_DOC_HUBS = np.array(
    [EDGE_KINDS["co-located"], EDGE_KINDS["shared-tag"], EDGE_KINDS["mentions"]], dtype=np.int8
)


def _any_of(kinds: npt.NDArray[np.int8], codes: npt.NDArray[np.int8]) -> npt.NDArray[np.bool_]:
    """Return where ``kinds`` is one of ``codes`` (``np.isin`` for a handful of codes).

    On the short adjacency rows of a walk this is several times faster than ``isin``, whose
    set-up dominates there.
    """
    mask: npt.NDArray[np.bool_] = kinds == codes[0]
    for code in codes[1:]:
        mask |= kinds == code
    return mask


class _Walk:
    def __init__(self, graph: Graph, ctx: QueryContext, fanout: int) -> None:
        self.graph = graph
        self.fanout = fanout
        self.cos = graph.chunk_cosine(ctx)
        self.best_of_doc = graph.doc_best(self.cos)
        self.expanded: set[int] = set()
        self.found: dict[int, int] = {}  # chunk node -> depth first reached

    def best(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The ``fanout`` chunk nodes with the highest query cosine."""
        if nodes.size <= self.fanout:
            return nodes[np.argsort(-self.cos[nodes], kind="stable")]
        return nodes[np.argsort(-self.cos[nodes], kind="stable")[: self.fanout]]

    def doc_score(self, doc: int) -> float:
        return float(self.best_of_doc[doc])

    def reach(self, nodes: npt.NDArray[np.int64], depth: int) -> list[int]:
        fresh = [int(n) for n in nodes if int(n) not in self.found]
        for n in fresh:
            self.found[n] = depth
        return fresh

    def docs_from(self, doc: int, banned: set[int]) -> list[int]:
        """Documents one logical hop from ``doc``: linked ones and fellow hub members."""
        g = self.graph
        nbrs, _, kinds = g.adjacent(doc)
        targets = set(nbrs[_any_of(kinds, _DOC_LINKS)].tolist())
        for hub in nbrs[_any_of(kinds, _DOC_HUBS)].tolist():
            if hub in self.expanded:
                continue  # a hub expands once globally
            self.expanded.add(hub)
            members, _, _ = g.adjacent(hub)
            # Root documents are banned before the fan-out cut, or (scoring best) they would
            # fill the hub's slots and then be dropped.
            docs = [
                m
                for m in members.tolist()
                if g.kind[m] == KINDS["doc"] and m != doc and m not in banned
            ]
            docs.sort(key=lambda d: -self.doc_score(d))
            targets.update(docs[: self.fanout])
        ranked = sorted((d for d in targets if d not in banned), key=lambda d: -self.doc_score(d))
        return ranked[: self.fanout]


def expand(graph: Graph, ctx: QueryContext, fanout: int) -> Ranked:
    """Run the bounded expansion from ``ctx.seeds``; return new chunks ranked by query cosine."""
    roots = [graph.node_of_chunk[c] for c, _ in ctx.seeds[:ROOTS] if c in graph.node_of_chunk]
    if not roots:
        return []
    walk = _Walk(graph, ctx, fanout)
    for root in roots:
        walk.found[root] = 0
    root_docs = {int(graph.doc_of[r]) for r in roots}
    frontier: list[int] = list(roots)
    for depth in range(1, MAX_HOPS + 1):
        nxt: list[int] = []
        for node in frontier:
            if node in walk.expanded:
                continue
            walk.expanded.add(node)
            if graph.kind[node] == KINDS["chunk"]:
                nbrs, _, kinds = graph.adjacent(node)
                nxt += walk.reach(walk.best(nbrs[_any_of(kinds, _CHUNK_HOPS)]), depth)
                for hub in nbrs[kinds == EDGE_KINDS["in-section"]].tolist():
                    if hub not in walk.expanded:
                        walk.expanded.add(hub)
                        members, _, _ = graph.adjacent(hub)
                        nxt += walk.reach(
                            walk.best(members[graph.kind[members] == KINDS["chunk"]]), depth
                        )
                doc = int(graph.doc_of[node])  # membership: free
                if doc >= 0 and doc not in walk.expanded:
                    walk.expanded.add(doc)
                    node = doc
                else:
                    continue
            if graph.kind[node] == KINDS["doc"]:
                for target in walk.docs_from(node, root_docs):
                    chunks = graph.members.get(target)
                    if chunks is not None:
                        nxt += walk.reach(walk.best(chunks), depth)
                    nxt.append(target)
        frontier = nxt
    keep = set(graph.allowed(ctx, np.array(list(walk.found), dtype=np.int64)).tolist())
    ranked = [
        (int(graph.chunk_id[node]), float(walk.cos[node]), depth)
        for node, depth in walk.found.items()
        if depth > 0 and walk.cos[node] > 0 and node in keep
    ]
    ranked.sort(key=lambda r: (-r[1], r[2], r[0]))
    # The roots lead the list in their fused order. Left out, every expanded chunk would get a
    # third RRF vote the roots lack and leapfrog them: the reason a naive expansion list
    # regresses simple lookups (the original Pinakes' gate: 0 multi-hop wins, 3 losses).
    head = [(c, s) for c, s in ctx.seeds[:ROOTS] if c in graph.node_of_chunk] if ROOTS_FIRST else []
    return [*head, *((cid, score) for cid, score, _ in ranked)][: ctx.candidates]


class ExpandChannel(GraphChannel):
    """The ``expand`` retrieval channel."""

    name = "expand"

    def rank(self, graph: Graph, ctx: QueryContext) -> Ranked:
        """Expand from the first-stage fusion of the other channels."""
        return expand(graph, ctx, ctx.kb.config.graph.adjacent_k)
