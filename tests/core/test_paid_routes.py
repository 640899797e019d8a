"""Where paid calls go and what they cost before they are sent (issue 35, items 1–4).

- A call that never left this machine is never billed: missing keys and unknown routes are
  refused before anything is reserved; errors raised before a request was sent are voided.
- Local models (a loopback ``[ask] api_base``, ``local = true``) cost nothing and are still
  metered with the server's token counts.
- The install hint fits the install route; the docs' provider table names priced models.
- The ledger lives in ``$XDG_STATE_HOME/pinakes`` (a tmp folder here, see conftest).

Calls go through litellm's ``mock_response`` or to a closed port on 127.0.0.1; nothing here
reaches the network. The real local model is in ``test_local_llm.py`` (slow).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb, set_config
from paid_support import constant_calibration, ledger_lines, ledger_path, synthesis
from pinakes_core import KB
from pinakes_core.errors import ConfigError
from pinakes_core.paid.ask import ask
from pinakes_core.paid.budget import Budget
from pinakes_core.paid.ledger import LEDGER_FILE, Ledger, ledger_dir, state_dir
from pinakes_core.paid.llm import (
    LiteLLMClient,
    ProviderRefused,
    ProviderUnknownOutcome,
    install_hint,
    is_loopback,
    litellm_module,
    never_sent,
    price_of,
    route_of,
)

QUESTION = "how does raft elect a leader"
REPO = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def synced(tmp_path: Path) -> KB:
    root = make_kb(tmp_path / "kb")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    constant_calibration(kb, 6.0)  # confident: plain ask answers
    return kb


def reopen(kb: KB) -> KB:
    return KB.open(kb.root, embedder=FakeHashEmbedder())


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- 1. nothing that never left the machine is billed ----------------------------------------


def test_a_missing_key_is_refused_before_anything_is_reserved(
    synced: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderRefused, match="ANTHROPIC_API_KEY is not set") as info:
        ask(synced, QUESTION, model="anthropic/claude-haiku-4-5", approve=lambda e: True)
    assert info.value.error_class == "MissingCredentials"
    assert ledger_lines(synced.root) == [] and not ledger_path(synced.root).exists()
    # A dry run still prices the call: pricing needs no key.
    dry = ask(synced, QUESTION, model="anthropic/claude-haiku-4-5", dry_run=True)
    assert dry.estimate is not None and dry.estimate.total_eur > 0


def test_a_model_without_a_route_is_refused_before_anything_is_reserved(synced: KB) -> None:
    set_config(synced.root, "ask", 'price_model = "gpt-4o-mini"')
    with pytest.raises(ConfigError, match="no provider for the model 'nobody-knows-me'"):
        ask(reopen(synced), QUESTION, model="nobody-knows-me", client=LiteLLMClient([]))
    assert ledger_lines(synced.root) == []


def test_credentials_missing_inside_the_call_are_refused_not_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The OpenAI client raises "Missing credentials" itself: the request was never sent."""
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ProviderRefused, match="never left this machine") as info:
        LiteLLMClient().complete(
            model="gpt-4o-mini", messages=MESSAGES, max_tokens=5, timeout_s=5, temperature=0
        )
    assert info.value.error_class.startswith("NotSent:")


def test_a_refused_connection_is_voided_and_its_reservation_released(
    synced: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that is not running: nothing was sent, so nothing is left to settle."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    set_config(
        synced.root, "ask", f'api_base = "{base}"\nlocal = false\nprice_model = "gpt-4o-mini"'
    )
    kb = reopen(synced)
    with pytest.raises(ProviderRefused, match="never left this machine"):
        ask(kb, QUESTION, model="openai/not-running", approve=lambda e: True)
    reservation, void = ledger_lines(kb.root)
    assert reservation["type"] == "reservation" and Decimal(reservation["eur"]) > 0
    assert void["type"] == "void" and void["reason"].startswith("NotSent:")
    status = Budget(kb.root, kb.config).status()
    assert status.open_calls == [] and status.windows[0].spent_eur == 0
    assert not [f for f in kb.doctor().findings if f.check.startswith("ledger")]


def test_errors_after_the_request_may_have_been_sent_stay_unknown() -> None:
    import httpx

    litellm = litellm_module()

    def wrapped(inner: BaseException) -> BaseException:
        outer = litellm.APIConnectionError(
            message="Connection error.", llm_provider="openai", model="gpt-4o-mini"
        )
        outer.__cause__ = inner
        return outer

    request = httpx.Request("POST", "https://api.example.invalid/v1/chat/completions")
    assert never_sent(wrapped(httpx.ConnectError("refused", request=request)))
    assert never_sent(wrapped(httpx.ConnectTimeout("no answer to SYN", request=request)))
    assert not never_sent(wrapped(httpx.ReadTimeout("no reply", request=request)))
    assert not never_sent(wrapped(httpx.RemoteProtocolError("reset", request=request)))
    # The outermost transport error decides: a read timeout after an earlier failed connect.
    late = httpx.ReadTimeout("no reply", request=request)
    late.__context__ = httpx.ConnectError("first try", request=request)
    assert not never_sent(wrapped(late))
    assert not never_sent(litellm.InternalServerError("500", "openai", "gpt-4o-mini"))
    client = LiteLLMClient([wrapped(httpx.ReadTimeout("no reply", request=request))])
    with pytest.raises(ProviderUnknownOutcome):
        client.complete(
            model="gpt-4o-mini", messages=MESSAGES, max_tokens=5, timeout_s=5, temperature=0
        )


# -- 2. local models ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.8.9.10/v1", True),
        ("http://localhost:11434", True),
        ("http://api.localhost/v1", True),
        ("http://[::1]:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://192.168.1.20:8080/v1", False),
        ("http://localhost.example.com/v1", False),
        ("http://127.0.0.1.nip.io/v1", False),
    ],
)
def test_loopback_addresses_are_recognised_without_resolving_names(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_routes_are_local_for_loopback_bases_ollama_defaults_and_declarations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    assert route_of("openai/x", "http://127.0.0.1:8080/v1").local
    assert not route_of("openai/x", "http://127.0.0.1:8080/v1", local=False).local
    assert route_of("openai/x", "http://10.0.0.5:8080/v1", local=True).local
    assert not route_of("gpt-4o-mini").local
    assert route_of("ollama/llama3.2").local
    monkeypatch.setenv("OLLAMA_API_BASE", "http://gpu-box.lan:11434")
    assert not route_of("ollama_chat/llama3.2").local


def test_local_without_a_server_of_its_own_is_refused(synced: KB) -> None:
    """`local = true` with a hosted route would price a paid call at zero: refused."""
    set_config(synced.root, "ask", "local = true")
    with pytest.raises(ConfigError, match="has no \\[ask\\] api_base"):
        ask(reopen(synced), QUESTION, client=LiteLLMClient([synthesis("x [P1]")]))
    assert ledger_lines(synced.root) == []
    assert route_of("ollama/llama3.2", local=True).local  # Ollama's own server is local


def test_a_crashed_local_call_leaves_nothing_for_doctor_to_ask_about(synced: KB) -> None:
    from pinakes_core.paid.ledger import Reservation, utc_now

    ledger = Ledger.for_kb(synced.root, synced.config.kb.id)
    dead = 2**22 + 54321
    assert not os.path.exists(f"/proc/{dead}")
    for call, eur in (("01JAXR3T5W6Z8Q9N0P1R2S3T4A", "0"), ("01JAXR3T5W6Z8Q9N0P1R2S3T4B", "0.01")):
        ledger.append(
            Reservation(
                call=call,
                ts=utc_now(),
                op="01JAXR3T5W6Z8Q9N0P1R2S3T4C",
                kind="synthesis",
                model="openai/gemma-local" if eur == "0" else "gpt-4o-mini",
                input_tokens_max=10,
                output_tokens_max=10,
                usd=Decimal(eur),
                usd_per_eur=Decimal("1.16"),
                eur=Decimal(eur),
                pid=dead,
                host=socket.gethostname(),
            )
        )
    [finding] = [f for f in reopen(synced).doctor().findings if f.check.startswith("ledger")]
    assert len(finding.items) == 1 and "01JAXR3T5W6Z8Q9N0P1R2S3T4B" in finding.items[0]


def test_a_local_model_costs_nothing_needs_no_key_and_is_metered(
    synced: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_config(
        synced.root, "ask", 'model = "openai/gemma-local"\napi_base = "http://127.0.0.1:8080/v1"'
    )
    kb = reopen(synced)
    result = ask(kb, QUESTION, client=LiteLLMClient([synthesis("Raft elects [P1].")]))
    assert result.answer and result.estimate is not None
    assert result.estimate.total_eur == 0 and result.estimate.price_entry == "local"
    assert result.cost is not None and result.cost.spent_eur == 0
    reservation, reconciliation = ledger_lines(kb.root)
    assert Decimal(reservation["usd"]) == 0 and Decimal(reconciliation["usd"]) == 0
    assert reconciliation["prompt_tokens"] > 0 and reconciliation["completion_tokens"] > 0
    # A zero cap does not stop a free call.
    set_config(kb.root, "budget", "daily_eur = 0\nmonthly_eur = 0\nper_operation_eur = 0")
    again = ask(reopen(kb), QUESTION, client=LiteLLMClient([synthesis("Again [P1].")]))
    assert again.answer


def test_an_unknown_outcome_of_a_local_call_is_settled_at_zero(synced: KB) -> None:
    litellm = litellm_module()
    set_config(
        synced.root, "ask", 'model = "openai/gemma-local"\napi_base = "http://127.0.0.1:8080/v1"'
    )
    kb = reopen(synced)
    timeout = litellm.Timeout(message="slow", model="openai/gemma-local", llm_provider="openai")
    with pytest.raises(ProviderUnknownOutcome):
        ask(kb, QUESTION, client=LiteLLMClient([timeout]))
    status = Budget(kb.root, kb.config).status()
    assert status.open_calls == []
    assert [r["type"] for r in ledger_lines(kb.root)] == ["reservation", "reconciliation"]


def test_api_base_is_validated(synced: KB) -> None:
    set_config(synced.root, "ask", 'api_base = "127.0.0.1:8080"')
    with pytest.raises(ConfigError, match="api_base"):
        KB.open(synced.root)


# -- 3. docs and install hints ------------------------------------------------------------


def test_the_docs_provider_table_names_models_the_price_table_knows() -> None:
    text = (REPO / "docs" / "ask.md").read_text(encoding="utf-8")
    section = text.split("## Pointing it at a real provider", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+) \| `([^`]+)` \| ", section, re.M)
    hosted = [(p.strip(), m) for p, m in rows if not route_of(m).local and "<" not in m]
    assert {p for p, _ in hosted} >= {"OpenAI", "Anthropic", "Google AI Studio", "Mistral"}
    for _, model in hosted:
        assert price_of(model).input > 0, model


def test_install_hint_names_the_command_for_each_install_route(tmp_path: Path) -> None:
    tool = tmp_path / "tools" / "pinakes-cli"
    tool.mkdir(parents=True)
    (tool / "uv-receipt.toml").write_text(
        "[tool]\n"
        'requirements = [{ name = "pinakes-cli" }, { name = "pinakes-mcp" }, { name = "pinakes-graph" }]\n'
        "entrypoints = [\n"
        '  { name = "pnk", install-path = "/b/pnk", from = "pinakes-cli" },\n'
        '  { name = "pinakes-mcp", install-path = "/b/pinakes-mcp", from = "pinakes-mcp" },\n'
        "]\n",
        encoding="utf-8",
    )
    assert install_hint(str(tool), "/usr", str(tool / "bin/python"), False, None) == (
        "uv tool install 'pinakes-cli[ask]' --with pinakes-mcp --with pinakes-graph "
        "--with-executables-from pinakes-mcp"
    )
    venv = tmp_path / "my env"
    python = str(venv / "bin" / "python")
    assert install_hint(str(venv), "/usr", python, True, None) == (
        f"'{python}' -m pip install 'pinakes-cli[ask]'"
    )
    assert install_hint(str(venv), "/usr", python, False, None) == (
        f"uv pip install --python '{python}' 'pinakes-cli[ask]'"
    )
    # A venv uv made gets uv's command even where pip is importable (a dependency's).
    venv.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nuv = 0.13.9\n", encoding="utf-8")
    assert install_hint(str(venv), "/usr", python, True, None) == (
        f"uv pip install --python '{python}' 'pinakes-cli[ask]'"
    )
    assert install_hint("/usr", "/usr", "/usr/bin/python3", True, None) == (
        "/usr/bin/python3 -m pip install --user 'pinakes-cli[ask]'"
    )
    assert install_hint(str(venv), "/usr", python, True, tmp_path / "clone") == (
        f"cd {shlex.quote(str(tmp_path / 'clone'))} && uv sync --all-packages"
    )
    # This test runs from the workspace clone (uv run): the hint is the workspace sync.
    assert install_hint() == f"cd {shlex.quote(str(REPO))} && uv sync --all-packages"


# -- 4. the ledger outside the disposable folder -----------------------------------------


def test_the_ledger_is_in_the_state_folder_keyed_by_kb_id(
    synced: KB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask(synced, QUESTION, client=LiteLLMClient([synthesis("Raft [P1].")]))
    state = Path(os.environ["XDG_STATE_HOME"])
    path = ledger_path(synced.root)
    assert path == state / "pinakes" / "ledgers" / synced.config.kb.id / LEDGER_FILE
    assert len(ledger_lines(synced.root)) == 2
    assert not list((synced.root / ".pinakes").glob("ledger*"))
    # Unset, empty or relative XDG_STATE_HOME: the platform's user state folder.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in ("", "  ", "relative/state"):
        monkeypatch.setenv("XDG_STATE_HOME", value)
        assert state_dir() == tmp_path / "home" / ".local" / "state" / "pinakes"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_dir() == tmp_path / "home" / ".local" / "state" / "pinakes"
    # An id that is not a plain name never names a path outside the state folder.
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    odd = ledger_dir("../../etc/passwd")
    assert odd.parent == state / "pinakes" / "ledgers" and ".." not in odd.name


def test_a_ledger_in_dot_pinakes_is_imported_once(synced: KB) -> None:
    """A KB whose ledger an earlier version kept in .pinakes/ keeps its spend."""
    ask(synced, QUESTION, client=LiteLLMClient([synthesis("Raft [P1].")]))
    current = ledger_path(synced.root)
    legacy = synced.root / ".pinakes" / LEDGER_FILE
    current.rename(legacy)
    with legacy.open("ab") as handle:
        handle.write(b'{"v":1,"call":"torn')
    budget = Budget(synced.root, synced.config)
    assert not legacy.exists() and legacy.with_name("ledger.jsonl.imported").exists()
    assert len(ledger_lines(synced.root)) == 2 and budget.status().windows[0].spent_eur > 0
    # Importing again (a crash before the rename) does not double the records.
    legacy.write_bytes(legacy.with_name("ledger.jsonl.imported").read_bytes())
    Ledger.for_kb(synced.root, synced.config.kb.id)
    assert len(ledger_lines(synced.root)) == 2
