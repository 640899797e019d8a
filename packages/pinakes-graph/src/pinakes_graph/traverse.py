"""The links API: bounded traversal over a document's links (DESIGN §6).

Bounded four ways: depth (served at most :data:`MAX_DEPTH` whatever is asked), fan-out per
document (``[graph] adjacent_k``, applied after ranking), rows (:data:`MAX_ROWS`) and an
approximate token budget (:data:`TOKEN_BUDGET`, ~1.3 tokens a word). Whatever a bound cuts off is
listed on the ``frontier`` with the bound that cut it, so the caller can take the next hop itself.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from pinakes_core.errors import PinakesError
from pinakes_core.models import FrontierItem, LinksResult, Neighbour, UnresolvedLink
from pinakes_core.sidecar import normalise_rel

__all__ = ["MAX_DEPTH", "MAX_ROWS", "TOKEN_BUDGET", "links", "match_relation"]

MAX_DEPTH = 3
MAX_ROWS = 50
TOKEN_BUDGET = 4000
#: A free-text relation maps to a typed one only above this cosine, and only if it beats the
#: runner-up by this margin (measured with all-MiniLM-L6-v2 on sentence-embedded relations:
#: "relies on" → depends-on 0.87, "replaces" → supersedes 0.80, "eats" ties at 0.80).
REL_THRESHOLD = 0.80
REL_MARGIN = 0.01
_REL_TEMPLATE = "this document {} that document"
_FRONTIER_CAP = 50


@dataclass(frozen=True)
class _Edge:
    doc_id: str
    title: str
    path: str
    rel: str
    direction: str
    weight: float


def _neighbours(
    conn: sqlite3.Connection, doc_id: str, rel: str | None, direction: str, weights: Any
) -> list[_Edge]:
    edges: list[_Edge] = []
    rel_clause = " AND l.rel = ?" if rel else ""
    params: list[object] = [doc_id, *([rel] if rel else [])]
    # out: this document is the source, the neighbour the destination; in: the reverse.
    for way, near, far in (("out", "src_doc", "dst_doc"), ("in", "dst_doc", "src_doc")):
        if direction not in (way, "both"):
            continue
        for r in conn.execute(
            "SELECT DISTINCT d.doc_id, d.title, d.path, l.rel, l.origin FROM links l "
            f"JOIN documents d ON d.doc_id = l.{far} WHERE l.{near} = ? AND l.reason IS NULL"
            f"{rel_clause} ORDER BY d.path",
            params,
        ):
            weight = weights.reverse_scan if r[4] == "reverse-scan" else weights.authored
            edges.append(_Edge(r[0], r[1], r[2], r[3], way, weight))
    best: dict[str, _Edge] = {}
    for edge in edges:  # one entry per neighbour: the heaviest link to it
        if edge.doc_id != doc_id and (
            edge.doc_id not in best or edge.weight > best[edge.doc_id].weight
        ):
            best[edge.doc_id] = edge
    return list(best.values())


def match_relation(kb: Any, rel: str) -> str:
    """Map a relation name or free-text verb to a relation the KB uses (DESIGN §9).

    Exact (normalised) names win; otherwise the closest relation label by embedding cosine,
    if it is above :data:`REL_THRESHOLD`.

    Raises:
        PinakesError: if nothing matches; the message lists the KB's relations.
    """
    wanted = normalise_rel(rel)
    conn = kb.store().conn
    known = [r[0] for r in conn.execute("SELECT DISTINCT rel FROM links ORDER BY rel")]
    known += [
        normalise_rel(r) for r in kb.config.schema_.relation_types if normalise_rel(r) not in known
    ]
    if wanted in known:
        return wanted
    if known:
        # Relations are embedded inside a sentence: a bare verb ("relies on") carries too little
        # for the model, "this document relies on that document" carries the relation.
        labels = [_REL_TEMPLATE.format(k.replace("-", " ")) for k in known]
        vectors = np.asarray(kb.embedder.embed_documents(labels), dtype=np.float32)
        query = np.asarray(
            kb.embedder.embed_query(_REL_TEMPLATE.format(rel.replace("-", " "))), dtype=np.float32
        )
        scores = vectors @ query
        order = np.argsort(-scores)
        best = int(order[0])
        margin = float(scores[best] - scores[order[1]]) if len(order) > 1 else 1.0
        if scores[best] >= REL_THRESHOLD and margin >= REL_MARGIN:
            return str(known[best])
    raise PinakesError(
        f"No relation in this KB matches {rel!r}.",
        f"Relations in use: {', '.join(known) or 'none yet'}.",
    )


def _doc_scores(kb: Any, query: str, doc_ids: set[str]) -> dict[str, float]:
    """Best chunk cosine of each document to the query."""
    if not doc_ids:
        return {}
    matrix = kb.vectors()
    conn = kb.store().conn
    marks = ",".join("?" * len(doc_ids))
    rows = conn.execute(
        f"SELECT chunk_id, doc_id FROM chunks WHERE doc_id IN ({marks})", list(doc_ids)
    ).fetchall()
    if not rows or len(matrix) == 0:
        return {}
    q = np.asarray(kb.embedder.embed_query(query), dtype=np.float32)
    index = np.searchsorted(matrix.chunk_ids, np.array([r[0] for r in rows], dtype=np.int64))
    index = np.clip(index, 0, len(matrix) - 1)
    present = matrix.chunk_ids[index] == np.array([r[0] for r in rows])
    cos = matrix.matrix[index] @ q
    scores: dict[str, float] = {}
    for (_, doc_id), ok, value in zip(rows, present, cos, strict=True):
        if ok:
            scores[doc_id] = max(scores.get(doc_id, -1.0), float(value))
    return scores


def links(
    kb: Any, doc_id: str, rel: str | None, direction: str, depth: int, query: str | None
) -> LinksResult:
    """Breadth-first traversal from ``doc_id``; see the module docstring for the bounds."""
    conn = kb.store().conn
    weights = kb.config.graph
    fanout = weights.adjacent_k
    served = max(1, min(depth, MAX_DEPTH))
    matched = match_relation(kb, rel) if rel else None
    start = conn.execute("SELECT title FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
    visited = {doc_id}
    layer = [doc_id]
    found: list[Neighbour] = []
    frontier: list[FrontierItem] = []
    truncated = False
    tokens = 0
    for distance in range(1, served + 2):
        candidates: list[tuple[str, _Edge]] = []
        for src in layer:
            candidates += [
                (src, e)
                for e in _neighbours(conn, src, matched, direction, weights)
                if e.doc_id not in visited
            ]
        if not candidates:
            break
        if distance > served:  # the hops beyond the served depth: reported, not expanded
            frontier += [
                FrontierItem(doc_id=e.doc_id, rel=e.rel, reason="depth") for _, e in candidates
            ]
            break
        scores = _doc_scores(kb, query, {e.doc_id for _, e in candidates}) if query else {}
        ranked = sorted(
            candidates,
            key=lambda c: (
                -(scores.get(c[1].doc_id, -1.0) if query else c[1].weight / distance),
                c[1].path,
            ),
        )
        next_layer: list[str] = []
        per_src: dict[str, int] = {}
        for src, edge in ranked:
            if edge.doc_id in visited:
                continue
            if per_src.get(src, 0) >= fanout:
                frontier.append(FrontierItem(doc_id=edge.doc_id, rel=edge.rel, reason="fanout"))
                continue
            cost = int(len(f"{edge.title} {edge.path} {edge.rel}".split()) * 1.3) + 12
            if len(found) >= MAX_ROWS or tokens + cost > TOKEN_BUDGET:
                truncated = True
                frontier.append(
                    FrontierItem(
                        doc_id=edge.doc_id,
                        rel=edge.rel,
                        reason="rows" if len(found) >= MAX_ROWS else "tokens",
                    )
                )
                continue
            visited.add(edge.doc_id)
            per_src[src] = per_src.get(src, 0) + 1
            tokens += cost
            score = scores.get(edge.doc_id, 0.0) if query else edge.weight / distance
            found.append(
                Neighbour(
                    doc_id=edge.doc_id,
                    title=edge.title,
                    path=edge.path,
                    rel=edge.rel,
                    direction=edge.direction,
                    distance=distance,
                    score=round(score, 4),
                    via=None if src == doc_id else src,
                )
            )
            next_layer.append(edge.doc_id)
        layer = next_layer
    unresolved = [
        UnresolvedLink(target=r[0], reason=r[1])
        for r in conn.execute(
            "SELECT target, reason FROM links WHERE src_doc = ? AND reason IS NOT NULL ORDER BY rowid",
            (doc_id,),
        )
    ]
    confidence = None
    if query and found:
        # The search calibration answers "does the best of these documents answer the query?".
        result = kb.search(query, k=1, doc_ids=[n.doc_id for n in found])
        confidence = result.confidence
    seen_frontier: set[str] = set()
    unique_frontier = []
    for item in frontier:
        if item.doc_id not in seen_frontier and item.doc_id not in visited:
            seen_frontier.add(item.doc_id)
            unique_frontier.append(item)
    return LinksResult(
        doc_id=doc_id,
        title=start[0] if start else "",
        rel=normalise_rel(rel) if rel else None,
        matched_rel=matched,
        depth=served,
        depth_asked=depth,
        neighbours=found,
        frontier=unique_frontier[:_FRONTIER_CAP],
        unresolved=unresolved,
        confidence=confidence,
        truncated=truncated or len(unique_frontier) > _FRONTIER_CAP,
    )
