"""The catalogue: the indexed documents as a reader finds them, from the store alone.

A reference (a ULID, a ``pnk://`` URI, a path, a frontmatter id or a note's name) resolved to a
document id (:func:`find_document`), the documents a page at a time (:func:`document_page`) and
the links a document holds (:func:`link_views`, :func:`outlinks`). Each takes the store's
connection; none reads a document's file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from pinakes_core.config import Config
from pinakes_core.errors import DocumentNotFoundError, PinakesError
from pinakes_core.intake import spellings
from pinakes_core.models import DocumentInfo, DocumentList, LinkView
from pinakes_core.read.identity import frontmatter_id
from pinakes_core.uri import SCHEME, is_ulid, parse_uri

__all__ = [
    "check_page",
    "check_reference",
    "document_page",
    "find_document",
    "link_views",
    "outlinks",
]


def check_reference(given: str) -> str:
    """The document reference ``given`` stripped of surrounding white space.

    Raises:
        DocumentNotFoundError: if it is empty or over 4,096 characters.
    """
    ref = given.strip()
    if not ref or len(ref) > 4096:
        raise DocumentNotFoundError(
            f"The document reference {ref[:60]!r} is empty or too long.",
            "Use a ULID, a pnk:// URI or a path relative to the KB root.",
        )
    return ref


def find_document(
    conn: sqlite3.Connection,
    root: Path,
    config: Config,
    given: str,
    ref: str,
    *,
    is_named: Callable[[str], bool],
) -> str:
    """Return the doc ULID for a ULID, ``pnk://`` URI, KB-relative (or absolute) path, frontmatter id, or name.

    A name is resolved as a wikilink to it is (``0002-retry-policy``, a title or an alias:
    :func:`~pinakes_core.read.resolution.resolver`).

    Args:
        conn: the KB's store.
        root: the KB root (an absolute path must lie inside it).
        config: the KB's config (its id and name).
        given: the reference as given.
        ref: the reference stripped (see :func:`check_reference`).
        is_named: whether a URI's KB part names this KB (its id, name or fleet name).

    Raises:
        DocumentNotFoundError: if nothing matches; its hint names up to three documents
            whose names are close to ``ref`` (:func:`~pinakes_core.read.resolution.near_names`).
    """
    if ref.startswith(SCHEME):
        uri = parse_uri(ref)
        if uri.kb is not None and not is_named(uri.kb):
            raise DocumentNotFoundError(
                f"{ref!r} names KB {uri.kb!r}, not this one ({config.kb.name!r}); "
                "it was not looked up here.",
                "Open that KB (--kb <its folder>), or search the fleet (pnk search --fleet).",
            )
        doc_id: str | None = uri.doc_id
    elif is_ulid(ref.upper()):
        doc_id = ref.upper()
    else:
        candidate = Path(ref)
        if candidate.is_absolute():
            try:
                candidate = candidate.resolve().relative_to(root)
            except ValueError:
                raise DocumentNotFoundError(f"{ref} is outside the KB at {root}.") from None
        rel = candidate.as_posix().removeprefix("./")
        # The name as given (" notes.md" is a file name too), then in either Unicode
        # normal form: a file named on macOS is NFD, the name typed for it NFC.
        for path in dict.fromkeys((given, *spellings(rel))):
            row = conn.execute("SELECT doc_id FROM documents WHERE path = ?", (path,)).fetchone()
            if row:
                break
        # Not a path: perhaps a frontmatter id (a Dendron id, a Zettelkasten number).
        doc_id = row[0] if row else frontmatter_id(config.kb.id, ref)
    if (
        doc_id is not None
        and conn.execute("SELECT 1 FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
    ):
        return doc_id
    # Link extraction (markdown-it) loads only for a reference that is not a path or an id.
    from pinakes_core.read.resolution import near_names, resolver

    if not ref.startswith(SCHEME):
        # A note's name, as its wikilinks write it (issue 35): from the KB's root.
        named = resolver(conn, config.kb.id, config.kb.name)("", ref)
        if named is not None:
            return named
    near = near_names(conn, ref)
    raise DocumentNotFoundError(
        f"No document {ref!r} in KB {config.kb.name!r}.",
        (f"Did you mean {', '.join(map(repr, near))}? " if near else "")
        + "Use a ULID, a pnk:// URI, a path relative to the KB root or a note's name; "
        "run `pnk sync` if it is new.",
        near=near,
    )


def check_page(offset: int, limit: int) -> None:
    """Refuse a page outside ``offset >= 0`` and ``1 <= limit <= 1000``.

    Raises:
        PinakesError: naming both values.
    """
    if offset < 0 or not 1 <= limit <= 1000:
        raise PinakesError(
            f"offset {offset} / limit {limit} is out of range.",
            "Use offset >= 0 and a limit from 1 to 1000.",
        )


def document_page(
    conn: sqlite3.Connection, kb_id: str, *, offset: int, limit: int, recent: bool
) -> DocumentList:
    """A page of the indexed documents (no text), by path or newest first.

    Args:
        conn: the KB's store.
        kb_id: the KB's id (for each document's URI).
        offset: documents to skip (a previous page's ``next_offset``).
        limit: page size (checked by :func:`check_page`).
        recent: order by file modification time, newest first, instead of by path.
    """
    total = int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    order = "mtime_ns DESC, path" if recent else "path"
    rows = conn.execute(
        f"SELECT doc_id, path, title, tags, mtime_ns FROM documents ORDER BY {order} "
        "LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    return DocumentList(
        documents=[
            DocumentInfo(
                doc_id=r["doc_id"],
                uri=f"{SCHEME}{kb_id}/{r['doc_id']}",
                path=r["path"],
                title=r["title"],
                tags=json.loads(r["tags"]),
                modified=r["mtime_ns"] / 1e9,
            )
            for r in rows
        ],
        total=total,
        next_offset=offset + len(rows) if offset + len(rows) < total else None,
    )


def link_views(conn: sqlite3.Connection, doc_id: str) -> list[LinkView]:
    """The links document ``doc_id`` holds, in the order they were stored."""
    return [
        LinkView(
            target=r["target"],
            rel=r["rel"],
            origin=r["origin"],
            dst_doc=r["dst_doc"],
            dst_kb=r["dst_kb"],
        )
        for r in conn.execute(
            "SELECT target, rel, origin, dst_doc, dst_kb FROM links WHERE src_doc = ? "
            "ORDER BY rowid",
            (doc_id,),
        )
    ]


def outlinks(conn: sqlite3.Connection, doc_id: str) -> tuple[str, list[LinkView]]:
    """The title of document ``doc_id`` and the links it holds, from the index alone."""
    row = conn.execute("SELECT title FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
    return row["title"], link_views(conn, doc_id)
