"""Budget windows and the ledger: caps across invocations and days, crashes, concurrency.

Real files in tmp_path, real processes for crashes and concurrency, an injected clock for
windows. Paid calls go to the scripted FAKE provider with ``worst_usage`` (actual cost =
reserved worst case) so the arithmetic is exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb
from paid_support import (
    Clock,
    ScriptedProvider,
    constant_calibration,
    ledger_lines,
    ledger_path,
    scripted_config,
    set_budget,
    synthesis,
    utc,
)
from pinakes_core import KB
from pinakes_core.errors import BudgetExceededError, PinakesError
from pinakes_core.paid.ask import ask
from pinakes_core.paid.budget import Budget
from pinakes_core.paid.ledger import MAX_RECORD_BYTES, Ledger, Reservation

QUESTION = "how does raft elect a leader"
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def kb(tmp_path: Path) -> KB:
    root = make_kb(tmp_path / "kb")
    scripted_config(root)
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    constant_calibration(handle, 6.0)  # confident: plain ask answers
    return handle


def reopen(kb: KB) -> KB:
    return KB.open(kb.root, embedder=FakeHashEmbedder())


def one_call(kb: KB) -> Decimal:
    """The reservation of one plain ask on this KB (its dry-run worst case)."""
    dry = ask(reopen(kb), QUESTION, dry_run=True)
    assert dry.estimate is not None
    return dry.estimate.total_eur


def paid_ask(kb: KB, clock: Clock) -> None:
    with ScriptedProvider([synthesis("Raft [P1].")], worst_usage=True):
        ask(reopen(kb), QUESTION, clock=clock)


def test_daily_cap_is_hit_across_two_invocations_and_days_follow_the_timezone(kb: KB) -> None:
    cost = one_call(kb)
    set_budget(kb.root, f'daily_eur = {cost * 3 / 2:.8f}\ntimezone = "Europe/Paris"')
    clock = Clock(utc(2026, 3, 10, 22, 0))  # 23:00 in Paris, 10 March
    paid_ask(kb, clock)
    clock.now = utc(2026, 3, 10, 22, 50)
    with pytest.raises(BudgetExceededError, match="daily_eur") as info:
        paid_ask(kb, clock)
    assert "2026-03-10 (Europe/Paris)" in info.value.message
    assert len(ledger_lines(kb.root)) == 2  # the refused call left no record
    clock.now = utc(2026, 3, 10, 23, 10)  # still the 10th in UTC, the 11th in Paris
    paid_ask(kb, clock)
    status = Budget(kb.root, reopen(kb).config, clock).status()
    day = status.windows[0]
    assert day.label == "2026-03-11 (Europe/Paris)" and day.calls == 1
    assert day.spent_eur == pytest.approx(cost, abs=Decimal("0.00000002"))


def test_monthly_cap_is_hit_across_days(kb: KB) -> None:
    cost = one_call(kb)
    monthly = f"monthly_eur = {cost * 5 / 2:.8f}"
    set_budget(kb.root, f"daily_eur = {cost * 3 / 2:.8f}\n{monthly}")
    clock = Clock(utc(2026, 1, 30, 12))
    paid_ask(kb, clock)
    clock.now = utc(2026, 1, 31, 12)
    paid_ask(kb, clock)
    clock.now = utc(2026, 1, 31, 13)
    with pytest.raises(BudgetExceededError, match="daily_eur"):
        paid_ask(kb, clock)
    clock.now = utc(2026, 1, 31, 23, 59)
    with pytest.raises(BudgetExceededError, match="daily_eur"):
        paid_ask(kb, clock)
    # A new day, but the month is spent: the monthly window refuses now.
    set_budget(kb.root, f"daily_eur = {cost * 10:.8f}\n{monthly}")
    with pytest.raises(BudgetExceededError, match="monthly_eur"):
        paid_ask(kb, clock)
    clock.now = utc(2026, 2, 1, 0, 1)
    paid_ask(kb, clock)
    month = Budget(kb.root, reopen(kb).config, clock).status().windows[1]
    assert month.label == "2026-02 (UTC)" and month.calls == 1


CRASH = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {tests!r})
    from conftest import FakeHashEmbedder
    from pinakes_core import KB
    from pinakes_core.paid.ask import ask

    class CrashingClient:  # the process dies after the reservation, mid-call
        def check(self, route):  # the call may leave the machine (it "does", then dies)
            pass

        def complete(self, **kwargs):
            os._exit(9)

    kb = KB.open(sys.argv[1], embedder=FakeHashEmbedder())
    ask(kb, {question!r}, client=CrashingClient())
    """
)


def test_a_crash_between_reservation_and_reconciliation_counts_at_the_reserved_amount(
    kb: KB,
) -> None:
    script = CRASH.format(tests=str(TESTS), question=QUESTION)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(kb.root)], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 9, proc.stderr[-2000:]
    records = ledger_lines(kb.root)
    assert [r["type"] for r in records] == ["reservation"]
    reserved = Decimal(records[0]["eur"])
    budget = Budget(kb.root, kb.config)
    status = budget.status()
    [open_call] = status.open_calls
    assert open_call.unknown_outcome and open_call.reserved_eur == reserved
    day = status.windows[0]
    assert day.open_eur == reserved and day.remaining_eur == day.cap_eur - reserved
    [finding] = [f for f in reopen(kb).doctor().findings if f.check == "ledger-unknown-outcome"]
    assert finding.severity == "warning" and open_call.call in finding.items[0]
    budget.resolve(open_call.call.lower(), Decimal("0.0004"))
    after = budget.status()
    assert after.open_calls == [] and after.windows[0].spent_eur == Decimal("0.0004")
    assert not [f for f in reopen(kb).doctor().findings if f.check.startswith("ledger")]
    with pytest.raises(PinakesError, match="already reconciled"):
        budget.resolve(open_call.call, Decimal("1"))
    with pytest.raises(PinakesError, match="No call"):
        budget.resolve("01JAXR3T5W6Z8Q9N0P1R2S3T4V", Decimal("1"))


RESERVER = textwrap.dedent(
    """
    import sys, time
    from decimal import Decimal
    from pathlib import Path
    from pinakes_core.paid.budget import Budget
    from pinakes_core.config import BudgetConfig, Config
    from pinakes_core.errors import BudgetExceededError
    from pinakes_core.paid.ledger import Ledger

    root, go = Path(sys.argv[1]), Path(sys.argv[2])
    config = Config.model_validate({
        "kb": {"name": "kb", "id": "01JAXR3T5W6Z8Q9N0P1R2S3T4V"},
        "budget": {"daily_eur": "2.0", "per_operation_eur": "100", "monthly_eur": "100"},
    })
    budget = Budget(root, config, ledger=Ledger(root / "ledger"))
    while not go.exists():
        time.sleep(0.001)
    made = 0
    for i in range(10):
        try:
            budget.reserve(operation=sys.argv[3], kind="solve", model="m", usd=Decimal("0.116"),
                           input_tokens_max=1, output_tokens_max=1)
            made += 1
        except BudgetExceededError:
            pass
    print(made)
    """
)


def test_concurrent_reservations_never_overspend(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / ".pinakes").mkdir(parents=True)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RESERVER, str(root), str(go), f"OP{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    time.sleep(1.0)
    go.touch()
    made = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        made.append(int(out))
    # 0.116 USD = 0.1 EUR at the default rate: exactly 20 fit under 2.0 EUR, never more.
    assert sum(made) == 20
    calls = Ledger(root / "ledger").calls()
    assert len(calls) == 20
    assert sum(c.counted_eur for c in calls.values()) == Decimal("2.0")


CONCURRENT_ASK = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from conftest import FakeHashEmbedder
    from paid_support import ScriptedProvider, synthesis
    from pinakes_core import KB
    from pinakes_core.paid.ask import ask
    from pinakes_core.errors import BudgetExceededError
    import litellm  # imported before the start signal so that all processes call together

    def slow(messages):
        time.sleep(1.0)  # every call is in flight while the others reserve
        return synthesis("Raft [P1].")

    kb = KB.open(sys.argv[1], embedder=FakeHashEmbedder())
    go = Path(sys.argv[2])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    with ScriptedProvider([slow], worst_usage=True):
        try:
            ask(kb, {question!r})
            print("spent")
        except BudgetExceededError:
            print("refused")
    """
)


@pytest.mark.slow
def test_concurrent_ask_processes_on_one_kb_never_overspend(kb: KB, tmp_path: Path) -> None:
    cost = one_call(kb)
    cap = cost * 5 / 2  # room for two calls, not three
    set_budget(kb.root, f"daily_eur = {cap:.8f}")
    go = tmp_path / "go"
    script = CONCURRENT_ASK.format(tests=str(TESTS), question=QUESTION)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(kb.root), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for proc in procs:  # every process has imported litellm and opened the KB
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        outcomes.append(out.strip())
    assert sorted(outcomes) == ["refused", "spent", "spent"]
    status = Budget(kb.root, reopen(kb).config).status()
    day = status.windows[0]
    assert day.calls == 2 and day.spent_eur <= cap and status.open_calls == []


def test_ledger_survives_a_rebuild_and_holds_only_bounded_records(kb: KB) -> None:
    paid_ask(kb, Clock(utc(2026, 5, 1, 9)))
    ledger = ledger_path(kb.root)
    before = ledger.read_bytes()
    deep_dir = kb.root / ".pinakes" / "deep"
    deep_dir.mkdir(exist_ok=True)
    (deep_dir / "keep.json").write_text("{}")
    report = reopen(kb).sync(rebuild=True)
    assert report.rebuilt
    assert ledger.read_bytes() == before
    assert (deep_dir / "keep.json").exists()
    too_big = Reservation.model_construct(
        v=1,
        type="reservation",
        call="X",
        ts=utc(2026, 5, 1),
        op="O",
        kind="k",
        model="m" * 5000,
        input_tokens_max=1,
        output_tokens_max=1,
        usd=Decimal(1),
        usd_per_eur=Decimal(1),
        eur=Decimal(1),
        pid=1,
        host="h",
    )
    with pytest.raises(PinakesError, match=str(MAX_RECORD_BYTES)):
        Ledger(ledger.parent).append(too_big)
    assert ledger.read_bytes() == before


def test_torn_ledger_lines_are_skipped_and_reported(kb: KB) -> None:
    paid_ask(kb, Clock(utc(2026, 5, 1, 9)))
    ledger = ledger_path(kb.root)
    with ledger.open("ab") as handle:
        handle.write(b'{"v":1,"call":"01ABC","ty')  # a write cut short
    status = Budget(kb.root, kb.config, Clock(utc(2026, 5, 1, 10))).status()
    assert status.malformed_lines == 1 and status.windows[0].calls == 1
    # The next record starts on a line of its own: the torn one never swallows it.
    paid_ask(kb, Clock(utc(2026, 5, 1, 11)))
    status = Budget(kb.root, kb.config, Clock(utc(2026, 5, 1, 12))).status()
    assert status.malformed_lines == 1 and status.windows[0].calls == 2
    checks = {f.check for f in reopen(kb).doctor().findings}
    assert "ledger-malformed" in checks


def test_budget_config_is_validated(kb: KB) -> None:
    from pinakes_core.errors import ConfigError

    set_budget(kb.root, 'timezone = "Mars/Olympus"')
    with pytest.raises(ConfigError, match=r"budget\.timezone.*IANA"):
        KB.open(kb.root)
    (kb.root / "pinakes.toml").write_text(
        (kb.root / "pinakes.toml")
        .read_text()
        .replace('timezone = "Mars/Olympus"', "daily_eur = -1")
    )
    with pytest.raises(ConfigError, match="daily_eur"):
        KB.open(kb.root)
    (kb.root / "pinakes.toml").write_text(
        (kb.root / "pinakes.toml").read_text().replace("daily_eur = -1", "daily_euro = 1")
    )
    with pytest.raises(ConfigError, match=r"allowed keys here are: .*daily_eur"):
        KB.open(kb.root)


def test_ledger_records_parse_as_the_documented_shape(kb: KB) -> None:
    paid_ask(kb, Clock(utc(2026, 5, 1, 9)))
    reservation, reconciliation = ledger_lines(kb.root)
    assert set(reservation) == {
        "v",
        "type",
        "call",
        "op",
        "ts",
        "kind",
        "model",
        "input_tokens_max",
        "output_tokens_max",
        "usd",
        "usd_per_eur",
        "eur",
        "pid",
        "host",
    }
    assert reservation["ts"] == "2026-05-01T09:00:00Z"
    assert set(reconciliation) == {
        "v",
        "type",
        "call",
        "ts",
        "usd",
        "eur",
        "prompt_tokens",
        "completion_tokens",
        "source",
    }
    assert json.dumps(reservation).count("raft") == 0
