"""The read-only MCP tools and the document resource: each parses, calls core, caps the reply.

The docstrings below are what an agent reads when it lists the tools: they say what each tool
is for, its defaults and units, and how to use it in a loop. Argument bounds are pydantic
``Field`` limits, so a bad argument is refused by the protocol layer before any code runs.
:func:`register` adds them to the server it is given; the write tools and ``pinakes_recent``
live in :mod:`pinakes_mcp.writes`, what both share in :mod:`pinakes_mcp.toolkit`.
``pinakes_search``'s body is :mod:`pinakes_mcp.search`, written without fastmcp so that the
stdio front can run it before fastmcp has loaded; it is registered here like the others.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastmcp.exceptions import ResourceError, ToolError
from fastmcp.server.context import Context
from pydantic import Field

from pinakes_core import PinakesError
from pinakes_core.models import Neighbour
from pinakes_core.read.sections import approx_tokens, truncate
from pinakes_mcp.models import KbInfo, KbsOutput, LinksOutput, ReadOutput
from pinakes_mcp.results import fit_lists
from pinakes_mcp.search import (
    DEFAULT_K,
    FRONTIER_LIMIT,
    MAX_K,
    MAX_LIST,
    MAX_QUERY_CHARS,
    RESULT_BUDGET_TOKENS,
    pinakes_search,
)
from pinakes_mcp.toolkit import (
    READ_ONLY,
    Doc,
    Kb,
    registry_of,
    served_tool,
    tool_errors,
    when_ready,
)

if TYPE_CHECKING:
    from fastmcp import FastMCP

__all__ = [
    "DEFAULT_K",
    "DEFAULT_READ_TOKENS",
    "DOCUMENT_URI",
    "FRONTIER_LIMIT",
    "GRAPH_MISSING",
    "MAX_DEPTH",
    "MAX_K",
    "MAX_LIST",
    "MAX_QUERY_CHARS",
    "MAX_READ_TOKENS",
    "RESULT_BUDGET_TOKENS",
    "pinakes_kbs",
    "pinakes_links",
    "pinakes_read",
    "pinakes_search",
    "register",
]

#: deepest link traversal served, whatever is asked (DESIGN §6).
MAX_DEPTH = 3
#: pinakes_read's text cap in approximate tokens (characters / 4): default and hard cap.
DEFAULT_READ_TOKENS = 4_000
MAX_READ_TOKENS = 20_000
#: the document resource template.
DOCUMENT_URI = "pnk://{kb}/{doc_id}"
GRAPH_MISSING = "pinakes_links needs the pinakes-graph plugin: uv pip install pinakes-graph"


def pinakes_read(
    ctx: Context,
    doc: Doc,
    kb: Kb = None,
    section: Annotated[
        str | None,
        Field(
            max_length=500,
            description=(
                "Return only this heading's section: a heading's text, or a heading path such "
                "as 'Raft › Log replication' (a hit's heading_path joined with ' › ')."
            ),
        ),
    ] = None,
    start_line: Annotated[
        int | None,
        Field(
            ge=1,
            le=10_000_000,
            description="Return lines from this one (1-based, as a hit's `lines`); not with section.",
        ),
    ] = None,
    end_line: Annotated[
        int | None,
        Field(
            ge=1,
            le=10_000_000,
            description="Return lines up to this one, inclusive (default: the end of the file).",
        ),
    ] = None,
    page_start: Annotated[
        int | None,
        Field(
            ge=1,
            le=100_000,
            description="PDFs only: return pages from this one (1-based, as a hit's page_start).",
        ),
    ] = None,
    page_end: Annotated[
        int | None,
        Field(
            ge=1,
            le=100_000,
            description="PDFs only: return pages up to this one, inclusive (default: page_start).",
        ),
    ] = None,
    max_tokens: Annotated[
        int,
        Field(
            ge=100,
            le=MAX_READ_TOKENS,
            description="Cap on the returned text in approximate tokens (characters / 4); default 4,000, at most 20,000.",
        ),
    ] = DEFAULT_READ_TOKENS,
) -> ReadOutput:
    """Read one document, one heading section, or a line range of it, with its metadata.

    Returns `title`, `tags`, `aliases`, frontmatter fields in `meta`, authored `links` (with the
    resolved `dst_doc` where a target resolves), `headings` (usable as `section`), the `uri`,
    and the current `text`, capped at `max_tokens` approximate tokens (characters / 4; default
    4,000, at most 20,000); `lines` says which lines of the file `text` holds, `truncated: true`
    that the text was cut, `total_tokens` how long the slice is.

    A PDF's text is its extracted text, each page under a `[page N]` line; `page_count` says
    how many pages it has and `pages` which ones `text` holds.

    How to loop: read a hit's document when its passage is not enough. For a long document ask
    for one `section` (see `headings`), the lines around a hit (`start_line`/`end_line`
    from its `lines`), or for a PDF the hit's pages (`page_start`/`page_end`), instead of
    raising `max_tokens`. Follow a link by reading its
    `dst_doc`, or use pinakes_links for more than one hop.
    """
    registry = registry_of(ctx)
    with tool_errors():
        if end_line is not None and start_line is None:
            start_line = 1
        lines = (start_line, end_line or 10_000_000) if start_line is not None else None
        if page_end is not None and page_start is None:
            page_start = 1
        pages = (page_start, page_end or page_start) if page_start is not None else None
        served, doc_id = registry.locate(doc, kb)
        with registry.using(served) as handle:
            view = registry.check_inside(
                served,
                handle.read(
                    doc_id, lines=lines, section=section, pages=pages, max_tokens=max_tokens
                ),
            )
    output = ReadOutput.model_validate({**view.model_dump(), "kb": served.name})
    # The metadata has its own budget beside the text's (a document may carry thousands of
    # links or tags, and a hundred frontmatter fields).
    output, notes = fit_lists(
        output,
        RESULT_BUDGET_TOKENS + approx_tokens(output.text),
        ("links", "meta", "aliases", "tags", "headings"),
    )
    return output.model_copy(update={"notes": notes}) if notes else output


def pinakes_links(
    ctx: Context,
    doc: Doc,
    kb: Kb = None,
    rel: Annotated[
        str | None,
        Field(
            max_length=200,
            description="Follow only this relation, e.g. 'cites' or 'links-to'; omit for all.",
        ),
    ] = None,
    direction: Annotated[
        Literal["out", "in", "both"],
        Field(description="'out': links this document makes; 'in': links to it; 'both' (default)."),
    ] = "both",
    depth: Annotated[
        int,
        Field(
            ge=1,
            le=100,
            description="Hops to follow (default 1). At most 3 are served; more is served as 3.",
        ),
    ] = 1,
    query: Annotated[
        str | None,
        Field(
            max_length=MAX_QUERY_CHARS,
            description="Rank neighbours by similarity to this text (and compute a confidence).",
        ),
    ] = None,
) -> LinksOutput:
    """Follow a document's links: what it links to and what links to it.

    Returns `neighbours` (doc_id, title, path, rel, direction 'out' or 'in', distance in
    hops, score, via = the previous hop; `kb` when the neighbour is in another served KB, a
    hop that is never expanded further), a `frontier` of next hops that were not expanded
    (with the reason: depth, fanout, rows or tokens), `unresolved` link targets with the
    reason, `confidence`, `truncated` (rows dropped to keep the reply under about 8,000 tokens,
    characters / 4), `depth` served and `depth_asked`. With `query`, neighbours are ranked by
    similarity to it and `confidence` is computed; without, they are ranked by link weight and
    distance and `confidence` is null. A free-text `rel` ("relies on") is matched to the KB's
    typed relation, reported as `matched_rel`. With NER enabled (pinakes-ner),
    `entity_neighbours` lists up to 10 documents that name the same people, places or
    organisations, with the shared `entities`: related notes that no link connects.

    How to loop: take one hop (depth=1, the default) and look before asking for depth 3; depth
    is served at most 3 and `notes` says when it was lowered. Filter with `rel` and
    `direction` rather than going deeper. Read a neighbour with pinakes_read(doc=<doc_id>,
    kb=<its kb>), and call pinakes_links there to go on inside that KB.
    Needs the pinakes-graph plugin.
    """
    registry = registry_of(ctx)
    with tool_errors():
        served, doc_id = registry.locate(doc, kb)
        if not callable(getattr(served.kb, "links", None)):  # a core older than the links API
            raise ToolError(GRAPH_MISSING, log_level=logging.WARNING)
        served_depth = min(depth, MAX_DEPTH)
        with registry.using(served) as handle:
            result = handle.links(
                doc_id, rel=rel, direction=direction, depth=served_depth, query=query
            )
    notes = (
        [f"depth {depth} was asked; depth {served_depth} is served (the cap)."]
        if served_depth < depth
        else []
    )
    output = LinksOutput.model_validate(
        {
            **result.model_dump(),
            "depth": served_depth,
            "depth_asked": depth,
            "kb": served.name,
            "notes": notes,
        }
    )
    # The note added below when rows are dropped must fit too: reserve room for it.
    used = approx_tokens(output.model_dump_json(exclude={"neighbours"})) + 50
    kept: list[Neighbour] = []
    for neighbour in output.neighbours:
        used += approx_tokens(neighbour.model_dump_json())
        if kept and used > RESULT_BUDGET_TOKENS:
            break
        kept.append(neighbour)
    if len(kept) < len(output.neighbours):
        dropped = len(output.neighbours) - len(kept)
        output = output.model_copy(
            update={
                "neighbours": kept,
                "truncated": True,
                "notes": [
                    *output.notes,
                    f"{dropped} more neighbours did not fit the ~{RESULT_BUDGET_TOKENS}-token "
                    "budget; filter with rel or direction.",
                ],
            }
        )
    # Unresolved targets and the frontier are not capped by the graph plugin's row budget.
    output, capped = fit_lists(output, RESULT_BUDGET_TOKENS, ("unresolved", "frontier"))
    if capped:
        output = output.model_copy(update={"truncated": True, "notes": [*output.notes, *capped]})
    return output


def pinakes_kbs(ctx: Context) -> KbsOutput:
    """List the knowledge bases this server serves; call it once to see what can be searched.

    Each entry has `name` (pass it as `kb` to the other tools), `kb_id`, `documents`,
    `chunks` and `vectors` counts, the embedding `model`, `last_sync` (UNIX seconds), `stale`
    (files new / changed / removed since the last sync: the index may miss them), `graph`
    (pinakes_links works) and `watching` (the server re-syncs when files change).
    """
    registry = registry_of(ctx)
    kbs = []
    with tool_errors():
        for served in registry:
            with registry.using(served) as handle:
                status = handle.status()
            kbs.append(
                KbInfo.model_validate(
                    {
                        **status.model_dump(),
                        "name": served.name,  # the name to pass as `kb` (a fleet name, maybe)
                        "graph": served.graph,
                        "watching": served.watching,
                    }
                )
            )
    return KbsOutput(kbs=kbs)


def document_resource(kb: str, doc_id: str, ctx: Context) -> str:
    """The current text of one document, by KB name (or KB ULID) and document ULID.

    Capped like pinakes_read at its largest (20,000 approximate tokens); a cut text ends with
    a line saying so.
    """
    registry = registry_of(ctx)
    try:
        served, found = registry.locate(f"pnk://{kb}/{doc_id}")
        with registry.using(served) as handle:
            view = registry.check_inside(served, handle.read(found))
    except PinakesError as exc:
        # The caller's mistake: one warning line, no traceback (server._OneLineCallerMistakes).
        raise ResourceError(str(exc), log_level=logging.WARNING) from None
    text, cut = truncate(view.text, MAX_READ_TOKENS)
    if cut:
        text += (
            f"\n[… cut at ~{MAX_READ_TOKENS} tokens of {approx_tokens(view.text)}; "
            "read sections with pinakes_read]\n"
        )
    return text


_TOOLS = (
    (served_tool(pinakes_search), "Search knowledge bases"),
    (when_ready(pinakes_read), "Read a document"),
    (when_ready(pinakes_links), "Follow a document's links"),
    (when_ready(pinakes_kbs), "List the served knowledge bases"),
)


def register(server: FastMCP[Any]) -> None:
    """Add the four read-only tools and the ``pnk://{kb}/{doc_id}`` resource template to ``server``.

    Every tool waits for the start-up sync of the served KBs (relaying its progress) and runs
    in a worker thread.
    """
    for tool, title in _TOOLS:
        server.tool(tool, title=title, annotations=READ_ONLY)
    server.resource(
        DOCUMENT_URI,
        name="pinakes_document",
        title="Pinakes document",
        description="The current text of one document: pnk://<kb name or KB ULID>/<doc ULID>.",
        mime_type="text/markdown",
    )(document_resource)
