"""``pinakes_search``'s body: what the tool does, with no MCP framework under it.

fastmcp serves it as the ``pinakes_search`` tool (:func:`pinakes_mcp.toolkit.served_tool`
adds the request's context, the wait for the start-up sync and the tool errors); the stdio
front (:mod:`pinakes_mcp.front`) runs the same function for a search that arrives before
fastmcp has loaded. The signature is the tool's input schema and this docstring its
description, so this module imports pydantic and core but never fastmcp or the MCP SDK.
A caller mistake raises :class:`~pinakes_core.PinakesError`; each caller turns it into
its tool error.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import Field

from pinakes_core.search.arguments import clean_text
from pinakes_core.search.when import WhenError, parse_when
from pinakes_mcp.arguments import Item, Kb
from pinakes_mcp.models import SearchOutput
from pinakes_mcp.results import cap_rows, frontier, merge
from pinakes_mcp.served import ArgumentError, Registry

__all__ = [
    "DEFAULT_K",
    "FRONTIER_LIMIT",
    "MAX_K",
    "MAX_LIST",
    "MAX_QUERY_CHARS",
    "RESULT_BUDGET_TOKENS",
    "pinakes_search",
]

#: hits per search: default and hard cap.
DEFAULT_K = 8
MAX_K = 50
#: longest query accepted (characters).
MAX_QUERY_CHARS = 2_000
#: most items in a list argument (tags, entities, concepts).
MAX_LIST = 20
#: approximate-token budget of one search or links reply; rows beyond it are dropped.
RESULT_BUDGET_TOKENS = 8_000
#: most frontier documents attached to a search reply.
FRONTIER_LIMIT = 10


def _parse_when(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_when(value)
    except WhenError as exc:
        raise ArgumentError(f"{name}: {exc.message}", exc.hint) from None


def pinakes_search(
    registry: Registry,
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
