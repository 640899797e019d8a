"""The ``pnk`` command group. Each command is parse → one core call → render."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import gc
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pinakes_cli import render
from pinakes_cli.fleet_commands import adopt_command, fleet, fleet_search
from pinakes_cli.options import JSON_META, json_option
from pinakes_cli.plugins import plugins, register_plugin_commands
from pinakes_cli.setup_commands import (
    hooks,
    init_with_template,
    relation_note,
    schema,
    templates,
    upgrade,
)
from pinakes_core import KB, PinakesError
from pinakes_core.search.when import WhenError, parse_when

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["cli", "main"]

_STAGES = {
    "read": "reading",
    "embed": "embedding",
    "links": "links",
    "graph": "graph",
    "graph links": "graph links",
    "labels": "labels",
}


def _out() -> Console:
    # Lazy: rich loads only when something is drawn (issue 14, start-up cost).
    return render.LazyConsole.make(soft_wrap=True)


def _err() -> Console:
    return render.LazyConsole.make(stderr=True, soft_wrap=True)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A progress callback drawing a bar per sync phase on a terminal's stderr, silent in pipes.

    Every phase reports (read, embed, links, and the graph plugin's graph, graph links and
    labels); a phase of unknown length (total 0) shows a pulsing bar.
    """
    if not enabled:
        yield None
        return
    console = render.console(stderr=True, soft_wrap=True)
    if not console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)

        yield update


#: Commands whose argument may start with ``-``: what it is for, and an example of one
#: (the ``--`` hint below).
_TEXT_ARGUMENTS = {
    "search": ("search for text", "'-your text'"),
    "ask": ("ask a question", "'-your text'"),
    "show": ("name a document", "-notes.md"),
    "links": ("name a document", "-notes.md"),
    "link": ("name a document", "-notes.md"),
}


def _dash_hint(exc: click.NoSuchOption) -> click.NoSuchOption:
    """``exc`` telling how to pass text that starts with ``-``, for commands that take text.

    ``pnk search --detectOpenHandles`` reads the flag being searched for as an option of
    ``search``; after ``--`` it is the query. Click's "Did you mean" (kept) guesses loosely
    (``--watchAll`` → ``--path``), so the hint is always given; a cluster of short options
    (``-foo`` is ``-f``) is not echoed, since the query was more than the option named.
    """
    command = exc.ctx.command.name if exc.ctx is not None else None
    known = _TEXT_ARGUMENTS.get(command or "")
    if known is None:
        return exc
    purpose, example = known
    name = exc.option_name
    example = shlex.quote(name) if name.startswith("--") else example
    message = (
        f"{exc.message} To {purpose} that starts with '-', put -- before it: "
        f"pnk {command} -- {example}"
    )
    return click.NoSuchOption(name, message, possibilities=exc.possibilities, ctx=exc.ctx)


class _Group(click.Group):
    """Maps every :class:`PinakesError` to one clean message (JSON with ``--json``) and exit 1.

    An OS error the user can fix (permission denied, a read-only mount, a full disk) that no
    library code explained gets one sentence too, never a traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            raise _dash_hint(exc) from None
        except OSError as exc:
            error = _os_error(exc)
            if error is None:
                raise
            self._fail(ctx, error)
        except PinakesError as exc:
            self._fail(ctx, exc)

    @staticmethod
    def _fail(ctx: click.Context, exc: PinakesError) -> None:
        if ctx.meta.get(JSON_META):
            error = {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}
            render.print_data(_out(), {"error": error})
        else:
            render.render_error(_err(), exc.message, exc.hint)
        sys.exit(1)


#: What an OS error the user can fix means, for :func:`_os_error`.
_OS_ERRORS = {
    errno.EACCES: ("cannot be read or written by this user (permission denied)", "permissions"),
    errno.EPERM: (
        "cannot be read or written by this user (operation not permitted)",
        "permissions",
    ),
    errno.EROFS: ("is on a read-only file system", "mount"),
    errno.ENOSPC: ("cannot be written: the disk is full", "space"),
    errno.EDQUOT: ("cannot be written: the disk quota is used up", "space"),
}
_OS_HINTS = {
    "permissions": "Check the permissions of that path, or run the command as its owner.",
    "mount": "Use a KB on a writable file system for commands that write.",
    "space": "Free some space and run the command again.",
}


def _os_error(exc: OSError) -> PinakesError | None:
    """One sentence for an OS error the user can fix (permissions, a full disk), else ``None``.

    A last resort: the library raises its own errors where it can say more.
    """
    known = _OS_ERRORS.get(exc.errno or 0)
    if known is None:
        return None
    what = f"{exc.filename}" if exc.filename else "A file Pinakes needs"
    return PinakesError(f"{what} {known[0]}.", _OS_HINTS[known[1]])


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


class _When(click.ParamType[float]):
    """A point in time: ``2024-05-01``, ``2024-05-01T12:00``, or an age such as ``7d``, ``12h``."""

    name = "when"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_when(str(value))
        except WhenError as exc:
            self.fail(f"{exc.message} {exc.hint}", param, ctx)


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
    """Pinakes: local-first hybrid search over a folder of Markdown.

    Only `pnk ask` can spend money (it calls a model provider, within the [budget] caps);
    every other command is free and never calls a paid API.

    Commands marked "not installed" come from another Pinakes distribution; `pnk plugins`
    lists what is installed.
    """
    ctx.ensure_object(dict)
    ctx.obj["kb"] = kb_path


@cli.command()
@_kb_option
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="KB name (default: the folder name).")
@click.option(
    "--template",
    help="Stamp a template: general, research-papers, engineering-docs (see `pnk templates`) "
    "or a template folder.",
)
@json_option()
@click.pass_context
def init(
    ctx: click.Context, path: Path | None, name: str | None, template: str | None, as_json: bool
) -> None:
    """Make PATH (default: --kb or the current folder) a KB: writes pinakes.toml and .gitignore."""
    if template:
        init_with_template(path or ctx.obj["kb"], template, name, as_json)
        return
    from pinakes_core.config import NEW_KB_SIDECARS

    kb = KB.init(path or ctx.obj["kb"], name=name, sidecars=NEW_KB_SIDECARS)
    if as_json:
        render.print_data(
            _out(), {"root": str(kb.root), "name": kb.config.kb.name, "id": kb.config.kb.id}
        )
    else:
        out = _out()
        out.print(
            render.line(f"Initialised KB {kb.config.kb.name!r} ({kb.config.kb.id}) in {kb.root}")
        )
        out.print(render.line(f"Next: pnk sync --kb {kb.root}"))


@cli.command()
@_kb_option
@click.option("--rebuild", is_flag=True, help="Delete the index and rebuild it from the files.")
@click.option("--strict", is_flag=True, help="Exit 1 if any file was skipped.")
@json_option("Print the sync report as JSON.")
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
        render.render_error(_err(), f"{len(report.skipped)} file(s) skipped (--strict).", None)
        sys.exit(1)


def _first_sync(kb: KB, quiet: bool) -> None:
    if kb.synced:
        return
    with _progress(not quiet) as progress:
        report = kb.sync(progress=progress)
    if not quiet:
        _err().print(
            render.line(
                (
                    f"first sync: {len(report.added)} documents indexed in {report.seconds:.1f}s",
                    "dim",
                )
            )
        )


@cli.command()
@click.option(
    "--kb",
    "kb_refs",
    multiple=True,
    help="The KB folder (or any folder inside it); repeat, with folders or fleet names, to "
    "search several KBs as one.",
)
@click.option(
    "--fleet", "use_fleet", is_flag=True, help="Search every KB in the fleet registry as one."
)
@click.argument("query")
@click.option(
    "-k", type=click.IntRange(1, 200), default=None, help="Number of hits [default: [retrieval] k]."
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Only documents with this tag or one nested under it (repeat: all must match).",
)
@click.option(
    "--path", "path_prefix", help="Only documents under this path prefix, e.g. runbooks/."
)
@click.option(
    "--doc",
    "docs",
    multiple=True,
    help="Only this document (ULID, pnk:// URI or path; repeatable: any of them).",
)
@click.option(
    "--meta",
    "meta",
    multiple=True,
    help="Frontmatter field filter: key=value, key!=value, key>v, key<v, 'key in a,b', "
    "'key exists' (repeatable: all must hold).",
)
@click.option(
    "--source-type",
    "source_types",
    multiple=True,
    type=click.Choice(["markdown", "text", "pdf", "code"]),
    help="Only documents of this source type (repeatable: any of them).",
)
@click.option(
    "--modified-after",
    type=_When(),
    help="Only files modified at or after this date (2024-05-01) or age (7d, 12h).",
)
@click.option(
    "--modified-before", type=_When(), help="Only files modified before this date or age."
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
@click.option(
    "--per-doc/--per-chunk",
    default=True,
    show_default=True,
    help="k documents, each with its best passages (default), or k passages.",
)
@click.option(
    "--min-score",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Leave out hits scoring below this relevance (0-1).",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Show each hit's rank and score in every channel, and how the query was ranked.",
)
@click.option(
    "--reader/--no-reader",
    default=None,
    help="Reread the top passages with the reader model, or not ([retrieval] reader by default).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(render.FORMATS),
    default="table",
    show_default=True,
    help="table: ranked passages; json: the result JSON; files: matching paths (exit 1 when "
    "none); md: Markdown. files and md leave out hits below a relevance floor (--min-score "
    "replaces it).",
)
@click.option(
    "-0",
    "--null",
    "null",
    is_flag=True,
    help="Print matching paths (--format files) each ended by a NUL byte and written exactly "
    "as they are, for xargs -0 (as find -print0, rg --null).",
)
@json_option("Print the result as JSON (same as --format json).")
@click.pass_context
def search(
    ctx: click.Context,
    kb_refs: tuple[str, ...],
    use_fleet: bool,
    query: str,
    k: int | None,
    tags: tuple[str, ...],
    path_prefix: str | None,
    docs: tuple[str, ...],
    meta: tuple[str, ...],
    source_types: tuple[str, ...],
    modified_after: float | None,
    modified_before: float | None,
    entities: tuple[str, ...],
    concepts: tuple[str, ...],
    channels: tuple[str, ...],
    per_doc: bool,
    min_score: float | None,
    explain: bool,
    reader: bool | None,
    fmt: str,
    null: bool,
    as_json: bool,
) -> None:
    """Hybrid search (BM25 + embeddings, fused by score). Syncs first if the KB never was.

    With --fleet, or --kb given more than once, the KBs are searched as one: each with the
    same filters, hits merged by score and labelled with their KB (docs/fleet.md).
    """
    fmt = "json" if as_json else fmt
    if null:
        if fmt not in ("table", "files"):
            raise click.UsageError(
                f"-0/--null prints paths; it cannot be used with --format {fmt}."
            )
        fmt = "files0"
    if fmt == "json":
        ctx.meta[JSON_META] = True
    filters: dict[str, Any] = {
        "k": k,
        "tags": tags,
        "path": path_prefix,
        "meta": meta,
        "source_type": source_types,
        "modified_after": modified_after,
        "modified_before": modified_before,
        "entities": entities,
        "concepts": concepts,
        "channels": channels or None,
        "group_by": "document" if per_doc else "chunk",
        "min_score": min_score,
        "reader": reader,
    }
    if use_fleet or len(kb_refs) > 1:
        fleet_search(
            ctx, query, kb_refs, use_fleet=use_fleet, docs=docs, explain=explain, fmt=fmt, **filters
        )
        return
    if kb_refs:
        ctx.obj["kb"] = Path(kb_refs[0])
    kb = _kb(ctx)
    _first_sync(kb, quiet=fmt != "table")
    result = kb.search(query, doc_ids=[kb.resolve(doc) for doc in docs], explain=explain, **filters)
    result = floor_list(result, fmt, min_score)
    render.render_search(_out(), result, explain=explain, fmt=fmt)
    end_list(ctx, result.hits, fmt)


#: The outputs that claim to list matches: a relevance floor applies (docs/cli.md).
LIST_FORMATS = ("files", "md")


def floor_list(result: Any, fmt: str, min_score: float | None) -> Any:
    """``result`` without the hits below the list floor, for ``--format files|md`` (issue 35).

    Only when ``--min-score`` was not given (it replaces the floor); says on stderr how many
    hits it left out and how to see them.
    """
    hits = list(result.hits)
    if fmt not in LIST_FORMATS or min_score is not None or not hits:
        return result
    from pinakes_core.search.hits import list_floor

    floor = list_floor([hit.score for hit in hits])
    kept = [hit for hit in hits if hit.score >= floor]
    if len(kept) < len(hits):
        _say_err(
            f"pnk: left out {len(hits) - len(kept)} of {len(hits)} hits scoring below the "
            f"relevance floor {floor:g}; --min-score 0 lists them."
        )
    return result.model_copy(update={"hits": kept})


def end_list(ctx: click.Context, hits: list[Any], fmt: str) -> None:
    """Exit 1 when ``--format files`` lists nothing, as grep and ripgrep do."""
    if fmt == "files" and not hits:
        ctx.exit(1)


def _say_err(message: str) -> None:
    _err().print(render.line(message), soft_wrap=True)


class _LineRange(click.ParamType[tuple[int, int]]):
    """``A-B`` (1-based, inclusive), ``A-`` (to the end) or ``A`` (one line)."""

    name = "A-B"
    _RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$")

    def __init__(self, what: str = "line") -> None:
        self.what = what

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, int]:
        if isinstance(value, tuple):
            return value
        match = self._RANGE.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a {self.what} range; use A-B, e.g. 10-40.", param, ctx)
        first = int(match.group(1))
        last = int(match.group(3)) if match.group(3) else (sys.maxsize if match.group(2) else first)
        return first, last


@cli.command()
@_kb_option
@click.argument("doc")
@click.option("--lines", "lines", type=_LineRange(), help="Only lines A-B of the file (1-based).")
@click.option("--section", help="Only this heading's section (its text or 'A › B' path).")
@click.option(
    "--page",
    "pages",
    type=_LineRange("page"),
    help="Only pages N-M of a PDF (N, N-M or N-; 1-based), each under a [page N] line.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(1, None),
    help="Cut the text to about N tokens (characters / 4) at a paragraph break.",
)
@click.option(
    "--body", is_flag=True, help="Print only the text (or the slice asked for), for piping."
)
@json_option("Print the document as JSON.")
@click.pass_context
def show(
    ctx: click.Context,
    doc: str,
    lines: tuple[int, int] | None,
    section: str | None,
    pages: tuple[int, int] | None,
    max_tokens: int | None,
    body: bool,
    as_json: bool,
) -> None:
    """Print a document with its metadata.

    DOC is a ULID, a pnk:// URI, a path, or a note's name as its wikilinks write it.
    """
    view = _kb(ctx).read(doc, lines=lines, section=section, pages=pages, max_tokens=max_tokens)
    if as_json:
        render.print_json(_out(), view)
    elif body:
        render.render_body(_out(), view)
    else:
        render.render_document(_out(), view)


@cli.command()
@_kb_option
@json_option("Print the status as JSON.")
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
@json_option()
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
@click.option(
    "--rel",
    required=True,
    help="The relation, e.g. depends-on; free text is matched to the schema's relation types.",
)
@click.option("--note", help="A free-text note stored with the link.")
@click.option(
    "--to-kb", "to_kb", help="The fleet KB holding DST (a name or KB id), when not this one."
)
@json_option("Print the sidecar path and its text before and after as JSON.")
@click.pass_context
def link(
    ctx: click.Context,
    src: str,
    dst: str,
    rel: str,
    note: str | None,
    to_kb: str | None,
    as_json: bool,
) -> None:
    """Add a typed link SRC → DST to SRC's sidecar (comments and order kept) and show the diff.

    DST may be in another KB of the fleet: a pnk://<kb>/<doc> URI, or any reference with --to-kb.
    """
    kb = _kb(ctx)
    path, before, after = kb.add_link(src, dst, rel, note, dst_kb=to_kb)
    if as_json:
        render.print_data(_out(), {"sidecar": path, "before": before, "after": after})
        return
    render.render_diff(_out(), path, before, after)
    relation_note(kb, rel)
    _err().print(render.line(("Run `pnk sync` to index the new link.", "dim")))


@cli.command()
@_kb_option
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
        render.print_data(_out(), payload)
        return
    if calibration is not None:
        render.render_calibration(_out(), calibration)
    render.render_eval(_out(), report)


@cli.command()
@_kb_option
@json_option("Print the calibration as JSON.")
@click.pass_context
def calibrate(ctx: click.Context, as_json: bool) -> None:
    """Refit confidence for this KB from its own synthetic queries (sync does it when needed)."""
    kb = _kb(ctx)
    with _progress(not as_json) as progress:
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


@cli.command()
@_kb_option
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

    from pinakes_core.index.watching import watch as watch_files

    kb = _kb(ctx)
    if not as_json:
        _err().print(render.line((f"watching {kb.root} (Ctrl-C stops)", "dim")))

    reported = False  # the first sync reports even when nothing changed

    def run_sync(events: int) -> None:
        nonlocal reported
        first, reported = not reported, True
        try:
            with _progress(not as_json) as progress:
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


cli.add_command(plugins)

# Commands from other Pinakes distributions (pnk mcp from pinakes-mcp, …) come through the
# register_commands hook; a known one that is not installed says what to install.
register_plugin_commands(cli)
cli.add_command(templates)
cli.add_command(upgrade)
cli.add_command(schema)
cli.add_command(hooks)
cli.add_command(fleet)
cli.add_command(adopt_command)

from pinakes_cli.paid_commands import ask, budget, review  # noqa: E402  (they use the helpers above)

cli.add_command(ask)
cli.add_command(budget)
cli.add_command(review)


def main() -> None:
    """Console-script entry point.

    When the command is done (click then exits through ``SystemExit``), every object left is
    frozen into the collector's permanent generation, so the interpreter's shutdown does not
    walk them all again looking for cycles: that walk cost a cold ``pnk search`` about as much
    CPU as loading the embedding model (issue 14). Nothing else is skipped: atexit handlers
    run, files flush and close, and the KB was closed when the command's context closed.
    Objects still alive at exit are all a freeze leaves unfinalised, which Python never
    promised to finalise anyway.
    """
    try:
        cli(obj={})
    finally:
        gc.freeze()
