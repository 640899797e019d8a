"""The :class:`KB` object: one knowledge base, its config, its store and its loaded vectors."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pinakes_core.config import (
    CONFIG_FILE,
    Config,
    SidecarPolicy,
    load_config,
)
from pinakes_core.errors import (
    IndexMissingError,
)
from pinakes_core.index import catalogue
from pinakes_core.index.backend import check_backend
from pinakes_core.index.embedding import Embedder, load_embedder
from pinakes_core.index.store import (
    Store,
    VectorMatrix,
)
from pinakes_core.index.views import read_document
from pinakes_core.manage.folder import find_root, make_kb_folder
from pinakes_core.models import (
    DoctorReport,
    DocumentList,
    DocumentView,
    LinksResult,
    LinkView,
    SearchResult,
    Status,
    SyncReport,
)
from pinakes_core.read.meta import MetaFilter
from pinakes_core.search import calibration as selfcal
from pinakes_core.search.arguments import (
    clean_text,
)
from pinakes_core.search.confidence import Calibration
from pinakes_core.search.context import Filters, QueryContext
from pinakes_core.search.hits import GroupBy
from pinakes_core.search.searcher import Searcher, search_request

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
        self._embedder_lock = threading.Lock()
        self._peers: Peers | None = None
        #: The search side: vectors, indexes, counts, names and calibration, per generation.
        self.searcher = Searcher(
            root, lambda: self.config, self.store, lambda: self.embedder, owner=self
        )

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
        # A reopened (possibly rebuilt) store restarts its generation count: forget ours.
        self.searcher.reset()

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

    def calibration(self) -> Calibration | None:
        """Return the confidence calibration in force.

        In order of preference, the first that matches the store's embedding model: the KB's
        labelled calibration (``pnk eval --calibrate``), its self-calibration (fitted at sync
        from synthetic queries), core's golden-set prior (read against the self-calibration's
        anchors when there are some). ``None`` when none matches.
        """
        return self.searcher.calibration()

    def offtopic_vectors(self) -> npt.NDArray[np.float32] | None:
        """The embedded off-topic reference queries of the last self-calibration, if any."""
        return self.searcher.offtopic_vectors()

    def save_calibration(self, calibration: Calibration) -> None:
        """Store a KB-specific calibration in the derived store (used from the next search)."""
        self.searcher.save_calibration(calibration)

    def self_calibrate(
        self, *, force: bool = False, progress: ProgressFn | None = None
    ) -> Calibration | None:
        """Fit the KB's confidence calibration from synthetic queries (no labels) and store it.

        Runs only when the KB changed materially since the last fit, unless ``force``.
        Returns the calibration now stored (``None`` when the KB is empty).
        """
        self._ensure_synced()
        return self.searcher.self_calibrate(force=force, progress=progress)

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
        return self.searcher.vectors()

    def ann(self) -> AnnIndex | None:
        """The approximate dense index, or ``None`` (dense search then scans exactly).

        There is one when the KB is past ``[scale] ann_min_chunks`` and the index is current.
        """
        return self.searcher.ann()

    def lexical(self) -> LexicalIndex | None:
        """The tantivy BM25 index, or ``None`` (the BM25 channel then runs in FTS5).

        There is one when the KB is past ``[scale] bm25_index_min_chunks`` and the index is
        current; a KB below it never imports tantivy.
        """
        return self.searcher.lexical()

    def document_names(self) -> dict[str, list[str]]:
        """Titles and aliases → ids of their documents, for the current store generation.

        Read at the first query that may be a name after each write and shared by the queries
        after it (:meth:`Searcher.document_names <pinakes_core.search.searcher.Searcher.document_names>`).
        """
        return self.searcher.document_names()

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
        return self.searcher.query_context(
            query,
            filters=filters,
            candidates=candidates,
            embed_query=embed_query,
            entities=entities,
            concepts=concepts,
        )

    # -- public API -----------------------------------------------------------------------

    def sync(self, *, rebuild: bool = False, progress: ProgressFn | None = None) -> SyncReport:
        """Bring the store up to date with the files (see :func:`pinakes_core.index.sync.run_sync`)."""
        from pinakes_core.index import refresh
        from pinakes_core.plugins import plugin_manager, require_plugins

        started = time.perf_counter()
        require_plugins(self.config, self.root / CONFIG_FILE)
        refresh.check_writable(self.root)
        if self._store is not None:
            self._store.close()
            self._store = None
        report = refresh.sync_folder(
            self.root,
            self.config,
            lambda: self.embedder,
            rebuild=rebuild,
            model_id=self._embedder.model_id if self._embedder is not None else None,
            progress=progress,
            after_sync=lambda store, changed, removed, relinked: plugin_manager().hook.after_sync(
                kb=self,
                store=store,
                changed=changed,
                removed=removed,
                relinked=relinked,
                progress=progress or (lambda stage, done, total: None),
            ),
        )
        self.searcher.forget_indexes()
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
        refresh.snapshot_vectors(self.root, self.store())
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
        request = search_request(
            self.config.retrieval,
            query,
            k=k,
            tags=tags,
            path=path,
            doc_ids=doc_ids,
            modified_after=modified_after,
            modified_before=modified_before,
            meta=meta,
            source_type=source_type,
            entities=entities,
            concepts=concepts,
            channels=channels,
            explain=explain,
            group_by=group_by,
            min_score=min_score,
            reader=reader,
        )
        self._ensure_synced()
        return self.searcher.search(request)

    def resolve(self, ref: str) -> str:
        """Return the doc ULID for a ULID, ``pnk://`` URI, KB-relative (or absolute) path, frontmatter id, or name.

        A name is resolved as a wikilink to it is (``0002-retry-policy``, a title or an alias:
        :func:`~pinakes_core.read.resolution.resolver`); see
        :func:`pinakes_core.index.catalogue.find_document`.

        Raises:
            DocumentNotFoundError: if nothing matches; its hint names up to three documents
                whose names are close to ``ref`` (:func:`~pinakes_core.read.resolution.near_names`).
        """
        given = clean_text(ref, "The document reference")
        ref = catalogue.check_reference(given)
        self._ensure_synced()
        conn = self.store().conn
        return catalogue.find_document(
            conn, self.root, self.config, given, ref, is_named=self._is_named
        )

    def _is_named(self, ref: str) -> bool:
        """Whether a URI's KB part names this KB: its id, its ``[kb] name``, or its fleet name."""
        from pinakes_core.manage.registry import names_kb

        return names_kb(ref, self.config.kb.id, self.config.kb.name)

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
        is rebuilt from the store, so a read never parses the PDF again (see
        :func:`pinakes_core.index.views.read_document`).

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
        return read_document(
            self.store().conn,
            self.root,
            self.config,
            doc_id,
            lines=lines,
            section=section,
            pages=pages,
            max_tokens=max_tokens,
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
        return catalogue.outlinks(self.store().conn, doc_id)

    def documents(self, *, offset: int = 0, limit: int = 100, recent: bool = False) -> DocumentList:
        """Return a page of the indexed documents (no text), by path or newest first.

        Args:
            offset: documents to skip (a previous page's ``next_offset``).
            limit: page size, 1-1000.
            recent: order by file modification time, newest first, instead of by path.

        Raises:
            PinakesError: if ``offset`` or ``limit`` is out of range.
        """
        catalogue.check_page(offset, limit)
        self._ensure_synced()
        return catalogue.document_page(
            self.store().conn, self.config.kb.id, offset=offset, limit=limit, recent=recent
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
        from pinakes_core.manage.linking import check_link_arguments, follow_links
        from pinakes_core.plugins import plugin_manager

        rel, direction, depth, query = check_link_arguments(rel, direction, depth, query)
        doc_id = self.resolve(doc)
        hook = plugin_manager().hook
        return follow_links(
            hook.kb_links(
                kb=self, doc_id=doc_id, rel=rel, direction=direction, depth=depth, query=query
            ),
            shared=lambda: hook.entity_neighbours(kb=self, doc_id=doc_id),
            store=self.store(),
            config=self.config,
            peers=self.peers,
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
        from pinakes_core.manage import linking

        src_id = self.resolve(src)
        return linking.add_link(
            self.root,
            self.config,
            self.store().conn,
            src_id,
            dst,
            rel,
            note,
            dst_kb=dst_kb,
            peers=self.peers(),
            resolve=self.resolve,
            embedder=lambda: self.embedder,
        )

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
        from pinakes_core.index.status import kb_status

        return kb_status(self.root, self.config, store=self._current_store)

    def _current_store(self) -> Store | None:
        """The store as it is now (a swapped-in rebuild reopened), ``None`` if never synced."""
        self._notice_swap()
        return self.store() if self.synced else None
