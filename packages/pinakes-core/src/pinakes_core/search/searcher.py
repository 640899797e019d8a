"""The search side of one KB: what a query reads, kept per store generation, and the recipe.

:class:`Searcher` is what :meth:`KB.search <pinakes_core.kb.KB.search>` and
:meth:`KB.query_context <pinakes_core.kb.KB.query_context>` hand their work to. It is given the
KB's store, config and embedder (as callables: the store opens and the model loads on first
use) and keeps, for the store's current generation, everything queries share: the chunk
vectors, the ANN and BM25 indexes (which of them, and from where, the store's kind says:
:mod:`pinakes_core.search.parts`), the FTS phrase counts, the table of document names and
the confidence calibration. A query then reads top-down once:

1. :func:`search_request` checks the arguments (before anything is synced or loaded);
2. :meth:`Searcher.search` picks the channels (:func:`~pinakes_core.search.retrieval.default_channels`),
   builds the :class:`~pinakes_core.search.context.QueryContext` (:meth:`Searcher.query_context`)
   and runs the recipe (:func:`~pinakes_core.search.retrieval.fuse_and_build`);
3. an empty result gets its note (:mod:`pinakes_core.search.notes`).

The KB itself is passed through as ``owner`` only: a plugin's channel reads it as ``ctx.kb``
and the ``query_entities`` hook receives it; nothing here imports the KB facade.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from pinakes_core.config import CONFIG_FILE, Config, RetrievalConfig
from pinakes_core.errors import IndexMissingError, PinakesError
from pinakes_core.index.bm25 import TextIndex
from pinakes_core.index.embedding import Embedder
from pinakes_core.index.store import Store, VectorMatrix
from pinakes_core.models import SearchResult
from pinakes_core.read.meta import MetaFilter, parse_meta_filter
from pinakes_core.search import calibration as selfcal
from pinakes_core.search.arguments import (
    check_k,
    clean_doc_ids,
    clean_list,
    clean_path,
    clean_query,
    clean_source_types,
    clean_text,
    clean_time,
)
from pinakes_core.search.confidence import Calibration, prior_calibration
from pinakes_core.search.context import Filters, QueryContext
from pinakes_core.search.hits import GroupBy
from pinakes_core.search.notes import empty_note
from pinakes_core.search.parts import SearchParts, search_parts
from pinakes_core.search.retrieval import default_channels, document_names, fuse_and_build

if TYPE_CHECKING:
    from pinakes_core.index.dense import AnnIndex
    from pinakes_core.index.lexical import LexicalIndex
    from pinakes_core.index.pgsearch import PgAnn, PgLexicalIndex

__all__ = ["MAX_COUNTED_PHRASES", "SearchRequest", "Searcher", "search_request"]

log = logging.getLogger(__name__)

TimeLike = float | datetime | None
#: Most FTS phrase counts a KB keeps between queries (a few MB at most; a long-lived server
#: that sees this many distinct words starts again).
MAX_COUNTED_PHRASES = 50_000


@dataclass(frozen=True)
class SearchRequest:
    """One search's arguments, checked (:func:`search_request`).

    Attributes:
        query: the query text, cleaned.
        k: number of hits.
        filters: the restrictions every channel applies.
        entities: extra BM25 list over these names (empty: a plugin may find some).
        concepts: extra dense list over these phrases.
        channels: exactly these channels instead of the configured ones (empty: configured).
        explain: include the per-channel scores, features and ranking decisions.
        group_by: ``"document"`` or ``"chunk"``.
        min_score: leave out hits scoring below this.
        reader: run the reader (``True``) or not (``False``); ``None``: ``[retrieval] reader``.
    """

    query: str
    k: int
    filters: Filters
    entities: tuple[str, ...] = ()
    concepts: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    explain: bool = False
    group_by: GroupBy = "document"
    min_score: float | None = None
    reader: bool | None = None


def search_request(
    retrieval: RetrievalConfig,
    query: str,
    *,
    k: int | None = None,
    tags: Sequence[str] = (),
    path: str | None = None,
    doc_ids: Sequence[str] = (),
    modified_after: TimeLike = None,
    modified_before: TimeLike = None,
    meta: Sequence[str | MetaFilter] = (),
    source_type: str | Sequence[str] = (),
    entities: Sequence[str] = (),
    concepts: Sequence[str] = (),
    channels: Sequence[str] | None = None,
    explain: bool = False,
    group_by: GroupBy = "document",
    min_score: float | None = None,
    reader: bool | None = None,
) -> SearchRequest:
    """Check the arguments of :meth:`KB.search <pinakes_core.kb.KB.search>` (its contract) into a request.

    Nothing is read or loaded: a bad argument is refused before the KB is synced.

    Args:
        retrieval: the KB's ``[retrieval]`` settings (``k``'s default).
        query: any text; it is never parsed as FTS syntax.
        k: number of hits (default ``[retrieval] k``).
        tags: documents must carry all of these tags.
        path: KB-relative path prefix, e.g. ``"runbooks/"``.
        doc_ids: restrict to these document ULIDs.
        modified_after: file modified at or after (UNIX time or datetime).
        modified_before: file modified before (UNIX time or datetime).
        meta: frontmatter field conditions, all of which must hold: ``"status=draft"``,
            ``"priority>2"``, ``"stage in a,b"``, ``"due exists"`` (see
            :mod:`pinakes_core.read.meta`), or parsed ``MetaFilter`` objects.
        source_type: only documents of this source type, or of any of these:
            ``"markdown"``, ``"text"``, ``"pdf"``, ``"code"``.
        entities: extra BM25 list over these names.
        concepts: extra dense list over these phrases.
        channels: run exactly these channels instead of the configured ones.
        explain: include each channel's raw score in every hit, the confidence features
            and how the query was ranked.
        group_by: ``"document"`` (default, as the CLI and MCP search): ``k`` distinct
            documents, each hit its document's best passage with the next best in
            ``passages``; ``"chunk"``: ``k`` passages, several of one document possibly.
        min_score: leave out hits whose score is below this (0-1).
        reader: run the reader (``True``) or not (``False``) instead of ``[retrieval] reader``.

    Raises:
        PinakesError: for an argument that cannot mean anything (``k=0``, ``tags="time"``,
            a path that leaves the KB, a NaN time …), naming it; query text is never
            refused (lone surrogates are replaced, over 100,000 characters it is cut).
        MetaFilterError: if a field condition is not understood.
        PinakesError: if a source type is not one of the four, ``group_by`` is not
            ``"chunk"`` or ``"document"``, or ``min_score`` is not a number in 0-1.
    """
    query = clean_query(query)
    k = check_k(k, retrieval.k)
    tags, entities, concepts = (
        clean_list(tags, "tags"),
        clean_list(entities, "entities"),
        clean_list(concepts, "concepts"),
    )
    if isinstance(meta, str | bytes):
        raise PinakesError(
            f"meta must be a list of field conditions, got the single string {meta[:60]!r}.",
            f"Wrap it in a list: meta=[{meta[:60]!r}].",
        )
    if group_by not in ("chunk", "document"):
        raise PinakesError(
            f"group_by {str(group_by)[:60]!r} is not one of chunk, document.",
            "Use group_by='document' for one hit per document.",
        )
    if min_score is not None and (
        isinstance(min_score, bool)
        or not isinstance(min_score, int | float)
        or not 0.0 <= min_score <= 1.0
    ):
        raise PinakesError(
            f"min_score {str(min_score)[:60]!r} is not a number in 0-1.",
            "Scores are relevance values in [0, 1]; pass e.g. min_score=0.4.",
        )
    filters = Filters(
        tags=tags,
        path=clean_path(path),
        doc_ids=clean_doc_ids(doc_ids),
        modified_after=clean_time(modified_after, "modified_after"),
        modified_before=clean_time(modified_before, "modified_before"),
        meta=tuple(
            m if isinstance(m, MetaFilter) else parse_meta_filter(clean_text(m, "meta"))
            for m in meta
        ),
        source_types=clean_source_types(source_type),
    )
    return SearchRequest(
        query=query,
        k=k,
        filters=filters,
        entities=tuple(entities),
        concepts=tuple(concepts),
        channels=clean_list(channels, "channels"),
        explain=explain,
        group_by=group_by,
        min_score=min_score,
        reader=reader,
    )


class Searcher:
    """The search side of one KB, over its store, config and embedder.

    Args:
        root: the KB folder.
        config: returns the KB's configuration (read at each use: a caller may replace the
            KB's ``config``, as ``benchmarks/eval_sets.py`` does per configuration).
        store: returns the KB's open store (raising :class:`IndexMissingError` if never synced).
        embedder: returns the KB's embedding model, loading it on first use.
        owner: what plugin channels see as ``ctx.kb`` and the ``query_entities`` hook
            receives as ``kb`` (the :class:`~pinakes_core.kb.KB`).
    """

    def __init__(
        self,
        root: Path,
        config: Callable[[], Config],
        store: Callable[[], Store],
        embedder: Callable[[], Embedder],
        owner: Any = None,
    ) -> None:
        self.root = root
        self._config = config
        self._store = store
        self._embedder = embedder
        self._owner = owner
        # The store generation a search on this thread reads everything for (:meth:`generation`).
        self._pinned = threading.local()
        self.reset()

    # -- loaded state ----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything loaded (the store was closed; a reopened one restarts its generations)."""
        self._parts: tuple[Any, SearchParts] | None = None
        self._vectors: VectorMatrix | None = None
        self._generation = -1
        self._ann: AnnIndex | PgAnn | None = None
        self._ann_checked = False
        self._lexical: LexicalIndex | PgLexicalIndex | None = None
        self._lexical_checked = False
        self._lexical_key: tuple[int | None, ...] | None = None
        self._calibration: Calibration | None = None
        self._offtopic: npt.NDArray[np.float32] | None = None
        self._calibration_generation = -1
        self._phrase_counts: dict[str, int] = {}
        self._counted_generation = -1
        self._names: tuple[int, dict[str, list[str]]] = (-1, {})

    def forget_indexes(self) -> None:
        """Reload the vectors and recheck the ANN and tantivy indexes at their next use (after a sync)."""
        self._vectors = None
        self._ann_checked = False
        self._lexical_checked = False

    @property
    def config(self) -> Config:
        """The KB's configuration, as it is now."""
        return self._config()

    @property
    def embedder(self) -> Embedder:
        """The KB's embedding model (loaded on first use)."""
        return self._embedder()

    def store(self) -> Store:
        """The KB's open store.

        Raises:
            IndexMissingError: if the KB was never synced.
        """
        return self._store()

    def parts(self) -> SearchParts:
        """What search reads of the open store beside its SQL, by the store's kind.

        Chosen once per open store (:func:`~pinakes_core.search.parts.search_parts`).
        """
        store = self.store()
        if self._parts is None or self._parts[0] is not store:
            self._parts = (store, search_parts(self.root, store))
        return self._parts[1]

    def generation(self) -> int:
        """The store's generation: the one read when this thread's search began, else read now.

        Everything a search keeps per generation (vectors, indexes, counts, names,
        calibration) is checked against it, so a search reads it once: a read of the store on
        a database server is a round trip (18 of a search's 33 statements on PostgreSQL were
        this one read).
        """
        pinned: int | None = getattr(self._pinned, "generation", None)
        return self.store().generation() if pinned is None else pinned

    def vectors(self) -> VectorMatrix:
        """The chunk vectors as one matrix, loaded once and reloaded after any sync.

        On SQLite the matrix is memory-mapped from the store's vector snapshot (see
        :mod:`pinakes_core.index.dense`), so a fresh process pays for the rows it touches
        only; on PostgreSQL it is read into memory.

        Raises:
            IndexMissingError: if the stored vectors cannot be compared with this KB's query
                vectors (``[embedding] model`` changed to one of another size since the sync).
        """
        store = self.store()
        generation = self.generation()
        if self._vectors is None or generation != self._generation:
            embedder = self.embedder
            dim = int(store.get_meta("dim") or embedder.dim)
            if dim != embedder.dim:
                raise IndexMissingError(
                    f"The index of {self.root} holds {dim}-dimension vectors from "
                    f"{store.get_meta('model_id')!r}, but this KB embeds queries with "
                    f"{embedder.model_id!r} ({embedder.dim} dimensions).",
                    f"Run `pnk sync --kb {self.root}`; it re-embeds every chunk.",
                )
            self._generation, self._vectors = self.parts().vectors(dim)
            self._ann_checked = False
            self._lexical_checked = False
        return self._vectors

    def ann(self) -> AnnIndex | PgAnn | None:
        """The approximate dense index, or ``None`` (dense search then scans exactly).

        There is one when the KB is past ``[scale] ann_min_chunks`` (and, on SQLite, the
        usearch index is current; on PostgreSQL it is pgvector's).
        """
        self.vectors()  # reloads both after another process's sync
        if not self._ann_checked:
            self._ann = self.parts().ann(self.config.scale)
            self._ann_checked = True
        return self._ann

    def lexical(self) -> LexicalIndex | PgLexicalIndex | None:
        """The BM25 index, or ``None`` (the BM25 channel then runs in FTS5).

        On SQLite the tantivy index, when the KB is past ``[scale] bm25_index_min_chunks`` and
        the index is current (a KB below it never imports tantivy); on PostgreSQL always the
        postings. Another process's sync is noticed at the next search (the index's key moves:
        :meth:`SearchParts.lexical_key <pinakes_core.search.parts.SearchParts.lexical_key>`).
        """
        scale = self.config.scale
        parts = self.parts()
        generation = self.generation()
        key = parts.lexical_key(scale, generation)
        if key is None:
            return None
        if not self._lexical_checked or key != self._lexical_key:
            self._lexical_key = key
            self._lexical = parts.lexical(scale, generation)
            self._lexical_checked = True
        return self._lexical

    def text_index(self) -> TextIndex:
        """What a query's phrase checks read: FTS5 on SQLite, the postings on PostgreSQL."""
        return self.parts().text(self.lexical)

    def phrase_counts(self) -> dict[str, int]:
        """Rows per FTS phrase, shared by the queries of the current store generation.

        Any committed write bumps the generation, and with it this starts empty; so does a
        table grown past :data:`MAX_COUNTED_PHRASES`.
        """
        generation = self.generation()
        if (
            generation != self._counted_generation
            or len(self._phrase_counts) >= MAX_COUNTED_PHRASES
        ):
            self._phrase_counts = {}
            self._counted_generation = generation
        return self._phrase_counts

    def document_names(self) -> dict[str, list[str]]:
        """Titles and aliases → ids of their documents, for the current store generation.

        Read at the first query that may be a name after each write (one pass over the
        documents table, 3-4 ms per 1,000 documents here) and shared by the queries after it
        (:func:`pinakes_core.search.retrieval.named_documents`).
        """
        generation = self.generation()
        if self._names[0] != generation:
            self._names = (generation, document_names(self.store().conn))
        return self._names[1]

    # -- calibration -----------------------------------------------------------------------

    def calibration(self) -> Calibration | None:
        """The confidence calibration in force (see :meth:`KB.calibration <pinakes_core.kb.KB.calibration>`).

        In order of preference, the first that matches the store's embedding model: the KB's
        labelled calibration (``pnk eval --calibrate``), its self-calibration, core's
        golden-set prior. ``None`` when none matches.
        """
        store = self.store()
        generation = self.generation()
        if self._calibration_generation != generation:
            model = store.get_meta("model_id")
            own = store.get_meta("calibration")
            labelled = None
            if own:
                try:
                    labelled = Calibration.model_validate_json(own)
                except ValidationError:  # written by an older version: ignored, not fatal
                    labelled = None
            self_fit = selfcal.stored(store)
            prior = prior_calibration()
            found = None
            for candidate in (labelled, self_fit, prior):
                if candidate is not None and candidate.model_id == model:
                    found = candidate
                    break
            self._calibration = found
            self._offtopic = selfcal.load_offtopic(store, model)
            self._calibration_generation = generation
        return self._calibration

    def offtopic_vectors(self) -> npt.NDArray[np.float32] | None:
        """The embedded off-topic reference queries of the last self-calibration, if any."""
        self.calibration()
        return self._offtopic

    def save_calibration(self, calibration: Calibration) -> None:
        """Store a KB-specific calibration in the derived store (used from the next search)."""
        store = self.store()
        with store.transaction() as conn:
            store.set_meta(conn, "calibration", calibration.model_dump_json())

    def self_calibrate(
        self, *, force: bool = False, progress: Callable[[str, int, int], None] | None = None
    ) -> Calibration | None:
        """Fit the confidence calibration from synthetic queries if stale (or ``force``); store it.

        Returns the calibration now stored (``None`` when the KB is empty). The store must be
        current (the caller syncs first).
        """
        store = self.store()
        if not force and not selfcal.stale(store, reader=selfcal.reader_key(self.config.retrieval)):
            return selfcal.stored(store)
        if not int(store.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]):
            return None
        tick = (lambda done, total: progress("calibrate", done, total)) if progress else None
        return selfcal.self_calibrate(self, progress=tick)

    def after_sync(
        self, changed: int, progress: Callable[[str, int, int], None] | None = None
    ) -> list[str]:
        """The search side's work on a freshly synced store; returns warnings for the report.

        Forgets the loaded vectors and indexes, counts ``changed`` documents (added, changed
        or removed) toward the calibration's drift and, under ``[confidence] self_calibrate``,
        refits the calibration if stale (:meth:`self_calibrate`). A failed fit is a refinement
        lost, never the reason a sync fails: the golden-set prior is used, and the warning says so.
        """
        self.forget_indexes()
        selfcal.add_drift(self.store(), changed)
        if not self.config.confidence.self_calibrate:
            return []
        try:
            self.self_calibrate(progress=progress)
        except Exception as exc:  # a refinement: never the reason a sync fails
            log.warning("Pinakes: self-calibration failed (%s); using the prior.", exc)
            return [
                f"confidence self-calibration failed ({type(exc).__name__}: {exc}); "
                "the golden-set prior is used until the next sync"
            ]
        return []

    # -- queries ---------------------------------------------------------------------------

    def query_context(
        self,
        query: str,
        *,
        filters: Filters | None = None,
        candidates: int | None = None,
        embed_query: Callable[[str], npt.NDArray[np.float32]] | None = None,
        entities: tuple[str, ...] = (),
        concepts: tuple[str, ...] = (),
    ) -> QueryContext:
        """The context the channels of one query run in, over this KB's store and vectors.

        ``candidates`` defaults to ``[retrieval] candidates``; ``embed_query`` to the KB's
        model, looked up at the first dense use (a BM25-only query never loads the model).
        """
        return QueryContext(
            query=query,
            conn=self.store().conn,
            filters=filters or Filters(),
            candidates=self.config.retrieval.candidates if candidates is None else candidates,
            vectors=self.vectors,
            embed_query=embed_query or (lambda text: self.embedder.embed_query(text)),
            ann=self.ann,
            ann_oversample=self.config.scale.ann_oversample,
            bm25_max_rows=self.config.scale.bm25_max_rows,
            phrase_counts=self.phrase_counts(),
            lexical=self.lexical,
            text=self.text_index,
            names=self.document_names,
            entities=entities,
            concepts=concepts,
            kb=self._owner,
        )

    def search(self, request: SearchRequest) -> SearchResult:
        """Run one checked request over the current store (the caller synced it first).

        An empty query (no text, entities nor concepts) returns no hits and says so; an empty
        result carries a ``note`` saying why (see :mod:`pinakes_core.search.notes`). The store
        generation is read once, when it begins (:meth:`generation`).

        Raises:
            PluginMissingError: if a requested channel is not installed.
        """
        outer = getattr(self._pinned, "generation", None)
        self._pinned.generation = self.store().generation()
        try:
            return self._search(request)
        finally:
            self._pinned.generation = outer

    def _search(self, request: SearchRequest) -> SearchResult:
        cfg = self.config.retrieval
        query, k, group_by = request.query, request.k, request.group_by
        if not query.strip() and not request.entities and not request.concepts:
            return SearchResult(
                query=query, hits=[], timings_ms={"total": 0.0}, note="The query is empty."
            )
        t0 = time.perf_counter()
        found: tuple[str, ...] = () if request.entities else self.query_entities(query)
        entities = request.entities or found
        entity_ms = round((time.perf_counter() - t0) * 1000, 3)
        names = (
            list(request.channels)
            if request.channels
            else default_channels(
                cfg,
                entities=bool(entities),
                concepts=bool(request.concepts),
                reader=request.reader,
            )
        )
        ctx = self.query_context(
            query,
            filters=request.filters,
            # Per document, several chunks may come from one document: fetch more of them.
            candidates=max(cfg.candidates, k * (3 if group_by == "document" else 1)),
            entities=entities,
            concepts=request.concepts,
        )
        result = fuse_and_build(
            ctx,
            names,
            k=k,
            rrf_k=cfg.rrf_k,
            explain=request.explain,
            weights=cfg.weights,
            calibration=self.calibration(),
            abstain_below=cfg.abstain_below,
            offtopic=self.offtopic_vectors(),
            min_score=request.min_score,
            group_by=group_by,
        )
        if found:
            result.timings_ms["query_entities"] = entity_ms
        result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 3)
        if not result.hits:
            note = empty_note(ctx.conn, self.parts().folder, ctx.filters)
            result = result.model_copy(update={"note": note})
        return result

    def query_entities(self, query: str) -> tuple[str, ...]:
        """Entity names a plugin (pinakes-ner) finds in ``query``; empty without one."""
        if not (self.config.ner.enabled and self.config.ner.auto_entities):
            return ()
        from pinakes_core.plugins import plugin_manager, require_plugins

        require_plugins(self.config, self.root / CONFIG_FILE)
        names = [
            n
            for group in plugin_manager().hook.query_entities(kb=self._owner, query=query)
            for n in group
        ]
        return tuple(dict.fromkeys(names))
