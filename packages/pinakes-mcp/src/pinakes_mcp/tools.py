"""The read-only MCP tools and the document resource: each parses, calls core, caps the reply.

The docstrings below are what an agent reads when it lists the tools: they say what each tool
is for, its defaults and units, and how to use it in a loop. Argument bounds are pydantic
``Field`` limits, so a bad argument is refused by the protocol layer before any code runs.
:func:`register` adds them to the server it is given; the write tools and ``pinakes_recent``
live in :mod:`pinakes_mcp.writes`, what both share in :mod:`pinakes_mcp.toolkit`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastmcp.exceptions import ResourceError, ToolError
from fastmcp.server.context import Context
from pydantic import Field

from pinakes_core import PinakesError
from pinakes_core.models import Neighbour
from pinakes_core.read.sections import approx_tokens, truncate
from pinakes_core.search.arguments import clean_text
from pinakes_core.search.when import WhenError, parse_when
from pinakes_mcp.models import (
    KbInfo,
    KbsOutput,
    LinksOutput,
    ReadOutput,
    SearchOutput,
)
from pinakes_mcp.results import cap_rows, fit_lists, frontier, merge
from pinakes_mcp.served import ArgumentError
from pinakes_mcp.toolkit import READ_ONLY, Doc, Item, Kb, registry_of, tool_errors, when_ready

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

#: hits per search: default and hard cap.
DEFAULT_K = 8
MAX_K = 50
#: longest query accepted (characters).
MAX_QUERY_CHARS = 2_000
#: most items in a list argument (tags, entities, concepts).
MAX_LIST = 20
#: deepest link traversal served, whatever is asked (DESIGN §6).
MAX_DEPTH = 3
#: pinakes_read's text cap in approximate tokens (characters / 4): default and hard cap.
DEFAULT_READ_TOKENS = 4_000
MAX_READ_TOKENS = 20_000
#: approximate-token budget of one search or links reply; rows beyond it are dropped.
RESULT_BUDGET_TOKENS = 8_000
#: most frontier documents attached to a search reply.
FRONTIER_LIMIT = 10
#: the document resource template.
DOCUMENT_URI = "pnk://{kb}/{doc_id}"
GRAPH_MISSING = "pinakes_links needs the pinakes-graph plugin: uv pip install pinakes-graph"


def _parse_when(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_when(value)
    except WhenError as exc:
        raise ArgumentError(f"{name}: {exc.message}", exc.hint) from None


def pinakes_search(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            max_length=MAX_QUERY_CHARS,
            description=(
                "What to look for: a question, keywords or an exact identifier (at most 2,000 "
                "characters). Plain text: quotes and operators are not a query language."
            ),
        ),
    ],
    kb: Kb = None,
    k: Annotated[
        int, Field(ge=1, le=MAX_K, description="Number of hits, 1-50 (default 8).")
    ] = DEFAULT_K,
    tags: Annotated[
        list[Item] | None,
        Field(
            max_length=MAX_LIST,
            description="Only documents carrying all of these tags (or tags nested under them).",
        ),
    ] = None,
    path: Annotated[
        str | None,
        Field(
            max_length=500,
            description="Only documents under this KB-relative folder prefix, e.g. 'runbooks/'.",
        ),
    ] = None,
    entities: Annotated[
        list[Item] | None,
        Field(
            max_length=MAX_LIST,
            description="Exact names or identifiers to match as keywords besides the query, e.g. ['E-4012'].",
        ),
    ] = None,
    concepts: Annotated[
        list[Item] | None,
        Field(
            max_length=MAX_LIST,
            description="Extra phrases to match by meaning besides the query.",
        ),
    ] = None,
    meta: Annotated[
        list[Item] | None,
        Field(
            max_length=MAX_LIST,
            description=(
                "Frontmatter field filters, all of which must hold: 'status=draft', "
                "'status!=done', 'priority>2', 'due<2025-01-01', 'stage in draft,review', "
                "'reviewed exists'."
            ),
        ),
    ] = None,
    source_type: Annotated[
        list[Literal["markdown", "text", "pdf", "code"]] | None,
        Field(
            max_length=4,
            description="Only documents of these source types (any of them), e.g. ['pdf'].",
        ),
    ] = None,
    modified_after: Annotated[
        str | None,
        Field(
            max_length=40,
            description="Only files modified at or after this: an ISO date ('2025-05-01', "
            "'2025-05-01T12:00') or an age ('7d', '12h', '2w').",
        ),
    ] = None,
    modified_before: Annotated[
        str | None,
        Field(max_length=40, description="Only files modified before this (same forms)."),
    ] = None,
    docs: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=1_000)]] | None,
        Field(
            max_length=MAX_LIST,
            description="Only these documents (doc_id, pnk:// URI or KB-relative path).",
        ),
    ] = None,
    per_doc: Annotated[
        bool,
        Field(
            description="true (default): k distinct documents, each hit its best passage with "
            "up to two more in `passages`; false: k passages, several of one document possible."
        ),
    ] = True,
    min_score: Annotated[
        float | None,
        Field(ge=0.0, le=1.0, description="Leave out hits whose score is below this (0-1)."),
    ] = None,
) -> SearchOutput:
    """Search the knowledge bases (keywords + meaning, fused) and get ranked documents.

    Use it first for anything the user's notes might answer. Each hit is one document's best
    passage (a chunk under one heading), with up to two more of its passages in `passages`:
    `doc_id`, `path`, `title`, `heading_path`, `text`, `lines`,
    `source_type` (markdown, text, pdf, code) and its `score`: its relevance in [0, 1] (the
    weighted mean of keyword and meaning evidence, comparable across queries and KBs; around
    0.5 and above is a strong match); a PDF hit also has `page_start`/`page_end` (cite the
    page); `kb` names the KB when several are served. Omitting `kb` searches every served KB
    and merges their hits by score. `per_doc: false` returns k passages instead of k distinct
    documents (the same as `pnk search --per-chunk`); `min_score` drops weak hits.

    Reading the reply:
    - `confidence` is a calibrated probability (0-1) that the top hit answers the query;
      null means it could not be computed.
    - `abstain: true` means the KB probably does not know: say so rather than guess.
    - `reader` (only on the first passages, when the KB reads with its reader model) is that
      model's probability (0-1) that the passage answers the query; it is part of `score`.
    - `frontier` lists up to 10 documents the hit documents link to: the next hop.
    - `truncated: true` means hits were dropped to keep the reply under about 8,000 tokens
      (tokens are approximated as characters / 4).

    - `note` (only with no hits) says why: an unknown tag, a filter matching no document,
      a sync still running.

    How to loop: prefer refining the query over raising `k`: other words, the exact
    identifier in `entities`, a `tags`, `path`, `meta` or date filter. The default k=8 is
    usually enough.
    Read a hit's whole document with pinakes_read(doc=<doc_id>, kb=<kb>), or follow its links
    with pinakes_links.
    """
    started = time.perf_counter()
    registry = registry_of(ctx)
    with tool_errors():
        prefix = registry.check_prefix(path) if path else None
        after = _parse_when(modified_after, "modified_after")
        before = _parse_when(modified_before, "modified_before")
        chosen = registry.select(kb)
        wanted: dict[str, list[str]] = {}
        for ref in docs or ():
            found, doc_id = registry.locate(ref, kb)
            wanted.setdefault(found.name, []).append(doc_id)
        if docs:
            chosen = [served for served in chosen if served.name in wanted]
        results = []
        for served in chosen:
            with registry.using(served) as handle:
                result = handle.search(
                    query,
                    k=k,
                    tags=tags or (),
                    path=prefix,
                    doc_ids=wanted.get(served.name, ()),
                    meta=meta or (),
                    source_type=source_type or (),
                    modified_after=after,
                    modified_before=before,
                    entities=entities or (),
                    concepts=concepts or (),
                    group_by="document" if per_doc else "chunk",
                    min_score=min_score,
                )
            results.append((served, result))
        merged, confidence, abstain = merge(results, k=k, multi=registry.multi)
        hits, truncated = cap_rows(merged, RESULT_BUDGET_TOKENS)
        t0 = time.perf_counter()
        linked = frontier(registry, hits, limit=FRONTIER_LIMIT)
    timings = (
        dict(results[0][1].timings_ms)
        if len(results) == 1
        else {f"kb:{served.name}": r.timings_ms.get("total", 0.0) for served, r in results}
    )
    timings["frontier"] = round((time.perf_counter() - t0) * 1000, 3)
    timings["server_total"] = round((time.perf_counter() - started) * 1000, 3)
    notes = (
        [
            f"{len(hits)} of {len(merged)} hits fit the ~{RESULT_BUDGET_TOKENS}-token budget; "
            "refine the query or add filters rather than raising k."
        ]
        if truncated
        else []
    )
    if hits and hits[0].text_truncated:
        notes.append(
            "The top hit's text was cut to fit the reply; read it with "
            f"pinakes_read(doc={hits[0].doc_id!r}) and a section or line range."
        )
    note = None
    if not hits:
        found_notes = [
            (f"{served.name}: " if len(results) > 1 else "") + r.note
            for served, r in results
            if r.note
        ]
        note = " ".join(dict.fromkeys(found_notes)) or None
    return SearchOutput(
        query=clean_text(query, "query"),
        note=note,
        hits=hits,
        confidence=confidence,
        abstain=abstain,
        timings_ms=timings,
        frontier=linked,
        truncated=truncated,
        notes=notes,
    )


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
    (pinakes_search, "Search knowledge bases"),
    (pinakes_read, "Read a document"),
    (pinakes_links, "Follow a document's links"),
    (pinakes_kbs, "List the served knowledge bases"),
)


def register(server: FastMCP[Any]) -> None:
    """Add the four read-only tools and the ``pnk://{kb}/{doc_id}`` resource template to ``server``.

    Every tool waits for the start-up sync of the served KBs (relaying its progress) and runs
    in a worker thread.
    """
    for fn, title in _TOOLS:
        server.tool(when_ready(fn), title=title, annotations=READ_ONLY)
    server.resource(
        DOCUMENT_URI,
        name="pinakes_document",
        title="Pinakes document",
        description="The current text of one document: pnk://<kb name or KB ULID>/<doc ULID>.",
        mime_type="text/markdown",
    )(document_resource)
