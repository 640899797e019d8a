"""``pnk sync``, ``pnk watch`` and ``pnk status``: keeping a KB's index in step with its files.

Each command parses its arguments, calls one core function and renders its result; the engine
loads inside the command (``pnk --help`` never pays for it).
"""

from __future__ import annotations

import datetime as dt
import sys

import click

from pinakes_cli import render
from pinakes_cli.options import json_option
from pinakes_cli.root import cli, kb_option, open_kb, progress_bar
from pinakes_cli.root import err as _err
from pinakes_cli.root import out as _out

__all__ = ["status", "sync", "watch"]


@cli.command()
@kb_option
@click.option("--rebuild", is_flag=True, help="Delete the index and rebuild it from the files.")
@click.option("--strict", is_flag=True, help="Exit 1 if any file was skipped.")
@json_option("Print the sync report as JSON.")
@click.pass_context
def sync(ctx: click.Context, rebuild: bool, strict: bool, as_json: bool) -> None:
    """Index new and changed files; remove deleted ones. Incremental and crash-safe."""
    kb = open_kb(ctx)
    with progress_bar(not as_json) as progress:
        report = kb.sync(rebuild=rebuild, progress=progress)
    if as_json:
        render.print_json(_out(), report)
    else:
        render.render_sync(_out(), report)
    if strict and report.skipped:
        render.render_error(_err(), f"{len(report.skipped)} file(s) skipped (--strict).", None)
        sys.exit(1)


@cli.command()
@kb_option
@json_option("Print the status as JSON.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Counts, model, schema and how many files changed since the last sync."""
    result = open_kb(ctx).status()
    if as_json:
        render.print_json(_out(), result)
    else:
        render.render_status(_out(), result)


@cli.command()
@kb_option
@click.option(
    "--debounce",
    "debounce_ms",
    type=click.IntRange(50, 60_000),
    default=1000,
    show_default=True,
    help="Quiet time (ms) after the last change before a sync starts.",
)
@json_option("Print each sync report as one JSON line (JSON Lines).")
@click.pass_context
def watch(ctx: click.Context, debounce_ms: int, as_json: bool) -> None:
    """Keep the index in step with the files: sync now, then after every burst of changes.

    The same debounced watcher the MCP server runs. Ctrl-C stops it.
    """
    import json

    from pinakes_core.errors import PinakesError
    from pinakes_core.index.watching import watch as watch_files

    kb = open_kb(ctx)
    if not as_json:
        _err().print(render.line((f"watching {kb.root} (Ctrl-C stops)", "dim")))

    reported = False  # the first sync reports even when nothing changed

    def run_sync(events: int) -> None:
        nonlocal reported
        first, reported = not reported, True
        try:
            with progress_bar(not as_json) as progress:
                report = kb.sync(progress=progress)
        except PinakesError as exc:  # a sync that fails (a lock held elsewhere) waits for the next
            render.render_error(_err(), exc.message, exc.hint)
            return
        if as_json:
            data = report.model_dump(mode="json", by_alias=True)
            _out().out(json.dumps({"events": events, **data}), highlight=False)
        elif report.added or report.changed or report.removed or report.renamed or first:
            stamp = dt.datetime.now().strftime("%H:%M:%S")
            _out().print(render.line((stamp, "dim"), " "), end="")
            render.render_sync(_out(), report)

    watch_files(kb.root, run_sync, debounce_ms=debounce_ms)
