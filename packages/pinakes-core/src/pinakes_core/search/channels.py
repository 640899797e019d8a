"""Core's retrieval channels, registered through the plugin hook like any other (DESIGN §5).

A channel turns a query into a ranked list of chunk ids. Core's channels are ``bm25`` (FTS5),
``dense`` (cosine over the in-memory matrix), ``entities`` (an extra BM25 list over given entity
names) and ``concepts`` (an extra dense list over given concept phrases); the reader reranker
(:mod:`pinakes_core.search.reading`) is registered with them. What they run on is the query's
:class:`~pinakes_core.search.context.QueryContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pinakes_core.hookspecs import hookimpl
from pinakes_core.search.context import Channel, QueryContext, Ranked

__all__ = ["register_channels"]


@dataclass(frozen=True)
class _Lexical:
    """A BM25 list over some text of the query context (the query, or the entity names)."""

    name: str
    text: Callable[[QueryContext], str]
    kind: str = "lexical"

    def run(self, ctx: QueryContext) -> Ranked:
        text = self.text(ctx)
        return ctx.bm25(text) if text.strip() else []

    def evidence(self, ctx: QueryContext, ranked: Ranked, chunk_ids: list[int]) -> dict[int, float]:
        text = self.text(ctx)
        return ctx.lexical_evidence(text, chunk_ids) if text.strip() else {}


@dataclass(frozen=True)
class _Semantic:
    """A cosine list over a score vector of the query context (the query, or the concepts)."""

    name: str
    scores: Callable[[QueryContext], npt.NDArray[np.float32]]
    active: Callable[[QueryContext], bool]
    kind: str = "semantic"

    def run(self, ctx: QueryContext) -> Ranked:
        return ctx.top_dense(self.scores(ctx)) if self.active(ctx) else []

    def evidence(self, ctx: QueryContext, ranked: Ranked, chunk_ids: list[int]) -> dict[int, float]:
        return ctx.cosine_evidence(self.scores(ctx), chunk_ids) if self.active(ctx) else {}


@dataclass(frozen=True)
class _Dense:
    """The query's cosine list: every row scanned, or the ANN index's candidates at scale."""

    name: str = "dense"
    kind: str = "semantic"

    def run(self, ctx: QueryContext) -> Ranked:
        return ctx.dense() if len(ctx.vectors) > 0 else []

    def evidence(self, ctx: QueryContext, ranked: Ranked, chunk_ids: list[int]) -> dict[int, float]:
        return ctx.dense_evidence(chunk_ids) if len(ctx.vectors) > 0 else {}


@hookimpl(trylast=True)
def register_channels() -> list[Channel]:
    """Core's own channels and the reader, registered through the plugin hook like any other.

    Called after the plugins' implementations (``trylast``), as when core registered first: a
    plugin's channel of the same name wins. :mod:`pinakes_core.search.registry` registers this
    module on the plugin manager.
    """
    from pinakes_core.search.reading import ReaderRerank  # light: the model loads on its first read

    return [
        _Lexical("bm25", lambda ctx: ctx.query),
        _Dense(),
        _Lexical("entities", lambda ctx: " ".join(ctx.entities)),
        _Semantic(
            "concepts",
            lambda ctx: ctx.concept_scores,
            lambda ctx: bool(ctx.concepts) and len(ctx.vectors) > 0,
        ),
        ReaderRerank(),
    ]
