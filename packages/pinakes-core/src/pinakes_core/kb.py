"""The :class:`KB` object: one knowledge base, its config, its store and its loaded vectors."""

from __future__ import annotations

import bisect
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from pinakes_core.config import (
    CONFIG_FILE,
    Config,
    SidecarPolicy,
    load_config,
    normalise_rel,
)
from pinakes_core.errors import (
    ConfigError,
    DocumentNotFoundError,
    IndexMissingError,
    IndexWriteError,
    PinakesError,
    PluginMissingError,
    UnsafeFileError,
)
from pinakes_core.index.backend import check_backend
from pinakes_core.index.embedding import Embedder, load_embedder
from pinakes_core.index.store import (
    SCHEMA_VERSION,
    Store,
    VectorMatrix,
    disk_full,
    lexical_paths,
    writable,
)
from pinakes_core.intake import read_limited, spellings
from pinakes_core.manage.folder import find_root, make_kb_folder
from pinakes_core.models import (
    DoctorReport,
    DocumentInfo,
    DocumentList,
    DocumentView,
    LinksResult,
    LinkView,
    SearchResult,
    Status,
    SyncReport,
)
from pinakes_core.read.identity import frontmatter_id
from pinakes_core.read.meta import MetaFilter, parse_meta_filter
from pinakes_core.read.sections import SliceError, slice_document
from pinakes_core.read.sidecar import (
    append_link,
    read_sidecar,
    sidecar_path,
    write_skeleton,
)
from pinakes_core.read.sources import text_from_chunks
from pinakes_core.search import calibration as selfcal
from pinakes_core.search.arguments import (
    check_depth,
    check_k,
    clean_doc_ids,
    clean_list,
    clean_path,
    clean_query,
    clean_source_types,
    clean_text,
    clean_time,
)
from pinakes_core.search.channels import Filters, QueryContext
from pinakes_core.search.confidence import Calibration, prior_calibration
from pinakes_core.search.hits import GroupBy
from pinakes_core.search.notes import empty_note
from pinakes_core.search.retrieval import default_channels, document_names, fuse_and_build
from pinakes_core.uri import SCHEME, is_ulid, parse_uri

if TYPE_CHECKING:
    from pinakes_core.index.dense import AnnIndex
    from pinakes_core.index.lexical import LexicalIndex
    from pinakes_core.index.sync import ProgressFn
    from pinakes_core.manage.crosskb import Peers

# Sync, document scanning, link extraction (markdown-it) and cross-KB resolution are imported
# where they are used: a search process needs none of them (issue 14, start-up cost).

__all__ = ["KB"]

log = logging.getLogger(__name__)

TimeLike = float | datetime | None
#: Most FTS phrase counts a KB keeps between queries (a few MB at most; a long-lived server
#: that sees this many distinct words starts again).
MAX_COUNTED_PHRASES = 50_000


def _link_views(conn: sqlite3.Connection, doc_id: str) -> list[LinkView]:
    """The links document ``doc_id`` holds, in the order they were stored."""
    return [
        LinkView(
            target=r["target"],
            rel=r["rel"],
            origin=r["origin"],
            dst_doc=r["dst_doc"],
            dst_kb=r["dst_kb"],
        )
        for r in conn.execute("SELECT * FROM links WHERE src_doc = ? ORDER BY rowid", (doc_id,))
    ]


class KB:
    """A knowledge base: a folder of documents with ``pinakes.toml`` and a derived store.

    A ``KB`` keeps its store connection, the embedding model and the vector matrix loaded
    between queries, and reloads the matrix when another process's sync changed the store.
    """

    def __init__(self, root: Path, config: Config, embedder: Embedder | None = None) -> None:
        check_backend(config, root)
        self.root = root
        self.config = config
        self._embedder = embedder
        self._store: Store | None = None
        self._vectors: VectorMatrix | None = None
        self._ann: AnnIndex | None = None
        self._ann_checked = False
        self._lexical: LexicalIndex | None = None
        self._lexical_checked = False
        self._lexical_key: tuple[int, int | None] = (-1, None)
        self._generation = -1
        self._calibration: Calibration | None = None
        self._offtopic: npt.NDArray[np.float32] | None = None
        self._embedder_lock = threading.Lock()
        self._calibration_generation = -1
        self._peers: Peers | None = None
        self._phrase_counts: dict[str, int] = {}
        self._counted_generation = -1
        self._names: tuple[int, dict[str, list[str]]] = (-1, {})

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        sidecars: SidecarPolicy | None = None,
    ) -> KB:
        """Make ``path`` a KB: write ``pinakes.toml`` and add ``.pinakes/`` to ``.gitignore``.

        ``sidecars`` is written as ``[sidecars] write`` (``pnk init``: ``"when-needed"``);
        ``None`` writes no ``[sidecars]`` table, which means ``"always"``.

        Raises:
            ConfigError: if ``path`` already holds a ``pinakes.toml`` or the name is invalid.
        """
        return cls(*make_kb_folder(Path(path), name, sidecars=sidecars))

    @classmethod
    def open(cls, path: str | os.PathLike[str] = ".", *, embedder: Embedder | None = None) -> KB:
        """Open the KB at ``path`` (or the nearest folder above it with ``pinakes.toml``).

        Args:
            path: a folder inside the KB.
            embedder: an embedder to use instead of the configured model (tests use fakes).

        Raises:
            ConfigError: if no ``pinakes.toml`` is found or it is invalid.
        """
        root = find_root(Path(path))
        return cls(root, load_config(root), embedder)

    def close(self) -> None:
        """Release the store connection and the loaded vectors."""
        if self._store is not None:
            self._store.close()
        self._store = None
        if self._peers is not None:
            self._peers.close()
        self._vectors = None
        self._ann = None
        self._ann_checked = False
        self._lexical = None
        self._lexical_checked = False
        # A reopened (possibly rebuilt) store restarts its generation count: forget ours.
        self._generation = -1
        self._calibration = None
        self._offtopic = None
        self._calibration_generation = -1
        self._counted_generation = -1

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedding model (loaded on first use)."""
        if self._embedder is None:
            with self._embedder_lock:  # a query may be embedding on a worker thread
                if self._embedder is None:
                    self._embedder = load_embedder(self.config.embedding)
        return self._embedder

    @property
    def synced(self) -> bool:
        """Whether the store exists (the KB was synced at least once)."""
        return Store.exists(self.root)

    def store(self) -> Store:
        """Return the open store.

        Raises:
            IndexMissingError: if the KB was never synced.
        """
        if self._store is None:
            if not self.synced:
                raise IndexMissingError(
                    f"{self.root} has no index yet.", f"Run `pnk sync --kb {self.root}`."
                )
            self._store = Store.open(self.root, create=False)
        return self._store

    def _notice_swap(self) -> None:
        # Another process rebuilt the store and swapped it in: let go of the old generation.
        # Called only where an operation starts, so no query is using the old connection.
        if self._store is not None and self._store.replaced():
            log.info("Pinakes: the store of %s was rebuilt; reopening it.", self.root)
            self.close()

    def _ensure_synced(self) -> None:
        self._notice_swap()
        # Never synced, or written by another schema version: a sync (re)builds it.
        if self._store is None and not Store.current(self.root):
            self.sync()

    def _check_writable(self) -> None:
        """Refuse, in one sentence, to sync into a ``.pinakes/`` this process cannot write.

        Raises:
            IndexWriteError: if the folder (or the KB root, before the first sync) is read-only.
        """
        store_dir = Store.location(self.root).parent
        folder = store_dir if store_dir.is_dir() else self.root
        if not writable(folder, *Store.files(self.root)):
            state = "has an index" if Store.current(self.root) else "has no current index"
            raise IndexWriteError(
                f"{folder} (or the index in it) is read-only for this user, so the index cannot be written "
                f"(the KB {state}; search and show read it without writing).",
                f"Run `pnk sync` as a user who can write {folder}, or make it writable.",
            )

    def calibration(self) -> Calibration | None:
        """Return the confidence calibration in force.

        In order of preference, the first that matches the store's embedding model: the KB's
        labelled calibration (``pnk eval --calibrate``), its self-calibration (fitted at sync
        from synthetic queries), core's golden-set prior (read against the self-calibration's
        anchors when there are some). ``None`` when none matches.
        """
        store = self.store()
        generation = store.generation()
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
        self, *, force: bool = False, progress: ProgressFn | None = None
    ) -> Calibration | None:
        """Fit the KB's confidence calibration from synthetic queries (no labels) and store it.

        Runs only when the KB changed materially since the last fit, unless ``force``.
        Returns the calibration now stored (``None`` when the KB is empty).
        """
        self._ensure_synced()
        store = self.store()
        if not force and not selfcal.stale(store, reader=selfcal.reader_key(self.config.retrieval)):
            return selfcal.stored(store)
        if not int(store.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]):
            return None
        tick = (lambda done, total: progress("calibrate", done, total)) if progress else None
        return selfcal.self_calibrate(self, progress=tick)

    def peers(self) -> Peers:
        """The other KBs this KB's cross-KB links resolve in (DESIGN §10).

        By default the fleet registry's KBs (read once, on first use); a server or a
        :class:`~pinakes_core.manage.fleet.Fleet` may set exactly which with :meth:`use_peers`.
        """
        if self._peers is None:
            from pinakes_core.manage.crosskb import Peers

            self._peers = Peers.from_registry(self.config.kb.id)
        return self._peers

    def use_peers(self, peers: Peers) -> None:
        """Resolve cross-KB links in ``peers`` only (an MCP server passes its served KBs)."""
        if self._peers is not None:
            self._peers.close()
        self._peers = peers

    def vectors(self) -> VectorMatrix:
        """The chunk vectors as one matrix, loaded once and reloaded after any sync.

        The matrix is memory-mapped from the store's vector snapshot (see
        :mod:`pinakes_core.index.dense`), so a fresh process pays for the rows it touches only.

        Raises:
            IndexMissingError: if the stored vectors cannot be compared with this KB's query
                vectors (``[embedding] model`` changed to one of another size since the sync).
        """
        store = self.store()
        generation = store.generation()
        if self._vectors is None or generation != self._generation:
            dim = int(store.get_meta("dim") or self.embedder.dim)
            if dim != self.embedder.dim:
                raise IndexMissingError(
                    f"The index of {self.root} holds {dim}-dimension vectors from "
                    f"{store.get_meta('model_id')!r}, but this KB embeds queries with "
                    f"{self.embedder.model_id!r} ({self.embedder.dim} dimensions).",
                    f"Run `pnk sync --kb {self.root}`; it re-embeds every chunk.",
                )
            from pinakes_core.index.dense import load_vectors

            self._generation, self._vectors = load_vectors(self.root, store, dim)
            self._ann_checked = False
            self._lexical_checked = False
        return self._vectors

    def ann(self) -> AnnIndex | None:
        """The approximate dense index, or ``None`` (dense search then scans exactly).

        There is one when the KB is past ``[scale] ann_min_chunks`` and the index is current.
        """
        from pinakes_core.index.dense import load_ann

        self.vectors()  # reloads both after another process's sync
        if not self._ann_checked:
            self._ann = load_ann(self.root, self.store(), self.config.scale)
            self._ann_checked = True
        return self._ann

    def lexical(self) -> LexicalIndex | None:
        """The tantivy BM25 index, or ``None`` (the BM25 channel then runs in FTS5).

        There is one when the KB is past ``[scale] bm25_index_min_chunks`` and the index is
        current; a KB below it never imports tantivy.
        """
        if self.config.scale.bm25_index_min_chunks <= 0:
            return None
        # A sync (of any process) writes the store, then the index and its stamp last.
        try:
            stamp = lexical_paths(self.root)[1].stat().st_mtime_ns
        except OSError:
            stamp = None
        key = (self.store().generation(), stamp)
        if not self._lexical_checked or key != self._lexical_key:
            self._lexical_key = key
            self._lexical = None
            if stamp is not None:
                from pinakes_core.index.lexical import load_lexical

                self._lexical = load_lexical(self.root, self.store(), self.config.scale)
            self._lexical_checked = True
        return self._lexical

    def _counts_of_phrases(self) -> dict[str, int]:
        """Rows per FTS phrase, shared by the queries of the current store generation.

        Any committed write bumps the generation, and with it this starts empty; so does a
        table grown past :data:`MAX_COUNTED_PHRASES`.
        """
        generation = self.store().generation()
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
        generation = self.store().generation()
        if self._names[0] != generation:
            self._names = (generation, document_names(self.store().conn))
        return self._names[1]

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
            phrase_counts=self._counts_of_phrases(),
            lexical=self.lexical,
            entities=entities,
            concepts=concepts,
            kb=self,
        )

    # -- public API -----------------------------------------------------------------------

    def sync(self, *, rebuild: bool = False, progress: ProgressFn | None = None) -> SyncReport:
        """Bring the store up to date with the files (see :func:`pinakes_core.index.sync.run_sync`)."""
        from pinakes_core.index.dense import load_vectors, update_ann
        from pinakes_core.index.sync import run_sync
        from pinakes_core.plugins import plugin_manager, require_plugins

        started = time.perf_counter()
        require_plugins(self.config, self.root / CONFIG_FILE)
        self._check_writable()
        if self._store is not None:
            self._store.close()
            self._store = None

        def after(
            store: Store, changed: list[str], removed: list[str], relinked: list[str]
        ) -> None:
            plugin_manager().hook.after_sync(
                kb=self,
                store=store,
                changed=changed,
                removed=removed,
                relinked=relinked,
                progress=progress or (lambda stage, done, total: None),
            )
            # Last, under the sync's lock: the chunks are final for this sync.
            update_ann(self.root, store, self.config.scale, changed=bool(changed or removed))
            # Past the threshold it is kept up to date, below it deleted (tantivy is
            # imported only past it).
            from pinakes_core.index.lexical import update_lexical

            update_lexical(self.root, store, self.config.scale, changed=changed, removed=removed)

        try:
            report = run_sync(
                self.root,
                self.config,
                lambda: self.embedder,
                rebuild=rebuild,
                model_id=self._embedder.model_id if self._embedder is not None else None,
                progress=progress,
                after_write=after,
            )
        except (sqlite3.OperationalError, OSError) as exc:
            if not disk_full(exc):
                raise
            store_dir = Store.location(self.root).parent
            raise IndexWriteError(
                f"The disk holding {store_dir} is full, so the sync stopped; the index is "
                "unchanged but for documents it had finished (each is all old or all new), "
                "and search keeps working.",
                "Free some space and run `pnk sync` again; it goes on where this one stopped.",
            ) from None
        self._vectors = None
        self._ann_checked = False
        self._lexical_checked = False
        changed = len(report.added) + len(report.changed) + len(report.removed)
        parts = {"index": report.seconds}
        t0 = time.perf_counter()
        selfcal.add_drift(self.store(), changed)
        if self.config.confidence.self_calibrate:
            try:
                self.self_calibrate(progress=progress)
            except Exception as exc:  # a refinement: never the reason a sync fails
                log.warning("Pinakes: self-calibration failed (%s); using the prior.", exc)
                report = report.model_copy(
                    update={
                        "warnings": [
                            *report.warnings,
                            f"confidence self-calibration failed ({type(exc).__name__}: {exc}); "
                            "the golden-set prior is used until the next sync",
                        ]
                    }
                )
        parts["self-calibration"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        store = self.store()
        if store.get_meta("dim"):
            # Leave the vector snapshot of the final generation for the next process to map
            # (a no-change sync finds it there already; the model is never loaded for this).
            load_vectors(self.root, store, int(store.get_meta("dim") or 0))
        parts["vector snapshot"] = round(time.perf_counter() - t0, 3)
        # The whole wall time, with its parts (issue 35: "synced in 6.1 s" for an 11.9 s run).
        seconds = round(time.perf_counter() - started, 3)
        return report.model_copy(update={"seconds": seconds, "parts_s": parts})

    def search(
        self,
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
    ) -> SearchResult:
        """Hybrid search: BM25 + dense (+ plugin channels and rerankers), fused by score.

        A KB that was never synced is synced first. Filters apply inside every channel. Each
        hit's ``score`` is its relevance in [0, 1] (see :mod:`pinakes_core.search.fusion`).

        Args:
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

        An empty result carries a ``note`` saying why (see :mod:`pinakes_core.search.notes`).

        Raises:
            PinakesError: for an argument that cannot mean anything (``k=0``, ``tags="time"``,
                a path that leaves the KB, a NaN time …), naming it; query text is never
                refused (lone surrogates are replaced, over 100,000 characters it is cut).
            PluginMissingError: if a requested channel is not installed.
            MetaFilterError: if a field condition is not understood.
            PinakesError: if a source type is not one of the four, ``group_by`` is not
                ``"chunk"`` or ``"document"``, or ``min_score`` is not a number in 0-1.
        """
        cfg = self.config.retrieval
        query = clean_query(query)
        k = check_k(k, cfg.k)
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
        channels = clean_list(channels, "channels")
        self._ensure_synced()
        if not query.strip() and not entities and not concepts:
            return SearchResult(
                query=query, hits=[], timings_ms={"total": 0.0}, note="The query is empty."
            )
        t0 = time.perf_counter()
        found: tuple[str, ...] = () if entities else self._query_entities(query)
        entities = tuple(entities) or found
        entity_ms = round((time.perf_counter() - t0) * 1000, 3)
        names = (
            list(channels)
            if channels
            else default_channels(
                cfg, entities=bool(entities), concepts=bool(concepts), reader=reader
            )
        )
        ctx = self.query_context(
            query,
            filters=filters,
            # Per document, several chunks may come from one document: fetch more of them.
            candidates=max(cfg.candidates, k * (3 if group_by == "document" else 1)),
            entities=tuple(entities),
            concepts=tuple(concepts),
        )
        result = fuse_and_build(
            ctx,
            names,
            k=k,
            rrf_k=cfg.rrf_k,
            explain=explain,
            weights=cfg.weights,
            calibration=self.calibration(),
            abstain_below=cfg.abstain_below,
            offtopic=self.offtopic_vectors(),
            min_score=min_score,
            group_by=group_by,
        )
        if found:
            result.timings_ms["query_entities"] = entity_ms
        result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 3)
        if not result.hits:
            note = empty_note(ctx.conn, Store.location(self.root).parent, ctx.filters)
            result = result.model_copy(update={"note": note})
        return result

    def _query_entities(self, query: str) -> tuple[str, ...]:
        """Entity names a plugin (pinakes-ner) finds in ``query``; empty without one."""
        if not (self.config.ner.enabled and self.config.ner.auto_entities):
            return ()
        from pinakes_core.plugins import plugin_manager, require_plugins

        require_plugins(self.config, self.root / CONFIG_FILE)
        names = [
            n for group in plugin_manager().hook.query_entities(kb=self, query=query) for n in group
        ]
        return tuple(dict.fromkeys(names))

    def resolve(self, ref: str) -> str:
        """Return the doc ULID for a ULID, ``pnk://`` URI, KB-relative (or absolute) path, frontmatter id, or name.

        A name is resolved as a wikilink to it is (``0002-retry-policy``, a title or an alias:
        :func:`~pinakes_core.read.links.resolver`).

        Raises:
            DocumentNotFoundError: if nothing matches; its hint names up to three documents
                whose names are close to ``ref`` (:func:`~pinakes_core.read.links.near_names`).
        """
        given = clean_text(ref, "The document reference")
        ref = given.strip()
        if not ref or len(ref) > 4096:
            raise DocumentNotFoundError(
                f"The document reference {ref[:60]!r} is empty or too long.",
                "Use a ULID, a pnk:// URI or a path relative to the KB root.",
            )
        self._ensure_synced()
        conn = self.store().conn
        if ref.startswith(SCHEME):
            uri = parse_uri(ref)
            if uri.kb is not None and not self._is_named(uri.kb):
                raise DocumentNotFoundError(
                    f"{ref!r} names KB {uri.kb!r}, not this one ({self.config.kb.name!r}); "
                    "it was not looked up here.",
                    "Open that KB (--kb <its folder>), or search the fleet (pnk search --fleet).",
                )
            doc_id: str | None = uri.doc_id
        elif is_ulid(ref.upper()):
            doc_id = ref.upper()
        else:
            candidate = Path(ref)
            if candidate.is_absolute():
                try:
                    candidate = candidate.resolve().relative_to(self.root)
                except ValueError:
                    raise DocumentNotFoundError(
                        f"{ref} is outside the KB at {self.root}."
                    ) from None
            rel = candidate.as_posix().removeprefix("./")
            # The name as given (" notes.md" is a file name too), then in either Unicode
            # normal form: a file named on macOS is NFD, the name typed for it NFC.
            for path in dict.fromkeys((given, *spellings(rel))):
                row = conn.execute(
                    "SELECT doc_id FROM documents WHERE path = ?", (path,)
                ).fetchone()
                if row:
                    break
            # Not a path: perhaps a frontmatter id (a Dendron id, a Zettelkasten number).
            doc_id = row[0] if row else frontmatter_id(self.config.kb.id, ref)
        if (
            doc_id is not None
            and conn.execute("SELECT 1 FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        ):
            return doc_id
        from pinakes_core.read.links import near_names, resolver

        if not ref.startswith(SCHEME):
            # A note's name, as its wikilinks write it (issue 35): from the KB's root.
            named = resolver(conn, self.config.kb.id, self.config.kb.name)("", ref)
            if named is not None:
                return named
        near = near_names(conn, ref)
        raise DocumentNotFoundError(
            f"No document {ref!r} in KB {self.config.kb.name!r}.",
            (f"Did you mean {', '.join(map(repr, near))}? " if near else "")
            + "Use a ULID, a pnk:// URI, a path relative to the KB root or a note's name; "
            "run `pnk sync` if it is new.",
            near=near,
        )

    def _is_named(self, ref: str) -> bool:
        """Whether a URI's KB part names this KB: its id, its ``[kb] name``, or its fleet name."""
        if ref.upper() == self.config.kb.id or ref == self.config.kb.name:
            return True
        from pinakes_core.manage.registry import FleetRegistry

        try:
            entry = FleetRegistry.load().find(ref)
        except PinakesError:  # an unreadable registry names nothing
            return False
        return entry is not None and entry.kb_id == self.config.kb.id

    def read(
        self,
        doc: str,
        *,
        lines: tuple[int, int] | None = None,
        section: str | None = None,
        pages: tuple[int, int] | None = None,
        max_tokens: int | None = None,
    ) -> DocumentView:
        """Return one document (current file text, or a slice of it) with its metadata.

        A PDF's text is its extracted text as indexed, each page under a ``[page N]`` line; it
        is rebuilt from the store, so a read never parses the PDF again.

        Args:
            doc: a ULID, ``pnk://`` URI or path.
            lines: only these lines of the file (first, last; 1-based, inclusive).
            section: only this heading's section (a heading's text or a heading path
                ``"Raft › Log replication"``).
            pages: only these pages of a PDF (first, last; 1-based, inclusive; a last page
                past the end is clamped).
            max_tokens: cut the text to about this many tokens (characters / 4), at a
                paragraph break where one is near; ``truncated`` then says so.

        Raises:
            DocumentNotFoundError: if ``doc`` matches nothing or its file has gone.
            SliceError: for a line range, section or page range the document does not have
                (pages of a document that has none, more than one of lines/section/pages).
        """
        doc_id = self.resolve(doc)
        conn = self.store().conn
        row = conn.execute("SELECT * FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        if not (self.root / row["path"]).resolve().is_relative_to(self.root.resolve()):
            raise DocumentNotFoundError(
                f"{row['path']} now leads outside the KB (a symlink?); it is not read.",
                "Run `pnk sync`.",
            )
        paged = row["source_type"] == "pdf" and row["pages"] is not None
        page_lines: list[int] = []
        if paged:
            if not (self.root / row["path"]).is_file():
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
                    self.root / row["path"],
                    limit=int(self.config.sync.max_file_mb * 1024 * 1024),
                    root=self.root.resolve(),
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
            lines = _page_lines(
                row["path"], page_lines if paged else None, pages, lines, section, text
            )
        links = _link_views(conn, doc_id)
        part = slice_document(
            row["path"],
            text.replace("\r\n", "\n"),
            lines=lines,
            section=section,
            max_tokens=max_tokens,
        )
        return DocumentView(
            doc_id=doc_id,
            uri=f"{SCHEME}{self.config.kb.id}/{doc_id}",
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

    def outlinks(self, doc: str) -> tuple[str, list[LinkView]]:
        """The document's title and the links it holds, from the index alone.

        What a caller that follows links needs (the MCP search frontier reads a dozen
        documents per search): :meth:`read` gives the same and also reads the file and parses
        its headings.

        Raises:
            DocumentNotFoundError: if ``doc`` matches nothing.
        """
        doc_id = self.resolve(doc)
        conn = self.store().conn
        row = conn.execute("SELECT title FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        return row["title"], _link_views(conn, doc_id)

    def documents(self, *, offset: int = 0, limit: int = 100, recent: bool = False) -> DocumentList:
        """Return a page of the indexed documents (no text), by path or newest first.

        Args:
            offset: documents to skip (a previous page's ``next_offset``).
            limit: page size, 1-1000.
            recent: order by file modification time, newest first, instead of by path.

        Raises:
            PinakesError: if ``offset`` or ``limit`` is out of range.
        """
        if offset < 0 or not 1 <= limit <= 1000:
            raise PinakesError(
                f"offset {offset} / limit {limit} is out of range.",
                "Use offset >= 0 and a limit from 1 to 1000.",
            )
        self._ensure_synced()
        conn = self.store().conn
        total = int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        order = "mtime_ns DESC, path" if recent else "path"
        rows = conn.execute(
            f"SELECT doc_id, path, title, tags, mtime_ns FROM documents ORDER BY {order} "
            "LIMIT ? OFFSET ?",
            (limit, offset),
        ).fetchall()
        return DocumentList(
            documents=[
                DocumentInfo(
                    doc_id=r["doc_id"],
                    uri=f"{SCHEME}{self.config.kb.id}/{r['doc_id']}",
                    path=r["path"],
                    title=r["title"],
                    tags=json.loads(r["tags"]),
                    modified=r["mtime_ns"] / 1e9,
                )
                for r in rows
            ],
            total=total,
            next_offset=offset + len(rows) if offset + len(rows) < total else None,
        )

    def links(
        self,
        doc: str,
        *,
        rel: str | None = None,
        direction: str = "both",
        depth: int = 1,
        query: str | None = None,
    ) -> LinksResult:
        """Follow links from a document (DESIGN §6); needs the pinakes-graph plugin.

        Args:
            doc: a ULID, ``pnk://`` URI or path.
            rel: only this relation; free text ("relies on") is matched to the KB's relations.
            direction: ``"out"``, ``"in"`` or ``"both"``.
            depth: hops to follow; served at most 3 whatever is asked.
            query: rank neighbours by similarity to this text and compute a confidence.

        Raises:
            PluginMissingError: if no installed plugin answers links.
            DocumentNotFoundError: if ``doc`` matches nothing.
        """
        from pinakes_core.plugins import plugin_manager

        if direction not in ("out", "in", "both"):
            raise ConfigError(f"direction {direction!r} is not one of out, in, both.")
        depth = check_depth(depth)
        rel = None if rel is None else clean_text(rel, "rel")[:200]
        query = None if query is None else clean_query(query)
        doc_id = self.resolve(doc)
        result = plugin_manager().hook.kb_links(
            kb=self, doc_id=doc_id, rel=rel, direction=direction, depth=depth, query=query
        )
        if result is None:
            raise PluginMissingError(
                "Following links needs the pinakes-graph plugin.",
                "Install it: uv pip install pinakes-graph",
            )
        assert isinstance(result, LinksResult)
        shared = plugin_manager().hook.entity_neighbours(kb=self, doc_id=doc_id)
        if shared:
            result = result.model_copy(update={"entity_neighbours": shared})
        from pinakes_core.manage.crosskb import extend_links

        return extend_links(
            result,
            store=self.store(),
            config=self.config,
            peers=self.peers(),
            embed_query=lambda text: self.embedder.embed_query(text),
            direction=direction,
            query=query,
        )

    def add_link(
        self,
        src: str,
        dst: str,
        rel: str,
        note: str | None = None,
        *,
        dst_kb: str | None = None,
    ) -> tuple[str, str, str]:
        """Append a typed link ``src → dst`` to ``src``'s sidecar (the index sees it at the next sync).

        Args:
            src: the linking document (ULID, ``pnk://`` URI or path).
            dst: the target document (ULID, ``pnk://`` URI or path): in this KB, or in another
                KB of the fleet when it is a ``pnk://<kb>/<doc>`` URI naming that KB, a ULID
                found only there, or anything with ``dst_kb``.
            rel: the relation: matched to ``[schema] relation_types`` by name, alias, inverse or
                label embedding (``"relies on"`` → ``depends-on``); a relation outside the schema
                is written normalised to lower-kebab and logged as a schema suggestion.
            note: an optional free-text note stored with the link.
            dst_kb: the fleet KB holding ``dst`` (name or KB ULID), when not this one.

        Returns:
            The sidecar path (KB-relative) and its text before and after.

        Raises:
            DocumentNotFoundError: if either document (or the other KB) is unknown.
            PinakesError: for a self-link or a link that already exists.
        """
        from pinakes_core.manage.crosskb import link_target
        from pinakes_core.manage.schema import GENERIC_REL, match_relation
        from pinakes_core.paid.suggestions import record_schema_suggestion
        from pinakes_core.read.links import resolver

        src_id = self.resolve(src)
        other = link_target(
            dst, dst_kb, config=self.config, peers=self.peers(), resolve=self.resolve
        )
        dst_kb_id, dst_id = (
            (other.kb_id, other.doc_id) if other else (self.config.kb.id, self.resolve(dst))
        )
        if src_id == dst_id and other is None:
            raise PinakesError("A document cannot link to itself.", "Pick a different target.")
        match = match_relation(
            self.config.schema_, lambda: self.embedder, clean_text(rel, "rel")[:200]
        )
        inverse = self.config.schema_.relation_types[match.rel].inverse if match.inverted else None
        # An inverse ("cited-by") is schema vocabulary: written as such, followed backwards.
        rel = normalise_rel(inverse) if inverse else match.rel
        note = None if note is None else clean_text(note, "note")
        conn = self.store().conn
        path = conn.execute("SELECT path FROM documents WHERE doc_id = ?", (src_id,)).fetchone()[0]
        side = sidecar_path(self.root / path)
        real_root = self.root.resolve()
        if not side.exists() and not side.is_symlink():
            write_skeleton(side, src_id)
        resolve = resolver(conn, self.config.kb.id, self.config.kb.name)
        peers = self.peers()
        for link in read_sidecar(side, root=real_root).links:
            if link.rel != rel:
                continue
            if other is None:
                same = resolve(path, link.to) == dst_id
            else:
                same = _names_doc(link.to, dst_id) and _names_kb(link.to, other.kb_id, peers)
            if same:
                raise PinakesError(
                    f"{side.relative_to(self.root)} already links to {dst_id} as {rel!r}.",
                    "Nothing to do.",
                )
        entry: dict[str, str] = {"to": f"{SCHEME}{dst_kb_id}/{dst_id}", "rel": rel}
        if note:
            entry["note"] = note
        before, after = append_link(side, entry, root=real_root)
        if not match.in_schema and rel != GENERIC_REL:
            record_schema_suggestion(self.root, "relation", rel, source=path, origin="link")
        return str(side.relative_to(self.root)), before, after

    def doctor(
        self, *, fix: bool = False, remove_orphans: bool | Callable[[int], bool] = False
    ) -> DoctorReport:
        """Check sidecars, ids, links, schema, model and store size (see ``pinakes_core.manage.doctor``)."""
        from pinakes_core.manage.doctor import run_doctor
        from pinakes_core.plugins import plugin_manager

        return run_doctor(
            self.root,
            self.config,
            store=self.store,
            peers=self.peers,
            plugin_checks=lambda store: plugin_manager().hook.doctor_checks(kb=self, store=store),
            fix=fix,
            remove_orphans=remove_orphans,
        )

    def status(self) -> Status:
        """Counts, model, schema and staleness (files new, changed or removed since last sync)."""
        base: dict[str, Any] = {
            "name": self.config.kb.name,
            "kb_id": self.config.kb.id,
            "root": str(self.root),
        }
        from pinakes_core.read.documents import scan

        entries, _ = scan(self.root, self.config.sync)
        self._notice_swap()
        if not self.synced:
            return Status(
                **base,
                synced=False,
                documents=0,
                chunks=0,
                vectors=0,
                model=None,
                dim=None,
                schema_version=None,
                last_sync=None,
                stale={"new": len(entries), "changed": 0, "removed": 0},
                store_bytes=0,
            )
        store = self.store()
        conn = store.conn
        from pinakes_core.index.sync import is_racy, racy_changed, racy_cutoff

        rows = {
            r[0]: tuple(r[1:])
            for r in conn.execute(
                "SELECT path, mtime_ns, size, sidecar_mtime_ns, sidecar_size, content_hash, "
                "sidecar_hash FROM documents"
            )
        }
        seen = {e.rel for e in entries}
        # A file whose stat is as stored but that was written in the last sync's clock tick
        # is read and hashed, as the next sync will (racily clean, as git calls it).
        racy = racy_cutoff(store.get_meta("sync_started"))
        limit = int(self.config.sync.max_file_mb * 1024 * 1024)
        changed = sum(
            1
            for e in entries
            if e.rel in rows
            and (
                rows[e.rel][:4] != e.stamp
                or (
                    is_racy(e, racy)
                    and racy_changed(e, self.root.resolve(), limit, *rows[e.rel][4:])
                )
            )
        )

        def count(table: str) -> int:
            return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

        last = store.get_meta("last_sync")
        skipped = json.loads(store.get_meta("skipped_files") or "{}")
        dim = store.get_meta("dim")
        ner = store.get_meta("ner_settings") is not None  # the NER layer was derived
        mentions = conn.execute("SELECT COUNT(*) FROM edges WHERE kind = 'mentions'").fetchone()
        size = sum(p.stat().st_size for p in Store.files(self.root))
        return Status(
            **base,
            synced=True,
            documents=count("documents"),
            chunks=count("chunks"),
            vectors=count("vectors"),
            model=store.get_meta("model_id"),
            dim=int(dim) if dim else None,
            schema_version=int(store.get_meta("schema_version") or SCHEMA_VERSION),
            last_sync=float(last) if last else None,
            stale={
                "new": sum(
                    1
                    for e in entries
                    if e.rel not in rows
                    and tuple(skipped.get(e.rel, ())) != e.stamp  # skipped as it is
                ),
                "changed": changed,
                "removed": len(rows.keys() - seen),
            },
            store_bytes=size,
            entities=int(
                conn.execute("SELECT COUNT(*) FROM nodes WHERE kind = 'entity'").fetchone()[0]
            )
            if ner
            else None,
            mentions=int(mentions[0]) if ner else None,
        )


def _names_doc(target: str, doc_id: str) -> bool:
    """Whether an authored link target names document ``doc_id`` (as a URI or a bare ULID)."""
    try:
        uri = parse_uri(target if target.startswith(SCHEME) else SCHEME + target)
    except PinakesError:
        return False
    return uri.doc_id == doc_id


def _names_kb(target: str, kb_id: str, peers: Peers) -> bool:
    """Whether a ``pnk://`` target names the KB ``kb_id`` (by id or a fleet name), or no KB."""
    try:
        uri = parse_uri(target if target.startswith(SCHEME) else SCHEME + target)
    except PinakesError:
        return False
    if uri.kb is None or uri.kb == kb_id:
        return True
    peer = peers.find(uri.kb)
    return peer is not None and peer.kb_id == kb_id


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
