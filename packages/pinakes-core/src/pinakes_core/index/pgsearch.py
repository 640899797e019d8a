"""Search on PostgreSQL (issue 38): the lexical index and the dense ANN over a ``PostgresStore``.

The search side asks a store kind for its parts in one place
(:func:`pinakes_core.search.parts.search_parts`); for a
:class:`~pinakes_core.index.pgstore.PostgresStore` they are:

* :class:`PgLexicalIndex`: BM25 over the store's ``postings`` table with the interface the
  BM25 channel uses of the tantivy index (:class:`~pinakes_core.index.lexical.LexicalIndex`:
  ``doc_freq``, ``idf``, ``search`` with the chunk ids a filter allows, ``len``), plus what the
  query's phrase checks read of FTS5 on SQLite (:class:`~pinakes_core.index.bm25.TextIndex`:
  rows holding a phrase, which phrases a chunk holds, which chunks hold them all, headings
  holding one). Words are made as SQLite's FTS5 makes them, split, folded and Porter-stemmed
  in Python (:func:`~pinakes_core.index.stemmer.terms`), and read through the ``simple``
  configuration, as the store indexed them. One word is
  one lexeme of ``postings``; a phrase of several words is ``chunks.tsv @@ phraseto_tsquery``
  (the GIN index), its words in order. The ranking is the store's BM25
  (:meth:`PostgresStore.lexical <pinakes_core.index.pgstore.PostgresStore.lexical>`: k1 1.2,
  b 0.75, column weights 2 / 1.5 / 1 / 1, and the IDF the SQLite backend scores with at the
  KB's size: FTS5's below ``[scale] bm25_index_min_chunks``, tantivy's (Lucene's) from it on,
  :func:`term_idf`) over the query's distinct lexemes,
  plus one term per phrase of several words (a quoted span, an identifier such as
  ``csv-parser``) whose tf is the weights of the columns it stands in, as FTS5's ``bm25()``
  counts a phrase (:func:`~pinakes_core.index.pgstore.phrase_tf_sql`); a filter
  restricts the rows scored, never the IDF (as FTS5's ``bm25()``). The lexemes of the phrases
  and their row counts are read once per store generation. Past ``[scale] bm25_max_rows``
  (a KB of more chunks whose query terms hold more rows than that in all) each term's
  postings are read best first from the impact index a sync made
  (:data:`~pinakes_core.index.pgstore.IMPACT_INDEX`) in growing depths until the threshold
  algorithm's bound closes (:data:`_TOPK_SQL`): the exact top ``k``, as the exact statement
  gives it. A store without that index splits the query's terms as the FTS5 channel splits
  its phrases (:data:`_SPLIT_SQL`): the rarest terms whose rows fit the budget bring the
  candidates, the common ones only score those that can still reach the top (MaxScore's
  bound), through the postings' key.
* :class:`PgAnn`: the dense channel's candidates from pgvector (:meth:`PostgresStore.nearest
  <pinakes_core.index.pgstore.PostgresStore.nearest>`: HNSW once sync made the index, an exact
  scan before), which the channel scores exactly against the vectors it holds in memory.
* the vectors themselves: ``PostgresStore.load_vectors`` once per store generation, in memory
  (no snapshot file: a server of a postgres KB keeps nothing on local disk).

Reads go through the store's ``_read`` (a dropped connection is reopened once), in the
driver's own ``%s`` style, with the schema on the search path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from pinakes_core.index.bm25 import bm25_idf
from pinakes_core.index.lexical import ceiling_idf
from pinakes_core.index.pgstore import (
    BM25_ARGS,
    BM25_ROWS_SQL,
    BM25_SQL,
    IMPACT_INDEX,
    TS_CONFIG,
    impact_sql,
    index_words,
    mean_length,
    phrase_tf_sql,
)
from pinakes_core.index.store import VectorMatrix

if TYPE_CHECKING:
    from pathlib import Path

    from pinakes_core.config import ScaleConfig
    from pinakes_core.index.pgstore import PostgresStore

__all__ = ["MAX_CACHED", "SCAN_RATIO", "SPLIT_WORK_MEM", "PgAnn", "PgLexicalIndex", "PgSearchParts"]

_T = TypeVar("_T")

#: Most phrases (and lexemes) one index keeps the analysis and row counts of; past it, it
#: starts again (a long-lived server seeing many distinct words).
MAX_CACHED = 50_000


# A phrase's text for the analyser (``simple``): its words as FTS5 stores them, quotes dropped.
def _text(phrase: str) -> str:
    return index_words(phrase.replace('"', " "))


#: Per phrase (by position in the array), its distinct lexemes and each one's rows.
_ANALYSE_SQL = """
SELECT p.i, x.lexeme, (SELECT count(*) FROM postings WHERE lexeme = x.lexeme)
FROM unnest(%(texts)s::text[]) WITH ORDINALITY p(t, i),
     LATERAL unnest(tsvector_to_array(to_tsvector(%(cfg)s, p.t))) x(lexeme)
"""


#: BM25 past the budget: the rows holding a ``rare`` term (a lexeme, or a phrase of several
#: words in order) are scored over the rare terms; the best ``k`` of those, scored over the
#: common lexemes too, give a floor (θ: the least of their scores) the final ``k``-th score
#: cannot be under (at 1M chunks, p50 179.5 → 166.4 ms against the ``k``-th partial score as
#: the floor, 15 golden questions, same results), and only the rows whose partial
#: score plus every common term's most (``ceiling``: Σ (k1 + 1) × IDF) reaches θ are scored
#: over the ``common`` terms too: a probe of the postings' key (lexeme, chunk_id) per row
#: and term, or, for a common term of fewer rows than :data:`SCAN_RATIO` × the candidates,
#: its postings read in key order and hash-joined (``scan``; at 1M chunks a probe cost 7 µs
#: where a posting read in order cost 0.1 µs); for a phrase, a check of the row's ``tsv``. A row holding only common terms is not a candidate:
#: its score is under ``ceiling`` (the FTS5 channel's split, ``index/bm25.py``). IDFs are
#: given (the counts the index keeps), over every row; ``allowed`` restricts the rows scored.
_SPLIT_SQL = """
WITH rare_hits AS MATERIALIZED (
    SELECT h.chunk_id, w.idf, h.tf, h.length
    FROM unnest(%(rare)s::text[], %(rare_idf)s::float8[]) w(lexeme, idf)
    JOIN postings h ON h.lexeme = w.lexeme {allowed}
    UNION ALL
    SELECT c.chunk_id, w.idf, {phrase_tf_w}, c.length
    FROM unnest(%(rare_phrases)s::text[], %(rare_phrase_idf)s::float8[]) w(t, idf)
    JOIN chunks c ON c.tsv @@ phraseto_tsquery(%(cfg)s, w.t) {allowed_c}),
partial AS MATERIALIZED (
    SELECT chunk_id, max(length) AS length,
           sum(idf * tf * %(k1p)s / (tf + %(k1)s * (1 - %(b)s + %(b)s * length / %(avg)s)))
               AS score
    FROM rare_hits GROUP BY chunk_id),
top AS MATERIALIZED (
    SELECT * FROM partial ORDER BY score DESC, chunk_id LIMIT %(k)s),
floor AS (
    SELECT CASE WHEN count(*) >= %(k)s THEN min(t.score + coalesce((
        SELECT sum(w.idf * h.tf * %(k1p)s
                   / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * t.length / %(avg)s)))
        FROM unnest(%(common_all)s::text[], %(common_all_idf)s::float8[]) w(lexeme, idf)
        JOIN postings h ON h.lexeme = w.lexeme AND h.chunk_id = t.chunk_id), 0))
    ELSE 0 END AS theta
    FROM top t),
open AS MATERIALIZED (
    SELECT p.* FROM partial p, floor WHERE p.score + %(ceiling)s >= floor.theta),
scanned AS MATERIALIZED (
    SELECT h.chunk_id, w.idf, h.tf
    FROM unnest(%(scan)s::text[], %(scan_idf)s::float8[]) w(lexeme, idf)
    JOIN postings h ON h.lexeme = w.lexeme),
more AS (
    SELECT o.chunk_id, w.idf * h.tf * %(k1p)s
               / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * o.length / %(avg)s)) AS score
    FROM open o
    CROSS JOIN unnest(%(common)s::text[], %(common_idf)s::float8[]) w(lexeme, idf)
    JOIN postings h ON h.lexeme = w.lexeme AND h.chunk_id = o.chunk_id
    UNION ALL
    SELECT o.chunk_id, s.idf * s.tf * %(k1p)s
               / (s.tf + %(k1)s * (1 - %(b)s + %(b)s * o.length / %(avg)s))
    FROM scanned s JOIN open o ON o.chunk_id = s.chunk_id
    UNION ALL
    SELECT o.chunk_id, w.idf * pt.tf * %(k1p)s
               / (pt.tf + %(k1)s * (1 - %(b)s + %(b)s * o.length / %(avg)s))
    FROM open o JOIN chunks c ON c.chunk_id = o.chunk_id
    CROSS JOIN unnest(%(common_phrases)s::text[], %(common_phrase_idf)s::float8[]) w(t, idf)
    CROSS JOIN LATERAL (SELECT {phrase_tf_w} AS tf) pt
    WHERE c.tsv @@ phraseto_tsquery(%(cfg)s, w.t))
SELECT chunk_id, sum(score) AS score
FROM (SELECT chunk_id, score FROM open UNION ALL SELECT chunk_id, score FROM more) s
GROUP BY chunk_id ORDER BY score DESC, chunk_id LIMIT %(k)s
""".replace("{phrase_tf_w}", phrase_tf_sql("c.tsv", "w.t"))


#: Every term's weight in the chunks of ``{chosen}`` (a CTE of chunk ids with their ``seen``
#: bits): the rows read, the postings of the lexemes they were not read for (one index scan a
#: term, the chunk ids as an array), the phrases they hold (through ``chunks.tsv``).
_ROWS_OF = """
    SELECT r.chunk_id, r.i, r.w FROM r JOIN {chosen} o ON o.chunk_id = r.chunk_id
    UNION ALL
    SELECT h.chunk_id, b.i, b.idf * h.tf * %(k1p)s
               / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.length / %(avg)s))
    FROM bound b CROSS JOIN LATERAL (
        SELECT chunk_id, tf, length FROM postings WHERE lexeme = b.lexeme AND chunk_id = ANY(
            ARRAY(SELECT o.chunk_id FROM {chosen} o WHERE o.seen & (1::bigint << b.i::int) = 0))) h
    WHERE b.most > 0 AND NOT b.phrase
    UNION ALL
    SELECT c.chunk_id, b.i, b.idf * c.tf * %(k1p)s
               / (c.tf + %(k1)s * (1 - %(b)s + %(b)s * c.length / %(avg)s))
    FROM bound b CROSS JOIN LATERAL (
        SELECT chunk_id, length, {phrase_tf_b} AS tf FROM chunks WHERE chunk_id = ANY(
            ARRAY(SELECT o.chunk_id FROM {chosen} o)) AND tsv @@ phraseto_tsquery(%(cfg)s, b.lexeme)) c
    WHERE b.most > 0 AND b.phrase""".replace(
    "{phrase_tf_b}", phrase_tf_sql("chunks.tsv", "b.lexeme")
)

#: BM25's exact top ``k`` past the budget, read best first (issue 38): one round of the
#: threshold algorithm over the impact index (:data:`~pinakes_core.index.pgstore.IMPACT_INDEX`).
#: Each query lexeme ``t`` has its first ``depth`` postings read by impact (``r``): a row read
#: gets its exact weight; a row not read for ``t`` gets at most ``most``: IDF × (k1 + 1) ×
#: ``margin`` (max(1, A / A0)) × the last impact read, or 0 once the whole list is read. A
#: phrase of several words is read whole (its rows through ``chunks.tsv``) or not at all (at
#: most IDF × (k1 + 1): its tf, its columns' weights, has no bound). A chunk
#: read for some term has a known part ``lo`` and at most ``lo`` + the ``most`` of the terms it
#: was not read for; a chunk read for none at most Σ ``most``. The best ``k`` by ``lo`` (``top``)
#: are scored exactly (their other terms probed through the postings' key, one index scan per
#: term with the chunk ids as an array); the least of those scores (θ) is a floor of the final
#: ``k``-th. Once Σ ``most`` < θ (``done``) no unread chunk can reach the top, and every chunk
#: whose most reaches θ (``open``) is scored exactly too; the best ``k`` of those are the exact
#: top ``k``, scores summed in the order the exact statement sums them (lexemes, then phrases).
#: Not done: only the first row (θ and each term's ``most``) comes back, and the caller reads
#: deeper. ``{impact}``: the impact expression at the index's A0; ``{allowed}``: a filter on
#: the chunks scored (the bound is over every row, so it holds for the allowed ones).
_TOPK_SQL = (
    """
WITH t AS (
    SELECT * FROM unnest(%(lexemes)s::text[], %(idf)s::float8[], %(depth)s::int[])
        WITH ORDINALITY t(lexeme, idf, depth, i)),
ph AS (
    SELECT * FROM unnest(%(phrases)s::text[], %(phrase_idf)s::float8[], %(whole)s::bool[])
        WITH ORDINALITY p(t, idf, whole, j)),
r AS MATERIALIZED (
    SELECT t.i, p.chunk_id, p.length, p.impact,
           t.idf * p.tf * %(k1p)s / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / %(avg)s)) AS w
    FROM t CROSS JOIN LATERAL (
        SELECT chunk_id, tf, length, {impact} AS impact FROM postings
        WHERE lexeme = t.lexeme ORDER BY {impact} DESC LIMIT t.depth) p
    UNION ALL
    SELECT %(nlex)s + ph.j, c.chunk_id, c.length, 0::float8,
           ph.idf * c.tf * %(k1p)s
               / (c.tf + %(k1)s * (1 - %(b)s + %(b)s * c.length / %(avg)s))
    FROM ph CROSS JOIN LATERAL (
        SELECT chunk_id, length, {phrase_tf_ph} AS tf FROM chunks
        WHERE tsv @@ phraseto_tsquery(%(cfg)s, ph.t)) c WHERE ph.whole),
bound AS MATERIALIZED (
    SELECT t.i, t.lexeme, t.idf, false AS phrase,
           CASE WHEN coalesce(f.n, 0) < t.depth THEN 0::float8
                ELSE t.idf * %(k1p)s * %(margin)s * f.low END AS most
    FROM t LEFT JOIN (SELECT i, count(*) AS n, min(impact) AS low FROM r GROUP BY i) f
        ON f.i = t.i
    UNION ALL
    SELECT %(nlex)s + ph.j, ph.t, ph.idf, true,
           CASE WHEN ph.whole THEN 0::float8 ELSE ph.idf * %(phrase_most)s END
    FROM ph),
total AS (SELECT coalesce(sum(most), 0) AS most FROM bound),
cand AS MATERIALIZED (
    SELECT r.chunk_id, max(r.length) AS length, sum(r.w) AS lo, sum(b.most) AS seen_most,
           bit_or(1::bigint << r.i::int) AS seen
    FROM r JOIN bound b ON b.i = r.i {allowed}
    GROUP BY r.chunk_id),
top AS MATERIALIZED (SELECT * FROM cand ORDER BY lo DESC, chunk_id LIMIT %(k)s),
top_rows AS ({rows_of_top}),
top_exact AS MATERIALIZED (
    SELECT chunk_id, sum(w ORDER BY i) AS score FROM top_rows GROUP BY chunk_id),
theta AS (
    SELECT CASE WHEN count(*) >= %(k)s THEN min(score) ELSE 0 END AS theta FROM top_exact),
state AS (
    SELECT theta.theta, total.most, total.most < theta.theta OR total.most = 0 AS done
    FROM theta, total),
reach AS MATERIALIZED (
    SELECT c.* FROM cand c, state
    WHERE state.done AND c.lo + state.most - c.seen_most >= state.theta
      AND NOT EXISTS (SELECT 1 FROM top o WHERE o.chunk_id = c.chunk_id)),
ready AS (SELECT count(*) <= %(open_max)s AS ready FROM reach),
open AS MATERIALIZED (SELECT reach.* FROM reach, ready WHERE ready.ready),
open_rows AS ({rows_of_open}),
final AS (
    SELECT chunk_id, score FROM top_exact, state, ready WHERE state.done AND ready.ready
    UNION ALL
    SELECT chunk_id, sum(w ORDER BY i) FROM open_rows GROUP BY chunk_id)
SELECT NULL::bigint, s.theta, s.done AND ready.ready, (SELECT array_agg(most ORDER BY i) FROM bound),
       (SELECT count(*) FROM r), (SELECT count(*) FROM reach), s.done
FROM state s, ready
UNION ALL
(SELECT chunk_id, score, NULL, NULL, NULL, NULL, NULL FROM final
 ORDER BY score DESC, chunk_id LIMIT %(k)s)
""".replace("{phrase_tf_ph}", phrase_tf_sql("chunks.tsv", "ph.t"))
    .replace("{rows_of_top}", _ROWS_OF.replace("{chosen}", "top"))
    .replace("{rows_of_open}", _ROWS_OF.replace("{chosen}", "open"))
)


#: A common term of at most this many times the split's candidate rows has its postings read
#: whole (in key order) rather than probed once per candidate (:data:`_SPLIT_SQL`).
SCAN_RATIO = 30
#: ``work_mem`` of a split's statement (``SET LOCAL``): at 1M chunks the split's p50 went
#: 355 → 234 ms against the default 4 MB (15 golden questions, load ~10).
SPLIT_WORK_MEM = "64MB"
#: Most terms (lexemes and phrases) a best-first read takes: which terms a chunk was read
#: for is a bit each of a ``bigint`` (:data:`_TOPK_SQL`); a longer query is split.
MAX_TERMS = 62
#: The best-first read (:data:`_TOPK_SQL`) starts at this many postings a term, times ``k``
#: (a term of at most twice that many rows is read whole) ...
FIRST_DEPTH = 4
#: ... and, while the bound stays open, multiplies the depth of the terms it deepens by this.
GROWTH = 4
#: Chunks that may still reach the top (``open``) are scored exactly once fewer than this
#: many times ``k`` or than :data:`OPEN_READ` times the postings the next round would add;
#: else it reads deeper (which shrinks their bounds).
OPEN_MIN = 8
OPEN_READ = 8
#: Best-first rounds that would read more than this many times ``[scale] bm25_max_rows``
#: postings in all give way to the split (:data:`_SPLIT_SQL`; the exact statement for one
#: term), whose candidates come from rare terms' rows that fit that budget. On golden cloned
#: 2,252 times (every text in 2,252 tied copies), 1M chunks, the whole search's p50 went
#: 231 → 148 ms against a quarter of the terms' rows, the bound used before (the split alone:
#: 119 ms); on the many-subjects fill no question reads a second round either way.
GIVE_WAY_READ = 1.0


def term_idf(rows: float, count: int, *, lucene: bool) -> float:
    """The IDF of a term held by ``count`` of ``rows`` rows, as ``BM25_SQL`` scores it.

    The SQLite backend's at the KB's size: ``lucene`` (from ``[scale] bm25_index_min_chunks``
    chunks on, where SQLite ranks with tantivy) Lucene's, otherwise FTS5's, floored at 1e-6.
    """
    total = int(rows)
    count = min(max(count, 0), total)
    return ceiling_idf(total, count) if lucene else bm25_idf(total, count)


class PgLexicalIndex:
    """BM25 and phrase checks over one ``PostgresStore``'s postings (see the module docstring).

    Meant to be held for one store generation (:class:`PgSearchParts` makes a new one after
    each write): the row count and the lexemes' row counts are read once. ``max_rows`` is
    ``[scale] bm25_max_rows`` (0: every matching row is scored, at any size); ``lucene_from``
    is ``[scale] bm25_index_min_chunks``: from that many rows on the IDF is Lucene's, below
    it FTS5's (:func:`term_idf`; 0: FTS5's at any size), so a KB ranks as it would on SQLite.
    """

    def __init__(self, store: PostgresStore, *, max_rows: int = 0, lucene_from: int = 0) -> None:
        self._store = store
        self.max_rows = max_rows
        self.lucene_from = lucene_from
        #: The last :meth:`search`'s split: its rare terms, its common ones and their ceiling
        #: (Σ (k1 + 1) × IDF); ``None`` when it scored every matching row.
        self.last_split: tuple[list[str], list[str], float] | None = None
        self._rows: tuple[float, float] | None = None
        #: The impact index's A0 (``meta.impact_avg``), 0.0 without the index; read once.
        self._impact_avg: float | None = None
        #: The last :meth:`search`'s best-first read: its rounds, postings read in the last
        #: round, chunks scored exactly beyond the top ``k``; ``None`` when it did not run.
        self.last_topk: dict[str, Any] | None = None
        #: phrase → its distinct lexemes, in the order the analyser gives them.
        self._lexemes: dict[str, tuple[str, ...]] = {}
        #: lexeme → rows holding it.
        self._df: dict[str, int] = {}
        #: phrase of several words → rows holding its words in order.
        self._phrase_df: dict[str, int] = {}

    def _read(self, job: Callable[[Any], _T]) -> _T:
        return self._store._read(job)

    def _stats(self) -> tuple[float, float]:
        """Rows (chunks) and their summed length, as the store keeps them for BM25."""
        if self._rows is None:
            row = self._read(lambda conn: conn.execute(BM25_ROWS_SQL).fetchone())
            self._rows = (float(row[0] or 0), float(row[1] or 0))
        return self._rows

    def __len__(self) -> int:
        return int(self._stats()[0])

    @property
    def lucene(self) -> bool:
        """Whether the IDF is Lucene's (the KB is past ``lucene_from`` rows) or FTS5's."""
        return 0 < self.lucene_from <= len(self)

    def _idf(self, rows: float, count: int) -> float:
        return term_idf(rows, count, lucene=self.lucene)

    def rows(self) -> int:
        """Number of chunks: the N of BM25 (:class:`~pinakes_core.index.bm25.TextIndex`)."""
        return len(self)

    def _analyse(self, phrases: Sequence[str]) -> None:
        """Read the lexemes of the phrases not seen yet, and their rows, in one statement."""
        todo = list(dict.fromkeys(p for p in phrases if p not in self._lexemes))
        if not todo:
            return
        if len(self._lexemes) + len(todo) > MAX_CACHED:
            self._lexemes.clear()
            self._df.clear()
        texts = [_text(p) for p in todo]

        def job(conn: Any) -> list[tuple[Any, ...]]:
            return list(conn.execute(_ANALYSE_SQL, {"texts": texts, "cfg": TS_CONFIG}))

        found: dict[int, list[str]] = {}
        for i, lexeme, count in self._read(job):
            found.setdefault(int(i) - 1, []).append(str(lexeme))
            self._df[str(lexeme)] = int(count)
        for i, phrase in enumerate(todo):
            self._lexemes[phrase] = tuple(found.get(i, ()))

    def lexemes(self, phrase: str) -> tuple[str, ...]:
        """The distinct lexemes of one FTS phrase (empty: only stopwords, or no word)."""
        self._analyse([phrase])
        return self._lexemes[phrase]

    def _is_phrase(self, phrase: str) -> bool:
        """Whether ``phrase`` is matched as words in order (two lexemes or more), not a word."""
        return len(self.lexemes(phrase)) > 1

    def doc_freq(self, phrase: str) -> int:
        """Rows holding one quoted FTS phrase: its word, or its words in order."""
        lexemes = self.lexemes(phrase)
        if not lexemes:
            return 0
        if not self._is_phrase(phrase):
            return self._df.get(lexemes[0], 0)
        count = self._phrase_df.get(phrase)
        if count is None:
            text = _text(phrase)

            def job(conn: Any) -> int:
                row = conn.execute(
                    "SELECT count(*) FROM chunks WHERE tsv @@ phraseto_tsquery(%s, %s)",
                    (TS_CONFIG, text),
                ).fetchone()
                return int(row[0])

            if len(self._phrase_df) >= MAX_CACHED:
                self._phrase_df.clear()
            count = self._phrase_df[phrase] = self._read(job)
        return count

    def idf(self, phrase: str) -> float:
        """The IDF :meth:`search` scores ``phrase`` with (:func:`term_idf`, over every row).

        A word's is its lexeme's; a phrase of several words is one term of its own, its IDF
        from the rows holding it (its words also count where the query names them alone).
        (k1 + 1) × it bounds what the phrase adds to any row's score.
        """
        rows = float(len(self))
        if self._is_phrase(phrase):
            counts = [self.doc_freq(phrase)]
        else:
            counts = [self._df.get(x, 0) for x in self.lexemes(phrase)]
        return math.fsum(self._idf(rows, c) for c in counts)

    def search(
        self, phrases: list[str], limit: int, allowed: list[int] | None = None
    ) -> list[tuple[int, float]]:
        """The best ``limit`` rows holding any of the FTS ``phrases``, by BM25, best first.

        As FTS5 ranks its query, each phrase is a term: a phrase of one word is that word
        (a stem counts once per phrase: ``parser parsers`` counts ``parser`` twice), a phrase
        of several words counts in the rows holding them in order (``BM25_SQL``), and its
        words count alone only where a phrase names them alone (``csv_parser`` is the phrase
        ``csv parser`` to FTS5, whose tokenizer splits at the underscore, not the words ``csv``
        and ``parser``).
        ``allowed``: when given, only these chunk ids (a filter, resolved by the caller).
        """
        self._analyse(phrases)
        several = [p for p in dict.fromkeys(phrases) if self._is_phrase(p)]
        # Once per phrase of one word: FTS5's bm25() sums its phrases, so two phrases of one
        # stem (``parser parsers``) count it twice (every statement takes a repeat as a term).
        lexemes = sorted(
            x for p in dict.fromkeys(phrases) if not self._is_phrase(p) for x in self._lexemes[p]
        )
        if not (lexemes or several) or limit <= 0 or (allowed is not None and not allowed):
            return []
        n, total = self._stats()
        self.last_split = None
        self.last_topk = None
        if self.max_rows and n > self.max_rows:
            terms = [(x, self._df.get(x, 0), False) for x in lexemes]
            terms += [(_text(p), self.doc_freq(p), True) for p in several]
            if sum(t[1] for t in terms) > self.max_rows:
                avg0 = self.impact_avg()
                if avg0 and len(terms) <= MAX_TERMS:
                    found = self._topk(terms, n, total, limit, allowed, avg0)
                    if found is not None:
                        return found
                # No impact index, or best first would read too deep (ties: copies of one
                # text): the split, which scores the rare terms' rows only.
                if len(terms) > 1:
                    return self._split(terms, n, total, limit, allowed)
        several = [_text(p) for p in several]
        params: dict[str, Any] = {
            "lexemes": lexemes,
            "phrases": several,
            "cfg": TS_CONFIG,
            "n": n,
            "lucene": self.lucene,
            "avg": mean_length(n, total),
            **BM25_ARGS,
            "k": limit,
        }
        where = ""
        if allowed is not None:
            where = "WHERE chunk_id = ANY(%(allowed)s::bigint[])"
            params["allowed"] = list(allowed)
        statement = BM25_SQL.format(allowed=where)

        def job(conn: Any) -> list[tuple[int, float]]:
            return [(int(r[0]), float(r[1])) for r in conn.execute(statement, params)]

        return self._read(job)

    def impact_avg(self) -> float:
        """The impact index's reference mean length A0; 0.0 where the store has no index."""
        if self._impact_avg is None:

            def job(conn: Any) -> tuple[Any, ...]:
                row = conn.execute(
                    "SELECT (SELECT value FROM meta WHERE key = 'impact_avg'), "
                    "to_regclass(%s) IS NOT NULL",
                    (IMPACT_INDEX,),
                ).fetchone()
                return tuple(row)

            value, made = self._read(job)
            self._impact_avg = float(value) if value is not None and made else 0.0
        return self._impact_avg

    def _topk(
        self,
        terms: list[tuple[str, int, bool]],
        n: float,
        total: float,
        limit: int,
        allowed: list[int] | None,
        avg0: float,
    ) -> list[tuple[int, float]] | None:
        """BM25's exact top ``limit``, each term's postings read best first (:data:`_TOPK_SQL`).

        ``terms``: (lexeme or phrase text, rows holding it, whether a phrase), lexemes first
        in sorted order, then the phrases in the query's (the order the exact statement sums
        them). Each round reads every lexeme to its depth; while the bound stays open (Σ of
        what an unread row can get ≥ θ), the terms with the most left to give are read
        :data:`GROWTH` times deeper (a phrase: whole), the fewest whose most covers the gap.
        A term read to its end gives nothing more to unread rows, so the rounds end. ``None``
        once the rounds would read more than :data:`GIVE_WAY_READ` times the budget in all:
        the split (or, for one term, the exact statement) is cheaper than that.
        """
        avg = mean_length(n, total)
        lexemes = [t for t in terms if not t[2]]
        phrases = [t for t in terms if t[2]]
        first = max(FIRST_DEPTH * limit, 1)
        # A term read whole is asked one row more than it holds: fewer rows than the depth
        # is how the statement knows that nothing is left unread.
        depth = [c + 1 if c <= 2 * first else first for _, c, _ in lexemes]
        whole = [c <= self.max_rows for _, c, _ in phrases]
        params: dict[str, Any] = {
            "lexemes": [t[0] for t in lexemes],
            "idf": [self._idf(n, t[1]) for t in lexemes],
            "phrases": [t[0] for t in phrases],
            "phrase_idf": [self._idf(n, t[1]) for t in phrases],
            "nlex": len(lexemes),
            "cfg": TS_CONFIG,
            "avg": avg,
            "margin": max(1.0, avg / avg0),
            # A phrase's tf is its columns' weights, unbounded: (k1 + 1) bounds its weight.
            "phrase_most": BM25_ARGS["k1p"],
            "k": limit,
            **BM25_ARGS,
        }
        where = ""
        if allowed is not None:
            where = "WHERE r.chunk_id = ANY(%(allowed)s::bigint[])"
            params["allowed"] = list(allowed)
        statement = _TOPK_SQL.format(impact=impact_sql(avg0), allowed=where)

        def job(conn: Any) -> list[tuple[Any, ...]]:
            with conn.transaction():
                conn.execute(f"SET LOCAL work_mem = '{SPLIT_WORK_MEM}'")
                return list(conn.execute(statement, params))

        rounds = spent = 0
        while True:
            rounds += 1
            # Scoring the chunks that may still reach θ costs probes; where they are more
            # than OPEN_READ times the postings the next deepening could read, it reads deeper.
            extra = sum(
                min(c + 1, d * GROWTH) - d for (_, c, _), d in zip(lexemes, depth, strict=True)
            )
            extra += sum(c for (_, c, _), w in zip(phrases, whole, strict=True) if not w)
            params["open_max"] = max(OPEN_MIN * limit, OPEN_READ * extra) if extra else 2**62
            params["depth"], params["whole"] = depth, whole
            planned = sum(min(d, c) for (_, c, _), d in zip(lexemes, depth, strict=True))
            planned += sum(c for (_, c, _), w in zip(phrases, whole, strict=True) if w)
            if rounds > 1 and spent + planned > GIVE_WAY_READ * self.max_rows:
                self.last_topk = dict(self.last_topk or {}, gave_way=True)
                return None
            spent += planned
            rows = self._read(job)
            _, theta, ready, most, read, reach, closed = rows[0]
            self.last_topk = {
                "rounds": rounds,
                "read": int(read),
                "open": int(reach),
                "depth": dict(zip(params["lexemes"], depth, strict=True)),
                "theta": float(theta),
                "gave_way": False,
            }
            if ready:
                return [(int(r[0]), float(r[1])) for r in rows[1:]]
            order = sorted(range(len(most)), key=lambda i: -most[i])
            if closed:
                # Closed, but too many chunks may reach θ: read deeper the terms whose unread
                # rows add the most to their bounds.
                gap = math.inf
                order = [i for i in order if most[i] * 4 >= most[order[0]]]
            else:
                # What an unread row can still get, per term, against θ: read deeper the
                # terms with the most, until what they hold covers the gap.
                gap = math.fsum(most) - float(theta)
            for i in order:
                if most[i] <= 0 or gap < 0:
                    break
                if i < len(lexemes):
                    rows_of = lexemes[i][1]
                    deeper = depth[i] * GROWTH
                    depth[i] = rows_of + 1 if deeper > rows_of else deeper
                else:
                    whole[i - len(lexemes)] = True
                gap -= most[i]

    def _split(
        self,
        terms: list[tuple[str, int, bool]],
        n: float,
        total: float,
        limit: int,
        allowed: list[int] | None,
    ) -> list[tuple[int, float]]:
        """BM25 with the rarest terms bringing the candidates (:data:`_SPLIT_SQL`).

        ``terms``: (lexeme or phrase text, rows holding it, whether a phrase). The rarest
        terms whose rows fit ``max_rows`` are the rare ones (at least one), as the FTS5
        channel's :meth:`~pinakes_core.index.bm25.Bm25.lexical_split` chooses them.
        """
        ordered = sorted(terms, key=lambda t: (t[1], t[0]))
        rare: list[tuple[str, int, bool]] = []
        rows = 0
        for term in ordered:
            if rare and rows + term[1] > self.max_rows:
                break
            rare.append(term)
            rows += term[1]
        common = ordered[len(rare) :]

        def pick(group: list[tuple[str, int, bool]], phrase: bool) -> tuple[list[str], list[float]]:
            chosen = [t for t in group if t[2] == phrase]
            return [t[0] for t in chosen], [self._idf(n, t[1]) for t in chosen]

        params: dict[str, Any] = {"cfg": TS_CONFIG, "avg": mean_length(n, total)}
        params.update(BM25_ARGS)
        # Candidates are at most the rare terms' rows: a common term of not many more rows
        # than that is read whole; the others are probed per candidate.
        scan = [t for t in common if not t[2] and t[1] <= SCAN_RATIO * rows]
        probe = [t for t in common if t not in scan]
        for name, group in (
            ("rare", rare),
            ("common", probe),
            ("scan", scan),
            ("common_all", common),
        ):
            params[name], params[f"{name}_idf"] = pick(group, False)
            params[f"{name}_phrases"], params[f"{name}_phrase_idf"] = pick(group, True)
        params["ceiling"] = math.fsum(BM25_ARGS["k1p"] * self._idf(n, t[1]) for t in common)
        params["k"] = limit
        self.last_split = ([t[0] for t in rare], [t[0] for t in common], params["ceiling"])
        if allowed is None:
            statement = _SPLIT_SQL.format(allowed="", allowed_c="")
        else:
            params["allowed"] = list(allowed)
            statement = _SPLIT_SQL.format(
                allowed="AND h.chunk_id = ANY(%(allowed)s::bigint[])",
                allowed_c="AND c.chunk_id = ANY(%(allowed)s::bigint[])",
            )

        def job(conn: Any) -> list[tuple[int, float]]:
            # The split's materialised candidates and common postings spill to disk under
            # the server's default work_mem (4 MB); raised for this statement only.
            with conn.transaction():
                conn.execute(f"SET LOCAL work_mem = '{SPLIT_WORK_MEM}'")
                return [(int(r[0]), float(r[1])) for r in conn.execute(statement, params)]

        return self._read(job)

    # -- the phrase checks (TextIndex) --------------------------------------------------------

    def holds(self, phrase: str, chunk_id: int) -> bool:
        """Whether chunk ``chunk_id`` holds the FTS ``phrase``."""
        return chunk_id in self.holders([phrase], [chunk_id])

    def held(self, phrases: Sequence[str], chunk_id: int) -> set[str]:
        """Which of the FTS ``phrases`` chunk ``chunk_id`` holds, in one statement."""
        todo = [p for p in dict.fromkeys(phrases) if _text(p)]
        if not todo:
            return set()

        def job(conn: Any) -> set[str]:
            rows = conn.execute(
                "SELECT t.i FROM unnest(%s::text[]) WITH ORDINALITY t(p, i), chunks c "
                "WHERE c.chunk_id = %s AND c.tsv @@ phraseto_tsquery(%s, t.p)",
                ([_text(p) for p in todo], chunk_id, TS_CONFIG),
            )
            return {todo[int(r[0]) - 1] for r in rows}

        return self._read(job)

    def holders(self, phrases: Sequence[str], chunk_ids: Sequence[int]) -> set[int]:
        """Which of ``chunk_ids`` hold every one of the FTS ``phrases`` (each in word order)."""
        texts = [_text(p) for p in phrases]
        if not texts or not chunk_ids or not all(texts):
            return set()

        def job(conn: Any) -> set[int]:
            rows = conn.execute(
                "SELECT chunk_id FROM chunks WHERE chunk_id = ANY(%s::bigint[]) AND tsv @@ ALL("
                "ARRAY(SELECT phraseto_tsquery(%s, t) FROM unnest(%s::text[]) t))",
                (list(chunk_ids), TS_CONFIG, texts),
            )
            return {int(r[0]) for r in rows}

        return self._read(job)

    def heading_count(self, text: str, at_most: int) -> int | None:
        """Rows whose heading path holds ``text`` as a phrase, counted up to ``at_most``.

        ``None`` when ``text`` has no word the index holds (nothing to count by).
        """
        phrase = _text(text)
        if not phrase or not self.lexemes(text):  # lexemes() takes the raw text (stems once)
            return None

        def job(conn: Any) -> int:
            # The GIN index finds the rows holding the phrase anywhere; ts_filter keeps the
            # heading's words (weight B, as the store indexed them).
            row = conn.execute(
                "WITH q AS (SELECT phraseto_tsquery(%s, %s) AS q) "
                "SELECT count(*) FROM (SELECT 1 FROM chunks, q WHERE tsv @@ q.q "
                "AND ts_filter(tsv, '{b}') @@ q.q LIMIT %s) s",
                (TS_CONFIG, phrase, at_most),
            ).fetchone()
            return int(row[0])

        return self._read(job)


class PgAnn:
    """The dense channel's candidates from pgvector (:meth:`PostgresStore.nearest`)."""

    def __init__(self, store: PostgresStore, chunks: int) -> None:
        self._store = store
        self._chunks = chunks

    def __len__(self) -> int:
        return self._chunks

    def search(self, vector: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """Chunk ids of (about) the ``count`` nearest rows to ``vector``, best first."""
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        hits = self._store.nearest(np.asarray(vector, dtype=np.float32), count)
        return np.fromiter((h.chunk_id for h in hits), dtype=np.int64, count=len(hits))


class PgSearchParts:
    """What the search side reads of a postgres KB (:class:`pinakes_core.search.parts.SearchParts`).

    Nothing is kept on local disk: vectors are read into memory once per store generation,
    the lexical index is the store's postings, the ANN is pgvector's.
    """

    @property
    def folder(self) -> Path | None:
        """A postgres KB has no local folder (no sync lock to look at, no files beside a store)."""
        return None

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def vectors(self, dim: int) -> tuple[int, VectorMatrix]:
        """The store's generation and its chunk vectors, read into memory.

        The generation is read first: a write between the two reads makes the next query
        read the vectors again, never keep older ones under a newer generation.
        """
        generation = self.store.generation()
        return generation, self.store.load_vectors(dim)

    def ann(self, config: ScaleConfig) -> PgAnn | None:
        """The candidates of pgvector past ``[scale] ann_min_chunks``; ``None`` below (exact scan)."""
        if config.ann_min_chunks <= 0:
            return None
        chunks = self.store.chunk_count()
        return PgAnn(self.store, chunks) if chunks >= config.ann_min_chunks else None

    def lexical_key(self, config: ScaleConfig, generation: int) -> tuple[int, ...] | None:
        """The lexical index's identity: the store generation, the rows budget, Lucene's start."""
        return (generation, config.bm25_max_rows, config.bm25_index_min_chunks)

    def lexical(self, config: ScaleConfig, generation: int) -> PgLexicalIndex:
        """A lexical index for store ``generation`` (its counts are read once, then kept)."""
        return PgLexicalIndex(
            self.store, max_rows=config.bm25_max_rows, lucene_from=config.bm25_index_min_chunks
        )

    def text(self, lexical: Callable[[], Any]) -> PgLexicalIndex:
        """The phrase checks: the searcher's lexical index itself (one per generation)."""
        index: PgLexicalIndex = lexical()
        return index
