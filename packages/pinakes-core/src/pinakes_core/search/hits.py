"""From a ranking to hits: fetch the chunks, fold near-duplicates, group by document (issue 9).

- **Near-duplicates** (the same passage copied into several notes, a page and its older copy):
  a chunk whose words are nearly those of a better-ranked hit (word-set Jaccard ≥
  :data:`DUPLICATE_JACCARD`, lengths within 10 %) is not a hit of its own; the better hit lists
  its path in ``duplicates``. Copies crowd nothing out of the first k. A hit whose passage a
  document listed earlier also holds is shown under that document (a page's older version
  whose copy of a passage scored best adds no document to the results).
- **Per document** (``group_by="document"``): k distinct documents in the order of their best
  passage, each hit carrying up to :data:`PASSAGES_PER_DOCUMENT` - 1 further passages of the
  same document in ``passages``. A document most of whose first passages a listed document
  holds is a copy of it and no row of its own; one that shares some text with a listed
  document is listed by its best passage of its own.
"""

from __future__ import annotations

import functools
import heapq
import json
import sqlite3
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pinakes_core.index.query import words
from pinakes_core.models import Hit, Passage
from pinakes_core.search.context import Ranked

__all__ = [
    "DUPLICATE_JACCARD",
    "LIST_FLOOR",
    "LIST_FLOOR_SHARE",
    "MAX_DUPLICATES",
    "PASSAGES_PER_DOCUMENT",
    "GroupBy",
    "build_hits",
    "list_floor",
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
#: The relevance floor of a list that claims to be matches (``pnk search --format files`` or
#: ``md``, which a user pipes into an editor): a hit scoring below the larger of this and
#: :data:`LIST_FLOOR_SHARE` of the top hit's score is left out (issue 35). "giraffe" over six
#: notes, one holding the word (0.59), kept that one and left out a savanna diary (0.21) and
#: a zoo's opening hours (0.14). On golden's 242 questions (top 10 each) the floor kept 95 % of
#: the relevant hits, 84 % of the others and 65 % of those of questions the KB does not answer
#: (a share of 0.3 kept 98 %, 92 %, 66 %, and the savanna diary). docs/cli.md.
LIST_FLOOR = 0.15
LIST_FLOOR_SHARE = 0.4
#: Words of a passage by which :class:`_Seen` finds its near-duplicates (see there).
_SKETCH = 4


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

    @functools.cached_property
    def words(self) -> frozenset[str]:
        """The passage's lower-cased words, read once per row.

        Equal texts never need them: :func:`_duplicate` and :class:`_Seen` compare texts first.
        """
        return frozenset(words(self.text.lower()))

    @functools.cached_property
    def sketch(self) -> list[int]:
        """The :data:`_SKETCH` smallest CRC-32s of its words (the same in every run)."""
        return heapq.nsmallest(
            _SKETCH, {zlib.crc32(w.encode("utf-8", "replace")) for w in self.words}
        )


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
            # The passage scored and ranked as the copy did (its ranks and channel scores are
            # that chunk's): only where it is shown changes.
            folded[row.chunk_id] = [row, *(c for c in copies if c is not chosen)]
            row = replace(chosen, score=row.score, chunk_id=row.chunk_id)
        first.setdefault(row.doc_id, len(out))
        out.append(row)
    return out


class _Seen:
    """Passages already shown, found again by their text: equal ones at once, near ones by sketch.

    Two passages that share at least 90 % of their words (:func:`_duplicate`) almost always
    share one of the few words with the smallest hashes in either; only the passages sharing
    one are compared, so a long list costs about a dictionary lookup per passage instead of a
    comparison with every passage shown (2,000 candidates: seconds).
    """

    def __init__(self) -> None:
        self.exact: dict[str, _Row] = {}
        self.by_word: dict[int, list[tuple[_Row, _Row]]] = {}

    def add(self, row: _Row, hit: _Row) -> None:
        self.exact.setdefault(row.text, hit)
        for h in row.sketch:
            self.by_word.setdefault(h, []).append((row, hit))

    def find(self, row: _Row) -> _Row | None:
        """The hit ``row``'s passage is shown under, if it is."""
        hit = self.exact.get(row.text)
        if hit is not None:
            return hit
        for h in row.sketch:
            for other, shown in self.by_word.get(h, ()):
                if _duplicate(row, other):
                    return shown
        return None


def _chunk_hits(
    conn: sqlite3.Connection,
    ranked: Sequence[tuple[int, float]],
    k: int,
    folded: dict[int, list[_Row]],
) -> list[_Row]:
    """At most ``k`` passages, each not a near-duplicate of a better one (folded into it)."""
    kept: list[_Row] = []
    seen = _Seen()
    # Enough rows for k hits after folding duplicates, fetched a page at a time: most searches
    # need little more than k rows.
    for row in _rows(conn, ranked[: k * 4 + 20], page=max(k + 10, 20)):
        twin = seen.find(row)
        if twin is not None:
            folded.setdefault(twin.chunk_id, []).append(row)
            continue
        if len(kept) == k:
            break
        kept.append(row)
        seen.add(row, row)
    return _shown_documents_first(kept, folded)


#: Passages of a document compared with the listed documents' to tell whether it is a copy.
COPY_PASSAGES = 3


def _document_hits(
    conn: sqlite3.Connection,
    ranked: Sequence[tuple[int, float]],
    k: int,
    folded: dict[int, list[_Row]],
    extra: dict[str, list[_Row]],
) -> list[_Row]:
    """At most ``k`` distinct documents in the order of their best passage, with more passages.

    A document most of whose first passages (of :data:`COPY_PASSAGES`) a listed document holds
    is a copy of it (a page's older version) and no row of its own: its best passage joins
    that document's ``duplicates``. Any other document is listed by its best passage that no
    listed document shows (a daily note whose best match is the template text it shares with
    another is listed by its own words), with up to :data:`PASSAGES_PER_DOCUMENT` - 1 more.
    """
    order: list[str] = []
    rows_of: dict[str, list[_Row]] = {}
    for row in _rows(conn, ranked, page=500):
        if row.doc_id not in rows_of:
            order.append(row.doc_id)
        rows_of.setdefault(row.doc_id, []).append(row)
    kept: list[_Row] = []
    top: list[float] = []  # the k best scores kept, smallest first (a heap)
    seen = _Seen()
    for doc in order:
        rows = rows_of[doc]
        if len(top) == k and rows[0].score < top[0]:
            break  # no passage of this or a later document can take a place
        twins = [seen.find(row) for row in rows[:COPY_PASSAGES]]
        if sum(t is not None for t in twins) * 2 > len(twins):
            original = next(t for t in twins if t is not None)
            folded.setdefault(original.chunk_id, []).append(rows[0])
            continue
        best: _Row | None = None
        more: list[_Row] = []
        for i, row in enumerate(rows):
            twin = twins[i] if i < len(twins) else seen.find(row)
            if twin is not None:
                folded.setdefault(twin.chunk_id, []).append(row)
            elif best is None:
                best = row
            elif len(more) == PASSAGES_PER_DOCUMENT - 1 or row.score <= 0:
                # A passage without evidence (score 0: reached by the graph, matched by no
                # channel) is not one of the document's best.
                break
            elif not any(_duplicate(row, other) for other in [best, *more]):
                more.append(row)
        if best is None:  # every passage is shown under other documents
            continue
        kept.append(best)
        (heapq.heappush if len(top) < k else heapq.heappushpop)(top, best.score)
        extra[doc] = more
        for row in [best, *more]:
            seen.add(row, best)
    # A document listed by a passage below its first (the first being another's) ranks by it.
    return sorted(kept, key=lambda row: -row.score)[:k]


def build_hits(
    conn: sqlite3.Connection,
    ranked: Sequence[tuple[int, float]],
    lists: Mapping[str, Ranked],
    *,
    k: int,
    explain: bool,
    group_by: GroupBy = "chunk",
    reader: Mapping[int, float] | None = None,
) -> list[Hit]:
    """Turn a ranking ``(chunk_id, score)`` (best first) into at most ``k`` hits.

    Near-duplicates of a better hit are folded into it (``duplicates``); with ``group_by =
    "document"`` each hit is one document's best passage and ``passages`` holds its next best.
    ``ranks`` gives each hit's rank in every list; ``channel_scores`` (with ``explain``) each
    list's raw score; ``reader`` (chunk id → the reader's probability) fills ``Hit.reader``.
    """
    folded: dict[int, list[_Row]] = {}
    extra: dict[str, list[_Row]] = {}
    if group_by == "chunk":
        kept = _chunk_hits(conn, ranked, k, folded)
    else:
        kept = _document_hits(conn, ranked, k, folded, extra)
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
            reader=None if reader is None else reader.get(row.chunk_id),
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
                    page_start=p.page_start,
                    page_end=p.page_end,
                )
                for p in extra.get(row.doc_id, [])
            ]
            if group_by == "document"
            else None,
        )
        for row in kept
    ]


def list_floor(scores: Sequence[float]) -> float:
    """The relevance floor of a list of matches whose hits score ``scores``, best first.

    ``max(LIST_FLOOR, LIST_FLOOR_SHARE × scores[0])``, rounded as hits show scores, or
    :data:`LIST_FLOOR` for no hits. A front-end leaves out the hits below it where its output
    claims to list matches (``pnk search --format files``), and says how many it left out.
    """
    best = scores[0] if scores else 0.0
    return round(max(LIST_FLOOR, LIST_FLOOR_SHARE * best), 4)
