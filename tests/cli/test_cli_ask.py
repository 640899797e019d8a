"""`pnk ask`, `pnk budget` and `pnk review` through click's runner.

Calls go to the scripted FAKE provider (tests/paid_support.py); the embedder is the FAKE hash
model (patched in: what is under test is the commands, not retrieval).
"""

from __future__ import annotations

import json
import os
import socket
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FakeHashEmbedder, make_kb
from paid_support import (
    ScriptedProvider,
    constant_calibration,
    ledger_lines,
    ledger_path,
    plan,
    scripted_config,
    set_budget,
    solve,
    synthesis,
)
from pinakes_cli.main import cli
from pinakes_core import KB
from pinakes_core.config import load_config
from pinakes_core.paid.budget import Budget
from pinakes_core.paid.ledger import Ledger, Reservation, utc_now

QUESTION = "how does raft elect a leader"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())
    kb_root = make_kb(tmp_path / "kb")
    scripted_config(kb_root)
    kb = KB.open(kb_root, embedder=FakeHashEmbedder())
    kb.sync()
    constant_calibration(kb, 6.0)  # confident: plain ask answers
    kb.close()
    return kb_root


def run(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--kb", str(root), *args], obj={})
    return result.exit_code, result.stdout, result.stderr


def test_ask_json_has_the_documented_keys_and_the_estimate_goes_to_stderr(root: Path) -> None:
    with ScriptedProvider([synthesis("Raft uses timeouts [P1].")]):
        code, out, err = run(root, "ask", QUESTION, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert {"answer", "citations", "confidence", "cost", "transcript"} <= set(result)
    assert result["citations"][0]["uri"].startswith("pnk://")
    assert Decimal(result["cost"]["spent_eur"]) > 0
    assert [s["kind"] for s in result["transcript"]] == ["retrieval", "synthesis"]
    assert "worst case €" in err and "1 × synthesis" in err


def test_human_output_prints_model_text_without_markup(root: Path) -> None:
    answer = "Use [bold]not markup[/bold] and [link=http://x]y[/link] [P1]."
    with ScriptedProvider([synthesis(answer)]):
        code, out, _ = run(root, "ask", QUESTION)
    assert code == 0
    assert "Use [bold]not markup[/bold] and [link=http://x]y[/link]" in out
    assert "Sources" in out and "raft.md" in out and "stop: answered" in out


def test_without_a_terminal_spending_above_the_threshold_is_refused(root: Path) -> None:
    set_budget(root, "confirm_above_eur = 0")
    with ScriptedProvider([synthesis("Raft [P1].")]) as provider:
        code, out, err = run(root, "ask", QUESTION)
    assert code == 1 and out == ""
    assert "no terminal to confirm on; nothing was spent" in err and "--yes" in err
    assert provider.calls == [] and ledger_lines(root) == []
    with ScriptedProvider([synthesis("Raft [P1].")]) as provider:
        code, out, err = run(root, "ask", QUESTION, "--yes")
    assert code == 0 and len(provider.calls) == 1


def test_dry_run_prints_the_estimate_and_spends_nothing(root: Path) -> None:
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    constant_calibration(kb, -6.0)  # low confidence: --deep plans the whole loop
    with ScriptedProvider([]) as provider:
        code, out, err = run(root, "ask", QUESTION, "--deep", "--dry-run")
    assert code == 0 and provider.calls == []
    assert "2 × decompose" in err and "3 × solve" in err and "1 × synthesis" in err
    assert "Dry run" in out and ledger_lines(root) == []


def test_budget_shows_windows_and_resolves_an_unknown_outcome(root: Path) -> None:
    config = load_config(root).budget
    ledger = Ledger(ledger_path(root).parent)
    dead = Reservation(
        call="01JAXR3T5W6Z8Q9N0P1R2S3T4V",
        ts=utc_now(),
        op="01JAXR3T5W6Z8Q9N0P1R2S3T4W",
        kind="synthesis",
        model="gpt-4o-mini",
        input_tokens_max=10,
        output_tokens_max=10,
        usd=Decimal("0.0116"),
        usd_per_eur=config.usd_per_eur,
        eur=Decimal("0.01"),
        pid=2**22 + 12345,
        host=socket.gethostname(),
    )
    assert not os.path.exists(f"/proc/{dead.pid}")
    ledger.append(dead)
    code, out, _ = run(root, "budget")
    assert code == 0
    assert "unknown outcome: 01JAXR3T5W6Z8Q9N0P1R2S3T4V" in out and "€0.010000" in out
    code, out, _ = run(root, "doctor", "--json")
    checks = {f["check"] for f in json.loads(out)["findings"]}
    assert "ledger-unknown-outcome" in checks
    code, _, err = run(root, "budget", "--resolve", dead.call)
    assert code == 2 and "go together" in err
    code, _, err = run(root, "budget", "--resolve", dead.call, "--actual", "abc")
    assert code == 1 and "not an amount" in err
    code, out, err = run(root, "budget", "--resolve", dead.call, "--actual", "0.004", "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["open_calls"] == []
    assert Decimal(status["windows"][0]["spent_eur"]) == Decimal("0.004")
    assert Budget(root, load_config(root)).status().windows[1].spent_eur == Decimal("0.004")


def test_review_lists_accepts_and_rejects_staged_suggestions(root: Path) -> None:
    def reply(messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"]
        if system.startswith("You plan"):
            return plan(("s1", "tomatoes need sun", []))
        if system.startswith("You answer one sub-question"):
            return solve("Gardening [P1].", "Gardening.")
        labels = [
            line.split("]")[0][1:]
            for line in messages[1]["content"].splitlines()
            if line.startswith("[P")
        ]
        return synthesis(" ".join(f"Fact [{label}]." for label in labels))

    with ScriptedProvider([reply] * 4):
        code, out, err = run(root, "ask", QUESTION, "--deep", "--write-suggestions", "--json")
    assert code == 0, err
    staged = [s for s in json.loads(out)["suggestions"] if s["status"] == "staged"]
    assert staged
    code, out, _ = run(root, "review", "--json")
    listed = json.loads(out)
    assert len(listed) == len(staged)
    code, out, _ = run(root, "review")
    assert listed[0]["id"] in out and "co-cited" in out
    first, *rest = [item["id"] for item in listed]
    code, out, err = run(root, "review", "--accept", first)
    assert code == 0 and f"accepted {first}" in out and "pnk sync" in err
    if rest:
        code, out, _ = run(root, "review", "--reject-all")
        assert code == 0 and all(f"rejected {i}" in out for i in rest)
    code, out, _ = run(root, "review")
    assert "No staged suggestions." in out
    code, _, err = run(root, "review", "--accept", "nope")
    assert code == 1 and "no staged suggestion nope" in err


def test_help_says_only_ask_spends_money(root: Path) -> None:
    code, out, _ = run(root, "--help")
    assert code == 0 and "Only `pnk ask` can spend money" in out
    code, out, _ = run(root, "ask", "--help")
    assert "PAID" in out and "only command that can spend money" in out


_KEY_VARS = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL")


def test_without_an_api_key_ask_refuses_in_one_sentence_and_nothing_is_left_to_settle(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35.1: the default model, the real client, no key: nothing reserved or billed."""
    for name in _KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    text = (root / "pinakes.toml").read_text(encoding="utf-8")
    (root / "pinakes.toml").write_text(
        text.replace('model = "scripted/fake"', 'model = "gpt-4o-mini"'), encoding="utf-8"
    )
    code, out, err = run(root, "ask", QUESTION, "--yes")
    assert code == 1 and out == ""
    first, *rest = [line for line in err.splitlines() if line.strip()]
    assert first.startswith("error: No API key for gpt-4o-mini: OPENAI_API_KEY is not set")
    assert first.count(". ") == 0 and "nothing was sent or reserved" in first
    assert "Traceback" not in err and len(rest) <= 1  # the sentence, then its one-line fix
    assert ledger_lines(root) == []  # nothing reserved: no reservation, no void
    code, out, _ = run(root, "budget", "--json")
    status = json.loads(out)
    assert code == 0 and status["open_calls"] == []
    assert all(Decimal(w["spent_eur"]) == 0 == Decimal(w["open_eur"]) for w in status["windows"])
    code, out, _ = run(root, "doctor", "--json")
    assert not [f for f in json.loads(out)["findings"] if f["check"].startswith("ledger")]


def test_removing_dot_pinakes_keeps_the_spend_and_the_caps(root: Path) -> None:
    """Issue 35.4: the ledger is in the state folder, so `rm -rf .pinakes` resets no cap."""
    import shutil

    with ScriptedProvider([synthesis("Raft [P1].")], worst_usage=True):
        code, _, err = run(root, "ask", QUESTION, "--yes")
    assert code == 0, err
    before = json.loads(run(root, "budget", "--json")[1])
    spent = Decimal(before["windows"][0]["spent_eur"])
    assert spent > 0 and not ledger_path(root).is_relative_to(root)
    set_budget(root, f"daily_eur = {spent}")  # the day's cap is now used up exactly
    shutil.rmtree(root / ".pinakes")
    code, _, err = run(root, "sync")
    assert code == 0, err
    kb = KB.open(root, embedder=FakeHashEmbedder())
    constant_calibration(kb, 6.0)
    kb.close()
    after = json.loads(run(root, "budget", "--json")[1])
    assert Decimal(after["windows"][0]["spent_eur"]) == spent
    with ScriptedProvider([synthesis("Raft [P1].")]) as provider:
        code, _, err = run(root, "ask", QUESTION, "--yes")
    assert code == 1 and "over [budget] daily_eur" in err and provider.calls == []
