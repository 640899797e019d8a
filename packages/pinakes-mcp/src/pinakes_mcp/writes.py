"""Opt-in write tools (``--allow-write``) and ``pinakes_recent``.

Each write tool confines its path exactly like a read (:func:`pinakes_core.manage.writing.confine`),
writes atomically, then syncs the KB before it returns, so the next search sees the change.
Annotations tell a host which calls can destroy content (``pinakes_write_note`` with
``overwrite``) and which are safe to repeat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastmcp.server.context import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from pinakes_core import DocumentNotFoundError, PinakesError
from pinakes_core.manage.writing import MAX_WRITE_CHARS, WriteResult, append, write_note
from pinakes_core.models import DocumentList
from pinakes_mcp.models import WriteOutput
from pinakes_mcp.served import ArgumentError, Registry, ServedKB
from pinakes_mcp.toolkit import Doc, Kb, registry_of, tool_errors, when_ready

if TYPE_CHECKING:
    from fastmcp import FastMCP

__all__ = [
    "APPEND",
    "LINK",
    "RECENT",
    "WRITE_NOTE",
    "pinakes_append",
    "pinakes_link",
    "pinakes_recent",
    "pinakes_write_note",
    "register",
]

#: may replace a note's content (overwrite=true); repeating a call changes nothing more.
WRITE_NOTE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
#: adds text; every repeat adds it again.
APPEND = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
#: adds a sidecar link; a repeat is refused ("already links"), so it changes nothing more.
LINK = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
RECENT = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

_Path = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1_000,
        description="KB-relative path of the note, e.g. 'notes/idea.md' (no '..', not absolute).",
    ),
]
_Text = Annotated[
    str,
    Field(
        max_length=MAX_WRITE_CHARS,
        description="Markdown text (at most 200,000 characters).",
    ),
]


def _one(registry: Registry, kb: str | None) -> ServedKB:
    chosen = registry.select(kb)
    if len(chosen) > 1:
        raise ArgumentError(
            "Several KBs are served; say which one to write to.",
            f"Pass kb= one of: {', '.join(s.name for s in chosen)}.",
        )
    return chosen[0]


def _finish(registry: Registry, served: ServedKB, result: WriteResult) -> WriteOutput:
    """Sync so the write is indexed before the call returns; report what happened."""
    notes: list[str] = []
    synced = True
    try:
        registry.sync(served)
    except PinakesError as exc:
        synced = False
        notes.append(f"The file was written but not indexed yet: {exc}")
    doc_id = None
    with registry.using(served) as handle:
        try:
            doc_id = handle.resolve(result.path)
        except (DocumentNotFoundError, PinakesError):
            if synced:  # the sync ran and left it out: say why, or the agent cannot know
                notes.append(
                    f"{result.path} was written but the sync left it out: a .gitignore rule "
                    "ignores it, or it could not be read (see `pnk sync`). Write it elsewhere."
                )
            synced = False
    return WriteOutput(
        kb=served.name,
        path=result.path,
        doc_id=doc_id,
        action=result.action,
        section=result.section,
        chars=result.chars,
        synced=synced,
        notes=notes,
    )


def pinakes_write_note(
    ctx: Context,
    path: _Path,
    text: _Text,
    kb: Kb = None,
    overwrite: Annotated[
        bool, Field(description="Replace the note if it exists (default false: refuse).")
    ] = False,
) -> WriteOutput:
    """Create a Markdown note at a KB-relative path; it is searchable when the call returns.

    Refuses to replace an existing note unless `overwrite` is true. Folders are created as
    needed; the path must be a document the KB indexes (e.g. `.md`), outside hidden folders.
    Returns the note's `path`, its `doc_id` once indexed, `action` (created or overwritten)
    and `synced`. Prefer pinakes_append to add to an existing note.
    """
    registry = registry_of(ctx)
    with tool_errors():
        served = _one(registry, kb)
        result = write_note(served.kb, path, text, overwrite=overwrite)
        return _finish(registry, served, result)


def pinakes_append(
    ctx: Context,
    path: _Path,
    text: _Text,
    kb: Kb = None,
    section: Annotated[
        str | None,
        Field(
            max_length=500,
            description="Append at the end of this heading's section (its text or 'A › B' "
            "path) instead of the end of the note.",
        ),
    ] = None,
) -> WriteOutput:
    """Append text to an existing note, or to the end of one of its sections.

    A blank line separates the new text from what was there. Every call appends again (not
    idempotent). The note is re-indexed before the call returns.
    """
    registry = registry_of(ctx)
    with tool_errors():
        served = _one(registry, kb)
        result = append(served.kb, path, text, section=section)
        return _finish(registry, served, result)


def pinakes_link(
    ctx: Context,
    src: Doc,
    dst: Doc,
    rel: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100,
            description="The relation, e.g. 'depends-on', 'cites', 'supersedes' (lower-kebab).",
        ),
    ],
    kb: Kb = None,
    note: Annotated[
        str | None, Field(max_length=1_000, description="A free-text note kept with the link.")
    ] = None,
) -> WriteOutput:
    """Add a typed link src → dst to src's sidecar (as `pnk link` does) and index it.

    The document text is never touched: the link goes into `<src>.pnk.yaml`, keeping its
    comments and order. A link that already exists is refused. Both documents must be in the
    same served KB. Follow it afterwards with pinakes_links.
    """
    registry = registry_of(ctx)
    with tool_errors():
        served, src_id = registry.locate(src, kb)
        target, dst_id = registry.locate(dst, kb or served.name)
        if target is not served:
            raise ArgumentError("src and dst are in different KBs.", "Link within one KB.")
        with registry.using(served) as handle:
            _, before, after = handle.add_link(src_id, dst_id, rel, note)
            path = handle.read(src_id).path
        result = WriteResult(path=path, action="linked", chars=len(after) - len(before))
        return _finish(registry, served, result)


def pinakes_recent(
    ctx: Context,
    kb: Kb = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Documents to return, 1-100.")] = 20,
    offset: Annotated[
        int, Field(ge=0, le=1_000_000, description="Skip this many (the previous next_offset).")
    ] = 0,
) -> DocumentList:
    """List the most recently modified documents, newest first (paged).

    Each has `doc_id`, `uri`, `path`, `title`, `tags` and `modified` (UNIX seconds); `total`
    counts all documents and `next_offset` is the offset of the next page (null at the end).
    Use it to see what changed lately; read one with pinakes_read(doc=<doc_id>).
    """
    registry = registry_of(ctx)
    with tool_errors():
        served = _one(registry, kb)
        with registry.using(served) as handle:
            return handle.documents(offset=offset, limit=limit, recent=True)


def register(server: FastMCP[Any], *, allow_write: bool = False) -> None:
    """Add ``pinakes_recent`` to ``server`` and, with ``allow_write``, the three write tools.

    Like the read tools, each waits for the start-up sync and runs in a worker thread.
    """
    server.tool(when_ready(pinakes_recent), title="Recently changed documents", annotations=RECENT)
    if allow_write:
        server.tool(when_ready(pinakes_write_note), title="Write a note", annotations=WRITE_NOTE)
        server.tool(when_ready(pinakes_append), title="Append to a note", annotations=APPEND)
        server.tool(when_ready(pinakes_link), title="Link two documents", annotations=LINK)
