"""The :class:`KB` object: one knowledge base, its config, its store and its loaded vectors."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

import pinakes_core.models as models
from pinakes_core.config import CONFIG_FILE, Config, SidecarPolicy, load_config
from pinakes_core.index import catalogue
from pinakes_core.index.embedding import Embedder, LazyEmbedder, Vectors, load_embedder
from pinakes_core.index.place import index_place
from pinakes_core.index.store import OpenStore, Store, VectorMatrix
from pinakes_core.manage.folder import find_root, make_kb_folder
from pinakes_core.read.meta import MetaFilter
from pinakes_core.search.arguments import clean_text
from pinakes_core.search.confidence import Calibration
from pinakes_core.search.context import Filters, QueryContext
from pinakes_core.search.hits import GroupBy
from pinakes_core.search.searcher import Searcher, TimeLike, search_request

if TYPE_CHECKING:
    from pinakes_core.index.sync import ProgressFn
    from pinakes_core.manage.crosskb import Peers

# Sync, document scanning and slicing, link extraction (markdown-it) and cross-KB resolution are
# imported where they are used: a search process needs none of them (issues 14, 37: start-up).

__all__ = ["KB", "QueryOptions", "SearchOptions"]

log = logging.getLogger(__name__)


class SearchOptions(TypedDict, total=False):
    """The keywords of :meth:`KB.search`: :func:`~pinakes_core.search.searcher.search_request` documents each."""

    k: int | None
    tags: Sequence[str]
    path: str | None
    doc_ids: Sequence[str]
    modified_after: TimeLike
    modified_before: TimeLike
    meta: Sequence[str | MetaFilter]
    source_type: str | Sequence[str]
    entities: Sequence[str]
    concepts: Sequence[str]
    channels: Sequence[str] | None
    explain: bool
    group_by: GroupBy
    min_score: float | None
    reader: bool | None


class QueryOptions(TypedDict, total=False):
    """The keywords of :meth:`KB.query_context`: :meth:`~pinakes_core.search.searcher.Searcher.query_context` documents each."""

    filters: Filters | None
    candidates: int | None
    embed_query: Callable[[str], Vectors] | None
    entities: tuple[str, ...]
    concepts: tuple[str, ...]


class KB:
    """A knowledge base: a folder of documents with ``pinakes.toml`` and a derived store.

    A ``KB`` keeps its store connection, the embedding model and the vector matrix loaded
    between queries, and reloads the matrix when another process's sync changed the store.
    Each method hands its job to the module that owns the data (docs/architecture.md).
    """

    def __init__(self, root: Path, config: Config, embedder: Embedder | None = None) -> None:
        self.root = root
        self.config = config
        #: Where the index lives (``[store] backend``: ``.pinakes/`` or a PostgreSQL schema).
        self.place = index_place(root, config)
        self._stores = OpenStore(lambda: self.place.open(create=False))
        self._embedder = LazyEmbedder(lambda: load_embedder(self.config.embedding), embedder)
        self._peers: Peers | None = None
        #: The search side: vectors, indexes, counts, names and calibration, per generation.
        self.searcher = Searcher(
            root, lambda: self.config, self.store, lambda: self.embedder, owner=self
        )

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
        """Open the KB holding ``path`` (the nearest folder up with ``pinakes.toml``).

        ``embedder`` replaces the configured model (tests use fakes).

        Raises:
            ConfigError: if no ``pinakes.toml`` is found or it is invalid.
        """
        root = find_root(Path(path))
        return cls(root, load_config(root), embedder)

    def close(self) -> None:
        """Release the store connection and the loaded vectors."""
        self._stores.close()
        self.place.close()
        if self._peers is not None:
            self._peers.close()
        # A reopened (possibly rebuilt) store restarts its generation count: forget ours.
        self.searcher.reset()

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder:
        """The embedding model (loaded on first use, once: :class:`~pinakes_core.index.embedding.LazyEmbedder`)."""
        return self._embedder.get()

    @property
    def synced(self) -> bool:
        """Whether the store exists (the KB was synced at least once)."""
        return self.place.exists()

    def store(self) -> Store:
        """Return the open store (:class:`~pinakes_core.index.store.OpenStore`).

        Raises:
            IndexMissingError: if the KB was never synced.
        """
        return self._stores.get()

    def _notice_swap(self) -> None:
        # Another process rebuilt the store and swapped it in: let go of the old generation.
        # Called only where an operation starts, so no query is using the old connection.
        if self._stores.replaced():
            log.info("Pinakes: the store of %s was rebuilt; reopening it.", self.root)
            self.close()

    def _ensure_synced(self) -> None:
        self._notice_swap()
        # Never synced, or written by another schema version: a sync (re)builds it.
        if not self._stores.is_open and not self.place.current():
            self.sync()

    def calibration(self) -> Calibration | None:
        """The confidence calibration in force (:meth:`Searcher.calibration <pinakes_core.search.searcher.Searcher.calibration>`)."""
        return self.searcher.calibration()

    def self_calibrate(
        self, *, force: bool = False, progress: ProgressFn | None = None
    ) -> Calibration | None:
        """Fit and store the confidence calibration if the KB changed materially (or ``force``); ``None`` when empty."""
        self._ensure_synced()
        return self.searcher.self_calibrate(force=force, progress=progress)

    def peers(self) -> Peers:
        """The KBs cross-KB links resolve in (DESIGN §10): the fleet registry's, unless :meth:`use_peers` set them."""
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
        """The chunk vectors as one matrix (:meth:`Searcher.vectors <pinakes_core.search.searcher.Searcher.vectors>`)."""
        return self.searcher.vectors()

    def query_context(self, query: str, **options: Unpack[QueryOptions]) -> QueryContext:
        """The context the channels of one query run in (:meth:`Searcher.query_context <pinakes_core.search.searcher.Searcher.query_context>`)."""
        return self.searcher.query_context(query, **options)

    def sync(
        self, *, rebuild: bool = False, progress: ProgressFn | None = None
    ) -> models.SyncReport:
        """Bring the store up to date with the files (see :func:`pinakes_core.index.refresh.sync_kb`).

        Raises:
            PluginMissingError: if the config asks for a plugin that is not installed.
            IndexWriteError: if ``.pinakes/`` is read-only or the disk filled up.
        """
        from pinakes_core.index.refresh import sync_kb
        from pinakes_core.plugins import after_sync, require_plugins

        require_plugins(self.config, self.root / CONFIG_FILE)
        return sync_kb(
            self.root,
            self.config,
            self.place,
            self._stores,
            self._embedder,
            rebuild=rebuild,
            progress=progress,
            after_sync=after_sync(self, progress),
            after_index=lambda changed: self.searcher.after_sync(changed, progress),
        )

    def search(self, query: str, **options: Unpack[SearchOptions]) -> models.SearchResult:
        """Hybrid search, BM25 + dense (+ plugins), fused; a never-synced KB is synced first.

        ``options`` are the keywords of :class:`SearchOptions`, each described and checked by
        :func:`~pinakes_core.search.searcher.search_request`; an empty result carries a ``note``.

        Raises:
            PinakesError: for an argument that cannot mean anything, naming it.
            PluginMissingError: if a requested channel is not installed.
            MetaFilterError: if a field condition is not understood.
        """
        request = search_request(self.config.retrieval, query, **options)
        self._ensure_synced()
        return self.searcher.search(request)

    def resolve(self, ref: str) -> str:
        """The doc ULID of a ULID, ``pnk://`` URI, path, frontmatter id or name (as a wikilink resolves).

        Raises:
            DocumentNotFoundError: if nothing matches; its hint names up to three documents
                whose names are close to ``ref``.
        """
        given = clean_text(ref, "The document reference")
        ref = catalogue.check_reference(given)
        self._ensure_synced()
        return catalogue.find_document(
            self.store().conn, self.root, self.config, given, ref, is_named=self._is_named
        )

    def _is_named(self, ref: str) -> bool:  # a URI's KB part: this KB's id, name or fleet name
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
    ) -> models.DocumentView:
        """One document's current text, or a slice of it, with its metadata (:func:`~pinakes_core.index.views.read_document`).

        Raises:
            DocumentNotFoundError: if ``doc`` matches nothing or its file has gone.
            SliceError: for a line range, section or page range the document does not have
                (pages of a document that has none, more than one of lines/section/pages).
        """
        from pinakes_core.index.views import read_document

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

    def outlinks(self, doc: str) -> tuple[str, list[models.LinkView]]:
        """The document's title and the links it holds, from the index alone (no file read).

        Raises:
            DocumentNotFoundError: if ``doc`` matches nothing.
        """
        doc_id = self.resolve(doc)  # first: a never-synced KB is synced
        return catalogue.outlinks(self.store().conn, doc_id)

    def documents(
        self, *, offset: int = 0, limit: int = 100, recent: bool = False
    ) -> models.DocumentList:
        """A page of the indexed documents (no text), by path or newest first (:func:`~pinakes_core.index.catalogue.document_page`).

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
    ) -> models.LinksResult:
        """Follow links from a document (DESIGN §6; :func:`~pinakes_core.manage.linking.links`); needs pinakes-graph.

        Raises:
            PluginMissingError: if no installed plugin answers links.
            DocumentNotFoundError: if ``doc`` matches nothing.
        """
        from pinakes_core.manage import linking

        return linking.links(
            self,
            doc,
            rel=rel,
            direction=direction,
            depth=depth,
            query=query,
            resolve=self.resolve,
            store=self.store,
            config=self.config,
            peers=self.peers,
            embedder=lambda: self.embedder,
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
        """Append a typed link ``src → dst`` to ``src``'s sidecar (:func:`~pinakes_core.manage.linking.add_link`).

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
    ) -> models.DoctorReport:
        """Check sidecars, ids, links, schema, model and store size (see ``pinakes_core.manage.doctor``)."""
        from pinakes_core.manage.doctor import run_doctor
        from pinakes_core.plugins import doctor_checks

        return run_doctor(
            self.root,
            self.config,
            store=self.store,
            place=self.place,
            peers=self.peers,
            plugin_checks=doctor_checks(self),
            fix=fix,
            remove_orphans=remove_orphans,
        )

    def status(self) -> models.Status:
        """Counts, model, schema and staleness (files new, changed or removed since last sync)."""
        from pinakes_core.index.status import kb_status

        return kb_status(self.root, self.config, store=self._current_store, size=self.place.size)

    def _current_store(self) -> Store | None:
        """The store as it is now (a swapped-in rebuild reopened), ``None`` if never synced."""
        self._notice_swap()
        return self.store() if self.synced else None
