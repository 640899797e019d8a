"""Evaluation metrics against hand-computed cases, question loading, calibration, and an end-to-end
eval on a tiny KB."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import FakeHashEmbedder, make_calibration, make_kb
from pinakes_core import KB, ConfigError
from pinakes_core.manage import eval as eval_module
from pinakes_core.manage.eval import (
    Outcome,
    Question,
    evaluate,
    load_questions,
    ndcg_at,
    recall_at,
    reciprocal_rank,
    reliability,
    score,
)
from pinakes_core.search.confidence import FEATURES, TOPIC, Calibration


def test_recall_counts_distinct_relevant_documents() -> None:
    docs = ["a", "b", "c", "d", "e", "f"]
    assert recall_at(docs, ["b"], 1) == 0.0
    assert recall_at(docs, ["b"], 2) == 1.0
    assert recall_at(docs, ["a", "f"], 5) == 0.5
    assert recall_at(docs, ["a", "f", "z"], 10) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        recall_at(docs, [], 5)


def test_reciprocal_rank_uses_the_first_relevant_document() -> None:
    assert reciprocal_rank(["x", "y", "a"], ["a", "y"]) == 0.5
    assert reciprocal_rank(["x"], ["a"]) == 0.0


def test_ndcg_by_hand() -> None:
    # relevant at ranks 1 and 3 of two relevant: (1 + 1/log2(4)) / (1 + 1/log2(3))
    expected = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert ndcg_at(["a", "x", "b"], ["a", "b"], 10) == pytest.approx(expected)
    assert ndcg_at(["a", "b"], ["a", "b"], 10) == pytest.approx(1.0)
    assert ndcg_at(["x", "y"], ["a"], 10) == 0.0


def _outcome(cls: str, relevant: list[str], docs: list[str], abstain: bool | None) -> Outcome:
    q = Question.model_validate({"id": "q", "query": "q", "class": cls, "relevant": relevant})
    return Outcome(
        q, docs, None if abstain is None else (0.1 if abstain else 0.9), abstain, None, 5.0
    )


def test_score_confidence_errors_by_hand() -> None:
    outcomes = [
        _outcome("lookup", ["a"], ["a", "b"], abstain=False),  # right and confident
        _outcome("lookup", ["a"], ["a", "b"], abstain=True),  # false abstain
        _outcome(
            "lookup", ["a"], ["b", "a"], abstain=False
        ),  # confident, wrong top: false confidence
        _outcome("none", [], ["b"], abstain=False),  # confident on none: false confidence
        _outcome("none", [], ["c"], abstain=True),  # right abstention
    ]
    report = score(outcomes, ["bm25", "dense"])
    assert report.overall.false_abstain == pytest.approx(1 / 3, abs=1e-3)
    # wrong top hits: outcomes 3, 4, 5 -> confident on 3 and 4
    assert report.overall.false_confidence == pytest.approx(2 / 3, abs=1e-3)
    assert report.overall.false_confidence_none == pytest.approx(0.5)
    lookup = report.classes["lookup"]
    assert lookup.recall_1 == pytest.approx(2 / 3, abs=1e-3)
    assert lookup.mrr == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-3)
    assert report.classes["none"].recall_5 is None


def test_offtopic_counts_as_not_answerable_and_gets_its_own_row() -> None:
    outcomes = [
        _outcome("lookup", ["a"], ["a"], abstain=False),  # right and confident
        _outcome("none", [], ["b"], abstain=True),  # right abstention
        _outcome("offtopic", [], ["b"], abstain=False),  # confident on off-topic
        _outcome("offtopic", [], ["c"], abstain=True),  # right abstention
        _outcome("offtopic", [], ["c"], abstain=True),  # right abstention
    ]
    report = score(outcomes, ["bm25", "dense"])
    assert report.overall.false_abstain == 0.0
    # wrong top hits are the 4 unanswerable questions; 1 of them answered confidently
    assert report.overall.false_confidence == pytest.approx(0.25)
    assert report.overall.false_confidence_none == pytest.approx(0.25)
    offtopic = report.classes["offtopic"]
    assert offtopic.questions == 3 and offtopic.recall_1 is None
    assert offtopic.abstained == pytest.approx(2 / 3, abs=1e-3)
    assert report.classes["none"].abstained == 1.0
    assert report.classes["lookup"].abstained == 0.0


def test_auroc_and_reliability_of_confidence() -> None:
    def scored(cls: str, relevant: list[str], top: str, confidence: float) -> Outcome:
        q = Question.model_validate({"id": "q", "query": "q", "class": cls, "relevant": relevant})
        return Outcome(q, [top], confidence, confidence < 0.5, None, 1.0)

    outcomes = [
        scored("lookup", ["a"], "a", 0.95),  # right, high
        scored("lookup", ["a"], "a", 0.35),  # right, low
        scored("lookup", ["a"], "x", 0.55),  # wrong top document
        scored("offtopic", [], "x", 0.15),  # not answerable
    ]
    report = score(outcomes, ["bm25", "dense"])
    # right tops {0.95, 0.35} vs wrong {0.55, 0.15}: 3 of 4 pairs ordered correctly
    assert report.overall.auroc == pytest.approx(0.75)
    bins = {(b.lower, b.upper): b for b in report.reliability}
    assert len(report.reliability) == 10
    assert bins[(0.9, 1.0)].count == 1 and bins[(0.9, 1.0)].observed == 1.0
    assert bins[(0.5, 0.6)].observed == 0.0 and bins[(0.1, 0.2)].mean_confidence == 0.15
    assert bins[(0.0, 0.1)].count == 0 and bins[(0.0, 0.1)].observed is None


def test_reliability_puts_confidence_one_in_the_last_bin() -> None:
    rows = reliability(np.array([1.0, 0.0]), np.array([1.0, 0.0]))
    assert rows[-1].count == 1 and rows[0].count == 1
    assert sum(r.count for r in rows) == 2


def test_score_without_confidence_reports_none() -> None:
    report = score([_outcome("lookup", ["a"], ["a"], abstain=None)], ["bm25"])
    assert report.overall.false_abstain is None and report.overall.false_confidence is None


def test_load_questions_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "a", "query": "x", "class": "lookup", "relevant": ["a.md"]}\n{not json}\n'
    )
    with pytest.raises(ConfigError, match=r"q.jsonl, line 2"):
        load_questions(path)
    path.write_text('{"id": "a", "query": "x", "class": "lookups", "relevant": []}\n')
    with pytest.raises(ConfigError, match="unknown class 'lookups'"):
        load_questions(path)
    # A question set saved as UTF-16 (Windows' "Unicode") raised UnicodeDecodeError.
    path.write_bytes(
        '{"id": "a", "query": "x", "class": "none", "relevant": []}\n'.encode("utf-16")
    )
    with pytest.raises(ConfigError, match=r"q.jsonl is not UTF-8 text \(byte 0\)"):
        load_questions(path)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "query": "x", "class": "offtopic", "relevant": ["a.md"]}'], "no relevant"),
        (['{"id": "a", "query": "x", "class": "lookup", "relevant": []}'], "list relevant"),
        (
            [
                '{"id": "a", "query": "x", "class": "none", "relevant": []}',
                '{"id": "a", "query": "y", "class": "offtopic", "relevant": []}',
            ],
            r"line 2: question id 'a' is used twice",
        ),
    ],
)
def test_load_questions_rejects_inconsistent_questions(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=message):
        load_questions(path)


def test_eval_end_to_end_on_a_tiny_kb(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb",
        {
            "ledger.md": "# Ledger\n\nThe ledger service listens on port 7300 and stores journal entries.\n",
            "gateway.md": "# Gateway\n\nThe API gateway terminates TLS on port 443.\n",
            "people/ana.md": "# Ana\n\nAna leads the ledger team.\n",
        },
    )
    kb = KB.open(root, embedder=FakeHashEmbedder())
    questions = tmp_path / "questions.jsonl"
    rows = [
        {"id": "l1", "query": "ledger port 7300", "class": "lookup", "relevant": ["ledger.md"]},
        {"id": "l2", "query": "gateway TLS", "class": "lookup", "relevant": ["gateway.md"]},
        {
            "id": "f1",
            "query": "ledger",
            "class": "filter",
            "relevant": ["people/ana.md"],
            "filters": {"path": "people/"},
        },
        {"id": "n1", "query": "sourdough recipe", "class": "none", "relevant": []},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = evaluate(kb, questions, {"bm25": ["bm25"], "hybrid": ["bm25", "dense"]})
    assert set(report.configs) == {"bm25", "hybrid"}
    bm25 = report.configs["bm25"]
    assert bm25.classes["lookup"].recall_1 == 1.0
    assert bm25.classes["filter"].recall_1 == 1.0  # the path filter changes the answer
    assert bm25.overall.questions == 4
    assert bm25.overall.latency_ms_p50 is not None

    # a relevant path the KB does not hold is a mistake in the set, not a miss of the engine
    rows[0]["relevant"] = ["ledgr.md"]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match=r"question l1 lists 'ledgr.md', which is not a document"):
        evaluate(kb, questions, {"bm25": ["bm25"]})


class _AnchoredKB:
    """Fake KB for :func:`calibrate`: only its anchors matter (its searches are replaced)."""

    root = Path("kb")

    def __init__(self, anchors: Calibration) -> None:
        self._anchors = anchors

    def self_calibrate(self) -> None:
        return None

    def calibration(self) -> Calibration:
        return self._anchors


def test_calibrate_cross_validation_includes_the_off_topic_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answerable and off-topic questions look alike to the main model; only the gate's topic
    # margin tells them apart, as it does at search time.
    lines = [
        {"id": f"a{i}", "query": "q", "class": "lookup", "relevant": ["a.md"]} for i in range(20)
    ]
    lines += [{"id": f"o{i}", "query": "q", "class": "offtopic"} for i in range(20)]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    same = dict.fromkeys(FEATURES, 0.5)

    def searched(kb: object, questions: list[Question], channels: object) -> list[Outcome]:
        margin = {"lookup": 1.0, "offtopic": -1.0}
        return [
            Outcome(q, ["a.md"], None, None, {**same, TOPIC: margin[q.cls]}, 1.0) for q in questions
        ]

    monkeypatch.setattr(eval_module, "run_questions", searched)
    anchors = make_calibration(coef=[0.0] * len(FEATURES), gate=[10.0, -2.0])
    report = eval_module.calibrate(_AnchoredKB(anchors), path)  # type: ignore[arg-type]
    assert report.auc == pytest.approx(1.0)
    at_quarter = next(row for row in report.thresholds if row.threshold == 0.25)
    assert at_quarter.false_confidence_none == 0.0
    assert report.calibration.gate == [10.0, -2.0]
