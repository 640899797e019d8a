"""`ask`: one synthesis call over free retrieval, with validated citations and a budget.

Calls never leave the process: litellm's ``mock_response`` for single turns, the scripted FAKE
provider (tests/paid_support.py) where turns must differ. The embedder is the FAKE hash model:
these tests check the paid path's mechanics, not retrieval quality.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, db, make_kb, set_config
from paid_support import (
    ScriptedProvider,
    constant_calibration,
    ledger_lines,
    ledger_path,
    scripted_config,
    synthesis,
)
from pinakes_core import KB
from pinakes_core.errors import BudgetExceededError, ConfigError
from pinakes_core.paid.ask import ask
from pinakes_core.paid.ledger import MAX_RECORD_BYTES
from pinakes_core.paid.llm import LiteLLMClient

QUESTION = "how does raft elect a leader"


@pytest.fixture
def synced(tmp_path: Path) -> KB:
    root = make_kb(tmp_path / "kb")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    constant_calibration(kb, 6.0)  # confident: plain ask answers (tests below lower it)
    return kb


def test_citations_map_to_real_chunk_ids_and_invented_ones_are_dropped(synced: KB) -> None:
    bogus_uri = f"pnk://{synced.config.kb.id}/01JAXR3T5W6Z8Q9N0P1R2S3T4V#2"
    reply = synthesis(
        f"Raft uses randomized election timeouts [P1]. Paxos has acceptors [P3; P2]. "
        f"Invented: [P42] and [{bogus_uri}]."
    )
    result = ask(synced, QUESTION, client=LiteLLMClient([reply]))
    assert result.stop_reason == "answered" and result.answer is not None
    assert len(result.citations) == 3
    conn = db(synced.root)
    for citation in result.citations:
        row = conn.execute(
            "SELECT c.ordinal, d.path FROM chunks c JOIN documents d USING (doc_id) "
            "WHERE c.doc_id = ? AND c.ordinal = ?",
            (citation.doc_id, citation.chunk),
        ).fetchone()
        assert row is not None, citation
        assert row["path"] == citation.path
        assert citation.uri == f"pnk://{synced.config.kb.id}/{citation.doc_id}#{citation.chunk}"
        assert f"[{citation.uri}]" in result.answer
    assert result.invalid_citations == ["P42", bogus_uri]
    assert "P42" not in result.answer and "01JAXR3T5W6Z8Q9N0P1R2S3T4V" not in result.answer
    # The first citation is the first passage the model was given.
    given = result.transcript[-1].passages
    assert result.citations[0].uri == given[0]


def test_abstains_below_threshold_without_spending_and_force_overrides(synced: KB) -> None:
    constant_calibration(synced, -6.0)  # every query gets confidence ~0.002
    refused = ask(synced, QUESTION, client=LiteLLMClient([]))
    assert refused.stop_reason == "abstained" and refused.answer is None
    assert refused.cost is None and ledger_lines(synced.root) == []
    forced = ask(synced, QUESTION, force=True, client=LiteLLMClient([synthesis("Yes [P1].")]))
    assert forced.stop_reason == "answered" and forced.citations
    assert forced.confidence is not None and forced.confidence < 0.01


def test_nothing_found_means_no_call(synced: KB) -> None:
    result = ask(synced, QUESTION, path="no/such/folder/", client=LiteLLMClient([]))
    assert result.stop_reason == "no_evidence" and result.cost is None
    assert ledger_lines(synced.root) == []


def test_confirmation_above_threshold_is_required_and_dry_run_spends_nothing(synced: KB) -> None:
    set_config(synced.root, "budget", "confirm_above_eur = 0")
    kb = KB.open(synced.root, embedder=FakeHashEmbedder())
    dry = ask(kb, QUESTION, dry_run=True, client=LiteLLMClient([]))
    assert dry.stop_reason == "dry_run" and dry.estimate is not None
    assert dry.estimate.needs_confirmation and dry.estimate.total_eur > 0
    with pytest.raises(BudgetExceededError, match="not approved"):
        ask(kb, QUESTION, client=LiteLLMClient([synthesis("x [P1]")]))
    seen = []
    with pytest.raises(BudgetExceededError):
        ask(kb, QUESTION, approve=lambda e: seen.append(e) or False, client=LiteLLMClient([]))
    assert seen and seen[0].lines[0].kind == "synthesis"
    assert ledger_lines(kb.root) == []
    done = ask(kb, QUESTION, approve=lambda e: True, client=LiteLLMClient([synthesis("ok [P1]")]))
    assert done.cost is not None and done.cost.calls == 1


def test_estimate_bounds_the_actual_cost_and_the_ledger_reconciles_it(synced: KB) -> None:
    scripted_config(synced.root)
    kb = KB.open(synced.root, embedder=FakeHashEmbedder())
    with ScriptedProvider([synthesis("Raft elects [P1].")]) as provider:
        result = ask(kb, QUESTION)
    assert len(provider.calls) == 1
    assert result.cost is not None and result.estimate is not None
    assert Decimal(0) < result.cost.spent_eur <= result.estimate.total_eur
    call = result.transcript[-1].call
    assert call is not None and call.prompt_tokens is not None
    # The input bound is the prompt's UTF-8 size plus overhead: above any tokenizer's count.
    prompt_bytes = sum(len(m["content"].encode()) for m in provider.calls[0])
    assert call.prompt_bytes == prompt_bytes
    assert call.input_tokens_max > prompt_bytes > call.prompt_tokens
    records = ledger_lines(kb.root)
    assert [r["type"] for r in records] == ["reservation", "reconciliation"]
    assert Decimal(records[1]["eur"]) == call.cost_eur <= Decimal(records[0]["eur"])
    assert Decimal(records[0]["usd_per_eur"]) == kb.config.budget.usd_per_eur


def test_ledger_holds_no_question_passage_or_answer_text(synced: KB) -> None:
    answer = "Leaders come from randomized election timeouts [P1]."
    ask(synced, QUESTION, client=LiteLLMClient([synthesis(answer)]))
    raw = ledger_path(synced.root).read_bytes()
    for line in raw.splitlines():
        assert len(line) + 1 <= MAX_RECORD_BYTES
        json.loads(line)
    text = raw.decode()
    for forbidden in ("raft", "leader", "randomized", "election", "timeouts", "Paxos"):
        assert forbidden.lower() not in text.lower(), forbidden


def test_model_without_a_price_is_refused_before_any_call(synced: KB) -> None:
    with pytest.raises(ConfigError, match="price table"):
        ask(synced, QUESTION, model="nobody/unpriced-model-x", client=LiteLLMClient([]))
    assert ledger_lines(synced.root) == []


def test_relations_become_typed_suggestions_and_nothing_is_written_without_the_flag(
    synced: KB,
) -> None:
    before = {p: p.read_text() for p in synced.root.rglob("*.pnk.yaml")}
    reply = synthesis(
        "Raft [P1] and Paxos [P3] both need majorities.",
        relations=[{"from": "P1", "to": "P3", "rel": "Compares With"}],
    )
    result = ask(synced, QUESTION, client=LiteLLMClient([reply]))
    paths = {c.path for c in result.citations}
    assert paths == {"raft.md", "notes/paxos.md"}
    [suggestion] = result.suggestions
    assert suggestion.rel == "compares-with" and suggestion.status == "proposed"
    assert suggestion.confidence == 0.75  # one answer + a typed relation
    assert {p: p.read_text() for p in synced.root.rglob("*.pnk.yaml")} == before
