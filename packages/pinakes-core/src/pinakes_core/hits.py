"""From a ranking to hits: fetch the chunks, fold near-duplicates, group by document (issue 9).

- **Near-duplicates** (the same passage copied into several notes, a page and its older copy):
  a chunk whose words are nearly those of a better-ranked hit (word-set Jaccard ≥
  :data:`DUPLICATE_JACCARD`, lengths within 10 %) is not a hit of its own; the better hit lists
  its path in ``duplicates``. Copies crowd nothing out of the first k. A hit whose passage a
  document listed earlier also holds is shown under that document (a page's older version
  whose copy of a passage scored best adds no document to the results).
- **Per document** (``group_by="document"``): k distinct documents in the order of their best
  passage, each hit carrying up to :data:`PASSAGES_PER_DOCUMENT` - 1 further passages of the
  same document in ``passages``. A document whose best passage a document listed before it
  holds (anywhere among its passages read) is a copy of it and no row of its own.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pinakes_core.channels import Ranked
from pinakes_core.models import Hit, Passage
from pinakes_core.query import words

__all__ = [
    "DUPLICATE_JACCARD",
    "MAX_DUPLICATES",
    "PASSAGES_PER_DOCUMENT",
    "GroupBy",
    "build_hits",
]

GroupBy = Literal["chunk", "document"]

#: Word-set Jaccard from which two passages are the same text (copies that differ by a link, a
#: date or a typo). High on purpose: two sections of one template share most words but are
#: different answers.
DUPLICATE_JACCARD = 0.9
#: Passages shown per document with ``group_by="document"``: the best one and two more.
PASSAGES_PER_DOCUMENT = 3
#: Most duplicate paths listed on one hit (a template copied into hundreds of notes).
MAX_DUPLICATES = 10
#: Documents read beyond k with ``group_by="document"``, to take the places of copies.
SPARE_DOCUMENTS = 5


@dataclass
class _Row:
    chunk_id: int
    score: float
    doc_id: str
    ordinal: int
    path: str
    title: str
    heading_path: list[str]
    text: str
    lines: tuple[int, int]
    source_type: str
    page_start: int | None
    page_end: int | None

    @property
    def words(self) -> frozenset[str]:
        return _word_set(self.text)


@functools.lru_cache(maxsize=256)
def _word_set(text: str) -> frozenset[str]:
    """The lower-cased words of ``text``, once per distinct text among the last few hundred.

    Copies of a passage, which the folding is for, have equal texts: their words are read once
    per search, not once per copy (on a KB of 8 copies, 1.5 -> 0.7 ms per search).
    """
    return frozenset(words(text.lower()))


def _rows(
    conn: sqlite3.Connection, ranked: Sequence[tuple[int, float]], page: int
) -> Iterator[_Row]:
    """The rows of ``ranked``, in its order, fetched ``page`` at a time as the caller asks."""
    for start in range(0, len(ranked), page):
        part = ranked[start : start + page]
        marks = ",".join("?" * len(part))
        found = {
            r["chunk_id"]: r
            for r in conn.execute(
                "SELECT c.chunk_id, c.doc_id, c.ordinal, c.heading_path, c.text, c.start_line, "
                "c.end_line, c.page_start, c.page_end, d.source_type, d.path, d.title "
                "FROM chunks c JOIN documents d USING (doc_id) "
                f"WHERE c.chunk_id IN ({marks})",
                [cid for cid, _ in part],
            )
        }
        for cid, score in part:
            r = found.get(cid)
            if r is None:  # deleted by a concurrent sync between ranking and fetch
                continue
            yield _Row(
                chunk_id=cid,
                score=score,
                doc_id=r["doc_id"],
                ordinal=r["ordinal"],
                path=r["path"],
                title=r["title"],
                heading_path=json.loads(r["heading_path"]),
                text=r["text"],
                lines=(r["start_line"], r["end_line"]),
                source_type=r["source_type"],
                page_start=r["page_start"],
                page_end=r["page_end"],
            )


def _duplicate(a: _Row, b: _Row) -> bool:
    """Whether two passages hold the same text (near enough)."""
    if a.text == b.text:  # what the rules below conclude for equal texts, without the words
        return True
    small, large = sorted((len(a.text), len(b.text)))
    if small < 0.8 * large:  # word sets within 10 % cannot come from texts this different
        return False
    if not a.words or not b.words:
        return a.text.strip() == b.text.strip()
    small, large = sorted((len(a.words), len(b.words)))
    if small < 0.9 * large:
        return False
    return len(a.words & b.words) / len(a.words | b.words) >= DUPLICATE_JACCARD


def _paths(row: _Row, copies: list[_Row]) -> list[str] | None:
    """The other paths holding ``row``'s passage (at most :data:`MAX_DUPLICATES`), or ``None``."""
    paths = list(dict.fromkeys(c.path for c in copies if c.path != row.path))
    return paths[:MAX_DUPLICATES] or None


def _shown_documents_first(kept: list[_Row], folded: dict[int, list[_Row]]) -> list[_Row]:
    """Each hit shown under the first-listed document that holds its passage.

    A passage repeated in several documents (a page and its older versions) is a hit of the
    copy that scored best, which may be the old version of a page listed above it. Shown under
    the document listed first among those holding it, it adds no document to the results; it
    keeps its place and score (the same text), and the copy it replaces joins its
    ``duplicates``.
    """
    first: dict[str, int] = {}
    out: list[_Row] = []
    for row in kept:
        copies = folded.get(row.chunk_id, [])
        listed = [c for c in [row, *copies] if c.doc_id in first]
        chosen = min(listed, key=lambda c: first[c.doc_id]) if listed else row
        if chosen is not row:
            folded[chosen.chunk_id] = [row, *(c for c in copies if c is not chosen)]
            row = replace(chosen, score=row.score)
        first.setdefault(row.doc_id, len(out))
        out.append(row)
    return out


def _without_copied_documents(
    kept: list[_Row], read: dict[str, list[_Row]], folded: dict[int, list[_Row]]
) -> list[_Row]:
    """The documents of ``kept`` whose best passage no document listed before them holds.

    One row per document: a page's older version whose best passage ranked above the same
    passage of the current page came first as a document of its own; it is a copy of a listed
    page and joins the ``duplicates`` of that page's hit.
    """
    out: list[_Row] = []
    for row in kept:
        twin = next(
            (hit for hit in out for other in read[hit.doc_id] if _duplicate(row, other)), None
        )
        if twin is None:
            out.append(row)
        else:
            folded.setdefault(twin.chunk_id, []).append(row)
    return out


def build_hits(
    conn: sqlite3.Connection,
    ranked: Sequence[tuple[int, float]],
    lists: Mapping[str, Ranked],
    *,
    k: int,
    explain: bool,
    group_by: GroupBy = "chunk",
) -> list[Hit]:
    """Turn a ranking ``(chunk_id, score)`` (best first) into at most ``k`` hits.

    Near-duplicates of a better hit are folded into it (``duplicates``); with ``group_by =
    "document"`` each hit is one document's best passage and ``passages`` holds its next best.
    ``ranks`` gives each hit's rank in every list; ``channel_scores`` (with ``explain``) each
    list's raw score.
    """
    # Enough rows for k hits after folding duplicates (chunks) or for k documents' passages.
    ranked = ranked[: k * 4 + 20] if group_by == "chunk" else ranked
    kept: list[_Row] = []
    folded: dict[int, list[_Row]] = {}
    extra: dict[str, list[_Row]] = {}
    by_doc: dict[str, _Row] = {}
    # Documents a passage of which was folded into another document's hit: copies of it (an
    # older version of a page); as documents of their own they would only repeat it.
    copies: set[str] = set()
    # Per document (group_by="document"): every passage read, to find a kept document whose
    # best passage another kept document holds further down; spare documents replace it.
    read: dict[str, list[_Row]] = {}
    limit = k + SPARE_DOCUMENTS if group_by == "document" else k
    # Chunks are fetched a page at a time: most searches need little more than k rows.
    for row in _rows(conn, ranked, page=max(k + 10, 20) if group_by == "chunk" else 500):
        if group_by == "document" and row.doc_id in by_doc:
            read[row.doc_id].append(row)
            more = extra.setdefault(row.doc_id, [])
            # A passage without evidence (score 0: reached by the graph, matched by no channel)
            # is not one of the document's best.
            if (
                len(more) < PASSAGES_PER_DOCUMENT - 1
                and row.score > 0
                and not any(_duplicate(row, other) for other in [by_doc[row.doc_id], *more])
            ):
                more.append(row)
            continue
        if group_by == "document" and row.doc_id in copies:
            continue
        # A copy of a hit, or of a passage shown under one (``passages``), joins that hit.
        shown = (
            (hit, other)
            for hit in kept
            for other in [hit, *(extra.get(hit.doc_id, []) if by_doc[hit.doc_id] is hit else [])]
        )
        twin = next((hit for hit, other in shown if _duplicate(row, other)), None)
        if twin is not None:
            folded.setdefault(twin.chunk_id, []).append(row)
            if row.doc_id != twin.doc_id:
                copies.add(row.doc_id)
            continue
        if len(kept) == limit:
            if group_by == "chunk":
                break
            continue  # still collecting passages of the kept documents
        kept.append(row)
        by_doc.setdefault(row.doc_id, row)
        read.setdefault(row.doc_id, [row])
    if group_by == "chunk":
        kept = _shown_documents_first(kept, folded)
    else:
        kept = _without_copied_documents(kept, read, folded)[:k]
    ranks = {name: {cid: i for i, (cid, _) in enumerate(r, 1)} for name, r in lists.items()}
    raw = {name: dict(r) for name, r in lists.items()}
    return [
        Hit(
            doc_id=row.doc_id,
            chunk=row.ordinal,
            path=row.path,
            title=row.title,
            heading_path=row.heading_path,
            text=row.text,
            score=round(row.score, 6),
            lines=row.lines,
            source_type=row.source_type,
            page_start=row.page_start,
            page_end=row.page_end,
            ranks={name: r.get(row.chunk_id) for name, r in ranks.items()},
            channel_scores={
                name: round(s[row.chunk_id], 6) for name, s in raw.items() if row.chunk_id in s
            }
            if explain
            else None,
            duplicates=_paths(row, folded.get(row.chunk_id, [])),
            passages=[
                Passage(
                    chunk=p.ordinal,
                    heading_path=p.heading_path,
                    text=p.text,
                    lines=p.lines,
                    score=round(p.score, 6),
                )
                for p in extra.get(row.doc_id, [])
            ]
            if group_by == "document"
            else None,
        )
        for row in kept
    ]
