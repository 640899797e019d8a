"""`ask --deep`: plan repair, the bounded rolling summary, every stop reason, the transcript.

Turns differ, so calls go to the scripted FAKE provider (tests/paid_support.py) through
litellm's provider routing; the embedder is the FAKE hash model.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb, set_config
from paid_support import (
    ScriptedProvider,
    constant_calibration,
    plan,
    scripted_config,
    solve,
    synthesis,
    threshold_calibration,
)
from pinakes_core import KB
from pinakes_core.paid.ask import AskResult, ask
from pinakes_core.paid.budget import Budget
from pinakes_core.paid.deep import MAX_SUBQUESTIONS, plan_dag
from pinakes_core.paid.llm import LiteLLMClient

FILES: dict[str, str | bytes] = {
    "services/ledger.md": "# Ledger service\n\nThe ledger service records every payment. It is owned by the payments team.\n",
    "teams/payments.md": "# Payments team\n\nThe payments team answers pages through the falcon rotation.\n",
    "rotations/falcon.md": "# Falcon rotation\n\nThe falcon rotation pages Ana and Bo on weekdays.\n",
    "misc/garden.md": "# Garden\n\nTomatoes need sun and water in July.\n",
    "misc/cooking.md": "# Cooking\n\nBoil pasta in salted water for nine minutes.\n",
    "misc/weather.md": "# Weather\n\nFog rolls in from the bay at dawn.\n",
}
QUESTION = "who gets paged for the ledger service"
PLAN3 = plan(
    ("s1", "which team owns the ledger service", []),
    ("s2", "which rotation pages for the payments team", ["s1"]),
    ("s3", "who is on the falcon rotation", ["s2"]),
)

#: Four sub-questions that each find a document the first search did not.
FOUR = plan(
    ("s1", "how long to boil pasta in salted water", []),
    ("s2", "when does fog roll in from the bay", []),
    ("s3", "what do tomatoes need in July", []),
    ("s4", "who is on the falcon rotation", []),
)


@pytest.fixture
def kb(tmp_path: Path) -> KB:
    root = make_kb(tmp_path / "kb", FILES)
    scripted_config(root, "passages = 2\n")
    set_config(root, "deep", "passages = 2")
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    constant_calibration(handle, -6.0)  # low confidence everywhere: the loop runs
    return handle


def reopen(kb: KB) -> KB:
    return KB.open(kb.root, embedder=FakeHashEmbedder())


def test_plan_dag_repairs_cycles_caps_and_orders_topologically() -> None:
    raw = [
        {"id": "a", "question": "A?", "depends_on": ["c"]},
        {"id": "b", "question": "B?", "depends_on": ["a", "b", "zz"]},
        {"id": "c", "question": "C?", "depends_on": ["b"]},  # a → c → b → a: a cycle
        {"id": "d", "question": "the main question", "depends_on": []},
        {"id": "e", "question": "a?", "depends_on": []},  # repeats A
        "F?",
        {"id": "g", "question": "G?", "depends_on": []},
        {"id": "h", "question": "H?", "depends_on": []},
    ]
    order, repairs = plan_dag(raw, "The main question?")
    assert len(order) == MAX_SUBQUESTIONS
    position = {n.id: i for i, n in enumerate(order)}
    for node in order:
        assert all(position[d] < position[node.id] for d in node.depends_on), node
    assert any("cycle" in r for r in repairs)
    assert any("itself" in r for r in repairs) and any("'zz'" in r for r in repairs)
    assert sum("repeats" in r for r in repairs) == 2  # the main question and "a?"
    assert any("kept the first 5" in r for r in repairs)
    # Cycle repair drops only the closing edge: a's dependency on c survives in some form.
    assert order[0].depends_on == ()


def test_a_cyclic_plan_is_repaired_and_run_in_dependency_order(kb: KB) -> None:
    cyclic = plan(
        ("s1", "which team owns the ledger service", ["s3"]),
        ("s2", "which rotation pages for the payments team", ["s1"]),
        ("s3", "who is on the falcon rotation", ["s2"]),
    )
    replies = [
        cyclic,
        solve("The payments team [P1].", "Payments owns the ledger [P1]."),
        solve("Falcon [P1].", "Falcon rotation [P1]."),
        solve("Ana and Bo [P1].", "Ana and Bo [P1]."),
        synthesis("Ana and Bo [P1]."),
    ]
    with ScriptedProvider(replies):
        result = ask(kb, QUESTION, deep=True)
    assert any("cycle" in r for r in result.repairs)
    solved = [s.query for s in result.transcript if s.kind in ("solve", "skip")]
    # s1 → s3 closed the cycle and was dropped, leaving s1 first, then s2, then s3.
    assert solved == [
        "which team owns the ledger service",
        "which rotation pages for the payments team",
        "who is on the falcon rotation",
    ]


def test_rolling_summary_stays_bounded_and_round_prompts_do_not_grow(kb: KB) -> None:
    huge = "Finding. " * 8000  # 72 KB of summary every round
    replies = [FOUR, *[solve("Found [P1].", huge + " [P1]")] * 4, synthesis("Done [P1].")]
    set_config(kb.root, "deep", "max_rounds = 5")
    with ScriptedProvider(replies) as provider:
        result = ask(reopen(kb), QUESTION, deep=True)
    limit = kb.config.deep.summary_bytes
    solves = [s for s in result.transcript if s.kind == "solve"]
    assert len(solves) >= 3
    for step in solves:
        assert step.note is not None
        assert int(step.note.split()[1]) <= limit
    assert result.estimate is not None
    bound = next(line for line in result.estimate.lines if line.kind == "solve").input_tokens_max
    solve_prompts = [c for c in provider.calls if "Sub-question:" in c[-1]["content"]]
    sizes = [sum(len(m["content"].encode()) for m in c) for c in solve_prompts]
    assert len(sizes) == len(solves) and all(size < bound for size in sizes)
    # Rounds 2 and 3 carry a full summary: their prompts stay within a summary's size.
    assert max(sizes[1:]) - min(sizes[1:]) < limit
    assert provider.calls[-1][0]["content"].startswith("You answer a question")
    synthesis_prompt = provider.calls[-1][-1]["content"]
    findings = synthesis_prompt.split("Findings of earlier steps:\n", 1)[1].split("\n\nPassages:")[
        0
    ]
    assert len(findings.encode()) <= limit


def test_stop_no_new_subquestions_still_answers_from_the_first_search(kb: KB) -> None:
    replies = [plan(), synthesis("Nothing more to split [P1].")]
    with ScriptedProvider(replies) as provider:
        result = ask(kb, QUESTION, deep=True)
    assert result.stop_reason == "no_new_subquestions"
    assert [s.kind for s in result.transcript] == ["retrieval", "decompose", "synthesis"]
    assert len(provider.calls) == 2 and result.answer and result.citations


def test_unusable_decomposition_gets_exactly_one_repair_call(kb: KB) -> None:
    replies = ["Sure! Here are some thoughts.", "still not json", synthesis("ok [P1]")]
    with ScriptedProvider(replies) as provider:
        result = ask(kb, QUESTION, deep=True)
    decompositions = [s for s in result.transcript if s.kind == "decompose"]
    assert len(decompositions) == 2 and all(s.note for s in decompositions)
    assert "not a usable JSON object" in provider.calls[1][-1]["content"]
    assert result.stop_reason == "no_new_subquestions"


def test_stop_max_rounds(kb: KB) -> None:
    set_config(kb.root, "deep", "max_rounds = 1")
    replies = [
        PLAN3,
        solve("The payments team [P1].", "Payments [P1]."),
        synthesis("Payments [P1]."),
    ]
    with ScriptedProvider(replies) as provider:
        result = ask(reopen(kb), QUESTION, deep=True)
    assert result.stop_reason == "max_rounds"
    assert [s.kind for s in result.transcript].count("solve") == 1
    assert len(provider.calls) == 3


def test_stop_no_evidence_when_sub_questions_find_nothing_new(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "small", {"a.md": "# Alpha\n\nAlpha facts.\n", "b.md": "# Beta\n\nBeta facts.\n"}
    )
    scripted_config(root)
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    constant_calibration(kb, -6.0)
    replies = [
        plan(("s1", "what about alpha", []), ("s2", "what about beta", [])),
        synthesis("x [P1]"),
    ]
    with ScriptedProvider(replies) as provider:
        result = ask(kb, "alpha and beta", deep=True)
    assert result.stop_reason == "no_evidence"
    assert [s.kind for s in result.transcript].count("skip") == 2
    assert len(provider.calls) == 2  # decompose + synthesis: skipped rounds cost nothing


def test_stop_confident_on_the_free_recheck(kb: KB) -> None:
    answer = "The falcon rotation pages Ana and Bo on weekdays"
    low = kb.search(QUESTION, k=2, explain=True).features
    high = kb.search(f"{QUESTION} {answer}", k=2, explain=True).features
    assert low is not None and high is not None and high["bm25_top"] > low["bm25_top"]
    threshold_calibration(kb, "bm25_top", low["bm25_top"], high["bm25_top"])
    replies = [PLAN3, solve(f"{answer} [P1].", f"{answer} [P1]."), synthesis("Ana and Bo [P1].")]
    with ScriptedProvider(replies) as provider:
        result = ask(reopen(kb), QUESTION, deep=True)
    assert result.stop_reason == "confident"
    assert result.transcript[0].confidence is not None and result.transcript[0].confidence < 0.7
    recheck = [s for s in result.transcript if s.kind == "recheck"]
    assert len(recheck) == 1 and recheck[0].confidence is not None and recheck[0].confidence >= 0.7
    assert result.confidence == recheck[0].confidence
    assert len(provider.calls) == 3


def _measure(kb: KB, replies: list[str]) -> AskResult:
    with ScriptedProvider(list(replies), worst_usage=True):
        return ask(reopen(kb), QUESTION, deep=True)


def test_stop_budget_keeps_room_for_the_synthesis(kb: KB) -> None:
    set_config(kb.root, "deep", "max_rounds = 5")
    replies = [FOUR, *[solve("Found [P1].", "Found [P1].")] * 4, synthesis("Done [P1].")]
    free = _measure(kb, replies)
    calls = [s.call for s in free.transcript if s.call is not None]
    assert [c.kind for c in calls][:3] == ["decompose", "solve", "solve"]
    decompose, s1, s2 = (c.reserved_eur for c in calls[:3])
    synthesis_bound = _synthesis_bound(kb)
    # Decompose and round 1 fit with the synthesis' room; round 2 does not.
    cap = decompose + s1 + synthesis_bound + s2 / 2
    set_config(kb.root, "budget", f"per_operation_eur = {cap:.8f}")
    limited = _measure(kb, replies)
    assert limited.stop_reason == "budget" and not limited.partial
    assert [s.kind for s in limited.transcript].count("solve") == 1
    assert limited.transcript[-1].kind == "synthesis" and limited.answer
    assert limited.cost is not None and limited.cost.spent_eur <= cap


def _synthesis_bound(kb: KB) -> Decimal:
    dry = ask(reopen(kb), QUESTION, deep=True, dry_run=True)
    assert dry.estimate is not None
    return next(line.eur for line in dry.estimate.lines if line.kind == "synthesis")


def test_budget_taken_by_another_process_leaves_a_partial_answer(kb: KB) -> None:
    set_config(kb.root, "budget", "daily_eur = 1.00\nper_operation_eur = 5.00")
    budget = Budget(kb.root, reopen(kb).config)

    def round_one(_messages: list[dict[str, str]]) -> str:
        # Meanwhile another operation reserves everything the day has left.
        left = budget.status().windows[0].remaining_eur
        budget.reserve(
            operation="OTHER",
            kind="synthesis",
            model="x",
            usd=(left - Decimal("0.00000002")) * budget.config.usd_per_eur,
            input_tokens_max=1,
            output_tokens_max=1,
        )
        return solve("The payments team [P1].", "Payments owns it [P1].")

    with ScriptedProvider([FOUR, round_one], worst_usage=True) as provider:
        result = ask(reopen(kb), QUESTION, deep=True)
    assert result.stop_reason == "budget" and result.partial
    assert result.answer is not None
    assert result.answer.startswith("- how long to boil pasta in salted water — The payments team")
    assert result.citations and len(provider.calls) == 2
    status = budget.status()
    day = status.windows[0]
    assert day.spent_eur + day.open_eur <= day.cap_eur


def test_high_confidence_deep_is_exactly_ask(kb: KB) -> None:
    constant_calibration(kb, 6.0)  # ~0.998 on every query
    reply = synthesis("Ana and Bo [P1].")
    with ScriptedProvider([reply]) as plain_provider:
        plain = ask(kb, QUESTION)
    with ScriptedProvider([reply]) as deep_provider:
        deep = ask(kb, QUESTION, deep=True)
    assert plain_provider.calls == deep_provider.calls and len(deep_provider.calls) == 1
    assert deep.answer == plain.answer and deep.citations == plain.citations
    assert deep.stop_reason == "confident" and plain.stop_reason == "answered"
    assert deep.cost is not None and plain.cost is not None
    assert deep.cost.spent_eur == plain.cost.spent_eur
    assert deep.estimate == plain.estimate


def test_every_round_goes_to_the_transcript_file(kb: KB) -> None:
    set_config(kb.root, "deep", "max_rounds = 5")
    replies = [FOUR, *[solve("Found [P1].", "Found [P1].")] * 4, synthesis("Done [P1].")]
    with ScriptedProvider(replies):
        result = ask(reopen(kb), QUESTION, deep=True)
    assert result.transcript_file == f".pinakes/deep/{result.operation_id}.json"
    saved = json.loads((kb.root / result.transcript_file).read_text())
    assert saved["operation_id"] == result.operation_id
    assert saved["stop_reason"] == "no_new_subquestions"
    rounds = [s for s in saved["transcript"] if s["kind"] == "solve"]
    steps = [s for s in saved["transcript"] if s["kind"] in ("solve", "skip")]
    assert [s["round"] for s in steps] == [1, 2, 3, 4] and len(rounds) >= 3
    for step in rounds:
        assert step["query"] and step["passages"] and step["result"]
        assert all(p.startswith(f"pnk://{kb.config.kb.id}/") for p in step["passages"])
        call = step["call"]
        assert call["prompt_bytes"] > 0 and call["input_tokens_max"] > call["prompt_bytes"]
        assert Decimal(call["cost_eur"]) > 0 and Decimal(call["reserved_eur"]) >= Decimal(
            call["cost_eur"]
        )
    total = sum(Decimal(s["call"]["cost_eur"]) for s in saved["transcript"] if s["call"])
    assert total == Decimal(saved["cost"]["spent_eur"])


def test_mock_response_errors_are_refused_and_voided(kb: KB) -> None:
    import litellm

    error = litellm.AuthenticationError(
        message="bad key", llm_provider="openai", model="gpt-4o-mini"
    )
    from pinakes_core.errors import ProviderError

    with pytest.raises(ProviderError, match="refused"):
        ask(kb, QUESTION, model="gpt-4o-mini", force=True, client=LiteLLMClient([error]))
    status = Budget(kb.root, kb.config).status()
    assert status.open_calls == [] and status.windows[0].spent_eur == 0
