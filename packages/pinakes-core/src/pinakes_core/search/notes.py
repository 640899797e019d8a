"""The ``note`` that explains an empty search result (issue 11).

An empty list tells a person or an agent nothing; the usual causes are cheap to check with
indexed reads: a sync still indexing, an empty KB, a tag no document carries, a path prefix
or field filter that matches no document, or filters that each match but never together.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pinakes_core.index.lock import sync_running
from pinakes_core.search.context import Filters

__all__ = ["empty_note"]


def _count(conn: sqlite3.Connection, where: str, params: list[object]) -> int:
    row = conn.execute(f"SELECT COUNT(*) FROM documents d WHERE {where}", params).fetchone()
    return int(row[0])


def _known_tags(conn: sqlite3.Connection, limit: int = 8) -> str:
    rows = conn.execute(
        "SELECT tag FROM doc_tags GROUP BY tag ORDER BY COUNT(*) DESC, tag LIMIT ?", (limit,)
    ).fetchall()
    return ", ".join(r[0] for r in rows) or "none"


def _folders(conn: sqlite3.Connection, limit: int = 8) -> str:
    # The top folder in Python: SQL of both engines (SQLite's instr is not PostgreSQL's).
    paths = conn.execute("SELECT path FROM documents WHERE path LIKE ?", ("%/%",)).fetchall()
    tops = sorted({str(r[0]).split("/", 1)[0] + "/" for r in paths})[:limit]
    return ", ".join(tops) or "none (every document is at the top level)"


def empty_note(conn: sqlite3.Connection, store_dir: Path | None, filters: Filters) -> str:
    """Return one or more sentences saying why a search with ``filters`` found nothing.

    ``store_dir``: the folder of the KB's store and sync lock (``None``: a store on a
    database server, whose sync is not seen from here).
    """
    notes: list[str] = []
    if store_dir is not None and sync_running(store_dir):
        notes.append(
            "A sync is still running, so some documents may not be indexed yet; "
            "search again when it finishes."
        )
    total = _count(conn, "1 = 1", [])
    if total == 0:
        notes.append("The KB has no indexed documents yet (run `pnk sync`).")
        return " ".join(notes)
    blocked = False
    for tag in filters.tags:
        single = Filters(tags=(tag,))
        if _count(conn, *single.where()) == 0:
            blocked = True
            notes.append(f"No document has the tag {tag!r}; common tags: {_known_tags(conn)}.")
    if filters.path and _count(conn, *Filters(path=filters.path).where()) == 0:
        blocked = True
        notes.append(
            f"No document path starts with {filters.path!r}; top folders: {_folders(conn)}."
        )
    for condition in filters.meta:
        if _count(conn, *Filters(meta=(condition,)).where()) == 0:
            blocked = True
            notes.append(f"No document's frontmatter matches {str(condition)!r}.")
    if filters.doc_ids and _count(conn, *Filters(doc_ids=filters.doc_ids).where()) == 0:
        blocked = True
        notes.append("None of the given documents is in the KB.")
    dates = Filters(modified_after=filters.modified_after, modified_before=filters.modified_before)
    if dates.active and _count(conn, *dates.where()) == 0:
        blocked = True
        notes.append("No document was modified in the given date range.")
    if not blocked:
        if filters.active and _count(conn, *filters.where()) == 0:
            notes.append("Each filter matches some documents, but no document meets all of them.")
        elif filters.active:
            notes.append("No passage in the filtered documents matched the query.")
        else:
            notes.append("No passage matched the query.")
    return " ".join(notes)
