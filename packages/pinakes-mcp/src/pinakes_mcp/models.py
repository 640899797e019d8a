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
    "WriteOutput",
]


class SearchHit(Hit):
    """A core Hit, plus the KB it came from when several are served."""

    kb: str | None = Field(
        default=None,
        description="name of the KB holding the hit (only when the server serves several KBs)",
        exclude_if=lambda v: v is None,
    )
    text_truncated: bool = Field(
        default=False,
        description="true when this hit's text was cut to fit the reply budget (read the document for all of it)",
        exclude_if=lambda v: not v,
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
    note: str | None = Field(
        default=None,
        description="why there are no hits (unknown tag, filter matching nothing, sync running)",
        exclude_if=lambda v: v is None,
    )
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
    """`pinakes_read` output: core's `DocumentView` JSON (sliced and capped) plus its KB."""

    kb: str = Field(description="name of the KB holding the document")
    notes: list[str] = Field(
        default_factory=list, description="what the server changed or capped, in plain words"
    )


class LinksOutput(LinksResult):
    """`pinakes_links` output: core's `LinksResult` JSON plus the KB and what was capped.

    `depth` is the depth served (at most 3) and `depth_asked` what the caller asked.
    """

    kb: str = Field(description="name of the KB holding the document")
    notes: list[str] = Field(
        default_factory=list, description="what the server changed or capped, in plain words"
    )


class WriteOutput(BaseModel):
    """What a write tool did: the note, the action and the sync that indexed it."""

    model_config = ConfigDict(frozen=True)

    kb: str = Field(description="name of the KB written to")
    path: str = Field(description="the note's KB-relative path")
    doc_id: str | None = Field(description="the note's ULID once indexed (null if not indexed)")
    action: str = Field(description="created | overwritten | appended | linked")
    section: str | None = Field(default=None, description="the section appended to, if any")
    chars: int = Field(description="characters written")
    synced: bool = Field(description="true when the change is indexed (searchable) already")
    notes: list[str] = Field(default_factory=list, description="anything the caller should know")


class KbInfo(Status):
    """One served KB: core's `Status` JSON plus what this server offers for it."""

    graph: bool = Field(description="whether pinakes_links works (the graph plugin is installed)")
    watching: bool = Field(description="whether the server re-syncs this KB when files change")


class KbsOutput(BaseModel):
    """`pinakes_kbs` output."""

    model_config = ConfigDict(frozen=True)

    kbs: list[KbInfo]
