"""Calibrated confidence: the probability that the top hit answers the query (DESIGN §5).

Features come from the retrieval itself (no extra model): the dense cosine of the best chunk and
of the top hit, the cosine margin to the runner-up, the best BM25 score, how the two channels
agree on the top hit, and how many of the query's content words the top hit contains. They go
through a logistic model whose coefficients are fitted on a golden set (``pnk eval
--calibrate``); the coefficients shipped in core were fitted on the project's golden KB with the
default embedding model. Confidence is ``None`` whenever an input is missing: a different model
without its own calibration, or a query that did not run both the bm25 and dense channels.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from importlib import resources

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from pinakes_core.query import query_terms

__all__ = [
    "FEATURES",
    "MONOTONE",
    "Calibration",
    "default_calibration",
    "extract_features",
    "fit_logistic",
]

#: Feature names, in the order of the coefficient vector.
FEATURES = (
    "dense_best",
    "dense_top",
    "dense_margin",
    "bm25_best",
    "rr_bm25",
    "rr_dense",
    "coverage",
    "idf_coverage",
    "unknown_share",
    "rarest_hit",
    "dense_peak",
    "identifier_miss",
)
#: Features whose coefficient is constrained to be ≥ 0: more of them never lowers confidence.
MONOTONE = frozenset(
    {
        "dense_best",
        "dense_top",
        "dense_margin",
        "bm25_best",
        "coverage",
        "idf_coverage",
        "rarest_hit",
    }
)

_WORD = re.compile(r"\w+", re.UNICODE)


class Calibration(BaseModel):
    """A fitted logistic calibration.

    Attributes:
        model_id: the embedding model the cosine features came from.
        features: feature names, in coefficient order.
        mean: per-feature mean used to standardise inputs.
        scale: per-feature standard deviation used to standardise inputs.
        coef: logistic coefficients over the standardised features.
        intercept: the logistic intercept.
        fitted_on: a description of the questions the fit used.
        n: number of questions in the fit.
    """

    model_config = ConfigDict(frozen=True)

    model_id: str
    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    fitted_on: str
    n: int

    def predict(self, features: Mapping[str, float]) -> float:
        """Return the calibrated probability for one feature mapping."""
        x = np.array([features[name] for name in self.features], dtype=np.float64)
        z = (x - np.array(self.mean)) / np.array(self.scale)
        logit = float(z @ np.array(self.coef) + self.intercept)
        return 1.0 / (1.0 + math.exp(-max(min(logit, 40.0), -40.0)))


def default_calibration() -> Calibration | None:
    """The calibration shipped with core (fitted on the golden set), or ``None`` if absent."""
    try:
        text = (
            resources.files("pinakes_core").joinpath("calibration.json").read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        return None
    return Calibration.model_validate_json(text)


_IDENTIFIER = re.compile(r"\w+(?:[-._/:]\w+)+|\w*\d\w*", re.UNICODE)


def identifiers(query: str) -> list[str]:
    """Identifier-like tokens of a query: words joined by ``-._/:`` or containing a digit."""
    return [m for m in _IDENTIFIER.findall(query) if len(m) > 1]


def _covered(term: str, words: set[str]) -> bool:
    # A crude stem match: "retries" covers "retry", "deploying" covers "deploy".
    stem = term[: max(4, len(term) - 3)] if len(term) > 4 else term
    return term in words or any(w.startswith(stem) for w in words)


def extract_features(
    query: str,
    lists: Mapping[str, Sequence[tuple[int, float]]],
    top_chunk: int | None,
    top_text: str,
    evidence: Sequence[tuple[float, bool, bool]] = (),
) -> dict[str, float] | None:
    """Compute the confidence features for one query, or ``None`` if inputs are missing.

    Args:
        query: the query text.
        lists: each channel's ranked ``(chunk_id, score)`` list; ``bm25`` and ``dense`` must
            both be present (possibly empty).
        top_chunk: the fused top hit's chunk id (``None`` when there are no hits).
        top_text: the top hit's title, heading path and text.
        evidence: per query word, its IDF in the KB, whether the top chunk contains it and
            whether any chunk does (see ``QueryContext.term_evidence``).
    """
    if "bm25" not in lists or "dense" not in lists:
        return None
    bm25, dense = lists["bm25"], lists["dense"]
    dense_scores = dict(dense)
    bm25_ranks = {cid: i for i, (cid, _) in enumerate(bm25, 1)}
    dense_ranks = {cid: i for i, (cid, _) in enumerate(dense, 1)}
    terms = query_terms(query)
    words = {w.lower() for w in _WORD.findall(top_text)}
    total_idf = sum(idf for idf, _, _ in evidence)
    coverage = (
        sum(_covered(t, words) for t in terms) / len(terms)
        if terms and top_chunk is not None
        else 0.0
    )
    return {
        "dense_best": dense[0][1] if dense else 0.0,
        "dense_top": dense_scores.get(top_chunk, 0.0) if top_chunk is not None else 0.0,
        "dense_margin": (dense[0][1] - dense[1][1])
        if len(dense) > 1
        else (dense[0][1] if dense else 0.0),
        # BM25 grows with the number of matched terms; the log keeps one long query from
        # dominating the fit.
        "bm25_best": math.log1p(max(bm25[0][1], 0.0)) if bm25 else 0.0,
        "rr_bm25": 1.0 / bm25_ranks[top_chunk] if top_chunk in bm25_ranks else 0.0,
        "rr_dense": 1.0 / dense_ranks[top_chunk] if top_chunk in dense_ranks else 0.0,
        "coverage": coverage,
        # Share of the query's IDF mass the top chunk holds: missing a rare word (an
        # identifier, a name) matters more than missing a common one.
        "idf_coverage": (
            sum(idf for idf, inside, _ in evidence if inside) / total_idf if total_idf > 0 else 0.0
        ),
        # Query words the KB has never seen: the strongest sign that it cannot answer.
        "unknown_share": (
            sum(1 for _, _, known in evidence if not known) / len(evidence) if evidence else 0.0
        ),
        # Does the top chunk hold the query's rarest word (usually the entity asked about)?
        "rarest_hit": float(max(evidence)[1]) if evidence else 0.0,
        # How far the best cosine stands above the next nine: a flat head means no clear match.
        "dense_peak": (
            dense[0][1] - sum(s for _, s in dense[1:10]) / len(dense[1:10])
            if len(dense) > 1
            else 0.0
        ),
        # An identifier in the query (E-4012, ledger.retry.max_attempts, v2.3) that the top
        # chunk does not contain verbatim.
        "identifier_miss": float(
            any(i.lower() not in top_text.lower() for i in identifiers(query))
        ),
    }


def fit_logistic(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    *,
    names: Sequence[str] = FEATURES,
    l2: float = 1.0,
    iterations: int = 100,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    """Fit an L2-regularised logistic regression by Newton's method on standardised features.

    Coefficients of :data:`MONOTONE` features are kept ≥ 0 (an active-set refit clamps any that
    come out negative), so confidence never falls when such a feature rises.

    Returns:
        ``(mean, scale, coef, intercept)``.
    """
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    free = np.ones(z.shape[1], dtype=bool)
    monotone = np.array([n in MONOTONE for n in names])
    while True:
        design = np.hstack([np.ones((z.shape[0], 1)), z[:, free]])
        w = np.zeros(design.shape[1])
        penalty = np.full(design.shape[1], l2)
        penalty[0] = 0.0  # the intercept is not shrunk
        for _ in range(iterations):
            p = 1.0 / (1.0 + np.exp(-np.clip(design @ w, -40, 40)))
            grad = design.T @ (p - y) + penalty * w
            hess = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
            step = np.linalg.solve(hess, grad)
            w -= step
            if np.max(np.abs(step)) < 1e-8:
                break
        coef = np.zeros(z.shape[1])
        coef[free] = w[1:]
        negative = free & monotone & (coef < 0)
        if not negative.any():
            return mean, scale, coef, float(w[0])
        free &= ~negative


def to_json(calibration: Calibration) -> str:
    """Serialise a calibration (stable key order, for committed files)."""
    return json.dumps(calibration.model_dump(), indent=2) + "\n"
