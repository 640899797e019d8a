"""Budget windows over the ledger (DESIGN §9): per operation, per day, per month, in EUR.

Before every paid call :meth:`Budget.reserve` takes the ledger's file lock, sums what each
window has already counted (settled calls at their actual cost, open ones at their reserved
cost, other processes' in-flight calls included), and appends a reservation only if the call's
worst case still fits every window. Two ``ask`` processes on one KB therefore never overspend:
the second one sees the first one's reservation. After the call :meth:`Budget.reconcile`
records the actual cost; a call that never gets that far stays open and keeps counting at its
reserved amount (an unknown outcome) until ``pnk budget --resolve``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict

from pinakes_core.config import BudgetConfig, Config
from pinakes_core.errors import BudgetExceededError, PinakesError
from pinakes_core.models import DoctorFinding
from pinakes_core.paid.ledger import (
    CallState,
    Clock,
    Ledger,
    Reconciliation,
    Reservation,
    Void,
    money,
    money_up,
    utc_now,
)
from pinakes_core.uri import new_ulid

__all__ = ["Budget", "BudgetStatus", "OpenCall", "WindowSpend", "budget_findings"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class WindowSpend(_Model):
    """One budget window: its cap and what it has counted so far (EUR)."""

    window: str
    label: str
    cap_eur: Decimal
    spent_eur: Decimal
    open_eur: Decimal
    remaining_eur: Decimal
    calls: int


class OpenCall(_Model):
    """A reservation without a settlement."""

    call: str
    operation: str
    kind: str
    model: str
    reserved_at: datetime
    reserved_eur: Decimal
    unknown_outcome: bool


class BudgetStatus(_Model):
    """What ``pnk budget`` shows: spend per window and the calls still open."""

    timezone: str
    usd_per_eur: Decimal
    per_operation_eur: Decimal
    windows: list[WindowSpend]
    open_calls: list[OpenCall]
    malformed_lines: int
    ledger: str


@dataclass(frozen=True)
class Ticket:
    """A reservation made for one call; pass it back to settle the call."""

    record: Reservation


class Budget:
    """The ``[budget]`` windows of one KB, checked against its ledger.

    Args:
        root: the KB folder (a ledger an earlier version kept in its ``.pinakes/`` is
            imported; see :meth:`Ledger.for_kb`).
        config: the KB's configuration: ``[kb] id`` picks the ledger, ``[budget]`` the caps.
        clock: the time source of the windows.
        ledger: a ledger to use instead of the KB's (tests, tools).
    """

    def __init__(
        self,
        root: Path,
        config: Config,
        clock: Clock = utc_now,
        *,
        ledger: Ledger | None = None,
    ) -> None:
        self.config: BudgetConfig = config.budget
        self.clock = clock
        self.zone = ZoneInfo(self.config.timezone)
        self.ledger = ledger if ledger is not None else Ledger.for_kb(root, config.kb.id)

    # -- money ----------------------------------------------------------------------------

    def to_eur(self, usd: Decimal) -> Decimal:
        """Convert USD (litellm's prices) to EUR at ``[budget] usd_per_eur``."""
        return usd / self.config.usd_per_eur

    # -- windows --------------------------------------------------------------------------

    def _windows(
        self, calls: dict[str, CallState], operation: str | None
    ) -> list[tuple[str, str, Decimal, list[CallState]]]:
        now = self.clock().astimezone(self.zone)
        local = {call: c.reservation.ts.astimezone(self.zone) for call, c in calls.items()}
        day = [c for call, c in calls.items() if local[call].date() == now.date()]
        month = [
            c
            for call, c in calls.items()
            if (local[call].year, local[call].month) == (now.year, now.month)
        ]
        windows = []
        if operation is not None:
            mine = [c for c in calls.values() if c.reservation.op == operation]
            windows.append(("operation", operation, self.config.per_operation_eur, mine))
        windows.append(
            ("day", f"{now:%Y-%m-%d} ({self.config.timezone})", self.config.daily_eur, day)
        )
        windows.append(
            ("month", f"{now:%Y-%m} ({self.config.timezone})", self.config.monthly_eur, month)
        )
        return windows

    def _breach(
        self, calls: dict[str, CallState], operation: str, amount: Decimal
    ) -> tuple[str, str, Decimal, Decimal] | None:
        for window, label, cap, members in self._windows(calls, operation):
            counted = sum((c.counted_eur for c in members), Decimal(0))
            if counted + amount > cap:
                return window, label, cap, counted
        return None

    def fits(self, operation: str, amount_eur: Decimal) -> bool:
        """Whether ``amount_eur`` more would fit every window now (advisory: no lock held)."""
        return self._breach(self.ledger.calls(), operation, amount_eur) is None

    def refusal(self, operation: str, amount_eur: Decimal) -> BudgetExceededError | None:
        """The error a reservation of ``amount_eur`` would raise now, or ``None`` if it fits."""
        breach = self._breach(self.ledger.calls(), operation, amount_eur)
        return None if breach is None else _exceeded(amount_eur, *breach)

    def reserve(
        self,
        *,
        operation: str,
        kind: str,
        model: str,
        usd: Decimal,
        input_tokens_max: int,
        output_tokens_max: int,
        headroom_eur: Decimal = Decimal(0),
    ) -> Ticket:
        """Record a call's worst case if it (plus ``headroom_eur``) fits every window.

        ``headroom_eur`` is checked but not recorded: the deep loop keeps room for its final
        synthesis call this way.

        Raises:
            BudgetExceededError: naming the first window the call would breach; nothing is
                recorded then.
        """
        usd = money_up(usd)
        eur = money_up(self.to_eur(usd))
        with self.ledger.locked():
            breach = self._breach(self.ledger.calls(), operation, eur + headroom_eur)
            if breach is not None:
                raise _exceeded(eur + headroom_eur, *breach)
            record = Reservation(
                call=new_ulid(),
                ts=self.clock(),
                op=operation,
                kind=kind,
                model=model,
                input_tokens_max=input_tokens_max,
                output_tokens_max=output_tokens_max,
                usd=usd,
                usd_per_eur=self.config.usd_per_eur,
                eur=eur,
                pid=os.getpid(),
                host=socket.gethostname(),
            )
            self.ledger.append(record)
        return Ticket(record)

    def reconcile(
        self, ticket: Ticket, usd: Decimal, prompt_tokens: int | None, completion_tokens: int | None
    ) -> Decimal:
        """Record a call's actual cost; returns it in EUR."""
        usd = money(usd)
        eur = money(self.to_eur(usd))
        self.ledger.append(
            Reconciliation(
                call=ticket.record.call,
                ts=self.clock(),
                usd=usd,
                eur=eur,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
        )
        return eur

    def void(self, ticket: Ticket, reason: str) -> None:
        """Record that the provider refused the call before charging for it."""
        self.ledger.append(Void(call=ticket.record.call, ts=self.clock(), reason=reason[:120]))

    def resolve(self, call: str, actual_eur: Decimal) -> CallState:
        """Settle an open call by hand (``pnk budget --resolve CALL --actual EUR``).

        Raises:
            PinakesError: if the call is unknown, already settled, or the amount is negative.
        """
        if actual_eur < 0:
            raise PinakesError(
                f"--actual {actual_eur} is negative.", "Give the amount in EUR, e.g. 0.012."
            )
        with self.ledger.locked():
            calls = self.ledger.calls()
            state = calls.get(call.strip().upper())
            if state is None:
                raise PinakesError(
                    f"No call {call!r} in {self.ledger.path}.", "`pnk budget` lists open calls."
                )
            if state.status != "open":
                raise PinakesError(f"Call {state.reservation.call} is already {state.status}.")
            eur = money(actual_eur)
            self.ledger.append(
                Reconciliation(
                    call=state.reservation.call,
                    ts=self.clock(),
                    usd=money(eur * self.config.usd_per_eur),
                    eur=eur,
                    source="manual",
                )
            )
        return CallState(state.reservation, "reconciled", eur)

    def status(self, operation: str | None = None) -> BudgetStatus:
        """Spend per window (and per ``operation`` if given) and every open call."""
        records, malformed = self.ledger.records()
        calls = self.ledger.calls(records)
        now = self.clock()
        windows = []
        for window, label, cap, members in self._windows(calls, operation):
            spent = sum((c.counted_eur for c in members if c.status != "open"), Decimal(0))
            held = sum((c.counted_eur for c in members if c.status == "open"), Decimal(0))
            windows.append(
                WindowSpend(
                    window=window,
                    label=label,
                    cap_eur=cap,
                    spent_eur=money(spent),
                    open_eur=money(held),
                    remaining_eur=money(max(Decimal(0), cap - spent - held)),
                    calls=len(members),
                )
            )
        open_calls = [
            OpenCall(
                call=c.reservation.call,
                operation=c.reservation.op,
                kind=c.reservation.kind,
                model=c.reservation.model,
                reserved_at=c.reservation.ts,
                reserved_eur=c.reservation.eur,
                unknown_outcome=c.unknown(now),
            )
            for c in calls.values()
            if c.status == "open"
        ]
        return BudgetStatus(
            timezone=self.config.timezone,
            usd_per_eur=self.config.usd_per_eur,
            per_operation_eur=self.config.per_operation_eur,
            windows=windows,
            open_calls=open_calls,
            malformed_lines=malformed,
            ledger=str(self.ledger.path),
        )


_KEYS = {"operation": "per_operation_eur", "day": "daily_eur", "month": "monthly_eur"}


def _exceeded(
    amount: Decimal, window: str, label: str, cap: Decimal, counted: Decimal
) -> BudgetExceededError:
    where = "this operation" if window == "operation" else f"the {window} {label}"
    return BudgetExceededError(
        f"The next call's worst case €{amount:.6f} would take {where} to "
        f"€{counted + amount:.6f}, over [budget] {_KEYS[window]} = €{cap}.",
        f"Raise [budget] {_KEYS[window]} in pinakes.toml"
        + ("" if window == "operation" else f", or wait for the next {window}")
        + "; `pnk budget` shows the spend.",
    )


def budget_findings(root: Path, config: Config, clock: Clock = utc_now) -> list[DoctorFinding]:
    """Doctor findings about the KB's ledger: unknown-outcome calls and malformed lines."""
    budget = Budget(root, config, clock)
    ledger_path = budget.ledger.path
    if not ledger_path.exists():
        return []
    status = budget.status()
    findings = []
    # A free (local) call counts nothing whatever its outcome: nothing to settle.
    unknown = [c for c in status.open_calls if c.unknown_outcome and c.reserved_eur > 0]
    if unknown:
        total = sum((c.reserved_eur for c in unknown), Decimal(0))
        findings.append(
            DoctorFinding(
                check="ledger-unknown-outcome",
                severity="warning",
                message=f"{len(unknown)} paid call(s) have an unknown outcome and count at their reserved "
                f"€{total:.6f}; settle each with `pnk budget --resolve CALL --actual EUR` "
                "(the provider's usage page tells the amount).",
                items=[
                    f"{c.call} ({c.kind}, {c.model}, reserved €{c.reserved_eur} at {c.reserved_at:%Y-%m-%d %H:%M}Z)"
                    for c in unknown[:20]
                ],
            )
        )
    if status.malformed_lines:
        findings.append(
            DoctorFinding(
                check="ledger-malformed",
                severity="warning",
                message=f"{status.malformed_lines} line(s) of {ledger_path} are not valid ledger records "
                "(a torn write?); they are ignored, so spend may be under-counted.",
            )
        )
    return findings
