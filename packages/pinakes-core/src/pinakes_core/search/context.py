"""The per-query context every retrieval channel shares, and the channel protocol (DESIGN §5).

:class:`QueryContext` holds what one query's channels read: the store connection, the
filters, the chunk vectors, the embedded query and the BM25 lists, each computed lazily and at
most once. :class:`Filters` are applied inside every channel before ranking, so a narrow filter
never starves a channel. :class:`Channel` is what a channel or reranker (core's own in
:mod:`pinakes_core.search.channels`, a plugin's through the ``register_channels`` hook)
looks like.

The BM25 lists themselves are ranked in the index room (:class:`~pinakes_core.index.bm25.Bm25`,
one per context); the context holds the query's share of everything else.
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

from pinakes_core.index.bm25 import Bm25, Fts5Text, TextIndex, allowed_chunks_sql
from pinakes_core.index.query import query_terms
from pinakes_core.index.store import VectorMatrix
from pinakes_core.intake import normal_tag, spellings
from pinakes_core.read.meta import MetaFilter
from pinakes_core.search.arguments import clean_path, clean_text, clean_time
from pinakes_core.search.fusion import QueryShape, query_shape

__all__ = ["Channel", "Filters", "QueryContext", "Ranked"]


#: A channel's output: ``(chunk_id, raw score)`` pairs, best first.
Ranked = list[tuple[int, float]]

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
                clauses.append("1 = 0")
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
        return (" AND ".join(clauses) or "1 = 1"), params


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
        text: Callable[[], TextIndex] | None = None,
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
        self._text = text
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
        return [r[0] for r in self.conn.execute(allowed_chunks_sql(where), params)]

    @_cached
    def allowed_rows(self) -> npt.NDArray[np.bool_] | None:
        """Mask over :attr:`vectors` rows that pass the filters, or ``None`` without filters."""
        ids = self.allowed_ids
        if ids is None:
            return None
        return np.isin(self.vectors.chunk_ids, np.asarray(ids, dtype=np.int64))

    @_cached
    def lexical_index(self) -> Any:
        """The KB's BM25 index, or ``None`` (FTS5 ranks).

        On SQLite the tantivy index past ``[scale] bm25_index_min_chunks``
        (:mod:`pinakes_core.index.lexical`); on PostgreSQL the postings
        (:class:`~pinakes_core.index.pgsearch.PgLexicalIndex`).
        """
        return None if self._lexical is None else self._lexical()

    @_cached
    def text_index(self) -> TextIndex:
        """What the query's phrase checks read (:class:`~pinakes_core.index.bm25.TextIndex`).

        The store's (FTS5 on SQLite, the postings on PostgreSQL); a bare context over a
        SQLite connection reads FTS5.
        """
        return Fts5Text(self.conn) if self._text is None else self._text()

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
    def lexical_ranker(self) -> Bm25:
        """The query's BM25 ranker (:class:`~pinakes_core.index.bm25.Bm25`), made at first use."""
        return Bm25(
            self.conn,
            candidates=self.candidates,
            filtered=self.filters.active,
            where=self.filters.where,
            allowed_ids=lambda: self.allowed_ids,
            index=lambda: self.lexical_index,
            max_rows=self._bm25_max_rows,
            phrase_counts=self._doc_freq,
            text=self.text_index,
        )

    @property
    def chunk_total(self) -> int:
        """Number of chunks (rows of the FTS table) in the KB: the N of FTS5's ``bm25()``."""
        return self.lexical_ranker.chunk_total

    def doc_freq(self, phrase: str) -> int:
        """Number of chunks matching one quoted FTS phrase, whatever the filters, cached.

        See :meth:`Bm25.doc_freq <pinakes_core.index.bm25.Bm25.doc_freq>`; the cache is the KB's
        for its store generation when the context came from :meth:`Searcher.query_context
        <pinakes_core.search.searcher.Searcher.query_context>`.
        """
        return self.lexical_ranker.doc_freq(phrase)

    def lexical_ceiling(self, text: str) -> float:
        """The most BM25 could give ``text`` (:meth:`Bm25.lexical_ceiling <pinakes_core.index.bm25.Bm25.lexical_ceiling>`)."""
        return self.lexical_ranker.lexical_ceiling(text)

    def phrase_ceiling(self, phrases: list[str]) -> float:
        """Σ (k1 + 1) × IDF over ``phrases`` (:meth:`Bm25.phrase_ceiling <pinakes_core.index.bm25.Bm25.phrase_ceiling>`)."""
        return self.lexical_ranker.phrase_ceiling(phrases)

    def bm25(self, text: str) -> Ranked:
        """BM25 over ``text`` with the filters applied (:meth:`Bm25.rank <pinakes_core.index.bm25.Bm25.rank>`)."""
        return self.lexical_ranker.rank(text)

    def split_is_exact(self, ranked: Ranked, common: list[str]) -> bool:
        """Whether ``ranked``'s first ``candidates`` are the exact BM25 top ones (:meth:`Bm25.split_is_exact <pinakes_core.index.bm25.Bm25.split_is_exact>`)."""
        return self.lexical_ranker.split_is_exact(ranked, common)

    def lexical_split(self, text: str, budget: int | None = None) -> tuple[list[str], list[str]]:
        """``text``'s rare and common FTS phrases (:meth:`Bm25.lexical_split <pinakes_core.index.bm25.Bm25.lexical_split>`)."""
        return self.lexical_ranker.lexical_split(text, budget)

    def lexical_evidence(self, text: str, chunk_ids: list[int]) -> dict[int, float]:
        """Lexical evidence of each chunk: its BM25 score for ``text`` over the ceiling, in [0, 1].

        Scores are exact for the :data:`~pinakes_core.index.bm25.EVIDENCE_POOL` × ``candidates`` best BM25 matches, which
        :meth:`bm25` keeps; a chunk below them gets the last one's score when the pool is full
        (an upper bound), and 0 when it is not (the chunk does not match at all).
        """
        ceiling = self.lexical_ceiling(text)
        pool = self.lexical_ranker.pool.get(text)
        if pool is None:
            self.bm25(text)
            pool = self.lexical_ranker.pool.get(text, ([], False))
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
        phrases = [f'"{term}"' for term in query_terms(self.query)[:_MAX_EVIDENCE_TERMS]]
        total = self.chunk_total
        counts = [self.doc_freq(p) for p in phrases]  # shared with the lexical ceiling
        somewhere = [p for p, df in zip(phrases, counts, strict=True) if df > 0]
        held = set() if chunk_id is None else self.text_index.held(somewhere, chunk_id)
        evidence = []
        for phrase, df in zip(phrases, counts, strict=True):
            # BM25's IDF (Robertson–Spärck Jones with +1, as in Lucene): rare words weigh most.
            idf = math.log((total - df + 0.5) / (df + 0.5) + 1.0)
            evidence.append((idf, phrase in held, df > 0))
        return evidence


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
