"""A document as ``read`` shows it: its current text (or a slice of it) with what the index knows.

The text is the file as it is now, read within the intake limits; a PDF's is its extracted
text as indexed, rebuilt from its chunks with a ``[page N]`` line before each page, so a read
never parses the PDF again. A slice is a line range, a heading's section or a page range
(:mod:`pinakes_core.read.sections`); the metadata and links come from the store.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from pathlib import Path

from pinakes_core.config import Config
from pinakes_core.errors import DocumentNotFoundError, UnsafeFileError
from pinakes_core.index.catalogue import link_views
from pinakes_core.intake import read_limited
from pinakes_core.models import DocumentView
from pinakes_core.read.sections import SliceError, slice_document
from pinakes_core.read.sources import text_from_chunks
from pinakes_core.uri import SCHEME

__all__ = ["read_document"]


def read_document(
    conn: sqlite3.Connection,
    root: Path,
    config: Config,
    doc_id: str,
    *,
    lines: tuple[int, int] | None = None,
    section: str | None = None,
    pages: tuple[int, int] | None = None,
    max_tokens: int | None = None,
) -> DocumentView:
    """Return document ``doc_id`` (current file text, or a slice of it) with its metadata.

    Args:
        conn: the KB's store.
        root: the KB root.
        config: the KB's config (its id and ``[sync] max_file_mb``).
        doc_id: an indexed document's ULID.
        lines: only these lines of the file (first, last; 1-based, inclusive).
        section: only this heading's section (a heading's text or a heading path
            ``"Raft › Log replication"``).
        pages: only these pages of a PDF (first, last; 1-based, inclusive; a last page
            past the end is clamped).
        max_tokens: cut the text to about this many tokens (characters / 4), at a
            paragraph break where one is near; ``truncated`` then says so.

    Raises:
        DocumentNotFoundError: if its file has gone or now leads outside the KB.
        SliceError: for a line range, section or page range the document does not have
            (pages of a document that has none, more than one of lines/section/pages).
    """
    row = conn.execute("SELECT * FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
    if not (root / row["path"]).resolve().is_relative_to(root.resolve()):
        raise DocumentNotFoundError(
            f"{row['path']} now leads outside the KB (a symlink?); it is not read.",
            "Run `pnk sync`.",
        )
    paged = row["source_type"] == "pdf" and row["pages"] is not None
    page_lines: list[int] = []
    if paged:
        if not (root / row["path"]).is_file():
            raise DocumentNotFoundError(
                f"{row['path']} is in the index but its file is gone.", "Run `pnk sync`."
            )
        page_lines = [int(n) for n in json.loads(row["pages"])]
        chunk_rows = conn.execute(
            "SELECT text, start_line, end_line FROM chunks WHERE doc_id = ? ORDER BY ordinal",
            (doc_id,),
        ).fetchall()
        text = text_from_chunks(chunk_rows, page_lines, int(row["line_count"] or 0))
    else:
        try:
            data = read_limited(
                root / row["path"],
                limit=int(config.sync.max_file_mb * 1024 * 1024),
                root=root.resolve(),
                name=row["path"],
            )
        except UnsafeFileError as exc:
            raise DocumentNotFoundError(exc.message, "Run `pnk sync`.") from None
        except OSError:
            raise DocumentNotFoundError(
                f"{row['path']} is in the index but its file is gone.", "Run `pnk sync`."
            ) from None
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    if pages is not None:
        lines = _page_lines(row["path"], page_lines if paged else None, pages, lines, section, text)
    links = link_views(conn, doc_id)
    part = slice_document(
        row["path"],
        text.replace("\r\n", "\n"),
        lines=lines,
        section=section,
        max_tokens=max_tokens,
    )
    return DocumentView(
        doc_id=doc_id,
        uri=f"{SCHEME}{config.kb.id}/{doc_id}",
        path=row["path"],
        title=row["title"],
        tags=json.loads(row["tags"]),
        aliases=json.loads(row["aliases"]),
        links=links,
        chunks=row["chunk_count"],
        modified=row["mtime_ns"] / 1e9,
        text=part.text,
        meta=json.loads(row["meta"]),
        lines=part.lines,
        section=part.section,
        headings=part.headings,
        tokens=part.tokens,
        total_tokens=part.total_tokens,
        truncated=part.truncated,
        source_type=row["source_type"],
        page_count=len(page_lines) if paged else None,
        pages=_pages_of(page_lines, part.lines) if paged else None,
    )


def _page_lines(
    path: str,
    page_lines: list[int] | None,
    pages: tuple[int, int],
    lines: tuple[int, int] | None,
    section: str | None,
    text: str,
) -> tuple[int, int]:
    """The line span (1-based, inclusive) of a page range (a last page past the end clamped)."""
    if lines is not None or section:
        raise SliceError("Give one of a line range, a section or a page range.", "Drop the others.")
    if page_lines is None:
        raise SliceError(
            f"{path} has no pages (only PDFs do).", "Use a line range or a section instead."
        )
    first, last = pages
    count = len(page_lines)
    if first < 1 or last < first:
        raise SliceError(
            f"The page range {first}-{last} is not valid.", "Use N or N-M with 1 <= N <= M."
        )
    if first > count:
        raise SliceError(
            f"{path} has {count} pages; page {first} is past the end.",
            f"Use pages within 1-{count}.",
        )
    last = min(last, count)
    end = page_lines[last] - 1 if last < count else text.count("\n") + 1
    while end > page_lines[last - 1] and not text.split("\n")[end - 1].strip():
        end -= 1
    return page_lines[first - 1], end


def _pages_of(page_lines: list[int], span: tuple[int, int]) -> tuple[int, int] | None:
    """The pages a line span covers."""
    if not page_lines:
        return None
    first = max(bisect.bisect_right(page_lines, span[0]), 1)
    last = max(bisect.bisect_right(page_lines, span[1]), 1)
    return first, last
