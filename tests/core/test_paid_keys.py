"""API keys never reach logs, transcripts, the ledger or any output (DESIGN §13).

Keys are planted in the provider environment variables; every run logs at DEBUG (litellm's
loggers included) and every byte Pinakes wrote or printed is grepped for them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb
from paid_support import (
    ScriptedProvider,
    constant_calibration,
    ledger_path,
    plan,
    scripted_config,
    solve,
    synthesis,
)
from pinakes_core import KB
from pinakes_core.errors import ProviderError
from pinakes_core.paid.ask import ask
from pinakes_core.paid.llm import LiteLLMClient, redact

KEYS = {
    "OPENAI_API_KEY": "sk-planted-openai-9f8e7d6c5b4a39281706",
    "ANTHROPIC_API_KEY": "sk-ant-planted-1a2b3c4d5e6f7a8b9c0d",
}


def test_keys_never_appear_in_logs_transcripts_ledger_or_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.DEBUG)
    root = make_kb(tmp_path / "kb")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    constant_calibration(kb, 6.0)  # confident: plain ask answers
    outputs = []
    plain = ask(kb, "how does raft elect a leader", client=LiteLLMClient([synthesis("Raft [P1].")]))
    outputs.append(plain.model_dump_json())
    scripted_config(root)
    constant_calibration(kb, -6.0)  # the deep run goes through its loop
    replies = [
        plan(("s1", "what is paxos", [])),
        solve("Paxos [P1].", "Paxos [P1]."),
        synthesis("x [P1]"),
    ]
    with ScriptedProvider(replies):
        deep = ask(
            KB.open(root, embedder=FakeHashEmbedder()), "how does raft elect a leader", deep=True
        )
    outputs.append(deep.model_dump_json())
    assert deep.transcript_file is not None
    # A provider error that quotes the key (as OpenAI's "Incorrect API key" does) is redacted.
    import litellm

    leaky = litellm.AuthenticationError(
        message=f"Incorrect API key provided: {KEYS['OPENAI_API_KEY']}",
        llm_provider="openai",
        model="gpt-4o-mini",
    )
    with pytest.raises(ProviderError) as info:
        ask(kb, "how does raft elect a leader", force=True, client=LiteLLMClient([leaky]))
    outputs.append(str(info.value))
    assert "[redacted]" in str(info.value)
    captured = capfd.readouterr()
    files = [p for p in (root / ".pinakes").rglob("*") if p.suffix in (".json", ".jsonl")]
    files.append(ledger_path(root))  # the ledger lives in the state folder
    assert {p.name for p in files} >= {"ledger.jsonl", Path(deep.transcript_file).name}
    written = [p.read_bytes().decode("utf-8", "replace") for p in files]
    assert caplog.text  # DEBUG logging really ran
    haystack = "\n".join([caplog.text, captured.out, captured.err, *outputs, *written])
    for value in KEYS.values():
        assert value not in haystack
        assert value[:20] not in haystack


def test_redact_masks_key_like_variables_only() -> None:
    env = {"MY_SERVICE_TOKEN": "tok-1234567890", "HOME": "/root/home-dir", "SHORT_KEY": "abc"}
    text = "token tok-1234567890 home /root/home-dir short abc"
    assert redact(text, env) == "token [redacted] home /root/home-dir short abc"
