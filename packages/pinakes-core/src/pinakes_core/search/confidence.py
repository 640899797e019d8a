"""Calibrated confidence: the probability that the top hit answers the query (DESIGN §5).

Features come from the retrieval itself and from reading the top passage (no extra model):

- how strongly the dense and BM25 channels point at the top *document*, and by how much it leads
  the best other document (document margins separate "the right page" from "a related page");
- how much of the query the top passage holds: IDF-weighted word coverage of the chunk and of its
  best sentence, query entities (identifiers, proper names) missing from it, query words the KB
  has never seen;
- an off-topic signal: how much closer the query is to the KB's best chunk than to a bundled
  list of general-knowledge questions.

Raw values are not comparable across KBs (a cosine of 0.45 is strong in one corpus and weak in
another), so every feature is read as a position between two per-KB anchors recorded at sync by
self-calibration (:mod:`pinakes_core.search.calibration`): its typical value on off-topic queries and on
the KB's own answerable pseudo-queries. A logistic model maps those positions to a probability.
Its coefficients are fitted per KB on synthetic queries, shrunk toward a prior fitted on the
labelled golden set; a KB without self-calibration uses the prior with the golden KB's anchors.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from pinakes_core.index.query import query_terms, words

__all__ = [
    "FEATURES",
    "READER_FEATURES",
    "SIGNS",
    "TOPIC",
    "Calibration",
    "Evidence",
    "Ranking",
    "extract_features",
    "fit_logistic",
    "identifiers",
    "prior_calibration",
]

#: Feature names, in the order of the coefficient vector.
FEATURES = (
    "dense_top",
    "dense_doc_margin",
    "bm25_top",
    "bm25_doc_margin",
    "doc_rr_bm25",
    "doc_rr_dense",
    "idf_coverage",
    "sentence_coverage",
    "entity_miss",
    "unknown_share",
)
#: The reader's features (:mod:`pinakes_core.search.reading`), present when the reader read the top
#: hit: its "answers" logit and its lead over the best passage of another document. A
#: calibration over ``FEATURES + READER_FEATURES`` keeps one over :data:`FEATURES` alone in
#: :attr:`Calibration.base` for searches the reader did not read.
READER_FEATURES = ("reader_top", "reader_doc_margin")
#: The off-topic signal, read by its own gate (:attr:`Calibration.gate`), not by the main model.
TOPIC = "topic_margin"
#: The sign each coefficient is constrained to: +1 means more of the feature never lowers
#: confidence, -1 that it never raises it. A fit on a few hundred questions would otherwise
#: pick up noise with the wrong sign, which transfers badly to another KB.
SIGNS: Mapping[str, int] = {
    "dense_top": 1,
    "dense_doc_margin": 1,
    "bm25_top": 1,
    "bm25_doc_margin": 1,
    "doc_rr_bm25": 1,
    "doc_rr_dense": 1,
    "idf_coverage": 1,
    "sentence_coverage": 1,
    "entity_miss": -1,
    "unknown_share": -1,
    "reader_top": 1,
    "reader_doc_margin": 1,
}

#: Positions are clipped to ± this many anchor distances.
POSITION_LIMIT = 4.0

_WORD = re.compile(r"\w+", re.UNICODE)
# A sentence ends at . ! ? before a space, at a line end, or at the full-width marks of Chinese and
# Japanese, which no space follows.
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|(?<=[。！？])")
# Anchored at word starts: unanchored, a long word without a digit was rescanned from each of
# its characters (a 100,000-character query word took minutes); the matches are the same.
_IDENTIFIER = re.compile(r"\b\w+(?:[-._/:]\w+)+|\b\w*\d\w*", re.UNICODE)


def identifiers(query: str) -> list[str]:
    """Identifier-like tokens of a query: words joined by ``-._/:`` or containing a digit."""
    return [m for m in _IDENTIFIER.findall(query) if len(m) > 1]


def query_entities(query: str) -> list[str]:
    """The query's entities, lower-cased: identifiers and capitalised words after the first."""
    found = _WORD.findall(query)
    names = [w for i, w in enumerate(found) if i > 0 and w[:1].isupper() and len(w) > 1]
    return list(dict.fromkeys(e.lower() for e in [*identifiers(query), *names]))


def _covered(term: str, words: set[str]) -> bool:
    # A crude stem match: "retries" covers "retry", "deploying" covers "deploy".
    stem = term[: max(4, len(term) - 3)] if len(term) > 4 else term
    return term in words or any(w.startswith(stem) for w in words)


@dataclass(frozen=True)
class Evidence:
    """One query word: its IDF in the KB, whether the top chunk has it, whether any chunk does."""

    term: str
    idf: float
    in_top: bool
    in_kb: bool


@dataclass(frozen=True)
class Ranking:
    """What the features read from one search.

    Attributes:
        bm25: the bm25 channel's ``(chunk_id, score)`` list, best first.
        dense: the dense channel's ``(chunk_id, cosine)`` list, best first.
        doc_of: the document of every chunk in those lists and of the top hit.
        top_chunk: the fused top hit's chunk id.
        top_doc: the fused top hit's document id.
        top_head: the top hit's title and heading path.
        top_text: the top hit's text.
        offtopic_best: the query's best cosine to the bundled off-topic queries (``None`` when
            they are not loaded).
    """

    bm25: Sequence[tuple[int, float]]
    dense: Sequence[tuple[int, float]]
    doc_of: Mapping[int, str]
    top_chunk: int
    top_doc: str
    top_head: str
    top_text: str
    offtopic_best: float | None = None


def _doc_rank(ranked: Sequence[tuple[int, float]], doc_of: Mapping[int, str], doc: str) -> int:
    seen: list[str] = []
    for chunk, _ in ranked:
        d = doc_of.get(chunk, "")
        if d not in seen:
            seen.append(d)
        if d == doc:
            return len(seen)
    return 0


def _doc_best(
    ranked: Sequence[tuple[int, float]], doc_of: Mapping[int, str], doc: str, *, other: bool
) -> float:
    for chunk, score in ranked:
        if (doc_of.get(chunk) != doc) if other else (doc_of.get(chunk) == doc):
            return score
    return 0.0


def extract_features(
    query: str, ranking: Ranking, evidence: Sequence[Evidence]
) -> dict[str, float]:
    """Compute the raw confidence features of one search's top hit.

    Every value is finite; a missing input counts as no evidence (0), never as an error.
    """
    bm25, dense, doc_of, doc = ranking.bm25, ranking.dense, ranking.doc_of, ranking.top_doc
    rank_bm25, rank_dense = _doc_rank(bm25, doc_of, doc), _doc_rank(dense, doc_of, doc)
    # BM25 grows with the number of matched terms; the log keeps one long query from dominating.
    bm25_top = math.log1p(max(_doc_best(bm25, doc_of, doc, other=False), 0.0))
    bm25_other = math.log1p(max(_doc_best(bm25, doc_of, doc, other=True), 0.0))
    dense_top = _doc_best(dense, doc_of, doc, other=False)
    dense_other = _doc_best(dense, doc_of, doc, other=True)
    total = sum(e.idf for e in evidence)
    head = {w.lower() for w in words(ranking.top_head)}
    best_sentence = 0.0
    for sentence in [s for s in _SENTENCE.split(ranking.top_text) if s.strip()] or [""]:
        seen = head | {w.lower() for w in words(sentence)}
        share = sum(e.idf for e in evidence if _covered(e.term, seen))
        best_sentence = max(best_sentence, share / total if total > 0 else 0.0)
    text = f"{ranking.top_head} {ranking.top_text}".lower()
    entities = query_entities(query)
    dense_best = dense[0][1] if dense else 0.0
    idf_coverage = sum(e.idf for e in evidence if e.in_top) / total if total > 0 else 0.0
    features = {
        # The top document's best cosine and its lead over the best other document.
        "dense_top": dense_top,
        "dense_doc_margin": dense_top - dense_other,
        "bm25_top": bm25_top,
        # The BM25 lead, weighted by how much of the query the top chunk covers: one document
        # alone matching one stray query word leads by a lot and means nothing.
        "bm25_doc_margin": (bm25_top - bm25_other) * idf_coverage,
        # Channel agreement at the document level: 1 / the top document's rank in each channel.
        "doc_rr_bm25": 1.0 / rank_bm25 if rank_bm25 else 0.0,
        "doc_rr_dense": 1.0 / rank_dense if rank_dense else 0.0,
        # Share of the query's IDF mass the top chunk holds: missing a rare word (an identifier,
        # a name) matters more than missing a common one.
        "idf_coverage": idf_coverage,
        # The same within the best single sentence (plus title and headings): an answer usually
        # sits in one sentence, while a chunk that merely mentions the words spreads them out.
        "sentence_coverage": best_sentence,
        # Identifiers and names the query asks about that the top passage does not contain.
        "entity_miss": (
            sum(1 for e in entities if e not in text) / len(entities) if entities else 0.0
        ),
        # IDF mass of query words that no chunk of the KB contains.
        "unknown_share": (
            sum(e.idf for e in evidence if not e.in_kb) / total if total > 0 else 0.0
        ),
    }
    if ranking.offtopic_best is not None:
        # Off-topic detection: the query's best cosine to the KB minus its best cosine to
        # general-knowledge questions (absent when those are not loaded).
        features[TOPIC] = dense_best - ranking.offtopic_best
    return features


def evidence_for(query: str, rows: Sequence[tuple[float, bool, bool]]) -> list[Evidence]:
    """Pair ``QueryContext.term_evidence`` rows with the query words they describe."""
    return [
        Evidence(term, idf, inside, known)
        for term, (idf, inside, known) in zip(query_terms(query), rows, strict=False)
    ]


class Calibration(BaseModel):
    """A fitted confidence calibration: per-feature anchors and a logistic model over them.

    A feature's position is ``(x - off) / scale``: 0 at its typical value on off-topic queries,
    about 1 at its typical value on answerable ones.

    Attributes:
        model_id: the embedding model the cosine features came from.
        kind: ``prior`` (fitted on the labelled golden set), ``self`` (fitted at sync on the
            KB's synthetic queries, shrunk toward the prior) or ``labelled`` (``pnk eval
            --calibrate`` on the KB's own question set).
        features: feature names, in coefficient order.
        off: per-feature anchor on off-topic queries.
        scale: per-feature distance from the off-topic anchor to the answerable one (> 0).
        coef: logistic coefficients over the positions.
        intercept: the logistic intercept.
        fitted_on: a description of what the fit used.
        n: number of queries in the fit.
        gate: the off-topic gate ``(slope, intercept)`` over the raw ``topic_margin``: the
            probability that the query is about the KB at all, fitted per KB on its
            pseudo-questions against the off-topic queries. Empty: no gate.
        signature: the KB state the calibration was fitted on (documents, chunks), so sync can
            tell when the KB changed enough to refit.
        base: for a calibration over the reader's features too, the one over
            :data:`FEATURES` alone, fitted on the same queries: it judges a search the reader
            did not read (``--no-reader``, a top hit lifted from past the reader's head).
    """

    model_config = ConfigDict(frozen=True)

    model_id: str
    kind: Literal["prior", "self", "labelled"] = "labelled"
    features: list[str]
    off: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    fitted_on: str
    n: int
    gate: list[float] = []
    signature: dict[str, int] = {}
    base: Calibration | None = None

    @property
    def reads(self) -> bool:
        """Whether this calibration reads the reader's features."""
        return any(name in READER_FEATURES for name in self.features)

    def positions(self, features: Mapping[str, float]) -> npt.NDArray[np.float64]:
        """The features' positions between the off-topic and answerable anchors.

        A feature missing from ``features`` (the off-topic margin of a store without its
        off-topic reference) sits halfway: it neither raises nor lowers confidence much.
        """
        off, scale = np.array(self.off), np.array(self.scale)
        x = np.array([features.get(name, np.nan) for name in self.features], dtype=np.float64)
        x = np.where(np.isnan(x), off + 0.5 * scale, x)
        # Clipped: one extreme value (a huge BM25 lead) must not outvote every other feature.
        z: npt.NDArray[np.float64] = np.clip((x - off) / scale, -POSITION_LIMIT, POSITION_LIMIT)
        return z

    def on_topic(self, features: Mapping[str, float]) -> float:
        """The gate's probability that the query is about this KB (1.0 without a gate)."""
        if len(self.gate) != 2 or TOPIC not in features:
            return 1.0
        return _sigmoid(self.gate[0] * features[TOPIC] + self.gate[1])

    def predict(self, features: Mapping[str, float]) -> float:
        """Return the calibrated probability for one feature mapping.

        It is the main model's probability that the top hit answers, times the off-topic gate's
        probability that the query concerns the KB at all. Features of a search the reader did
        not read go to :attr:`base` when there is one.
        """
        if self.base is not None and "reader_top" not in features:
            return self.base.predict(features)
        logit = float(self.positions(features) @ np.array(self.coef) + self.intercept)
        return _sigmoid(logit) * self.on_topic(features)

    def with_anchors(self, off: Sequence[float], scale: Sequence[float]) -> Calibration:
        """This model read against other anchors (a prior moved onto another KB)."""
        return self.model_copy(update={"off": list(off), "scale": list(scale)})


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 40.0), -40.0)))


def prior_calibration() -> Calibration | None:
    """The prior shipped with core (fitted on the golden set), or ``None`` if absent."""
    try:
        text = (
            resources.files("pinakes_core")
            .joinpath("data/confidence_prior.json")
            .read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        return None
    return Calibration.model_validate_json(text)


def fit_logistic(
    z: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    *,
    names: Sequence[str] = FEATURES,
    weights: npt.NDArray[np.float64] | None = None,
    center: Sequence[float] | None = None,
    l2: float | Sequence[float] = 1.0,
    iterations: int = 100,
) -> tuple[npt.NDArray[np.float64], float]:
    """Fit a weighted logistic regression by Newton's method, shrunk toward ``center``.

    Minimises ``Σ wᵢ · logloss(yᵢ, σ(zᵢ·β + b)) + l2/2 · ‖β - center‖²`` (the intercept is not
    shrunk; ``l2`` may give each coefficient its own strength). Coefficients are kept on the side of zero :data:`SIGNS` allows (an active-set refit
    clamps any that come out on the wrong side at 0).

    Returns:
        ``(coef, intercept)``.
    """
    n, d = z.shape
    w_rows = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    target = np.zeros(d) if center is None else np.asarray(center, dtype=np.float64)
    signs = np.array([SIGNS.get(name, 0) for name in names])
    strengths = np.broadcast_to(np.asarray(l2, dtype=np.float64), (d,))
    free = np.ones(d, dtype=bool)
    while True:
        cols = np.flatnonzero(free)
        design = np.hstack([np.ones((n, 1)), z[:, cols]])
        beta = np.concatenate([[0.0], target[cols]])
        centre = np.concatenate([[0.0], target[cols]])
        penalty = np.concatenate([[0.0], strengths[cols]])
        for _ in range(iterations):
            p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -40, 40)))
            grad = design.T @ (w_rows * (p - y)) + penalty * (beta - centre)
            hess = (design * (w_rows * p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
            step = np.linalg.solve(hess, grad)
            beta -= step
            if np.max(np.abs(step)) < 1e-8:
                break
        coef = np.zeros(d)
        coef[cols] = beta[1:]
        wrong = free & (coef * signs < 0)
        if not wrong.any():
            return coef, float(beta[0])
        free &= ~wrong


def to_json(calibration: Calibration) -> str:
    """Serialise a calibration (stable key order, for committed files)."""
    return json.dumps(calibration.model_dump(), indent=2) + "\n"
