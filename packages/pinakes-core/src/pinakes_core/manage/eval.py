"""Evaluation: golden question sets, per-class retrieval metrics, calibration (DESIGN §11).

A question set is JSONL, one object a line::

    {"id": "lookup-001", "query": "...", "class": "lookup", "relevant": ["services/ledger.md"],
     "answer": "...", "filters": {"tags": ["ledger"], "path": "services/"}}

Metrics are computed over the ranked list of distinct documents the hits come from. Recall@k is
the share of a question's relevant documents found in the first k; MRR uses the first relevant
document; nDCG@10 uses binary relevance. The KB does not answer ``none`` questions (near misses)
nor ``offtopic`` ones (world knowledge, other domains); both count as *not answerable* in every
metric, have no recall, and the correct behaviour on them is to abstain:

- ``abstained`` (per class): the share of the class's questions on which the search abstained
  (confidence below ``[retrieval] abstain_below``): the correct-abstention rate of ``none`` and
  ``offtopic``, the false-abstain rate of an answerable class;
- ``false_abstain``: answerable questions on which the search abstained, over all answerable
  questions;
- ``false_confidence``: questions answered confidently although the top hit is wrong (a question
  the KB does not answer, or a top document that is not relevant), over all questions whose top
  hit is wrong;
- ``false_confidence_none``: the same restricted to the questions the KB does not answer
  (``none`` and ``offtopic``; the original Pinakes' metric);
- ``auroc``: how well ``confidence`` ranks questions with a right top document above those with
  a wrong one (0.5 is chance), and ``reliability``: the 10-bin reliability diagram of
  ``confidence`` against "the top document is right".

Why one module of this length (issue 37): question sets, their runs, the metrics and the
labelled calibration are one job (``pnk eval``): :func:`calibrate` fits on the same runs and
outcomes :func:`evaluate` scores, and the CLI, tests and benchmarks read them as one module.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pinakes_core.errors import ConfigError, PinakesError
from pinakes_core.search.confidence import Calibration, fit_logistic, prior_calibration
from pinakes_core.search.registry import channel_registry

if TYPE_CHECKING:
    from pinakes_core.kb import KB

__all__ = [
    "CLASSES",
    "UNANSWERABLE",
    "ClassMetrics",
    "ConfigReport",
    "EvalReport",
    "Outcome",
    "Question",
    "ReliabilityBin",
    "calibrate",
    "check_relevant",
    "evaluate",
    "load_questions",
    "matrix_configs",
    "ndcg_at",
    "recall_at",
    "reciprocal_rank",
    "reliability",
    "run_questions",
    "score",
]

CLASSES = ("lookup", "paraphrase", "lexical", "filter", "multi-hop", "none", "offtopic")
#: Classes of questions the KB does not answer: they list no relevant documents.
UNANSWERABLE = frozenset({"none", "offtopic"})
#: Chunks fetched per question: enough for ten distinct documents in practice.
_FETCH = 50


class QuestionFilters(BaseModel):
    """Filters a question applies (same meaning as ``KB.search``'s arguments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tags: list[str] = []
    path: str | None = None
    doc_ids: list[str] = []
    modified_after: float | None = None
    modified_before: float | None = None


class Question(BaseModel):
    """One golden question."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    query: str
    cls: str = Field(alias="class")
    relevant: list[str] = []
    answer: str = ""
    filters: QuestionFilters | None = None


def load_questions(path: Path) -> list[Question]:
    """Read a JSONL question set.

    Raises:
        ConfigError: on a line that is not JSON or not a valid question (unknown class, an id used
            twice, an answerable question without relevant documents or a none/offtopic one with
            them); the message names the file and line.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"Cannot read question file {path}: {exc.strerror}.", "Pass --questions FILE."
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {exc.start}).", "Save the question set as UTF-8 JSONL."
        ) from None
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            question = Question.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else exc.msg
            raise ConfigError(f"{path}, line {number}: not a valid question ({detail}).") from None
        if question.cls not in CLASSES:
            raise ConfigError(
                f"{path}, line {number}: unknown class {question.cls!r}; allowed: {', '.join(CLASSES)}."
            )
        if (question.cls in UNANSWERABLE) == bool(question.relevant):
            raise ConfigError(
                f"{path}, line {number}: a {question.cls!r} question must "
                + (
                    "list no relevant documents."
                    if question.relevant
                    else "list relevant documents."
                ),
                "Give answerable questions their documents; none/offtopic questions get [].",
            )
        if question.id in seen:
            raise ConfigError(f"{path}, line {number}: question id {question.id!r} is used twice.")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise ConfigError(f"{path} holds no questions.")
    return questions


# -- metrics -----------------------------------------------------------------------------------


def recall_at(docs: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Share of ``relevant`` found among the first ``k`` of ``docs``."""
    if not relevant:
        raise ValueError("recall is undefined without relevant documents")
    return len(set(docs[:k]) & set(relevant)) / len(set(relevant))


def reciprocal_rank(docs: Sequence[str], relevant: Sequence[str]) -> float:
    """1 / rank of the first relevant document (0 when none is retrieved)."""
    wanted = set(relevant)
    return next((1.0 / i for i, d in enumerate(docs, 1) if d in wanted), 0.0)


def ndcg_at(docs: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Binary-relevance nDCG over the first ``k`` documents."""
    wanted = set(relevant)
    dcg = sum(1.0 / math.log2(i + 1) for i, d in enumerate(docs[:k], 1) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(wanted), k) + 1))
    return dcg / ideal if ideal else 0.0


def _percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


# -- running -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one question's search returned."""

    question: Question
    docs: list[str]
    confidence: float | None
    abstain: bool | None
    features: dict[str, float] | None
    latency_ms: float

    @property
    def answerable(self) -> bool:
        """Whether the KB answers the question (it is not ``none`` or ``offtopic``)."""
        return self.question.cls not in UNANSWERABLE

    @property
    def top_correct(self) -> bool:
        """Whether the top document is one of the relevant ones."""
        return self.answerable and bool(self.docs) and self.docs[0] in self.question.relevant


def run_questions(
    kb: KB, questions: Sequence[Question], channels: Sequence[str] | None
) -> list[Outcome]:
    """Search every question with ``channels`` (``None``: the KB's defaults)."""
    outcomes = []
    for question in questions:
        f = question.filters or QuestionFilters()
        result = kb.search(
            question.query,
            k=_FETCH,
            tags=f.tags,
            path=f.path,
            doc_ids=f.doc_ids,
            modified_after=f.modified_after,
            modified_before=f.modified_before,
            channels=channels,
            explain=True,
            group_by="chunk",  # the figures rank passages (docs/evaluation.md)
        )
        docs = list(dict.fromkeys(hit.path for hit in result.hits))
        outcomes.append(
            Outcome(
                question,
                docs,
                result.confidence,
                result.abstain,
                result.features,
                result.timings_ms["total"],
            )
        )
    return outcomes


class ClassMetrics(BaseModel):
    """Metrics of one question class.

    ``None`` where undefined: recall of ``none``/``offtopic``, ``abstained`` without a
    calibrated confidence.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)

    questions: int
    recall_1: float | None = Field(alias="recall@1")
    recall_5: float | None = Field(alias="recall@5")
    recall_10: float | None = Field(alias="recall@10")
    mrr: float | None
    ndcg_10: float | None = Field(alias="ndcg@10")
    abstained: float | None = None


class Overall(BaseModel):
    """Whole-set figures: confidence errors and latency."""

    model_config = ConfigDict(frozen=True)

    questions: int
    false_abstain: float | None
    false_confidence: float | None
    false_confidence_none: float | None
    auroc: float | None = None
    latency_ms_p50: float | None
    latency_ms_p95: float | None


class ReliabilityBin(BaseModel):
    """One bin of the reliability (calibration) curve."""

    model_config = ConfigDict(frozen=True)

    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    observed: float | None


class ConfigReport(BaseModel):
    """The results of one channel configuration."""

    model_config = ConfigDict(frozen=True)

    channels: list[str]
    classes: dict[str, ClassMetrics]
    overall: Overall
    #: Confidence against "the top document is right", 10 equal-width bins (empty without
    #: a calibrated confidence).
    reliability: list[ReliabilityBin] = []


class EvalReport(BaseModel):
    """``pnk eval``'s result: one report per configuration."""

    model_config = ConfigDict(frozen=True)

    kb: str
    questions_file: str
    abstain_below: float
    configs: dict[str, ConfigReport]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _auc(p: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> float | None:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return None
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return round(float(greater / (len(pos) * len(neg))), 4)


def reliability(
    confidence: np.ndarray[Any, Any], correct: np.ndarray[Any, Any], bins: int = 10
) -> list[ReliabilityBin]:
    """Return the reliability diagram of ``confidence`` against ``correct`` (0/1).

    Per equal-width confidence bin: the mean confidence and the observed share of right top
    documents (``None`` for an empty bin).
    """
    rows = []
    edges = np.linspace(0, 1, bins + 1)
    for lo, hi in itertools.pairwise(edges):
        mask = (confidence >= lo) & ((confidence < hi) | (hi == 1.0))
        rows.append(
            ReliabilityBin(
                lower=round(float(lo), 1),
                upper=round(float(hi), 1),
                count=int(mask.sum()),
                mean_confidence=round(float(confidence[mask].mean()), 3) if mask.any() else None,
                observed=round(float(correct[mask].mean()), 3) if mask.any() else None,
            )
        )
    return rows


def score(outcomes: Sequence[Outcome], channels: Sequence[str]) -> ConfigReport:
    """Aggregate outcomes into per-class metrics and whole-set figures."""
    classes: dict[str, ClassMetrics] = {}
    for cls in CLASSES:
        group = [o for o in outcomes if o.question.cls == cls]
        if not group:
            continue
        answerable = [o for o in group if o.question.relevant]
        classes[cls] = ClassMetrics.model_validate(
            {
                "questions": len(group),
                "recall@1": _mean([recall_at(o.docs, o.question.relevant, 1) for o in answerable]),
                "recall@5": _mean([recall_at(o.docs, o.question.relevant, 5) for o in answerable]),
                "recall@10": _mean(
                    [recall_at(o.docs, o.question.relevant, 10) for o in answerable]
                ),
                "mrr": _mean([reciprocal_rank(o.docs, o.question.relevant) for o in answerable]),
                "ndcg@10": _mean([ndcg_at(o.docs, o.question.relevant, 10) for o in answerable]),
                "abstained": _mean([float(o.abstain) for o in group if o.abstain is not None]),
            }
        )
    judged = [o for o in outcomes if o.abstain is not None]
    answerable = [o for o in judged if o.answerable]
    wrong = [o for o in judged if not o.top_correct]
    nones = [o for o in judged if not o.answerable]
    latencies = [o.latency_ms for o in outcomes]

    def share(group: list[Outcome], abstained: bool) -> float | None:
        return round(sum(o.abstain is abstained for o in group) / len(group), 4) if group else None

    scored = [o for o in outcomes if o.confidence is not None]
    confidence = np.array([o.confidence for o in scored], dtype=np.float64)
    correct = np.array([1.0 if o.top_correct else 0.0 for o in scored])
    overall = Overall(
        questions=len(outcomes),
        false_abstain=share(answerable, True),
        false_confidence=share(wrong, False),
        false_confidence_none=share(nones, False),
        auroc=_auc(confidence, correct),
        latency_ms_p50=_percentile(latencies, 50),
        latency_ms_p95=_percentile(latencies, 95),
    )
    return ConfigReport(
        channels=list(channels),
        classes=classes,
        overall=overall,
        reliability=reliability(confidence, correct) if scored else [],
    )


def config_name(channels: Sequence[str]) -> str:
    """A configuration's display name: ``hybrid`` for bm25 + dense, ``hybrid+<x>`` beyond it."""
    rest = [c for c in channels if c not in ("bm25", "dense")]
    if "bm25" in channels and "dense" in channels:
        return "+".join(["hybrid", *rest])
    return "+".join(channels)


def matrix_configs() -> dict[str, list[str]]:
    """Return every configuration ``--matrix`` compares.

    That is bm25, dense, hybrid, and hybrid plus each graph channel or reranker an installed
    plugin registers (and ppr with link-rerank when both are there).
    """
    configs = {"bm25": ["bm25"], "dense": ["dense"], "hybrid": ["bm25", "dense"]}
    core = {"bm25", "dense", "entities", "concepts"}
    registered = channel_registry()
    for name in registered:
        if name not in core:
            configs[f"hybrid+{name}"] = ["bm25", "dense", name]
    if {"ppr", "link-rerank"} <= registered.keys():
        configs["hybrid+ppr+link-rerank"] = ["bm25", "dense", "ppr", "link-rerank"]
    return configs


def select_configs(
    kb: KB, *, matrix: bool, names: Sequence[str] | None
) -> dict[str, list[str]] | None:
    """Return the configurations a run compares.

    All of them with ``matrix``, the named ones, or ``None`` for the KB's default.

    Raises:
        ConfigError: if a name is not one of :func:`matrix_configs`.
    """
    if not matrix and not names:
        return None
    available = matrix_configs()
    if matrix and not names:
        return available
    unknown = [n for n in names or () if n not in available]
    if unknown:
        raise ConfigError(
            f"Unknown configuration {unknown[0]!r}.", f"Choose from: {', '.join(available)}."
        )
    return {n: available[n] for n in names or ()}


def check_relevant(kb: KB, questions: Sequence[Question], questions_file: Path) -> None:
    """Check that every relevant document of ``questions`` is a document of ``kb``.

    A KB that was never synced is synced first, as a search would.

    Raises:
        ConfigError: naming the first question and path that are missing, and how many more are.
    """
    kb._ensure_synced()  # as search would: a never-synced KB is synced first
    known = {row[0] for row in kb.store().conn.execute("SELECT path FROM documents")}
    missing = [(q.id, path) for q in questions for path in q.relevant if path not in known]
    if missing:
        first_id, first_path = missing[0]
        more = f" ({len(missing) - 1} more are missing too)" if len(missing) > 1 else ""
        raise ConfigError(
            f"{questions_file}: question {first_id} lists {first_path!r}, which is not a "
            f"document of the KB at {kb.root}{more}.",
            "Relevant paths are relative to the KB root with '/' separators; fix the path or "
            "pass the KB the set was written for with --kb.",
        )


def evaluate(
    kb: KB, questions_file: Path, configs: dict[str, list[str]] | None = None
) -> EvalReport:
    """Run a question set against ``kb`` for each configuration (default: the KB's own).

    Raises:
        ConfigError: if the question file is invalid (see :func:`load_questions`) or a question
            lists a relevant document the KB does not hold (a typo, or the set was written for
            another folder), since such a question could never be found.
    """
    from pinakes_core.search.retrieval import default_channels

    questions = load_questions(questions_file)
    check_relevant(kb, questions, questions_file)
    if configs is None:
        channels = default_channels(kb.config.retrieval, entities=False, concepts=False)
        configs = {config_name(channels): channels}
    reports = {
        name: score(run_questions(kb, questions, chans), chans) for name, chans in configs.items()
    }
    return EvalReport(
        kb=str(kb.root),
        questions_file=str(questions_file),
        abstain_below=kb.config.retrieval.abstain_below,
        configs=reports,
    )


# -- calibration -------------------------------------------------------------------------------


class ThresholdRow(BaseModel):
    """Cross-validated error rates if ``abstain_below`` were ``threshold``."""

    model_config = ConfigDict(frozen=True)

    threshold: float
    false_abstain: float
    false_confidence: float
    false_confidence_none: float


class CalibrationReport(BaseModel):
    """The result of ``pnk eval --calibrate``: the fit over all questions plus held-out figures."""

    model_config = ConfigDict(frozen=True)

    calibration: Calibration
    folds: int
    questions: int
    positives: int
    brier: float
    log_loss: float
    auc: float | None
    reliability: list[ReliabilityBin]
    thresholds: list[ThresholdRow]


def thresholds(
    p: np.ndarray[Any, Any], y: np.ndarray[Any, Any], answerable: np.ndarray[Any, Any]
) -> list[ThresholdRow]:
    """Error rates at every ``abstain_below`` from 0.05 to 0.95."""
    rows = []
    for threshold in np.round(np.arange(0.05, 0.96, 0.05), 2):
        confident = p >= threshold
        rows.append(
            ThresholdRow(
                threshold=float(threshold),
                false_abstain=round(
                    float((~confident & answerable).sum() / max(answerable.sum(), 1)), 4
                ),
                false_confidence=round(
                    float((confident & (y == 0)).sum() / max((y == 0).sum(), 1)), 4
                ),
                false_confidence_none=round(
                    float((confident & ~answerable).sum() / max((~answerable).sum(), 1)), 4
                ),
            )
        )
    return rows


def _positions(
    outcomes: Sequence[Outcome], anchors: Calibration
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    z = np.array([anchors.positions(o.features or {}) for o in outcomes])
    y = np.array([1.0 if o.top_correct else 0.0 for o in outcomes])
    answerable = np.array([o.answerable for o in outcomes])
    return z, y, answerable


#: Strength of the shrinkage of a labelled fit toward the prior (in questions).
LABELLED_L2 = 3.0


def calibrate(kb: KB, questions_file: Path, *, folds: int = 5, seed: int = 0) -> CalibrationReport:
    """Fit the confidence calibration on a labelled question set and report it with CV.

    Features are read against the KB's self-calibration anchors (it is refreshed first when
    stale); coefficients are shrunk toward the shipped prior. Every figure in the report (Brier,
    log loss, AUC, reliability curve, threshold table) comes from held-out predictions: each
    question is scored by a model fitted on the other folds. The returned ``calibration`` is
    then fitted on all questions; the caller decides whether to store it
    (``KB.searcher.save_calibration``). It keeps the KB's off-topic gate, and the held-out predictions
    include that gate as a search's ``confidence`` does.

    Raises:
        PinakesError: if the set lacks either correct or wrong top hits to learn from.
    """
    questions = load_questions(questions_file)
    kb.self_calibrate()
    anchors = kb.calibration()
    if anchors is None:
        raise PinakesError(
            f"{kb.root}: no calibration matches this KB's embedding model.",
            "Run `pnk sync` (it fits one) or `pnk calibrate`.",
        )
    outcomes = [o for o in run_questions(kb, questions, None) if o.features is not None]
    z, y, answerable = _positions(outcomes, anchors)
    if len(set(y.tolist())) < 2:
        raise PinakesError(
            f"{questions_file}: calibration needs questions with both right and wrong top hits.",
            "Add `none` or `offtopic` questions (the KB does not answer them) to the set.",
        )
    prior = prior_calibration()
    # The prior over the same features (the reader's too, or not), if it has one.
    matching = [c for c in (prior, prior and prior.base) if c and c.features == anchors.features]
    center = matching[0].coef if matching else None

    def fitted(rows: np.ndarray[Any, Any]) -> Calibration:
        """The anchors' model (off-topic gate and all) with coefficients fitted on ``rows``."""
        coef, intercept = fit_logistic(
            z[rows], y[rows], names=anchors.features, center=center, l2=LABELLED_L2
        )
        return anchors.model_copy(
            update={
                "kind": "labelled",
                "coef": [round(float(v), 6) for v in coef],
                "intercept": round(intercept, 6),
                "fitted_on": f"{questions_file.name} ({len(rows)} questions)",
                "n": len(rows),
            }
        )

    order = list(range(len(y)))
    random.Random(seed).shuffle(order)
    held_out = np.zeros(len(y))
    for fold in range(folds):
        test = np.array(order[fold::folds])
        # Scored as a search scores it: Calibration.predict, the off-topic gate included.
        model = fitted(np.setdiff1d(np.arange(len(y)), test))
        held_out[test] = [model.predict(outcomes[i].features or {}) for i in test]
    calibration = fitted(np.arange(len(y)))
    clipped = np.clip(held_out, 1e-6, 1 - 1e-6)
    return CalibrationReport(
        calibration=calibration,
        folds=folds,
        questions=len(y),
        positives=int(y.sum()),
        brier=round(float(np.mean((held_out - y) ** 2)), 4),
        log_loss=round(float(-np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped))), 4),
        auc=_auc(held_out, y),
        reliability=reliability(held_out, y),
        thresholds=thresholds(held_out, y, answerable),
    )


def default_questions(root: Path) -> Path:
    """Return the question file ``pnk eval`` uses without ``--questions``.

    That is ``questions.jsonl`` in the KB root or in its parent folder (the golden layout:
    ``golden/kb`` + ``golden/questions.jsonl``).

    Raises:
        ConfigError: if neither exists.
    """
    for candidate in (root / "questions.jsonl", root.parent / "questions.jsonl"):
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"No questions.jsonl in {root} or its parent folder.", "Pass --questions FILE."
    )
