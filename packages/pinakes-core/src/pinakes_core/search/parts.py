"""What the search side reads of a store, by store kind, chosen in one place (issue 38).

The channels need, beside the store's SQL, the chunk vectors as one matrix, an approximate
dense index past ``[scale] ann_min_chunks``, a BM25 index and the phrase checks. Where each
comes from depends on the store's engine, and only here:

=====================  ==============================================  =========================================
part                   SQLite (:class:`SqliteSearchParts`)               PostgreSQL (:class:`~pinakes_core.index.pgsearch.PgSearchParts`)
=====================  ==============================================  =========================================
vectors                memory-mapped snapshot beside the store         read into memory per generation
                       (:func:`~pinakes_core.index.dense.load_vectors`)
ANN                    usearch file, if current                        pgvector (HNSW once sync made it)
BM25 index             tantivy past ``bm25_index_min_chunks``,         the postings, always
                       if current; else FTS5 ranks
phrase checks          FTS5                                            the postings and ``tsvector``
local folder           the store's folder (sync lock, notes)           none
=====================  ==============================================  =========================================

:func:`search_parts` picks them for an open store; :class:`~pinakes_core.search.searcher.Searcher`
keeps the result for as long as it holds that store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pinakes_core.index.bm25 import Fts5Text, TextIndex
from pinakes_core.index.store import LEXICAL_STAMP, Store, VectorMatrix

if TYPE_CHECKING:
    from pinakes_core.config import ScaleConfig

__all__ = ["SearchParts", "SqliteSearchParts", "search_parts"]


class SearchParts(Protocol):
    """The search side's reads of one open store that differ between engines."""

    @property
    def folder(self) -> Path | None:
        """The folder beside the store (its sync lock), or ``None`` (a database server's store)."""
        ...

    def vectors(self, dim: int) -> tuple[int, VectorMatrix]:
        """The store's generation and every chunk vector, rows ordered by chunk id."""
        ...

    def ann(self, config: ScaleConfig) -> Any:
        """An object with ``search(vector, count) -> chunk ids``, or ``None`` (exact scan)."""
        ...

    def lexical_key(self, config: ScaleConfig, generation: int) -> tuple[int | None, ...] | None:
        """What identifies the BM25 index at store ``generation``; ``None``: none to use.

        The searcher loads the index again when this changes (another process's sync).
        """
        ...

    def lexical(self, config: ScaleConfig, generation: int) -> Any:
        """The BM25 index (``doc_freq``, ``idf``, ``search``, ``len``), or ``None``."""
        ...

    def text(self, lexical: Callable[[], Any]) -> TextIndex:
        """The phrase checks (``lexical`` returns the searcher's BM25 index, if they need it)."""
        ...


class SqliteSearchParts:
    """:class:`SearchParts` of the SQLite :class:`~pinakes_core.index.store.Store`.

    The vector snapshot, the ANN and the tantivy index are files beside the store, in its
    folder (``.pinakes/``), each stamped with the store generation it is current for.
    """

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store
        self.folder: Path | None = store.path.parent
        # The tantivy index's stamp, stat'ed at each search (another process's sync moves it);
        # the folder comes from the open store, not from walking the KB's path again.
        self._stamp = store.path.parent / LEXICAL_STAMP

    def vectors(self, dim: int) -> tuple[int, VectorMatrix]:
        """See :class:`SearchParts` (:func:`~pinakes_core.index.dense.load_vectors`)."""
        from pinakes_core.index.dense import load_vectors

        return load_vectors(self.root, self.store, dim)

    def ann(self, config: ScaleConfig) -> Any:
        """See :class:`SearchParts` (:func:`~pinakes_core.index.dense.load_ann`)."""
        from pinakes_core.index.dense import load_ann

        return load_ann(self.root, self.store, config)

    def lexical_key(self, config: ScaleConfig, generation: int) -> tuple[int | None, ...] | None:
        """The store generation and the stamp's mtime; ``None`` below the threshold or unstamped.

        A sync (of any process) writes the store, then the index and its stamp last.
        """
        if config.bm25_index_min_chunks <= 0:
            return None
        try:
            stamp = self._stamp.stat().st_mtime_ns
        except OSError:
            return None
        return (generation, stamp)

    def lexical(self, config: ScaleConfig, generation: int) -> Any:
        """See :class:`SearchParts` (:func:`~pinakes_core.index.lexical.load_lexical`)."""
        from pinakes_core.index.lexical import load_lexical

        return load_lexical(self.root, self.store, config)

    def text(self, lexical: Callable[[], Any]) -> TextIndex:
        """FTS5: the truth on SQLite, whether tantivy ranks or not."""
        return Fts5Text(self.store.conn)


def search_parts(root: Path, store: Any) -> SearchParts:
    """The search parts of an open store: the one place that asks which engine it runs on."""
    if getattr(store, "backend", "sqlite") == "postgres":
        from pinakes_core.index.pgsearch import PgSearchParts

        return PgSearchParts(store)
    return SqliteSearchParts(root, store)
