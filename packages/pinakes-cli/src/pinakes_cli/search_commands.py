"""``pnk search``: one KB, or several as one (``--fleet``, ``--kb A --kb B``; DESIGN §10).

The command parses its arguments, calls one core function (``KB.search`` or
``Fleet.search``) and renders its result; the engine loads inside the command (``pnk --help``
never pays for it). Text that came from a user's files is printed with Rich markup off.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pinakes_cli import render
from pinakes_cli.options import JSON_META, json_option
from pinakes_cli.root import cli, open_kb, progress_bar
from pinakes_cli.root import err as _err
from pinakes_cli.root import out as _out

if TYPE_CHECKING:
    from rich.console import Console

    from pinakes_core import KB
    from pinakes_core.manage.fleet import FleetSearchResult

__all__ = ["end_list", "floor_list", "render_fleet_search", "search"]


class _When(click.ParamType[float]):
    """A point in time: ``2024-05-01``, ``2024-05-01T12:00``, or an age such as ``7d``, ``12h``."""

    name = "when"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        from pinakes_core.search.when import WhenError, parse_when

        try:
            return parse_when(str(value))
        except WhenError as exc:
            self.fail(f"{exc.message} {exc.hint}", param, ctx)


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
    kb = open_kb(ctx)
    _first_sync(kb, quiet=fmt != "table")
    result = kb.search(query, doc_ids=[kb.resolve(doc) for doc in docs], explain=explain, **filters)
    result = floor_list(result, fmt, min_score)
    render.render_search(_out(), result, explain=explain, fmt=fmt)
    end_list(ctx, result.hits, fmt)


def _first_sync(kb: KB, quiet: bool) -> None:
    if kb.synced:
        return
    with progress_bar(not quiet) as progress:
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


def render_fleet_search(
    console: Console, result: FleetSearchResult, *, explain: bool = False, fmt: str = "table"
) -> None:
    """The merged ranking as ``table``, ``files`` (absolute paths), ``md`` or ``json``.

    ``table`` and ``md`` are core's single-KB renderings with each path labelled ``[kb]``;
    KBs that could not answer are named first.
    """
    if fmt == "json":
        render.print_json(console, result)
        return
    if fmt in ("files", "files0"):
        roots = {item.name: item.root for item in result.kbs}
        paths = [
            str(Path(roots.get(kb_name, ".")) / rel)
            for kb_name, rel in dict.fromkeys((h.kb, h.path) for h in result.hits)
        ]
        if fmt == "files0":  # -0: NUL-ended, as they are
            render.write_raw(console, "".join(f"{path}\0" for path in paths))
            return
        for path in paths:
            console.out(render.one_line(path), highlight=False)
        return
    if fmt == "table":
        for item in result.kbs:
            if item.error:
                render.say(console, (f"{item.name}: not searched: ", "yellow"), item.error)
        if result.hits and result.kb:
            render.say(
                console, (f"confidence and abstain from {result.kb}, the top hit's KB", "dim")
            )
    from pinakes_core import SearchResult

    labelled = SearchResult(
        query=result.query,
        hits=[h.model_copy(update={"path": f"[{h.kb}] {h.path}"}) for h in result.hits],
        confidence=result.confidence,
        abstain=result.abstain,
        timings_ms=result.timings_ms,
    )
    render.render_search(console, labelled, explain=explain, fmt=fmt)


def _doc_id(ref: str) -> str:
    """A ``--doc`` reference that means the same in every KB: a ULID or a ``pnk://`` URI."""
    from pinakes_core.errors import UriError
    from pinakes_core.uri import SCHEME, is_ulid, parse_uri

    ref = ref.strip()
    if ref.startswith(SCHEME):
        return parse_uri(ref).doc_id
    if is_ulid(ref.upper()):
        return ref.upper()
    raise UriError(
        f"--doc {ref!r} is a path, which names a document in one KB only.",
        "With several KBs pass the document's ULID or pnk:// URI.",
    )


def fleet_search(
    ctx: click.Context,
    query: str,
    refs: tuple[str, ...],
    *,
    use_fleet: bool,
    docs: tuple[str, ...],
    explain: bool,
    fmt: str,
    **filters: Any,
) -> None:
    """``pnk search --fleet`` / ``--kb A --kb B``: one core call, the merged result rendered."""
    from pinakes_core.manage.fleet import Fleet

    if use_fleet and refs:
        raise click.UsageError("Pass --fleet (every registered KB) or --kb A --kb B, not both.")
    members = Fleet.open(None if use_fleet else list(refs))
    ctx.call_on_close(members.close)
    for _, kb in members:
        _first_sync(kb, quiet=fmt != "table")
    result = members.search(query, doc_ids=[_doc_id(d) for d in docs], explain=explain, **filters)
    result = floor_list(result, fmt, filters.get("min_score"))
    render_fleet_search(_out(), result, explain=explain, fmt=fmt)
    end_list(ctx, result.hits, fmt)
