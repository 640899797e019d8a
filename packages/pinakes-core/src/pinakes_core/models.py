"""Result models: the one JSON shape the library, the CLI's ``--json`` and MCP all return.

``model_dump()`` of each model is exactly what the CLI prints with ``--json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DoctorFinding",
    "DoctorReport",
    "DocumentInfo",
    "DocumentList",
    "DocumentView",
    "EntityNeighbour",
    "FrontierItem",
    "Hit",
    "LinkView",
    "LinksResult",
    "Neighbour",
    "Passage",
    "RankingInfo",
    "RenamedPath",
    "RepeatedId",
    "SearchResult",
    "SkippedFile",
    "Status",
    "SyncReport",
    "UnresolvedLink",
]


#: A passage's first and last page (PDFs only), as every model that locates a passage has them.
PageStart = Annotated[
    int | None,
    Field(
        description="first page of the passage (PDFs only; cite it as the page)",
        exclude_if=lambda v: v is None,
    ),
]
PageEnd = Annotated[
    int | None,
    Field(
        description="last page of the passage, inclusive (PDFs only)",
        exclude_if=lambda v: v is None,
    ),
]


def heading_trail(title: str, heading_path: Sequence[str]) -> list[str]:
    """The document title followed by the heading path, without repeating an H1 equal to it."""
    path = list(heading_path)
    if path and path[0].strip().lower() == title.strip().lower():
        path = path[1:]
    return [title, *path]


class _Model(BaseModel):
    # Deferred: a model's validator is built when the first instance is made, so a command
    # builds only the results it returns (a search: four of twenty; issue 14).
    model_config = ConfigDict(frozen=True, defer_build=True)


class Passage(_Model):
    """Another passage of a hit's document (``group_by="document"``)."""

    chunk: int = Field(description="chunk ordinal within the document")
    heading_path: list[str]
    text: str
    lines: tuple[int, int]
    score: float = Field(description="relevance in [0, 1], as Hit.score")
    page_start: PageStart = None
    page_end: PageEnd = None


def _says(title: str, heading: str) -> bool:
    """Whether ``title`` holds every word of ``heading``, in order and together.

    A frontmatter title that differs from the H1 yet says it ("ADR 0002: Retry policy" over
    "# Retry policy") was repeated in every hit's location (issue 35).
    """
    import re

    def words(text: str) -> str:
        return " " + " ".join(re.findall(r"\w+", text)) + " "

    inner = words(heading)
    return inner.strip() != "" and inner in words(title)


class Hit(_Model):
    """One retrieved chunk.

    ``ranks`` holds the chunk's 1-based rank in every channel that ran (``None`` where the chunk
    was not in that channel's list); ``channel_scores`` holds each channel's raw score and is
    present (in the model and in its JSON) only when the search asked for ``explain``.
    ``duplicates`` and ``passages`` appear only when they have something to say.
    """

    doc_id: str
    chunk: int = Field(description="chunk ordinal within the document")
    path: str
    title: str
    heading_path: list[str]
    text: str
    score: float = Field(
        description="relevance in [0, 1]: the weighted mean of the hit's evidence from every "
        "channel that ran (lexical: share of the query's best possible BM25; semantic: cosine), "
        "after any reranker; comparable across queries and KBs, and never rising with rank"
    )
    lines: tuple[int, int]
    source_type: str = Field(default="markdown", description="markdown | text | pdf | code")
    page_start: PageStart = None
    page_end: PageEnd = None
    ranks: dict[str, int | None]
    reader: float | None = Field(
        default=None,
        description="the reader's probability that this passage answers the query (0-1); "
        "present only on the passages the reader read",
        exclude_if=lambda v: v is None,
    )
    channel_scores: dict[str, float] | None = Field(default=None, exclude_if=lambda v: v is None)
    duplicates: list[str] | None = Field(
        default=None,
        description="paths of other documents holding a near-identical passage, folded into "
        "this hit instead of taking places of their own",
        exclude_if=lambda v: v is None,
    )
    passages: list[Passage] | None = Field(
        default=None,
        description="with group_by='document': the document's next-best passages, best first",
        exclude_if=lambda v: v is None,
    )

    @property
    def location(self) -> str:
        """Where the hit is, for a reader: ``document title › heading path``.

        A leading heading that says what the title says (the usual H1, or a frontmatter title
        that extends it) is not repeated.
        """
        trail = heading_trail(self.title, self.heading_path)
        if len(trail) > 1:
            title, first = trail[0].strip().lower(), trail[1].strip().lower()
            if first and (
                title.startswith(first) or first.startswith(title) or _says(title, first)
            ):
                del trail[1]
        return " › ".join(trail)


class RankingInfo(_Model):
    """How one query was ranked (returned with ``explain``)."""

    shape: dict[str, object] = Field(
        description="what the query looks like: identifiers, quoted phrases, code, the share "
        "of its words that are exact tokens, and whether it reads as a question"
    )
    weights: dict[str, float] = Field(description="each channel's weight in the fused score")
    stages: dict[str, str] = Field(
        default_factory=dict,
        description="gated stages (the adaptive graph reranker) and why each ran or not",
    )


class SearchResult(_Model):
    """The answer to one query.

    ``confidence`` is the calibrated probability that the top hit answers the query, or ``None``
    when it cannot be computed (never invented); ``abstain`` is ``None`` whenever
    ``confidence`` is.
    """

    query: str
    hits: list[Hit]
    confidence: float | None = None
    abstain: bool | None = None
    timings_ms: dict[str, float]
    features: dict[str, float] | None = Field(
        default=None,
        description="the confidence features; only with explain",
        exclude_if=lambda v: v is None,
    )
    note: str | None = Field(
        default=None,
        description="why the result is empty (an unknown tag, a filter matching no document, "
        "a sync still running …); present only when there are no hits",
        exclude_if=lambda v: v is None,
    )
    ranking: RankingInfo | None = Field(
        default=None,
        description="how the query was ranked; only with explain",
        exclude_if=lambda v: v is None,
    )


class SkippedFile(_Model):
    """A file sync left out, with the reason."""

    path: str
    reason: str


class RenamedPath(_Model):
    """A document that moved and kept its ULID."""

    doc_id: str
    old: str = Field(alias="from")
    new: str = Field(alias="to")
    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)


class RepeatedId(_Model):
    """A document whose frontmatter id another document already holds, so it got its own id.

    Docusaurus, MkDocs and Hugo ids are page slugs, repeated by every versioned or translated
    copy of a page; sync reports these in one summary warning and lists them here.
    """

    path: str = Field(description="the document that got an id of its own")
    frontmatter_id: str = Field(description="the id its frontmatter gives")
    also: str = Field(description="the document that holds that id")
    doc_id: str = Field(description="the id this document got instead")


class SyncReport(_Model):
    """What one ``sync`` did."""

    added: list[str]
    changed: list[str]
    removed: list[str]
    renamed: list[RenamedPath]
    unchanged: int
    skipped: list[SkippedFile]
    warnings: list[str]
    chunks_embedded: int
    chunks_reused: int
    embed_seconds: float
    chunks_per_second: float | None
    seconds: float = Field(description="the whole sync's wall time, every part below included")
    parts_s: dict[str, float] = Field(
        default_factory=dict,
        description="seconds of the sync's parts (index: reading, embedding and writing the "
        "store; self-calibration; vector snapshot), when KB.sync measured them",
        exclude_if=lambda v: not v,
    )
    rebuilt: str | None = Field(default=None, description="why the store was rebuilt, if it was")
    pdfs_extracted: int = Field(default=0, description="PDFs whose text was extracted")
    pdfs_from_cache: int = Field(
        default=0, description="PDFs whose text came from the extraction cache"
    )
    repeated_ids: list[RepeatedId] = Field(
        default_factory=list,
        description="documents whose frontmatter id another holds (one summary warning)",
        exclude_if=lambda v: not v,
    )


class LinkView(_Model):
    """An authored link as stored (resolution is the graph plugin's job)."""

    target: str
    rel: str
    origin: str
    dst_doc: str | None
    dst_kb: str | None = Field(
        default=None,
        description="the other KB a pnk:// link names (as written), else absent",
        exclude_if=lambda v: v is None,
    )


class DocumentView(_Model):
    """A document with its metadata, as ``read`` returns it.

    ``text`` is the whole file, or the slice asked for (a line range, a heading section or a
    page range, then cut to a token budget); ``lines`` says which lines of the file it holds.
    For a PDF the "file" is its extracted text: each page under a ``[page N]`` line.
    """

    doc_id: str
    uri: str
    path: str
    title: str
    tags: list[str]
    aliases: list[str]
    links: list[LinkView]
    chunks: int
    modified: float
    text: str
    meta: dict[str, object] = Field(
        default_factory=dict, description="the frontmatter fields (scalars and lists)"
    )
    lines: tuple[int, int] | None = Field(
        default=None, description="first and last line of `text` in the file, 1-based, inclusive"
    )
    section: str | None = Field(
        default=None, description="the heading path whose section `text` holds, if one was asked"
    )
    headings: list[str] = Field(
        default_factory=list, description="the document's heading paths (at most 50)"
    )
    tokens: int | None = Field(
        default=None, description="approximate tokens in `text` (characters / 4)"
    )
    total_tokens: int | None = Field(
        default=None, description="approximate tokens in the slice before the budget cut it"
    )
    truncated: bool = Field(default=False, description="true when `text` was cut to the budget")
    source_type: str = Field(default="markdown", description="markdown | text | pdf | code")
    page_count: int | None = Field(
        default=None,
        description="pages in the document (PDFs only)",
        exclude_if=lambda v: v is None,
    )
    pages: tuple[int, int] | None = Field(
        default=None,
        description="first and last page `text` holds (PDFs only)",
        exclude_if=lambda v: v is None,
    )


class DocumentInfo(_Model):
    """One document in a listing (``KB.documents``, ``KB.recent``): no text."""

    doc_id: str
    uri: str
    path: str
    title: str
    tags: list[str]
    modified: float = Field(description="file modification time, UNIX seconds")


class DocumentList(_Model):
    """A page of documents, newest first for ``recent``, by path for ``documents``."""

    documents: list[DocumentInfo]
    total: int = Field(description="documents matching, across all pages")
    next_offset: int | None = Field(description="offset of the next page; null on the last")


class Status(_Model):
    """The state of a KB and its store."""

    name: str
    kb_id: str
    root: str
    synced: bool
    documents: int
    chunks: int
    vectors: int
    model: str | None
    dim: int | None
    schema_version: int | None
    last_sync: float | None
    stale: dict[str, int] = Field(description="files new / changed / removed since the last sync")
    store_bytes: int
    entities: int | None = Field(
        default=None, description="entity nodes (pinakes-ner); null when NER is not in use"
    )
    mentions: int | None = Field(
        default=None, description="chunk-entity mention edges; null when NER is not in use"
    )


class Neighbour(_Model):
    """A document reached from the start document by following links (DESIGN §6)."""

    doc_id: str
    title: str
    path: str
    rel: str = Field(description="relation of the last hop, e.g. links-to, depends-on")
    direction: str = Field(
        description="'out' (the start links to it), 'in' (it links back) or 'both' (the two "
        "link each other with this relation)"
    )
    distance: int = Field(description="hops from the start document")
    score: float = Field(description="query similarity with a query, else edge weight / distance")
    via: str | None = Field(default=None, description="doc_id of the previous hop")
    kb: str | None = Field(
        default=None,
        description="the fleet KB holding this neighbour when it is in another KB (one hop "
        "across, never expanded further); absent for this KB's documents",
        exclude_if=lambda v: v is None,
    )


class FrontierItem(_Model):
    """A next hop that was not expanded (depth, fan-out, row or token limit)."""

    doc_id: str
    rel: str
    reason: str = Field(description="depth | fanout | rows | tokens")
    path: str = Field(default="", description="the document's KB-relative path")
    kb: str | None = Field(default=None, description="the KB holding it, when not this one")


class UnresolvedLink(_Model):
    """A link whose target does not resolve to a document."""

    target: str
    reason: str


class EntityNeighbour(_Model):
    """A document that mentions the same named entities as the start document (pinakes-ner)."""

    doc_id: str
    title: str
    path: str
    entities: list[str] = Field(description="the shared entities, most specific first (at most 5)")
    score: float = Field(
        description="sum over shared entities of log(documents / documents naming it)"
    )


class LinksResult(_Model):
    """The answer of ``KB.links``: neighbours, frontier, unresolved links and confidence."""

    doc_id: str
    title: str
    rel: str | None = Field(description="the relation asked for, normalised")
    matched_rel: str | None = Field(
        default=None, description="the typed relation a free-text rel was matched to"
    )
    depth: int = Field(description="depth served (asked depth capped at 3)")
    depth_asked: int
    neighbours: list[Neighbour]
    frontier: list[FrontierItem]
    unresolved: list[UnresolvedLink]
    confidence: float | None
    truncated: bool
    entity_neighbours: list[EntityNeighbour] = Field(
        default_factory=list,
        description="documents mentioning the same named entities (with pinakes-ner enabled)",
    )


class DoctorFinding(_Model):
    """One thing ``pnk doctor`` found."""

    check: str
    severity: str = Field(description="error | warning | info")
    message: str
    items: list[str] = []
    fixable: bool = False


class DoctorReport(_Model):
    """All findings, plus what ``--fix`` did."""

    findings: list[DoctorFinding]
    fixed: list[str] = []
