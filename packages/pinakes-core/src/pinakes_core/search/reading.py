"""The reader in the pipeline: rerank the head of the ranking and judge the top hit (issue 36).

``[retrieval] reader = true`` adds the ``reader`` reranker to a search's default stages
(:func:`pinakes_core.search.retrieval.default_channels`). It runs after fusion and the graph stages:

- **Rerank.** The first :data:`~pinakes_core.config.RetrievalConfig.reader_top_n` candidates
  (at most :data:`PER_DOCUMENT` of one document, so the reader sees several documents) are read
  with the query by the cross-encoder (:mod:`pinakes_core.search.reader`) and re-scored as
  ``(1 - READER_WEIGHT) · fused + READER_WEIGHT · p``, where ``p`` is the reader's "answers"
  probability. The rest of the ranking follows, scaled under the head's lowest score, so scores
  stay in [0, 1] and never rise with rank (fleet merging compares them across KBs).
- **Judge.** The reader's logit for the final top hit and its lead over the best passage of
  another document become confidence features
  (:data:`~pinakes_core.search.confidence.READER_FEATURES`), read by the calibration
  fitted with them (:mod:`pinakes_core.search.confidence`).

The weight was fixed before measuring, never chosen on the held-out sets (docs/evaluation.md).
This module is light: the model and onnxruntime load only when
:meth:`ReaderRerank.rerank` first runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from pinakes_core.index.query import query_terms, words

if TYPE_CHECKING:
    from pinakes_core.search.context import QueryContext, Ranked

__all__ = [
    "PER_DOCUMENT",
    "READER_WEIGHT",
    "ReaderRerank",
    "combine_scores",
    "passage_text",
    "reader_features",
    "window",
]

#: Weight of the reader's probability in a reread passage's score (the fused score has the
#: rest); the default of ``[retrieval] reader_weight``. Fixed before the trained model was measured, as a hedge: the reader reorders the
#: head where it differs clearly, while near ties keep the fused order (a head's fused scores
#: span ~0.1, the reader's probabilities up to 1). The sweep on golden and the personal notes
#: (``benchmarks/reader_rule.py``, docs/evaluation.md) is reported beside it.
READER_WEIGHT = 0.35
#: Most passages of one document the reader reads for one query: ten passages of one long page
#: would leave no room for the page that answers.
PER_DOCUMENT = 2
#: Default of ``[retrieval] reader_top_n`` when the context has no KB.
DEFAULT_TOP_N = 10
#: Characters of a passage the reader reads (about 80 tokens of English prose; the pair is
#: cut at :data:`pinakes_core.search.reader.PAIR_TOKENS` anyway). A cross-encoder's cost grows with
#: the tokens it reads: a whole 256-token chunk costs twice a 128-token window on the same
#: CPU, and the answer sits in a sentence or two (docs/benchmarks.md).
WINDOW_CHARS = 320

_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")


def _hits(sentence: str, terms: set[str]) -> int:
    seen = {w.lower() for w in words(sentence)}
    return sum(1 for t in terms if t in seen or any(w.startswith(t[:5]) for w in seen))


def window(text: str, query: str, limit: int | None = None) -> str:
    """The part of ``text`` the reader reads: the sentences around the one most like the query.

    A text within ``limit`` characters is returned whole. Otherwise the sentence holding the
    most query words is taken, then its neighbours (the following one first) while they fit;
    a passage that holds no query word is read from its start. ``limit`` defaults to
    :data:`WINDOW_CHARS` (read at each call).
    """
    limit = WINDOW_CHARS if limit is None else limit
    if len(text) <= limit:
        return text
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    terms = set(query_terms(query))
    scores = [_hits(s, terms) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (scores[i], -i)) if sentences else 0
    if not sentences or scores[best] == 0:
        return text[:limit]
    lo = hi = best
    size = len(sentences[best])
    while True:
        grown = False
        for nxt in (hi + 1, lo - 1):
            if 0 <= nxt < len(sentences) and size + len(sentences[nxt]) + 1 <= limit:
                size += len(sentences[nxt]) + 1
                lo, hi = min(lo, nxt), max(hi, nxt)
                grown = True
                break
        if not grown:
            break
    return " ".join(sentences[lo : hi + 1])[:limit]


def passage_text(title: str, heading_path: list[str], text: str) -> str:
    """What the reader reads of a passage: its document's title and headings, then its text.

    The same form the reader was trained on (``benchmarks/train_reader.py``).
    """
    head = " › ".join([title, *[h for h in heading_path if h and h != title]])
    return f"{head}\n{text}" if head else text


def combine_scores(fused: float, probability: float, weight: float | None = None) -> float:
    """A reread passage's score: the fused score and the reader's probability, weighted.

    ``weight`` defaults to :data:`READER_WEIGHT` (read at each call).
    """
    w = READER_WEIGHT if weight is None else weight
    return (1.0 - w) * fused + w * probability


def _head(ctx: QueryContext, fused: Ranked, top_n: int) -> list[tuple[int, float, str, str]]:
    """The candidates the reader reads: ``(chunk, fused score, document, passage text)``."""
    candidates = [c for c, _ in fused[: top_n * 4]]
    marks = ",".join("?" * len(candidates))
    rows = {
        int(chunk): (str(doc), str(title), json.loads(path or "[]"), str(text))
        for chunk, doc, title, path, text in ctx.conn.execute(
            "SELECT c.chunk_id, c.doc_id, d.title, c.heading_path, c.text FROM chunks c "
            f"JOIN documents d ON d.doc_id = c.doc_id WHERE c.chunk_id IN ({marks})",
            candidates,
        )
    }
    per_doc: dict[str, int] = {}
    head = []
    for chunk, score in fused[: top_n * 4]:
        row = rows.get(chunk)
        if row is None or per_doc.get(row[0], 0) >= PER_DOCUMENT:
            continue
        per_doc[row[0]] = per_doc.get(row[0], 0) + 1
        text = window(row[3], ctx.query)
        head.append((chunk, score, row[0], passage_text(row[1], row[2], text)))
        if len(head) == top_n:
            break
    return head


class ReaderRerank:
    """The ``reader`` reranker: the cross-encoder re-scores the head of the ranking.

    What it read is left in ``ctx.read`` (chunk id → its document and the reader's logit) for
    the hits (``Hit.reader``) and the confidence features.
    """

    name = "reader"

    def run(self, ctx: QueryContext) -> Ranked:
        """A reranker produces no list of its own."""
        return []

    def rerank(self, ctx: QueryContext, fused: Ranked) -> Ranked:
        """Re-score the head by :func:`combine_scores`; the tail follows under its lowest score.

        Raises:
            ReaderError: if the bundled model is missing or cannot be loaded.
        """
        if not fused or not ctx.query.strip():
            return fused
        from pinakes_core.search.reader import default_reader, sigmoid

        config = getattr(getattr(ctx.kb, "config", None), "retrieval", None)
        top_n = getattr(config, "reader_top_n", DEFAULT_TOP_N)
        weight = getattr(config, "reader_weight", READER_WEIGHT)
        head = _head(ctx, fused, top_n)
        if not head:
            return fused
        logits = default_reader().logits(ctx.query, [text for *_, text in head])
        ctx.read = {
            chunk: (doc, float(v)) for (chunk, _, doc, _), v in zip(head, logits, strict=True)
        }
        if weight <= 0.0:  # the reader only judges: the ranking stays the fused one
            return fused
        probabilities = sigmoid(np.asarray(logits, dtype=np.float64))
        reread = sorted(
            (
                (chunk, combine_scores(score, float(p), weight))
                for (chunk, score, *_), p in zip(head, probabilities, strict=True)
            ),
            key=lambda kv: (-kv[1], kv[0]),
        )
        read = {chunk for chunk, _ in reread}
        tail = [(c, s) for c, s in fused if c not in read]
        # The tail keeps its order, scaled to stay just under the head's lowest score.
        floor = reread[-1][1] * (1.0 - 1e-6)
        peak = tail[0][1] if tail else 0.0
        scale = floor / peak if peak > floor and peak > 0 else 1.0
        return reread + [(c, s * scale) for c, s in tail]


def reader_features(read: Mapping[int, tuple[str, float]], top_chunk: int) -> dict[str, float]:
    """The reader's confidence features for a search whose top hit is ``top_chunk``.

    ``reader_top``: the reader's logit for the top hit; ``reader_doc_margin``: its lead over the
    best passage the reader read from another document (0 when it read no other document).
    Empty when the reader did not read the top hit (a document the query names, lifted from
    further down): the calibration then reads the search as it reads one without the reader.
    """
    if top_chunk not in read:
        return {}
    top_doc, top = read[top_chunk]
    others = [v for doc, v in read.values() if doc != top_doc]
    return {"reader_top": top, "reader_doc_margin": top - max(others) if others else 0.0}
