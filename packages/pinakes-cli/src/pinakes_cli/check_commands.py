"""``pnk doctor``, ``pnk eval`` and ``pnk calibrate``: how healthy a KB is and how well it finds.

Each command parses its arguments, calls one core function and renders its result; the engine
loads inside the command (``pnk --help`` never pays for it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pinakes_cli import render
from pinakes_cli.options import json_option
from pinakes_cli.root import cli, kb_option, open_kb, progress_bar
from pinakes_cli.root import err as _err
from pinakes_cli.root import out as _out

__all__ = ["calibrate", "doctor", "eval_"]


@cli.command()
@kb_option
@click.option(
    "--fix",
    is_flag=True,
    help="Repair what is safe: new ids for copied sidecars; orphans after confirmation.",
)
@click.option("--yes", is_flag=True, help="With --fix, remove orphan sidecars without asking.")
@json_option("Print the report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, fix: bool, yes: bool, as_json: bool) -> None:
    """Check sidecars, ids, links, hubs, schema, model and store size."""
    kb = open_kb(ctx)

    def consent(count: int) -> bool:  # asked only when --fix found orphan sidecars
        return yes or (
            sys.stdin.isatty()
            and click.confirm(f"Remove {count} orphan sidecar(s)?", default=False)
        )

    report = kb.doctor(fix=fix, remove_orphans=consent)
    if as_json:
        render.print_json(_out(), report)
    else:
        render.render_doctor(_out(), report)


@cli.command(name="eval")
@kb_option
@click.option(
    "--questions",
    "questions",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSONL question set [default: questions.jsonl in the KB root or its parent].",
)
@click.option("--matrix", is_flag=True, help="Compare every channel configuration side by side.")
@click.option("--configs", help="Comma-separated configurations to compare, e.g. bm25,hybrid.")
@click.option(
    "--calibrate",
    is_flag=True,
    help="Fit this KB's confidence calibration (cross-validated) and store it.",
)
@json_option("Print the report as JSON.")
@click.pass_context
def eval_(
    ctx: click.Context,
    questions: Path | None,
    matrix: bool,
    configs: str | None,
    calibrate: bool,
    as_json: bool,
) -> None:
    """Measure retrieval on a golden question set: per-class recall, MRR, nDCG, confidence errors."""
    from pinakes_core.manage import eval as evaluation

    kb = open_kb(ctx)
    questions = questions or evaluation.default_questions(kb.root)
    if not kb.synced:
        with progress_bar(not as_json) as progress:
            kb.sync(progress=progress)
    calibration = None
    if calibrate:
        calibration = evaluation.calibrate(kb, questions)
        kb.searcher.save_calibration(calibration.calibration)
    chosen = evaluation.select_configs(
        kb, matrix=matrix, names=configs.split(",") if configs else None
    )
    report = evaluation.evaluate(kb, questions, chosen)
    if as_json:
        payload = report.model_dump(mode="json", by_alias=True)
        if calibration is not None:
            payload["calibration"] = calibration.model_dump(mode="json")
        render.print_data(_out(), payload)
        return
    if calibration is not None:
        render.render_calibration(_out(), calibration)
    render.render_eval(_out(), report)


@cli.command()
@kb_option
@json_option("Print the calibration as JSON.")
@click.pass_context
def calibrate(ctx: click.Context, as_json: bool) -> None:
    """Refit confidence for this KB from its own synthetic queries (sync does it when needed)."""
    kb = open_kb(ctx)
    with progress_bar(not as_json) as progress:
        calibration = kb.self_calibrate(force=True, progress=progress)
    if calibration is None:
        # None: no documents, or none of the synthetic queries it drew found its passage.
        note = "Too little distinct text to calibrate from; confidence keeps the built-in prior."
        if as_json:
            render.print_data(_out(), None)  # still JSON on stdout
            _err().print(render.line(note))
        else:
            _out().print(render.line(note))
    elif as_json:
        render.print_json(_out(), calibration)
    else:
        _out().print(
            f"confidence calibrated on {calibration.n} synthetic queries ({calibration.fitted_on}).",
            markup=False,
            highlight=False,
        )
