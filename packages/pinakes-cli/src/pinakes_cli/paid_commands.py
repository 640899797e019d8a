"""``pnk ask`` (the only command that can spend money), ``pnk budget`` and ``pnk review``.

Model output, questions, titles and paths are user data: everything here prints them with
Rich markup and highlighting off.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from pinakes_cli import render
from pinakes_cli.options import json_option
from pinakes_cli.root import cli, kb_option, open_kb
from pinakes_core.errors import BudgetExceededError, PinakesError

if TYPE_CHECKING:
    from decimal import Decimal

    from rich.console import Console

# rich loads inside the functions that draw (issue 14, start-up cost).

__all__ = ["ask", "budget", "review"]


def _out() -> Console:
    return render.console(soft_wrap=True, highlight=False)


def _err() -> Console:
    return render.console(stderr=True, soft_wrap=True, highlight=False)


def _plain(console: Console, text: str, style: str | None = None) -> None:
    from rich.text import Text

    console.print(Text(text, style=style or ""), soft_wrap=True)


def _eur(value: Decimal | None) -> str:
    return "–" if value is None else f"€{value:.6f}"


def render_estimate(console: Console, estimate: Any) -> None:
    """The worst-case estimate, one line per call kind."""
    _plain(
        console,
        f"worst case {_eur(estimate.total_eur)} with {estimate.model} "
        f"(${estimate.input_usd_per_mtok}/${estimate.output_usd_per_mtok} per M tokens in/out, "
        f"1 EUR = {estimate.usd_per_eur} USD):",
        "bold",
    )
    for line in estimate.lines:
        _plain(
            console,
            f"  {line.calls} × {line.kind}: ≤ {line.input_tokens_max} tokens in, "
            f"≤ {line.output_tokens_max} out → {_eur(line.eur)}",
        )


def render_answer(console: Console, result: Any) -> None:
    """The answer, its sources, then cost, stop reason and suggestions."""
    if result.answer is None:
        reasons = {
            "abstained": "Retrieval confidence is below [retrieval] abstain_below: the KB "
            "probably does not answer this, so nothing was spent. --force asks anyway; "
            "--deep decomposes the question.",
            "no_evidence": "The search found nothing to answer from; nothing was spent.",
            "dry_run": "Dry run: nothing was spent.",
        }
        _plain(console, reasons.get(result.stop_reason, f"No answer ({result.stop_reason})."))
    else:
        if result.partial:
            _plain(
                console,
                "Partial answer: the budget stopped the run before its synthesis.",
                "yellow",
            )
        _plain(console, result.answer)
        if result.citations:
            console.print()
            _plain(console, "Sources", "bold")
            for c in result.citations:
                where = " › ".join([c.path, *c.heading_path])
                _plain(console, f"  {c.uri}  {where} (lines {c.lines[0]}–{c.lines[1]})")
    if result.invalid_citations:
        _plain(
            console,
            f"warning: removed {len(result.invalid_citations)} citation(s) of passages the model "
            f"was never given: {', '.join(result.invalid_citations[:5])}",
            "yellow",
        )
    if result.uncited_sentences:
        _plain(
            console, f"note: {result.uncited_sentences} sentence(s) carry no citation.", "yellow"
        )
    console.print()
    confidence = "unknown" if result.confidence is None else f"{result.confidence:.2f}"
    cost = (
        f"spent {_eur(result.cost.spent_eur)} in {result.cost.calls} call(s) "
        f"(worst case {_eur(result.cost.estimate_eur)})"
        if result.cost
        else "spent €0"
    )
    _plain(
        console,
        f"{result.mode} · stop: {result.stop_reason} · confidence {confidence} · {cost}",
        "dim",
    )
    for sub in result.sub_questions:
        _plain(console, f"  sub-question: {sub}", "dim")
    for repair in result.repairs:
        _plain(console, f"  plan repair: {repair}", "dim")
    if result.suggestions:
        _plain(console, "Suggested links", "bold")
        for s in result.suggestions:
            _plain(
                console,
                f"  {s.src_path} → {s.dst_path}  {s.rel}  confidence {s.confidence:.2f}  [{s.status}]",
            )
        if all(s.status == "proposed" for s in result.suggestions):
            _plain(
                console, "  (not written; --write-suggestions stages them for `pnk review`)", "dim"
            )
    if result.transcript_file:
        _plain(console, f"transcript: {result.transcript_file}", "dim")


@cli.command()
@kb_option
@click.argument("question")
@click.option(
    "--deep",
    is_flag=True,
    help="When retrieval confidence is low, decompose into sub-questions and answer them in "
    "budgeted rounds (with high confidence it does exactly what plain ask does).",
)
@click.option("--force", is_flag=True, help="Answer even below [retrieval] abstain_below.")
@click.option("--model", help="A litellm model id instead of [ask] model.")
@click.option(
    "-k", type=click.IntRange(1, 30), default=None, help="Passages [default: [ask] passages]."
)
@click.option("--tag", "tags", multiple=True, help="Only documents with this tag (repeatable).")
@click.option("--path", "path_prefix", help="Only documents under this path prefix.")
@click.option("--yes", is_flag=True, help="Spend without asking (the [budget] caps still hold).")
@click.option("--dry-run", is_flag=True, help="Print the worst-case estimate and stop.")
@click.option(
    "--write-suggestions",
    is_flag=True,
    help="Stage the proposed links in the sidecars for `pnk review` (else only printed).",
)
@json_option("Print the result as JSON.")
@click.pass_context
def ask(
    ctx: click.Context,
    question: str,
    deep: bool,
    force: bool,
    model: str | None,
    k: int | None,
    tags: tuple[str, ...],
    path_prefix: str | None,
    yes: bool,
    dry_run: bool,
    write_suggestions: bool,
    as_json: bool,
) -> None:
    """PAID: answer QUESTION with cited passages through a model (litellm).

    The only command that can spend money. It prints the worst-case cost first, asks before
    spending more than [budget] confirm_above_eur (--yes skips that; without a terminal it
    refuses), and never breaches the per-operation, daily or monthly caps. The API key comes
    from the provider's environment variable (e.g. OPENAI_API_KEY).
    """
    from pinakes_core.paid.ask import CostEstimate
    from pinakes_core.paid.ask import ask as run_ask

    kb = open_kb(ctx)

    def approve(estimate: CostEstimate) -> bool:
        render_estimate(_err(), estimate)
        if yes or not estimate.needs_confirmation:
            return True
        if not sys.stdin.isatty():
            raise BudgetExceededError(
                f"The worst case {_eur(estimate.total_eur)} is above [budget] confirm_above_eur "
                f"= €{estimate.confirm_above_eur} and there is no terminal to confirm on; "
                "nothing was spent.",
                "Re-run with --yes to accept it, or raise [budget] confirm_above_eur.",
            )
        return click.confirm(f"Spend up to {_eur(estimate.total_eur)}?", default=False, err=True)

    result = run_ask(
        kb,
        question,
        deep=deep,
        force=force,
        model=model,
        k=k,
        tags=tags,
        path=path_prefix,
        approve=approve,
        dry_run=dry_run,
        write_suggestions=write_suggestions,
    )
    if dry_run and result.estimate is not None:
        render_estimate(_err(), result.estimate)
    if as_json:
        render.print_json(_out(), result)
    else:
        render_answer(_out(), result)
    if result.answer is None and not dry_run:
        sys.exit(1)


def _amount(text: str) -> Decimal:
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.strip().lstrip("€"))
    except InvalidOperation:
        raise PinakesError(
            f"--actual {text!r} is not an amount.", "Give EUR, e.g. --actual 0.012."
        ) from None
    if not value.is_finite():
        raise PinakesError(f"--actual {text!r} is not an amount.", "Give EUR, e.g. --actual 0.012.")
    return value


@cli.command()
@kb_option
@click.option(
    "--resolve", "call", metavar="CALL_ID", help="Settle a call whose outcome is unknown."
)
@click.option("--actual", metavar="EUR", help="With --resolve: what the call really cost, in EUR.")
@json_option("Print the status as JSON.")
@click.pass_context
def budget(ctx: click.Context, call: str | None, actual: str | None, as_json: bool) -> None:
    """Spend per [budget] window and calls with an unknown outcome (free: reads the ledger)."""
    from rich.table import Table
    from rich.text import Text

    from pinakes_core.paid.budget import Budget

    kb = open_kb(ctx)
    keeper = Budget(kb.root, kb.config)
    if (call is None) != (actual is None):
        raise click.UsageError("--resolve and --actual go together.")
    if call is not None and actual is not None:
        state = keeper.resolve(call, _amount(actual))
        _plain(_err(), f"resolved {state.reservation.call} at {_eur(state.actual_eur)}")
    status = keeper.status()
    if as_json:
        render.print_json(_out(), status)
        return
    console = _out()
    table = Table(box=None, pad_edge=False)
    for column in ("window", "spent", "in flight/unknown", "cap", "remaining", "calls"):
        table.add_column(column)
    for w in status.windows:
        table.add_row(
            Text(w.label),
            _eur(w.spent_eur),
            _eur(w.open_eur),
            _eur(w.cap_eur),
            _eur(w.remaining_eur),
            str(w.calls),
        )
    console.print(table)
    _plain(
        console,
        f"per operation: {_eur(status.per_operation_eur)} · 1 EUR = {status.usd_per_eur} USD · ledger {status.ledger}",
        "dim",
    )
    for c in status.open_calls:
        what = "unknown outcome" if c.unknown_outcome else "in flight"
        _plain(
            console,
            f"{what}: {c.call} ({c.kind}, {c.model}) reserved {_eur(c.reserved_eur)} at "
            f"{c.reserved_at:%Y-%m-%d %H:%M}Z — settle with `pnk budget --resolve {c.call} --actual EUR`",
            "yellow" if c.unknown_outcome else None,
        )
    if status.malformed_lines:
        _plain(
            console, f"warning: {status.malformed_lines} malformed ledger line(s) ignored", "yellow"
        )


@cli.command()
@kb_option
@click.option("--accept", multiple=True, metavar="ID", help="Move a staged suggestion into links:.")
@click.option("--reject", multiple=True, metavar="ID", help="Delete a staged suggestion.")
@click.option("--accept-all", is_flag=True, help="Accept every staged suggestion.")
@click.option("--reject-all", is_flag=True, help="Reject every staged suggestion.")
@json_option("Print the suggestions as JSON.")
@click.pass_context
def review(
    ctx: click.Context,
    accept: tuple[str, ...],
    reject: tuple[str, ...],
    accept_all: bool,
    reject_all: bool,
    as_json: bool,
) -> None:
    """List the links `ask --write-suggestions` staged in sidecars; accept or reject them."""
    from rich.table import Table
    from rich.text import Text

    from pinakes_core.paid import writeback

    kb = open_kb(ctx)
    if accept_all and reject_all:
        raise click.UsageError("--accept-all and --reject-all exclude each other.")
    if accept_all or reject_all:
        ids = tuple(s.id for s in writeback.staged(kb))
        accept, reject = (ids, ()) if accept_all else ((), ids)
    if accept or reject:
        report = writeback.review(kb, accept=accept, reject=reject)
        if as_json:
            render.print_data(_out(), report.model_dump(mode="json"))
            return
        for s in report.accepted:
            _plain(
                _out(), f"accepted {s.id}: {s.src_path} → {s.dst_path or s.to} ({s.rel})", "green"
            )
        for s in report.rejected:
            _plain(_out(), f"rejected {s.id}: {s.src_path} → {s.dst_path or s.to} ({s.rel})")
        for ident in report.unknown:
            _plain(_err(), f"no staged suggestion {ident}", "yellow")
        if report.accepted:
            _plain(_err(), "Run `pnk sync` to index the accepted links.", "dim")
        if report.unknown:
            sys.exit(1)
        return
    items = writeback.staged(kb)
    if as_json:
        render.print_data(_out(), [s.model_dump(mode="json") for s in items])
        return
    if not items:
        _plain(_out(), "No staged suggestions.")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("id", "from", "to", "rel", "confidence", "operation"):
        table.add_column(column)
    for s in items:
        table.add_row(
            s.id,
            Text(s.src_path),
            Text(s.dst_path or s.to),
            Text(s.rel),
            "–" if s.confidence is None else f"{s.confidence:.2f}",
            Text(s.operation or "–"),
        )
    _out().print(table)
    _plain(_out(), "pnk review --accept ID / --reject ID (or --accept-all / --reject-all)", "dim")
