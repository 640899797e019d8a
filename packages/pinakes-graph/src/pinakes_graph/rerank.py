"""Graph priors applied to the fused ranking (DESIGN §6, "also evaluated").

- ``link-rerank``: a hit whose document is one authored or text link away from a top document
  gains a share of the top hit's fused score — multi-hop evidence is usually a neighbour of the
  first hop, even when it shares few words with the question.
- ``salience``: an in-degree prior — documents many others link to by authored links rank a
  little higher (``1 + SALIENCE × log1p(in-degree)``).

Both are switches in the evaluation matrix (``hybrid+link-rerank``, ``hybrid+salience``).
"""

from __future__ import annotations

import math

from pinakes_core.search.context import QueryContext, Ranked

__all__ = ["LINK_BONUS", "SALIENCE", "TOP_DOCS", "LinkRerank", "Salience"]

#: Documents whose neighbours are boosted: those of the first TOP_DOCS fused hits.
TOP_DOCS = 3
#: A neighbour gains this share of the top hit's fused score. RRF scores of the top ten differ by
#: a few percent, so the share must be small: 0.03 was best of 0.01-1.0 on the golden set (0.25
#: already reorders nearly everything, since most candidates neighbour some top document).
LINK_BONUS = 0.03
#: Strength of the in-degree prior (best of 0.002-0.1 on the golden set; 0.1 halves lookup recall@1).
SALIENCE = 0.006


def _docs_of(ctx: QueryContext, chunk_ids: list[int]) -> dict[int, str]:
    if not chunk_ids:
        return {}
    marks = ",".join("?" * len(chunk_ids))
    return {
        int(r[0]): str(r[1])
        for r in ctx.conn.execute(
            f"SELECT chunk_id, doc_id FROM chunks WHERE chunk_id IN ({marks})", chunk_ids
        )
    }


class LinkRerank:
    """Boost hits linked to the top documents."""

    name = "link-rerank"

    def run(self, ctx: QueryContext) -> Ranked:
        """A reranker produces no list of its own."""
        return []

    def rerank(self, ctx: QueryContext, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Add ``LINK_BONUS × top score`` to hits one link from the top documents."""
        if not fused:
            return fused
        docs = _docs_of(ctx, [c for c, _ in fused])
        top: list[str] = []
        for chunk, _ in fused:
            doc = docs.get(chunk)
            if doc and doc not in top:
                top.append(doc)
            if len(top) == TOP_DOCS:
                break
        marks = ",".join("?" * len(top))
        neighbours = set()
        for src, dst in ctx.conn.execute(
            f"SELECT src_doc, dst_doc FROM links WHERE reason IS NULL AND (src_doc IN ({marks}) OR dst_doc IN ({marks}))",
            [*top, *top],
        ):
            neighbours.add(dst if src in top else src)
        neighbours -= set(top)
        bonus = LINK_BONUS * fused[0][1]
        boosted = [(c, s + bonus if docs.get(c) in neighbours else s) for c, s in fused]
        return sorted(boosted, key=lambda kv: (-kv[1], kv[0]))


class Salience:
    """An in-degree prior over authored links."""

    name = "salience"

    def run(self, ctx: QueryContext) -> Ranked:
        """A reranker produces no list of its own."""
        return []

    def rerank(self, ctx: QueryContext, fused: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Multiply each hit's score by ``1 + SALIENCE × log1p(authored in-degree)``."""
        docs = _docs_of(ctx, [c for c, _ in fused])
        wanted = sorted(set(docs.values()))
        if not wanted:
            return fused
        marks = ",".join("?" * len(wanted))
        degree = {
            str(r[0]): int(r[1])
            for r in ctx.conn.execute(
                f"SELECT dst_doc, COUNT(DISTINCT src_doc) FROM links WHERE reason IS NULL AND origin != 'reverse-scan' "
                f"AND dst_doc IN ({marks}) GROUP BY dst_doc",
                wanted,
            )
        }
        scored = [
            (c, s * (1.0 + SALIENCE * math.log1p(degree.get(docs.get(c, ""), 0)))) for c, s in fused
        ]
        return sorted(scored, key=lambda kv: (-kv[1], kv[0]))
