"""The ``pnk`` command group. Each command is parse → one core call → render."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from pinakes_cli import render
from pinakes_cli.calibrate_command import calibrate
from pinakes_cli.mcp_command import mcp
from pinakes_core import KB, PinakesError

__all__ = ["cli", "main"]

_STAGES = {"read": "reading", "embed": "embedding", "scan": "scanning", "write": "writing"}


def _out() -> Console:
    return Console(soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True, soft_wrap=True)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A progress callback drawing a bar on a terminal's stderr, silent in pipes."""
    console = _err()
    if not enabled or not console.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update


class _Group(click.Group):
    """Maps every :class:`PinakesError` to one clean message and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PinakesError as exc:
            _err().print(f"[red]error:[/] {exc.message}", highlight=False)
            if exc.hint:
                _err().print(f"[dim]hint:[/] {exc.hint}", highlight=False)
            sys.exit(1)


def _set_kb(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.ensure_object(dict)["kb"] = value


def _kb_option(command: Any) -> Any:
    """Accept ``--kb`` after the command name too (``pnk search "…" --kb notes``).

    Given there, it wins over the group's ``--kb``.
    """
    return click.option(
        "--kb",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_set_kb,
        help="The KB folder (or any folder inside it).",
    )(command)


def _kb(ctx: click.Context) -> KB:
    kb: KB = KB.open(ctx.obj["kb"])
    ctx.call_on_close(kb.close)
    return kb


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--kb",
    "kb_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default="current directory",
    help="The KB folder (or any folder inside it).",
)
@click.version_option(package_name="pinakes-cli", prog_name="pnk")
@click.pass_context
def cli(ctx: click.Context, kb_path: Path) -> None:
    """Pinakes: local-first hybrid search over a folder of Markdown."""
    ctx.ensure_object(dict)
    ctx.obj["kb"] = kb_path


@cli.command()
@_kb_option
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="KB name (default: the folder name).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def init(ctx: click.Context, path: Path | None, name: str | None, as_json: bool) -> None:
    """Make PATH (default: --kb or the current folder) a KB: writes pinakes.toml and .gitignore."""
    kb = KB.init(path or ctx.obj["kb"], name=name)
    if as_json:
        _out().print_json(
            data={"root": str(kb.root), "name": kb.config.kb.name, "id": kb.config.kb.id}
        )
    else:
        _out().print(
            f"Initialised KB {kb.config.kb.name!r} ({kb.config.kb.id}) in {kb.root}",
            highlight=False,
        )
        _out().print(f"Next: pnk sync --kb {kb.root}", highlight=False)


@cli.command()
@_kb_option
@click.option("--rebuild", is_flag=True, help="Delete the index and rebuild it from the files.")
@click.option("--strict", is_flag=True, help="Exit 1 if any file was skipped.")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as JSON.")
@click.pass_context
def sync(ctx: click.Context, rebuild: bool, strict: bool, as_json: bool) -> None:
    """Index new and changed files; remove deleted ones. Incremental and crash-safe."""
    kb = _kb(ctx)
    with _progress(not as_json) as progress:
        report = kb.sync(rebuild=rebuild, progress=progress)
    if as_json:
        render.print_json(_out(), report)
    else:
        render.render_sync(_out(), report)
    if strict and report.skipped:
        _err().print(
            f"[red]error:[/] {len(report.skipped)} file(s) skipped (--strict).", highlight=False
        )
        sys.exit(1)


@cli.command()
@_kb_option
@click.argument("query")
@click.option(
    "-k", type=click.IntRange(1, 200), default=None, help="Number of hits [default: [retrieval] k]."
)
@click.option(
    "--tag", "tags", multiple=True, help="Only documents with this tag (repeat: all must match)."
)
@click.option(
    "--path", "path_prefix", help="Only documents under this path prefix, e.g. runbooks/."
)
@click.option(
    "--entity", "entities", multiple=True, help="Extra keyword list for this name (repeatable)."
)
@click.option(
    "--concept", "concepts", multiple=True, help="Extra semantic list for this phrase (repeatable)."
)
@click.option(
    "--channel", "channels", multiple=True, help="Run exactly these channels (repeatable)."
)
@click.option("--explain", is_flag=True, help="Show each hit's rank and score in every channel.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    k: int | None,
    tags: tuple[str, ...],
    path_prefix: str | None,
    entities: tuple[str, ...],
    concepts: tuple[str, ...],
    channels: tuple[str, ...],
    explain: bool,
    as_json: bool,
) -> None:
    """Hybrid search (BM25 + embeddings, fused with RRF). Syncs first if the KB never was."""
    kb = _kb(ctx)
    if not kb.synced:
        with _progress(not as_json) as progress:
            report = kb.sync(progress=progress)
        if not as_json:
            _err().print(
                f"[dim]first sync: {len(report.added)} documents indexed in {report.seconds:.1f}s[/]"
            )
    result = kb.search(
        query,
        k=k,
        tags=tags,
        path=path_prefix,
        entities=entities,
        concepts=concepts,
        channels=channels or None,
        explain=explain,
    )
    if as_json:
        render.print_json(_out(), result)
    else:
        render.render_search(_out(), result, explain=explain)


@cli.command()
@_kb_option
@click.argument("doc")
@click.option("--json", "as_json", is_flag=True, help="Print the document as JSON.")
@click.pass_context
def show(ctx: click.Context, doc: str, as_json: bool) -> None:
    """Print a document with its metadata. DOC is a ULID, a pnk:// URI or a path."""
    view = _kb(ctx).read(doc)
    if as_json:
        render.print_json(_out(), view)
    else:
        render.render_document(_out(), view)


@cli.command()
@_kb_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Counts, model, schema and how many files changed since the last sync."""
    result = _kb(ctx).status()
    if as_json:
        render.print_json(_out(), result)
    else:
        render.render_status(_out(), result)


@cli.command()
@_kb_option
@click.argument("doc")
@click.option("--rel", help="Only this relation; free text is matched to the KB's relations.")
@click.option(
    "--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True
)
@click.option(
    "--depth",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Hops (served at most 3).",
)
@click.option("--query", help="Rank neighbours by similarity to this text and report a confidence.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def links(
    ctx: click.Context,
    doc: str,
    rel: str | None,
    direction: str,
    depth: int,
    query: str | None,
    as_json: bool,
) -> None:
    """Show the documents DOC links to and that link to it (needs pinakes-graph)."""
    result = _kb(ctx).links(doc, rel=rel, direction=direction, depth=depth, query=query)
    if as_json:
        render.print_json(_out(), result)
    else:
        render.render_links(_out(), result)


@cli.command()
@_kb_option
@click.argument("src")
@click.argument("dst")
@click.option("--rel", required=True, help="The relation, e.g. depends-on, cites, supersedes.")
@click.option("--note", help="A free-text note stored with the link.")
@click.pass_context
def link(ctx: click.Context, src: str, dst: str, rel: str, note: str | None) -> None:
    """Add a typed link SRC → DST to SRC's sidecar (comments and order kept) and show the diff."""
    path, before, after = _kb(ctx).add_link(src, dst, rel, note)
    render.render_diff(_out(), path, before, after)
    _err().print("[dim]Run `pnk sync` to index the new link.[/]")


@cli.command()
@_kb_option
@click.option(
    "--fix",
    is_flag=True,
    help="Repair what is safe: new ids for copied sidecars; orphans after confirmation.",
)
@click.option("--yes", is_flag=True, help="With --fix, remove orphan sidecars without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def doctor(ctx: click.Context, fix: bool, yes: bool, as_json: bool) -> None:
    """Check sidecars, ids, links, hubs, schema, model and store size."""
    kb = _kb(ctx)

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
@_kb_option
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
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
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
    from pinakes_core import eval as evaluation

    kb = _kb(ctx)
    questions = questions or evaluation.default_questions(kb.root)
    if not kb.synced:
        with _progress(not as_json) as progress:
            kb.sync(progress=progress)
    calibration = None
    if calibrate:
        calibration = evaluation.calibrate(kb, questions)
        kb.save_calibration(calibration.calibration)
    chosen = evaluation.select_configs(
        kb, matrix=matrix, names=configs.split(",") if configs else None
    )
    report = evaluation.evaluate(kb, questions, chosen)
    if as_json:
        payload = report.model_dump(mode="json", by_alias=True)
        if calibration is not None:
            payload["calibration"] = calibration.model_dump(mode="json")
        _out().print_json(data=payload)
        return
    if calibration is not None:
        render.render_calibration(_out(), calibration)
    render.render_eval(_out(), report)


cli.add_command(mcp)
cli.add_command(calibrate)


def main() -> None:
    """Console-script entry point."""
    cli(obj={})
