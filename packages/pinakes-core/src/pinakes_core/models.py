"""Result models: the one JSON shape the library, the CLI's ``--json`` and MCP all return.

``model_dump()`` of each model is exactly what the CLI prints with ``--json``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DocumentView",
    "Hit",
    "LinkView",
    "RenamedPath",
    "SearchResult",
    "SkippedFile",
    "Status",
    "SyncReport",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Hit(_Model):
    """One retrieved chunk.

    ``ranks`` holds the chunk's 1-based rank in every channel that ran (``None`` where the chunk
    was not in that channel's list); ``channel_scores`` holds each channel's raw score and is
    present (in the model and in its JSON) only when the search asked for ``explain``.
    """

    doc_id: str
    chunk: int = Field(description="chunk ordinal within the document")
    path: str
    title: str
    heading_path: list[str]
    text: str
    score: float = Field(description="fused RRF score")
    lines: tuple[int, int]
    ranks: dict[str, int | None]
    channel_scores: dict[str, float] | None = Field(default=None, exclude_if=lambda v: v is None)


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
    seconds: float
    rebuilt: str | None = Field(default=None, description="why the store was rebuilt, if it was")


class LinkView(_Model):
    """An authored link as stored (resolution is the graph plugin's job)."""

    target: str
    rel: str
    origin: str
    dst_doc: str | None


class DocumentView(_Model):
    """A document with its metadata, as ``read`` returns it."""

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
