"""BM25 over a KB's chunks, exact at any size (DESIGN §5, docs/scaling.md).

:class:`Bm25` ranks chunks by FTS5's ``bm25()`` over one query's phrases (or, past ``[scale]
bm25_index_min_chunks``, by the tantivy index of :mod:`pinakes_core.index.lexical`), with the
search filters applied inside the query, and keeps the scores of the best
:data:`EVIDENCE_POOL` × ``candidates`` matches for the lexical evidence. Past ``[scale]
bm25_max_rows`` rows it splits a query's phrases into rare ones that bring candidates and common
ones that only score them, widening the split until the result is provably exact
(:meth:`Bm25.split_is_exact`). The row count of each phrase is kept in a table a KB shares
between the queries of one store generation.

A query context of the search room (``search/context.py``) runs its BM25 channel through one
:class:`Bm25`; the SQLite store contract (:mod:`pinakes_core.index.backend`) uses
one for its ``lexical`` reads.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pinakes_core.index.query import fts_phrases, split_cjk
from pinakes_core.index.store import chunk_count

__all__ = [
    "BM25_K1",
    "EVIDENCE_POOL",
    "EXCLUSIVE_ARM_SHARE",
    "FIRST_SPLIT_SHARE",
    "MAX_SHARED_PHRASE_CHARS",
    "Bm25",
    "Fts5Text",
    "TextIndex",
    "allowed_chunks_sql",
    "bm25_idf",
    "scored_arms",
]

#: ``(chunk_id, BM25 score)`` pairs, best first.
_Ranked = list[tuple[int, float]]

#: FTS5's bm25() constants (k1 = 1.2, b = 0.75); a phrase contributes at most (k1 + 1) × IDF.
BM25_K1 = 1.2
# Column weights for bm25(): title, heading path, text, identifier parts. A query word in a
# heading or title is stronger evidence of topic than one in running text; the parts of a code
# identifier (issue 18) and the operators standing alone in any chunk (query.symbol_words)
# count like running text.
_BM25_WEIGHTS = (2.0, 1.5, 1.0, 1.0)
_BM25_SQL = f"bm25(chunks_fts, {', '.join(map(str, _BM25_WEIGHTS))})"
#: BM25 scores are kept for this many times ``candidates`` best matches (lexical evidence).
EVIDENCE_POOL = 4
#: The BM25 channel first splits a query at this share of ``[scale] bm25_max_rows`` (1/4) and
#: widens only until the result is provably exact: at 52k chunks the first split was proven for
#: 17 of the 20 benchmark queries it split, and the channel's p50 fell 19.6 → 11.2 ms
#: (docs/scaling.md).
FIRST_SPLIT_SHARE = 4
#: A split's rows holding a rare phrase and no common one get an arm of their own (``rare NOT
#: common``) when the rare phrases' rows are at least this share of the common ones': the rows
#: holding a common phrase too are then scored once (by the arm scoring every phrase), not
#: twice, which the extra counting of the common phrases' rows for their IDF does not outweigh.
#: At 52k chunks, 8 split arms of long questions: 103.9 → 85.3 ms in all, while the one with
#: 448 rare rows against 46,000 common ones went 3.8 → 5.2 ms (docs/scaling.md).
EXCLUSIVE_ARM_SHARE = 0.05
#: Longest FTS phrase whose row count a KB keeps for all its queries (:meth:`Bm25.doc_freq`).
MAX_SHARED_PHRASE_CHARS = 64
#: Prefix of the shared count table's keys for the tantivy index's counts (no FTS phrase
#: starts with it).
_INDEX_COUNT = "\x00index:"


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's IDF of a phrase found in ``hits`` of ``rows`` rows (floored at 1e-6 as FTS5 does).

    ``hits`` is taken as at most ``rows``: two counts read at different moments (a sync in
    another process between them) must not make the logarithm's argument negative.
    """
    hits = min(max(hits, 0), max(rows, 0))
    return max(math.log((max(rows, 0) - hits + 0.5) / (hits + 0.5)), 1e-6)


def allowed_chunks_sql(where: str) -> str:
    """The ids of the chunks of the documents meeting ``where`` (a condition on ``d``).

    Documents first, then their chunks by the ``(doc_id, ordinal)`` index: the join the other
    way round scanned every chunk (at 1M chunks, a path filter's ids 800 → 70 ms).
    """
    return (
        "SELECT c.chunk_id FROM chunks c WHERE c.doc_id IN "
        f"(SELECT d.doc_id FROM documents d WHERE {where})"
    )


def scored_arms(rare: list[str], common: list[str], *, exclusive: bool = False) -> list[str]:
    """FTS expressions for the rows holding a ``rare`` phrase, each scored in full.

    A row holding a rare phrase and common ones is scored over all of them by the second arm
    (the smaller FTS5 score, the negated BM25, wins when the arms are merged). With
    ``exclusive`` the first arm leaves those rows out (``NOT``): its rows hold no common
    phrase, whose terms in FTS5's BM25 sum are then exact zeros added after the rare phrases'
    terms, so each row's score is the same to the bit, and no row is scored twice.
    """
    anyone = " OR ".join(rare)
    if not common:
        return [anyone]
    others = " OR ".join(common)
    first = f"({anyone}) NOT ({others})" if exclusive else anyone
    return [first, f"({anyone}) AND ({others})"]


class TextIndex(Protocol):
    """What a query's phrase checks read of the KB's text index, whatever the store.

    FTS5 on SQLite (:class:`Fts5Text`), the postings and ``tsvector`` on PostgreSQL
    (:class:`~pinakes_core.index.pgsearch.PgLexicalIndex`). Phrases are FTS phrases
    (:func:`~pinakes_core.index.query.fts_phrases`: double-quoted words).
    """

    def rows(self) -> int:
        """Number of chunks: the N of BM25."""
        ...

    def doc_freq(self, phrase: str) -> int:
        """Rows holding ``phrase``."""
        ...

    def holds(self, phrase: str, chunk_id: int) -> bool:
        """Whether chunk ``chunk_id`` holds ``phrase``."""
        ...

    def held(self, phrases: Sequence[str], chunk_id: int) -> set[str]:
        """Which of ``phrases`` chunk ``chunk_id`` holds."""
        ...

    def holders(self, phrases: Sequence[str], chunk_ids: Sequence[int]) -> set[int]:
        """Which of ``chunk_ids`` hold every one of ``phrases``."""
        ...

    def heading_count(self, text: str, at_most: int) -> int | None:
        """Rows whose heading path holds ``text`` as a phrase, counted up to ``at_most``.

        ``None`` when the index cannot read ``text`` as a phrase.
        """
        ...


class Fts5Text:
    """:class:`TextIndex` over the SQLite store's FTS5 table ``chunks_fts``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rows(self) -> int:
        """See :class:`TextIndex` (FTS5's own row count, :func:`~pinakes_core.index.store.chunk_count`)."""
        return chunk_count(self.conn)

    def doc_freq(self, phrase: str) -> int:
        """See :class:`TextIndex`."""
        return int(
            self.conn.execute(
                "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
            ).fetchone()[0]
        )

    def holds(self, phrase: str, chunk_id: int) -> bool:
        """See :class:`TextIndex`."""
        return (
            self.conn.execute(
                "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?",
                (phrase, chunk_id),
            ).fetchone()
            is not None
        )

    def held(self, phrases: Sequence[str], chunk_id: int) -> set[str]:
        """See :class:`TextIndex` (one indexed lookup per phrase)."""
        return {p for p in phrases if self.holds(p, chunk_id)}

    def holders(self, phrases: Sequence[str], chunk_ids: Sequence[int]) -> set[int]:
        """See :class:`TextIndex`; a phrase FTS5 cannot read is held nowhere."""
        if not phrases or not chunk_ids:
            return set()
        try:
            # ``+rowid``: FTS5 reads the phrases' doclists once and the ids filter its rows.
            return {
                int(r[0])
                for r in self.conn.execute(
                    "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? "
                    f"AND +rowid IN ({','.join('?' * len(chunk_ids))})",
                    [" AND ".join(phrases), *chunk_ids],
                )
            }
        except sqlite3.Error:
            return set()

    def heading_count(self, text: str, at_most: int) -> int | None:
        """See :class:`TextIndex` (the ``heading`` column; ``text`` split as FTS5 indexes it)."""
        try:
            return int(
                self.conn.execute(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? "
                    "LIMIT ?)",
                    (f'heading : "{split_cjk(text)}"', at_most),
                ).fetchone()[0]
            )
        except sqlite3.Error:
            return None


def _merge(ranked: _Ranked, more: _Ranked, limit: int) -> _Ranked:
    """The best ``limit`` of two BM25 lists, a row found in both keeping its higher score."""
    best = dict(ranked)
    for chunk, score in more:
        best[chunk] = max(score, best.get(chunk, score))
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:limit]


class Bm25:
    """One query's BM25 lists over a KB's chunks, their scores kept for lexical evidence.

    Args:
        conn: the store connection.
        candidates: how many chunks a list returns.
        filtered: whether the search filters restrict the chunks at all.
        where: returns the filters' SQL condition over ``documents d`` and its parameters
            (called only when ``filtered``).
        allowed_ids: returns the ids of the chunks the filters allow, or ``None``.
        index: returns the tantivy index, or ``None`` (FTS5 ranks).
        max_rows: ``[scale] bm25_max_rows`` (0: never split).
        phrase_counts: the KB's table of rows per FTS phrase for its store generation
            (``None``: this ranker counts its own).
        text: the KB's text index the phrase counts read (``None``: FTS5 over ``conn``).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        candidates: int,
        filtered: bool = False,
        where: Callable[[], tuple[str, list[object]]] = lambda: ("1", []),
        allowed_ids: Callable[[], list[int] | None] = lambda: None,
        index: Callable[[], Any] = lambda: None,
        max_rows: int = 0,
        phrase_counts: dict[str, int] | None = None,
        text: TextIndex | None = None,
    ) -> None:
        self.conn = conn
        self.text: TextIndex = Fts5Text(conn) if text is None else text
        self.candidates = candidates
        self.max_rows = max_rows
        self._filtered = filtered
        self._where = where
        self._allowed_ids = allowed_ids
        self._index = index
        # Rows per FTS phrase: a constant of the KB's content, so a KB passes one dict to all
        # the queries of a store generation; a bare ranker counts its own.
        self._doc_freq: dict[str, int] = {} if phrase_counts is None else phrase_counts
        self._own_freq: dict[str, int] = {}  # phrases too long for the shared table
        #: Per query text: its best ``EVIDENCE_POOL`` × ``candidates`` rows, and whether the
        #: pool is full (a chunk below it scores at most the last one).
        self.pool: dict[str, tuple[_Ranked, bool]] = {}
        self._chunk_total: int | None = None

    @property
    def chunk_total(self) -> int:
        """Number of chunks (rows of the FTS table) in the KB: the N of FTS5's ``bm25()``."""
        if self._chunk_total is None:
            self._chunk_total = self.text.rows()
        return self._chunk_total

    def doc_freq(self, phrase: str) -> int:
        """Number of chunks matching one quoted FTS phrase (whatever the filters), cached.

        The cache is the KB's for its current store generation when it passed one
        (``phrase_counts``): counting a common word
        reads its whole doclist (~0.6 ms for one in 21,000 of 52,000 chunks), and a long
        question's common words recur from query to query.
        """
        # Only short phrases go to the KB's shared table: a query word may be 100,000
        # characters, and 50,000 of those would hold gigabytes in a long-lived server.
        cache = self._doc_freq if len(phrase) <= MAX_SHARED_PHRASE_CHARS else self._own_freq
        index = self._index()
        if index is not None:
            # The index's own count (its tokenizer's), kept apart from FTS5's: a context of
            # the same generation may run on FTS5 (the index went stale meanwhile).
            key = _INDEX_COUNT + phrase
            count = cache.get(key)
            if count is None:
                count = cache[key] = index.doc_freq(phrase)
            return count
        count = cache.get(phrase)
        if count is None:
            count = cache[phrase] = self.text.doc_freq(phrase)
        return count

    def lexical_ceiling(self, text: str) -> float:
        """The most BM25 could give ``text``: Σ over its FTS phrases of (k1 + 1) × IDF.

        FTS5 scores a phrase IDF × f·(k1 + 1) / (f + k1·(1 − b + b·len/avglen)), which tends to
        (k1 + 1) × IDF as its (column-weighted) frequency f grows, so no chunk reaches the sum.
        """
        return self.phrase_ceiling(fts_phrases(text))

    def phrase_ceiling(self, phrases: list[str]) -> float:
        """Σ (k1 + 1) × IDF over ``phrases``: more than any chunk's BM25 from them alone.

        With the tantivy index the IDF is the one it scores with (Lucene's formula, a
        phrase's the sum of its words', over its rows deleted ones included).
        """
        index = self._index()
        if index is not None:
            return math.fsum((BM25_K1 + 1.0) * index.idf(p) for p in phrases)
        total = self.chunk_total
        return math.fsum((BM25_K1 + 1.0) * bm25_idf(total, self.doc_freq(p)) for p in phrases)

    def rank(self, text: str) -> _Ranked:
        """FTS5 BM25 over ``text`` with the filters applied inside the query.

        Past ``[scale] bm25_max_rows`` rows a query's common words stop bringing candidates of
        their own (see :meth:`lexical_split`); they still score the candidates the rarer words
        bring, so every score returned is the chunk's exact BM25 for the whole query. The
        channel first splits at 1/:data:`FIRST_SPLIT_SHARE` of that budget and stops as soon as
        the result is provably the exact top :attr:`candidates` (:meth:`split_is_exact`);
        until then it moves the rarest common phrase to the rare ones and scores only the rows
        that brings, as long as the rare phrases' rows fit the whole budget. Where they no
        longer fit, the result is the split at the whole budget (exact in a KB that fits it).
        """
        phrases = fts_phrases(text)
        if not phrases:
            return []
        limit = self.candidates * EVIDENCE_POOL
        if self._index() is not None:
            # Past ``bm25_index_min_chunks``: tantivy's top rows (block-max WAND), a filter
            # as the set of chunk ids it allows (docs/scaling.md).
            ranked: _Ranked = self._index().search(phrases, limit, self._allowed_ids())
            self.pool[text] = (ranked, len(ranked) == limit)
            return ranked[: self.candidates]
        first = self.max_rows and max(self.max_rows // FIRST_SPLIT_SHARE, 1)
        rare, common = self.lexical_split(text, first)
        ranked = self._split_rows([], rare, common, limit)
        rows = sum(map(self.doc_freq, rare)) if common else 0
        # A KB within the whole budget ends exact, as lexical_split would have it.
        cap = math.inf if self.chunk_total <= self.max_rows else self.max_rows
        while common and not self.split_is_exact(ranked, common):
            phrase = min(common, key=self.doc_freq)
            rows += self.doc_freq(phrase)
            if rows > cap:
                # Unproven at the whole budget: the rows holding every common phrase come too,
                # as candidates of their own (the old split's third arm).
                if len(common) > 1:
                    ranked = _merge(ranked, self._rows([" AND ".join(common)], limit), limit)
                break
            common = [p for p in common if p != phrase]
            ranked = self._split_rows(ranked, [phrase], common, limit)
        # FTS5 scores every matching row to sort them, so a longer LIMIT costs little: the
        # extra rows give exact lexical evidence to chunks other channels bring in.
        self.pool[text] = (ranked, len(ranked) == limit)
        return ranked[: self.candidates]

    def split_is_exact(self, ranked: _Ranked, common: list[str]) -> bool:
        """Whether ``ranked``'s first :attr:`candidates` are the exact BM25 top ones.

        A chunk holding none of the rare phrases scores at most the common phrases' ceiling
        (:meth:`phrase_ceiling`), so once the ``candidates``-th score reaches it no such chunk
        can enter the top (MaxScore's argument, Turtle & Flood 1995).
        """
        if len(ranked) < self.candidates:
            return False
        return ranked[self.candidates - 1][1] >= self.phrase_ceiling(common)

    def _split_rows(
        self, ranked: _Ranked, rare: list[str], common: list[str], limit: int
    ) -> _Ranked:
        """``ranked`` merged with the best ``limit`` rows holding a ``rare`` phrase, by BM25.

        Every row is scored over all the phrases (:func:`scored_arms`). The rows holding a
        common phrase too come first; the arm for the rows holding only rare ones runs only if
        they can still enter the best ``limit``: such a row scores less than the rare phrases'
        ceiling (:meth:`phrase_ceiling`), so once the ``limit``-th score reaches it the arm
        cannot change the result, and is skipped. At 1M chunks that arm costs as much as the
        other (FTS5 reads the common phrases' whole doclists for each arm naming them: their
        IDF, and the ``NOT``); it was skipped in every split of 15 of the 20 benchmark queries
        (docs/scaling.md).
        """
        arms = self._split_arms(rare, common)
        if len(arms) == 1:
            rows = self._rows(arms, limit)
            return _merge(ranked, rows, limit) if ranked else rows
        ranked = _merge(ranked, self._rows(arms[1:], limit), limit)
        if not self._may_enter(ranked, rare, limit):
            return ranked
        return _merge(ranked, self._rows(arms[:1], limit), limit)

    def _may_enter(self, ranked: _Ranked, phrases: list[str], limit: int) -> bool:
        """Whether a row scored over ``phrases`` alone could still enter the best ``limit``."""
        return len(ranked) < limit or ranked[-1][1] < self.phrase_ceiling(phrases)

    def _split_arms(self, rare: list[str], common: list[str]) -> list[str]:
        """:func:`scored_arms` for a split, exclusive when that saves work.

        See :data:`EXCLUSIVE_ARM_SHARE`; the phrases' row counts are the KB's (cached).
        """
        rare_rows = sum(map(self.doc_freq, rare))
        exclusive = rare_rows >= EXCLUSIVE_ARM_SHARE * sum(map(self.doc_freq, common))
        return scored_arms(rare, common, exclusive=bool(common) and exclusive)

    def _rows(self, arms: list[str], limit: int) -> _Ranked:
        """The best ``limit`` rows matching any of the FTS expressions ``arms``, by BM25.

        Each arm scores its rows over the phrases in its own expression; BM25 terms are
        positive, so a row's best score over the arms is its BM25 over the most phrases. Each
        arm keeps only its own best ``limit`` rows (a bounded sort, not a sort of every row it
        scores): a row among the best ``limit`` overall by its best arm's score is among that
        arm's best ``limit`` too, since every row ahead of it there is ahead of it overall.
        """
        where, params = self._where()
        # ``+rowid``: a bare ``rowid IN (…)`` is handed to FTS5, which then runs the MATCH once
        # per allowed row, each time re-reading every phrase's doclist for its IDF: a path
        # filter passing all 6,542 chunks of nushell-docs took 7.5 s instead of 64 ms.
        restrict = (
            f" AND +chunks_fts.rowid IN ({allowed_chunks_sql(where)})" if self._filtered else ""
        )
        if len(arms) == 1:
            sql = (
                f"SELECT chunks_fts.rowid, {_BM25_SQL} AS s FROM chunks_fts "
                f"WHERE chunks_fts MATCH ?{restrict} ORDER BY s, chunks_fts.rowid LIMIT ?"
            )
        else:
            sql = (
                "SELECT rowid, MIN(s) AS s FROM ("
                + " UNION ALL ".join(
                    f"SELECT * FROM (SELECT chunks_fts.rowid AS rowid, {_BM25_SQL} AS s "
                    f"FROM chunks_fts WHERE chunks_fts MATCH ?{restrict} "
                    "ORDER BY s, chunks_fts.rowid LIMIT ?)"
                    for _ in arms
                )
                + ") GROUP BY rowid ORDER BY s, rowid LIMIT ?"
            )
        each = [limit] if len(arms) > 1 else []
        args = [value for arm in arms for value in (arm, *params, *each)] + [limit]
        return [(int(r[0]), -float(r[1])) for r in self.conn.execute(sql, args).fetchall()]

    def lexical_split(self, text: str, budget: int | None = None) -> tuple[list[str], list[str]]:
        """Split ``text``'s FTS phrases into the rare ones that bring candidates, and the rest.

        FTS5 has no top-k pruning: it scores every row matching any query word, ~2 µs a row, so
        at a million chunks a question holding "command" or "table" scores 200,000–500,000 rows
        (docs/scaling.md). Past ``[scale] bm25_max_rows`` rows (the sum of the phrases' document
        frequencies), the rarest phrases whose rows fit that budget bring the candidates, with
        the rows holding every other phrase; the others only score them (the idea of
        Elasticsearch's retired ``common`` terms query, ``cutoff_frequency``). A chunk holding
        some of the common words but none of the rare ones is then missed; its BM25 is at most
        Σ (k1 + 1) × IDF over those words, small because they are common. At 1M chunks this kept
        the exact top 50 on all 20 benchmark queries (docs/scaling.md). Returns ``(phrases,
        [])``, the exact query, for a KB of at most ``budget`` chunks (default ``bm25_max_rows``),
        when the budget is 0, or when every phrase fits.
        """
        phrases = fts_phrases(text)
        if budget is None:
            budget = self.max_rows
        if budget <= 0 or len(phrases) < 2 or self.chunk_total <= budget:
            return phrases, []
        rare: set[str] = set()
        rows = 0
        for phrase in sorted(phrases, key=self.doc_freq):
            count = self.doc_freq(phrase)
            if rare and rows + count > budget:
                break
            rare.add(phrase)
            rows += count
        return [p for p in phrases if p in rare], [p for p in phrases if p not in rare]
