"""From a ranking to hits: fetch the chunks, fold near-duplicates, group by document (issue 9).

- **Near-duplicates** (the same passage copied into several notes, a page and its older copy):
  a chunk whose words are nearly those of a better-ranked hit (word-set Jaccard ≥
  :data:`DUPLICATE_JACCARD`, lengths within 10 %) is not a hit of its own; the better hit lists
  its path in ``duplicates``. Copies crowd nothing out of the first k.
- **Per document** (``group_by="document"``): k distinct documents in the order of their best
  passage, each hit carrying up to :data:`PASSAGES_PER_DOCUMENT` - 1 further passages of the
  same document in ``passages``.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
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
    folded: dict[int, list[str]] = {}
    extra: dict[str, list[_Row]] = {}
    by_doc: dict[str, _Row] = {}
    # Chunks are fetched a page at a time: most searches need little more than k rows.
    for row in _rows(conn, ranked, page=max(k + 10, 20) if group_by == "chunk" else 500):
        if group_by == "document" and row.doc_id in by_doc:
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
        twin = next((other for other in kept if _duplicate(row, other)), None)
        if twin is not None:
            paths = folded.setdefault(twin.chunk_id, [])
            if row.path != twin.path and row.path not in paths and len(paths) < MAX_DUPLICATES:
                paths.append(row.path)
            continue
        if len(kept) == k:
            if group_by == "chunk":
                break
            continue  # still collecting passages of the kept documents
        kept.append(row)
        by_doc.setdefault(row.doc_id, row)
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
            duplicates=folded.get(row.chunk_id) or None,
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
