"""The JSON the MCP tools return: core's result models plus what serving several KBs adds.

Each tool's structured output is one of these models. Where a core model exists
(SearchResult, DocumentView,
Status) the output carries the same fields under the same names, so an
agent sees the JSON the CLI prints with `--json`, plus the fields documented here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pinakes_core import DocumentView, Hit, Status
from pinakes_core.models import LinksResult

__all__ = [
    "FrontierDoc",
    "KbInfo",
    "KbsOutput",
    "LinksOutput",
    "ReadOutput",
    "SearchHit",
    "SearchOutput",
]


class SearchHit(Hit):
    """A core Hit, plus the KB it came from when several are served."""

    kb: str | None = Field(
        default=None,
        description="name of the KB holding the hit (only when the server serves several KBs)",
        exclude_if=lambda v: v is None,
    )


class FrontierDoc(BaseModel):
    """A document linked from a hit's document: a candidate for the next hop."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    title: str
    rel: str = Field(description="the link's relation, e.g. links-to, cites")
    kb: str = Field(description="name of the KB holding the document")
    via: str = Field(description="doc_id of the hit document whose link leads here")


class SearchOutput(BaseModel):
    """`pinakes_search` output: core's `SearchResult` JSON plus `frontier` and `truncated`."""

    model_config = ConfigDict(frozen=True)

    query: str
    hits: list[SearchHit]
    confidence: float | None = Field(
        default=None,
        description="calibrated probability that the top hit answers the query; null = unknown",
    )
    abstain: bool | None = Field(
        default=None, description="true when confidence is below the KB's abstain threshold"
    )
    timings_ms: dict[str, float]
    frontier: list[FrontierDoc] = Field(
        default_factory=list, description="documents the hit documents link to (at most 10)"
    )
    truncated: bool = Field(
        default=False, description="true when hits were dropped to fit the token budget"
    )
    notes: list[str] = Field(
        default_factory=list, description="what the server changed or capped, in plain words"
    )


class ReadOutput(DocumentView):
    """`pinakes_read` output: core's `DocumentView` JSON, capped, plus where it came from."""

    kb: str = Field(description="name of the KB holding the document")
    section: str | None = Field(
        default=None, description="the heading whose section `text` holds, if one was asked"
    )
    headings: list[str] = Field(
        default_factory=list,
        description="the document's headings (at most 50), usable as `section`",
    )
    tokens: int = Field(description="approximate tokens in `text` (characters / 4)")
    total_tokens: int = Field(
        description="approximate tokens in the whole document or section before capping"
    )
    truncated: bool = Field(description="true when `text` was cut to fit max_tokens")


class LinksOutput(LinksResult):
    """`pinakes_links` output: core's `LinksResult` JSON plus the KB and what was capped.

    `depth` is the depth served (at most 3) and `depth_asked` what the caller asked.
    """

    kb: str = Field(description="name of the KB holding the document")
    notes: list[str] = Field(
        default_factory=list, description="what the server changed or capped, in plain words"
    )


class KbInfo(Status):
    """One served KB: core's `Status` JSON plus what this server offers for it."""

    graph: bool = Field(description="whether pinakes_links works (the graph plugin is installed)")
    watching: bool = Field(description="whether the server re-syncs this KB when files change")


class KbsOutput(BaseModel):
    """`pinakes_kbs` output."""

    model_config = ConfigDict(frozen=True)

    kbs: list[KbInfo]
