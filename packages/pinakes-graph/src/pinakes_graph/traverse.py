"""The links API: bounded traversal over a document's links (DESIGN §6).

Bounded four ways: depth (served at most :data:`MAX_DEPTH` whatever is asked), fan-out per
document (``[graph] adjacent_k``, applied after ranking), rows (:data:`MAX_ROWS`) and an
approximate token budget (:data:`TOKEN_BUDGET`, ~1.3 tokens a word). Whatever a bound cuts off is
listed on the ``frontier`` with the bound that cut it, so the caller can take the next hop itself.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pinakes_core.config import normalise_rel
from pinakes_core.errors import PinakesError
from pinakes_core.manage.schema import RelationMatch, match_relation
from pinakes_core.models import FrontierItem, LinksResult, Neighbour, UnresolvedLink

__all__ = ["MAX_DEPTH", "MAX_ROWS", "TOKEN_BUDGET", "links", "resolve_relation"]

MAX_DEPTH = 3
MAX_ROWS = 50
TOKEN_BUDGET = 4000
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
    conn: sqlite3.Connection,
    doc_id: str,
    rel: RelationMatch | None,
    inverse: str | None,
    direction: str,
    weights: Any,
) -> list[_Edge]:
    """The documents one link away; with ``rel``, only that relation.

    A link written with the relation's inverse (``B cited-by A``) counts as the relation read
    the other way (``A cites B``); a ``rel`` that named the inverse flips the direction.
    """
    if rel is not None and rel.inverted:
        direction = {"out": "in", "in": "out"}.get(direction, direction)
    name = rel.rel if rel else None
    # (direction served, column holding this document, column holding the neighbour, relation):
    # out: this document is the source; in: the destination. A link written with the inverse
    # relation points the other way, so it serves the opposite direction.
    passes = [("out", "src_doc", "dst_doc", name), ("in", "dst_doc", "src_doc", name)]
    if inverse:
        passes += [("out", "dst_doc", "src_doc", inverse), ("in", "src_doc", "dst_doc", inverse)]
    edges: list[_Edge] = []
    for way, near, far, wanted in passes:
        if direction not in (way, "both"):
            continue
        rel_clause = " AND l.rel = ?" if wanted else ""
        for r in conn.execute(
            "SELECT DISTINCT d.doc_id, d.title, d.path, l.rel, l.origin FROM links l "
            f"JOIN documents d ON d.doc_id = l.{far} WHERE l.{near} = ? AND l.reason IS NULL"
            f"{rel_clause} ORDER BY d.path",
            [doc_id, *([wanted] if wanted else [])],
        ):
            weight = weights.reverse_scan if r[4] == "reverse-scan" else weights.authored
            edges.append(_Edge(r[0], r[1], r[2], name or r[3], way, weight))
    best: dict[str, _Edge] = {}
    ways: dict[tuple[str, str], set[str]] = {}
    for edge in edges:  # one entry per neighbour: the heaviest link to it
        ways.setdefault((edge.doc_id, edge.rel), set()).add(edge.direction)
        if edge.doc_id != doc_id and (
            edge.doc_id not in best or edge.weight > best[edge.doc_id].weight
        ):
            best[edge.doc_id] = edge
    # A neighbour linked both ways by the kept relation is shown "both" (issue 35: it was
    # listed by whichever link came first, as if it went one way only).
    return [
        replace(edge, direction="both") if len(ways[(edge.doc_id, edge.rel)]) > 1 else edge
        for edge in best.values()
    ]


def resolve_relation(kb: Any, rel: str) -> RelationMatch:
    """Map a relation name or free-text verb to a relation of the schema or in use (DESIGN §9).

    Schema names, aliases and inverses match exactly; otherwise the closest relation label by
    embedding cosine (see :func:`pinakes_core.manage.schema.match_relation`).

    Raises:
        PinakesError: if nothing matches; the message lists the schema's and the KB's relations.
    """
    conn = kb.store().conn
    in_use = [r[0] for r in conn.execute("SELECT DISTINCT rel FROM links ORDER BY rel")]
    match = match_relation(kb.config.schema_, lambda: kb.embedder, rel, also=in_use)
    if match.via != "none":
        return match
    known = list(dict.fromkeys([*kb.config.schema_.relation_types, *in_use]))
    raise PinakesError(
        f"No relation in this KB matches {rel!r}.",
        f"Relations in the schema or in use: {', '.join(known) or 'none yet'}.",
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
    match = resolve_relation(kb, rel) if rel else None
    inverse = None
    if match is not None and match.rel in kb.config.schema_.relation_types:
        written = kb.config.schema_.relation_types[match.rel].inverse
        inverse = normalise_rel(written) if written else None
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
                for e in _neighbours(conn, src, match, inverse, direction, weights)
                if e.doc_id not in visited
            ]
        if not candidates:
            break
        if distance > served:  # the hops beyond the served depth: reported, not expanded
            frontier += [
                FrontierItem(doc_id=e.doc_id, rel=e.rel, reason="depth", path=e.path)
                for _, e in candidates
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
                frontier.append(
                    FrontierItem(doc_id=edge.doc_id, rel=edge.rel, reason="fanout", path=edge.path)
                )
                continue
            cost = int(len(f"{edge.title} {edge.path} {edge.rel}".split()) * 1.3) + 12
            if len(found) >= MAX_ROWS or tokens + cost > TOKEN_BUDGET:
                truncated = True
                frontier.append(
                    FrontierItem(
                        doc_id=edge.doc_id,
                        rel=edge.rel,
                        reason="rows" if len(found) >= MAX_ROWS else "tokens",
                        path=edge.path,
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
    from pinakes_core.read.links import IN_NOTE  # here: markdown-it is no search's import

    unresolved = [
        UnresolvedLink(target=r[0], reason=r[1])
        for r in conn.execute(
            "SELECT target, reason FROM links WHERE src_doc = ? AND reason IS NOT NULL AND reason != ? "
            "ORDER BY rowid",
            (doc_id, IN_NOTE),
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
        matched_rel=match.rel if match else None,
        depth=served,
        depth_asked=depth,
        neighbours=found,
        frontier=unique_frontier[:_FRONTIER_CAP],
        unresolved=unresolved,
        confidence=confidence,
        truncated=truncated or len(unique_frontier) > _FRONTIER_CAP,
    )
