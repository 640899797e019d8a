"""The per-query context every retrieval channel shares, and the channel protocol (DESIGN §5).

:class:`QueryContext` holds what one query's channels read: the store connection, the
filters, the chunk vectors, the embedded query and the BM25 lists, each computed lazily and at
most once. :class:`Filters` are applied inside every channel before ranking, so a narrow filter
never starves a channel. :class:`Channel` is what a channel or reranker (core's own in
:mod:`pinakes_core.search.channels`, a plugin's through the ``register_channels`` hook)
looks like.

This module is longer than most (issue 37): :class:`QueryContext` is one object whose lazily
computed parts depend on each other (the dense job started beside BM25, the shared phrase
counts, the BM25 list split at scale and proven exact), and splitting it would spread one
query's state over modules that each need all of it.
"""

from __future__ import annotations

import functools
import math
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, overload, runtime_checkable

import numpy as np
import numpy.typing as npt

from pinakes_core.index.query import fts_phrases, query_terms
from pinakes_core.index.store import VectorMatrix, chunk_count
from pinakes_core.intake import normal_tag, spellings
from pinakes_core.read.meta import MetaFilter
from pinakes_core.search.arguments import clean_path, clean_text, clean_time
from pinakes_core.search.fusion import BM25_K1, QueryShape, bm25_idf, query_shape

__all__ = ["Channel", "Filters", "QueryContext", "Ranked"]


#: A channel's output: ``(chunk_id, raw score)`` pairs, best first.
Ranked = list[tuple[int, float]]

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
# Confidence looks at no more query words than this (a pasted paragraph is not a question).
_MAX_EVIDENCE_TERMS = 16


_T = TypeVar("_T")


class _cached(Generic[_T]):
    """``functools.cached_property`` without its lock.

    Python 3.11's ``cached_property`` takes one lock per *property*, shared by every instance,
    while it computes. A search's main thread computing ``dense_scores`` waits on its dense job;
    work another search left on the worker ahead of that job (a graph channel's seed vector)
    reading its own context's ``dense_scores`` then waits on the lock forever. Computing a value
    twice when two threads ask at once is harmless here (each is a pure read of the same data).
    """

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.__doc__ = func.__doc__
        self.name = func.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _cached[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> _T | _cached[_T]:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.name] = value  # found there first from now on
        return value


@functools.cache
def _dense_worker() -> ThreadPoolExecutor:
    """The one thread that runs a query's dense work while the calling thread runs BM25."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="pinakes-dense")


# A forked child has none of its parent's threads: it starts its own worker when it needs one.
os.register_at_fork(after_in_child=_dense_worker.cache_clear)


@dataclass(frozen=True)
class Filters:
    """Restrictions applied inside every channel.

    Attributes:
        tags: the document must carry every one of these tags, or a tag nested under it.
        path: the document's path must start with this prefix (KB-relative, POSIX).
        doc_ids: the document must be one of these.
        modified_after: file modified at or after this UNIX time.
        modified_before: file modified before this UNIX time.
        meta: frontmatter field conditions; the document must meet every one.
        source_types: the document's source type must be one of these (``markdown``,
            ``text``, ``pdf``, ``code``).
    """

    tags: tuple[str, ...] = ()
    path: str | None = None
    doc_ids: tuple[str, ...] = ()
    modified_after: float | None = None
    modified_before: float | None = None
    meta: tuple[MetaFilter, ...] = ()
    source_types: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """Whether any restriction is set."""
        return bool(self.tags or self.path or self.doc_ids or self.meta or self.source_types) or (
            self.modified_after is not None or self.modified_before is not None
        )

    def where(self) -> tuple[str, list[object]]:
        """Return a SQL condition over ``documents d`` and its parameters.

        Raises:
            PinakesError: for a path prefix that leaves the KB or a time that is not finite.
        """
        clauses: list[str] = []
        params: list[object] = []
        for tag in dict.fromkeys(normal_tag(clean_text(t, "tags")) for t in self.tags):
            # The tag or one nested under it (``project`` matches ``project/alpha``, as in
            # Obsidian); the range is ``tag/…`` (``0`` follows ``/``), so the index serves it.
            if not tag:  # '#' or '/' alone names no tag: nothing carries it
                clauses.append("0")
                continue
            clauses.append(
                "d.doc_id IN (SELECT doc_id FROM doc_tags WHERE tag = ? OR (tag >= ? AND tag < ?))"
            )
            params += [tag, tag + "/", tag + "0"]
        prefix = clean_path(self.path)
        if prefix is not None:
            # Either Unicode spelling: a folder named on macOS is NFD, the prefix typed NFC.
            forms = spellings(prefix)
            clauses.append("(" + " OR ".join(["substr(d.path, 1, ?) = ?"] * len(forms)) + ")")
            for form in forms:
                params += [len(form), form]
        if self.doc_ids:
            clauses.append(f"d.doc_id IN ({','.join('?' * len(self.doc_ids))})")
            params += [clean_text(d, "doc_ids") for d in self.doc_ids]
        after = clean_time(self.modified_after, "modified_after")
        if after is not None:
            clauses.append("d.mtime_ns >= ?")
            params.append(int(after * 1e9))
        before = clean_time(self.modified_before, "modified_before")
        if before is not None:
            clauses.append("d.mtime_ns < ?")
            params.append(int(before * 1e9))
        if self.source_types:
            clauses.append(f"d.source_type IN ({','.join('?' * len(self.source_types))})")
            params += list(self.source_types)
        for condition in self.meta:
            clause, values = condition.sql()
            clauses.append(clause)
            params += values
        return (" AND ".join(clauses) or "1"), params


#: Longest FTS phrase whose row count a KB keeps for all its queries (:meth:`QueryContext.doc_freq`).
MAX_SHARED_PHRASE_CHARS = 64
#: Prefix of the shared count table's keys for the tantivy index's counts (no FTS phrase
#: starts with it).
_INDEX_COUNT = "\x00index:"


class QueryContext:
    """Everything a channel may need for one query, computed lazily and at most once."""

    def __init__(
        self,
        *,
        query: str,
        conn: sqlite3.Connection,
        filters: Filters,
        candidates: int,
        vectors: Callable[[], VectorMatrix],
        embed_query: Callable[[str], npt.NDArray[np.float32]],
        entities: tuple[str, ...] = (),
        concepts: tuple[str, ...] = (),
        kb: Any = None,
        ann: Callable[[], Any] | None = None,
        ann_oversample: float = 2.0,
        bm25_max_rows: int = 0,
        phrase_counts: dict[str, int] | None = None,
        lexical: Callable[[], Any] | None = None,
        names: Callable[[], dict[str, list[str]]] | None = None,
    ) -> None:
        self.query = query
        self.conn = conn
        self.filters = filters
        self.candidates = candidates
        self.entities = entities
        self.concepts = concepts
        self._vectors = vectors
        self._embed_query = embed_query
        self._ann = ann
        self._ann_oversample = ann_oversample
        self._bm25_max_rows = bm25_max_rows
        self._lexical = lexical
        #: Returns the KB's table of document names (titles and aliases → ids) kept for its
        #: store generation (:meth:`Searcher.document_names
        #: <pinakes_core.search.searcher.Searcher.document_names>`); ``None``: read per query.
        self.names = names
        self.kb = kb
        #: The first-stage fusion ``(chunk_id, score)``, set before after-fusion channels run.
        self.seeds: list[tuple[int, float]] = []
        self.timings_ms: dict[str, float] = {}
        # Rows per FTS phrase: a constant of the KB's content, so a KB passes one dict to all
        # the queries of a store generation (Searcher.query_context); a bare context counts its own.
        self._doc_freq: dict[str, int] = {} if phrase_counts is None else phrase_counts
        self._own_freq: dict[str, int] = {}  # phrases too long for the shared table
        self._bm25_pool: dict[str, tuple[Ranked, bool]] = {}
        self._dense_job: (
            Future[tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | None, Ranked | None]]
            | None
        ) = None
        #: Work a channel started for this query before it runs (:meth:`on_worker`), by key.
        self.prepared: dict[str, Any] = {}
        #: What the reader reranker read (:mod:`pinakes_core.search.reading`): chunk id → its document
        #: and the reader's "answers" logit. Empty when the reader did not run.
        self.read: dict[int, tuple[str, float]] = {}

    @_cached
    def shape(self) -> QueryShape:
        """The query's shape (:func:`pinakes_core.search.fusion.query_shape`), computed once."""
        return query_shape(self.query)

    @_cached
    def vectors(self) -> VectorMatrix:
        """The KB's chunk vectors."""
        return self._vectors()

    @_cached
    def allowed_ids(self) -> list[int] | None:
        """Ids of the chunks that pass the filters, or ``None`` without filters."""
        if not self.filters.active:
            return None
        where, params = self.filters.where()
        return [r[0] for r in self.conn.execute(_allowed_chunks_sql(where), params)]

    @_cached
    def allowed_rows(self) -> npt.NDArray[np.bool_] | None:
        """Mask over :attr:`vectors` rows that pass the filters, or ``None`` without filters."""
        ids = self.allowed_ids
        if ids is None:
            return None
        return np.isin(self.vectors.chunk_ids, np.asarray(ids, dtype=np.int64))

    @_cached
    def lexical_index(self) -> Any:
        """The KB's tantivy BM25 index (:mod:`pinakes_core.index.lexical`), or ``None`` (FTS5)."""
        return None if self._lexical is None else self._lexical()

    def start_dense(self) -> None:
        """Start the dense channel's work on a worker thread, beside the BM25 channel.

        The worker embeds the query and, when the channel will scan every row (no ANN index,
        no filters), scores the rows too; past ``ann_min_chunks`` it searches the index and
        scores its candidates instead (:meth:`dense`). The model (onnxruntime), the matrix
        product (BLAS), usearch, ``pread`` and SQLite all release the GIL, so this overlaps
        the BM25 channel instead of following it. :attr:`query_vector`, :attr:`dense_scores`
        and :meth:`dense` wait for it.
        """
        if self._dense_job is not None or "query_vector" in self.__dict__:
            return
        index = None if self.filters.active or self._ann is None else self._ann()
        vectors = self.vectors
        matrix = (
            vectors.matrix if index is None and not self.filters.active and len(vectors) else None
        )
        count = math.ceil(self.candidates * self._ann_oversample)

        def job() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | None, Ranked | None]:
            vector = self._embed_query(self.query)
            if index is not None:  # the index's candidates, scored exactly, beside BM25 too
                return vector, None, _ann_top(index, vectors, vector, count, self.candidates)
            return vector, None if matrix is None else matrix @ vector, None

        self._dense_job = _dense_worker().submit(job)

    def on_worker(self, job: Callable[[], Any]) -> Future[Any] | None:
        """Run ``job`` on the dense worker after the dense work, or return ``None`` if not started.

        For work that needs only the query vector and in-memory arrays (a graph channel's seed
        vector), so it overlaps the BM25 channel as the dense work does. ``job`` runs on another
        thread: it must not touch the SQLite connection, nor anything computed from it that is
        not computed yet (touch :attr:`vectors` first; :attr:`allowed_rows` reads SQL when
        filters are set).
        """
        if self._dense_job is None:
            return None
        return _dense_worker().submit(job)

    @_cached
    def query_vector(self) -> npt.NDArray[np.float32]:
        """The embedded query."""
        if self._dense_job is not None:
            return self._dense_job.result()[0]
        return self._embed_query(self.query)

    @_cached
    def dense_scores(self) -> npt.NDArray[np.float32]:
        """Cosine of the query to every chunk row (filtered-out rows set to -1)."""
        scores = None if self._dense_job is None else self._dense_job.result()[1]
        return self.cosine(self.query_vector) if scores is None else scores

    @_cached
    def concept_scores(self) -> npt.NDArray[np.float32]:
        """Per chunk row, the best cosine to any of the concept phrases (-1 without concepts)."""
        if not self.concepts or len(self.vectors) == 0:
            return np.full(len(self.vectors), -1.0, dtype=np.float32)
        best: npt.NDArray[np.float32] = np.max(
            np.stack([self.cosine(self._embed_query(c)) for c in self.concepts]), axis=0
        )
        return best

    def cosine_evidence(
        self, scores: npt.NDArray[np.float32], chunk_ids: list[int]
    ) -> dict[int, float]:
        """Semantic evidence of each chunk: its row of ``scores`` clipped to [0, 1]."""
        if not chunk_ids or scores.size == 0:
            return {}
        ids = np.asarray(chunk_ids, dtype=np.int64)
        rows = self.rows_of(ids)
        values = np.where(rows >= 0, scores[np.clip(rows, 0, None)], 0.0)
        return {int(c): float(min(v, 1.0)) for c, v in zip(ids, values, strict=True) if v > 0}

    @_cached
    def chunk_total(self) -> int:
        """Number of chunks (rows of the FTS table) in the KB: the N of FTS5's ``bm25()``."""
        return chunk_count(self.conn)

    def doc_freq(self, phrase: str) -> int:
        """Number of chunks matching one quoted FTS phrase (whatever the filters), cached.

        The cache is the KB's for its current store generation when the context came from
        :meth:`Searcher.query_context <pinakes_core.search.searcher.Searcher.query_context>`: counting a common word
        reads its whole doclist (~0.6 ms for one in 21,000 of 52,000 chunks), and a long
        question's common words recur from query to query.
        """
        # Only short phrases go to the KB's shared table: a query word may be 100,000
        # characters, and 50,000 of those would hold gigabytes in a long-lived server.
        cache = self._doc_freq if len(phrase) <= MAX_SHARED_PHRASE_CHARS else self._own_freq
        index = self.lexical_index
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
            count = cache[phrase] = int(
                self.conn.execute(
                    "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase,)
                ).fetchone()[0]
            )
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
        index = self.lexical_index
        if index is not None:
            return math.fsum((BM25_K1 + 1.0) * index.idf(p) for p in phrases)
        total = self.chunk_total
        return math.fsum((BM25_K1 + 1.0) * bm25_idf(total, self.doc_freq(p)) for p in phrases)

    def lexical_evidence(self, text: str, chunk_ids: list[int]) -> dict[int, float]:
        """Lexical evidence of each chunk: its BM25 score for ``text`` over the ceiling, in [0, 1].

        Scores are exact for the :data:`EVIDENCE_POOL` × ``candidates`` best BM25 matches, which
        :meth:`bm25` keeps; a chunk below them gets the last one's score when the pool is full
        (an upper bound), and 0 when it is not (the chunk does not match at all).
        """
        ceiling = self.lexical_ceiling(text)
        pool = self._bm25_pool.get(text)
        if pool is None:
            self.bm25(text)
            pool = self._bm25_pool.get(text, ([], False))
        ranked, full = pool
        if ceiling <= 0 or not ranked:
            return {}
        raw = dict(ranked)
        floor = ranked[-1][1] if full else 0.0
        evidence = {}
        for chunk in chunk_ids:
            score = raw.get(chunk, floor)
            if score > 0:
                evidence[chunk] = min(score / ceiling, 1.0)
        return evidence

    def cosine(self, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine of ``vector`` to every chunk row, with filtered-out rows set to -1."""
        if len(self.vectors) == 0:
            return np.zeros(0, dtype=np.float32)
        scores = self.vectors.matrix @ vector
        if self.allowed_rows is not None:
            scores = np.where(self.allowed_rows, scores, np.float32(-1.0))
        return scores

    def rows_of(self, chunk_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of each chunk id in :attr:`vectors` (-1 for a chunk without a vector)."""
        ids = self.vectors.chunk_ids
        if ids.size == 0:
            return np.full(chunk_ids.shape, -1, dtype=np.int64)
        rows = np.clip(np.searchsorted(ids, chunk_ids), 0, ids.size - 1)
        return np.where(ids[rows] == chunk_ids, rows, -1)

    def dense(self) -> Ranked:
        """The dense channel: the best :attr:`candidates` chunks by cosine to the query.

        Past ``[scale] ann_min_chunks`` an unfiltered search takes ``ann_oversample`` times the
        candidates from the ANN index and scores them exactly; otherwise every row is scanned.
        """
        index = self._ann() if self._ann is not None and not self.filters.active else None
        if index is None or "dense_scores" in self.__dict__:
            return self.top_dense(self.dense_scores)
        if self._dense_job is not None:
            done = self._dense_job.result()[2]
            if done is not None:
                return done
        count = math.ceil(self.candidates * self._ann_oversample)
        return _ann_top(index, self.vectors, self.query_vector, count, self.candidates)

    def dense_evidence(self, chunk_ids: list[int]) -> dict[int, float]:
        """Semantic evidence of each chunk for the query (see :meth:`cosine_evidence`).

        When the ANN index answered the dense channel, only these chunks' rows are read.
        """
        ann = None if self.filters.active or "dense_scores" in self.__dict__ else self._ann
        if ann is None or ann() is None:
            return self.cosine_evidence(self.dense_scores, chunk_ids)
        ids = np.asarray(chunk_ids, dtype=np.int64)
        rows = self.rows_of(ids)
        keep = rows >= 0
        if not keep.any():
            return {}
        from pinakes_core.index.dense import read_rows

        values = np.asarray(read_rows(self.vectors, rows[keep]) @ self.query_vector, np.float32)
        return {int(c): float(min(v, 1.0)) for c, v in zip(ids[keep], values, strict=True) if v > 0}

    def top_dense(self, scores: npt.NDArray[np.float32]) -> Ranked:
        """The best :attr:`candidates` rows by score; non-positive cosine is no evidence."""
        if scores.size == 0:
            return []
        n = min(self.candidates, scores.size)
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.lexsort((self.vectors.chunk_ids[top], -scores[top]))]
        return [(int(self.vectors.chunk_ids[i]), float(scores[i])) for i in top if scores[i] > 0]

    def term_evidence(self, chunk_id: int | None) -> list[tuple[float, bool, bool]]:
        """Return, per content word of the query, its IDF and where it occurs.

        Each item is ``(BM25 IDF in this KB, whether chunk ``chunk_id`` contains the word,
        whether any chunk does)``, with words stemmed as the index stems them.

        Used by the confidence features.
        """
        terms = query_terms(self.query)[:_MAX_EVIDENCE_TERMS]
        total = self.chunk_total
        evidence = []
        for term in terms:
            phrase = f'"{term}"'
            df = self.doc_freq(phrase)  # shared with the lexical ceiling: counted once
            inside = (
                chunk_id is not None
                and df > 0
                and self.conn.execute(
                    "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?",
                    (phrase, chunk_id),
                ).fetchone()
                is not None
            )
            # BM25's IDF (Robertson–Spärck Jones with +1, as in Lucene): rare words weigh most.
            idf = math.log((total - df + 0.5) / (df + 0.5) + 1.0)
            evidence.append((idf, bool(inside), df > 0))
        return evidence

    def bm25(self, text: str) -> Ranked:
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
        if self.lexical_index is not None:
            # Past ``bm25_index_min_chunks``: tantivy's top rows (block-max WAND), a filter
            # as the set of chunk ids it allows (docs/scaling.md).
            ranked: Ranked = self.lexical_index.search(phrases, limit, self.allowed_ids)
            self._bm25_pool[text] = (ranked, len(ranked) == limit)
            return ranked[: self.candidates]
        first = self._bm25_max_rows and max(self._bm25_max_rows // FIRST_SPLIT_SHARE, 1)
        rare, common = self.lexical_split(text, first)
        ranked = self._split_rows([], rare, common, limit)
        rows = sum(map(self.doc_freq, rare)) if common else 0
        # A KB within the whole budget ends exact, as lexical_split would have it.
        cap = math.inf if self.chunk_total <= self._bm25_max_rows else self._bm25_max_rows
        while common and not self.split_is_exact(ranked, common):
            phrase = min(common, key=self.doc_freq)
            rows += self.doc_freq(phrase)
            if rows > cap:
                # Unproven at the whole budget: the rows holding every common phrase come too,
                # as candidates of their own (the old split's third arm).
                if len(common) > 1:
                    ranked = _merge(ranked, self._bm25_rows([" AND ".join(common)], limit), limit)
                break
            common = [p for p in common if p != phrase]
            ranked = self._split_rows(ranked, [phrase], common, limit)
        # FTS5 scores every matching row to sort them, so a longer LIMIT costs little: the
        # extra rows give exact lexical evidence to chunks other channels bring in.
        self._bm25_pool[text] = (ranked, len(ranked) == limit)
        return ranked[: self.candidates]

    def split_is_exact(self, ranked: Ranked, common: list[str]) -> bool:
        """Whether ``ranked``'s first :attr:`candidates` are the exact BM25 top ones.

        A chunk holding none of the rare phrases scores at most the common phrases' ceiling
        (:meth:`phrase_ceiling`), so once the ``candidates``-th score reaches it no such chunk
        can enter the top (MaxScore's argument, Turtle & Flood 1995).
        """
        if len(ranked) < self.candidates:
            return False
        return ranked[self.candidates - 1][1] >= self.phrase_ceiling(common)

    def _split_rows(self, ranked: Ranked, rare: list[str], common: list[str], limit: int) -> Ranked:
        """``ranked`` merged with the best ``limit`` rows holding a ``rare`` phrase, by BM25.

        Every row is scored over all the phrases (:func:`_scored_arms`). The rows holding a
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
            rows = self._bm25_rows(arms, limit)
            return _merge(ranked, rows, limit) if ranked else rows
        ranked = _merge(ranked, self._bm25_rows(arms[1:], limit), limit)
        if not self._may_enter(ranked, rare, limit):
            return ranked
        return _merge(ranked, self._bm25_rows(arms[:1], limit), limit)

    def _may_enter(self, ranked: Ranked, phrases: list[str], limit: int) -> bool:
        """Whether a row scored over ``phrases`` alone could still enter the best ``limit``."""
        return len(ranked) < limit or ranked[-1][1] < self.phrase_ceiling(phrases)

    def _split_arms(self, rare: list[str], common: list[str]) -> list[str]:
        """:func:`_scored_arms` for a split, exclusive when that saves work.

        See :data:`EXCLUSIVE_ARM_SHARE`; the phrases' row counts are the KB's (cached).
        """
        rare_rows = sum(map(self.doc_freq, rare))
        exclusive = rare_rows >= EXCLUSIVE_ARM_SHARE * sum(map(self.doc_freq, common))
        return _scored_arms(rare, common, exclusive=bool(common) and exclusive)

    def _bm25_rows(self, arms: list[str], limit: int) -> Ranked:
        """The best ``limit`` rows matching any of the FTS expressions ``arms``, by BM25.

        Each arm scores its rows over the phrases in its own expression; BM25 terms are
        positive, so a row's best score over the arms is its BM25 over the most phrases. Each
        arm keeps only its own best ``limit`` rows (a bounded sort, not a sort of every row it
        scores): a row among the best ``limit`` overall by its best arm's score is among that
        arm's best ``limit`` too, since every row ahead of it there is ahead of it overall.
        """
        where, params = self.filters.where()
        # ``+rowid``: a bare ``rowid IN (…)`` is handed to FTS5, which then runs the MATCH once
        # per allowed row, each time re-reading every phrase's doclist for its IDF: a path
        # filter passing all 6,542 chunks of nushell-docs took 7.5 s instead of 64 ms.
        restrict = (
            f" AND +chunks_fts.rowid IN ({_allowed_chunks_sql(where)})"
            if self.filters.active
            else ""
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
            budget = self._bm25_max_rows
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


def _allowed_chunks_sql(where: str) -> str:
    """The ids of the chunks of the documents meeting ``where`` (a condition on ``d``).

    Documents first, then their chunks by the ``(doc_id, ordinal)`` index: the join the other
    way round scanned every chunk (at 1M chunks, a path filter's ids 800 → 70 ms).
    """
    return (
        "SELECT c.chunk_id FROM chunks c WHERE c.doc_id IN "
        f"(SELECT d.doc_id FROM documents d WHERE {where})"
    )


def _ann_top(
    index: Any,
    vectors: VectorMatrix,
    vector: npt.NDArray[np.float32],
    count: int,
    candidates: int,
) -> Ranked:
    """The best ``candidates`` of the index's ``count`` nearest rows, by their exact cosine.

    Touches no SQLite connection: it runs on the dense worker (:meth:`QueryContext.start_dense`).
    """
    found = index.search(vector, count)
    ids = vectors.chunk_ids
    if ids.size == 0:
        return []
    rows = np.clip(np.searchsorted(ids, found), 0, ids.size - 1)
    rows = np.unique(rows[ids[rows] == found])
    if rows.size == 0:
        return []
    from pinakes_core.index.dense import read_rows

    scores = np.asarray(read_rows(vectors, rows) @ vector, dtype=np.float32)
    n = min(candidates, rows.size)
    top = np.argpartition(-scores, n - 1)[:n]
    top = top[np.lexsort((ids[rows[top]], -scores[top]))]
    return [(int(ids[rows[i]]), float(scores[i])) for i in top if scores[i] > 0]


def _scored_arms(rare: list[str], common: list[str], *, exclusive: bool = False) -> list[str]:
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


def _merge(ranked: Ranked, more: Ranked, limit: int) -> Ranked:
    """The best ``limit`` of two BM25 lists, a row found in both keeping its higher score."""
    best = dict(ranked)
    for chunk, score in more:
        best[chunk] = max(score, best.get(chunk, score))
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:limit]


@runtime_checkable
class Channel(Protocol):
    """A retrieval channel: a name and a function from a query context to a ranked list.

    A channel whose ``after_fusion`` attribute is true runs after the others, with their fused
    ranking in ``ctx.seeds`` (graph channels start from it). A channel may also have an
    ``evidence(ctx, ranked, chunk_ids)`` method returning, for any of ``chunk_ids``, evidence in
    [0, 1] that means the same across queries (see :mod:`pinakes_core.search.fusion`); a channel
    without one contributes by rank only. A ``kind`` attribute (``"lexical"`` or
    ``"semantic"``) lets the query's shape weigh it.

    A *reranker* is registered the same way but has ``rerank(ctx, fused)``: it takes the fused
    ``(chunk_id, score)`` ranking and returns a new one, best first, with scores in the same
    units (relevance in [0, 1]). A reranker with ``gated = True`` also has ``wanted(ctx,
    fused) -> (bool, reason)`` and runs only when it says it can help the query.

    Any of them may have ``prepare(ctx)``, called before the first stage runs, to start work
    that needs only the query (e.g. on the dense worker through :meth:`QueryContext.on_worker`)
    so it overlaps the BM25 channel.
    """

    @property
    def name(self) -> str:
        """The channel's unique name (``bm25``, ``dense``, ``expand`` …)."""
        ...

    def run(self, ctx: QueryContext) -> Ranked:
        """Return ``(chunk_id, score)`` pairs, best first, at most ``ctx.candidates`` long."""
        ...
