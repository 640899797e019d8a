"""BM25 at scale (issue 14): a tantivy index beside FTS5, for top-k lexical search.

FTS5 has no top-k pruning: it scores every row holding any query word, so at a million chunks
the BM25 channel costs ~50 ms even with the rare/common split (docs/scaling.md). From
``[scale] bm25_index_min_chunks`` chunks on, sync keeps a tantivy index in
``.pinakes/bm25-tantivy/`` and the channel asks it for its top rows (block-max WAND). FTS5 stays
the truth and serves everything else (small KBs, the confidence features' word checks, any
search while the index is missing or stale).

**Scores.** The index holds one text field with a chunk's FTS columns as separate values, the
title (with aliases) twice: FTS5's ``bm25()`` sums the column-weighted frequencies (title 2,
heading 1.5, text 1, identifier parts 1) into one BM25 per phrase over the whole row, which
this approximates; tantivy's per-field BM25 summed over boosted fields ranked very differently
(46 % of FTS5's top 10 on nushell-docs, against 94 % for this). The tokenizer is FTS5's
(``porter unicode61 remove_diacritics 2``) as closely as tantivy has it: split on
non-alphanumerics, lower case, ASCII folding, the English (Porter2) stemmer; a capital dotted
I is read as I first, as FTS5 reads it. So the rows a word matches differ only where ASCII
folding goes further than removing diacritics: full-width forms (ｗｏｒｄ matches word),
ß (strasse matches Straße), ligatures (finance matches ﬁnance) and a few letters such as ø
and æ; the index matches those, FTS5 does not (docs/scaling.md). The IDF is Lucene's
``ln(1 + (N - n + 0.5) / (n + 0.5))``, with N and n counting the rows an update deleted
until a merge drops them, so scores are not FTS5's: the lexical ceiling uses the same IDF
when the index answers (:meth:`LexicalIndex.idf`).

**Currency.** The index is stamped (``bm25-tantivy.json``) with the store file it was built from,
both schema versions and the ``sync_serial`` of the sync that last brought it up to date; search uses it only when
both are the store's. A sync that finds the stamp one serial behind updates it incrementally
(deletes the changed and removed documents' rows by document id, adds the changed documents'
current rows, commits, then moves the stamp); any other stamp, a missing or unreadable index,
a row count other than the store's, or an update that would leave more than
:data:`MAX_DELETED_SHARE` of the rows deleted ones (tantivy counts and scores them until a merge
drops them) means a rebuild into a new folder swapped into place. A kill at any point
leaves the old stamp, so the next sync rebuilds or catches up, and searches meanwhile use FTS5.
Below the threshold the index is deleted.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinakes_core.index.store import SCHEMA_VERSION as STORE_SCHEMA
from pinakes_core.index.store import Store, chunk_count, lexical_paths, read_stamp, write_stamp

if TYPE_CHECKING:
    from pinakes_core.config import ScaleConfig

__all__ = ["LexicalIndex", "analyzer", "drop_lexical", "load_lexical", "update_lexical"]

log = logging.getLogger(__name__)

#: Bumped when the fields, the tokenizer or what goes into them change: the index is rebuilt.
#: 2: the ``rows`` field (one term in every row: the row count tantivy scores with).
#: 3: a capital dotted I is indexed as I (as FTS5 reads it).
SCHEMA_VERSION = 3
_FIELD = "all"
#: Every row holds this term of the ``rows`` field, so its document frequency is the number
#: of rows tantivy's BM25 counts: deleted ones too, until a merge drops them.
_ROWS_FIELD, _ROW_TERM = "rows", "1"
#: A word in at most this many rows (deleted ones included) is counted exactly while the
#: index holds deleted rows (~0.4 ms at 10,000); a commoner one's count is the dictionary's,
#: at most the live rows. An update leaving more than :data:`MAX_DELETED_SHARE` of the rows
#: deleted rebuilds the index, which bounds that error.
EXACT_COUNT_MAX = 20_000
MAX_DELETED_SHARE = 0.2
_TOKENIZER = "pinakes"
_WRITER_HEAP = 256_000_000
#: A filtered search first looks for its rows among this many times ``limit`` unfiltered ones.
OVER_FETCH = 8


def _tantivy() -> Any:
    import tantivy

    return tantivy


#: Rust lower-cases İ (U+0130) to i + a combining dot (U+0307), which ASCII folding keeps, so
#: "İstanbul" would not match "istanbul"; FTS5's unicode61 with remove_diacritics 2 reads it
#: as i (and drops a combining dot, as Python's lower case of İ leaves one in a query word).
#: Applied to indexed text and query words alike.
_PRE_FOLD = str.maketrans({"\u0130": "I", "\u0307": None})


def analyzer() -> Any:
    """The tantivy text analyzer the index reads with (also what the benchmark measures)."""
    tantivy = _tantivy()
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> Any:
    tantivy = _tantivy()
    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("chunk_id", indexed=True, fast=True)
    builder.add_text_field("doc", tokenizer_name="raw", index_option="basic")
    builder.add_text_field(_ROWS_FIELD, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(_FIELD, tokenizer_name=_TOKENIZER, index_option="position")
    return builder.build()


def _open(path: Path) -> Any:
    index = _tantivy().Index(_schema(), path=str(path), reuse=True)
    index.register_tokenizer(_TOKENIZER, analyzer())
    return index


def ceiling_idf(rows: int, hits: int) -> float:
    """The IDF tantivy gives a term in ``hits`` of ``rows`` rows (Lucene's; ``hits <= rows``)."""
    return math.log(1.0 + (rows - hits + 0.5) / (hits + 0.5))


class LexicalIndex:
    """An open tantivy index over the chunks' FTS columns, keyed by chunk id."""

    def __init__(self, index: Any) -> None:
        self._tv = _tantivy()
        self._index = index
        self._schema = index.schema
        self._searcher = index.searcher()
        self._analyzer = analyzer()
        #: The rows tantivy's BM25 counts: :func:`len` plus deleted ones not yet merged away.
        self.scored_rows = max(
            int(self._searcher.doc_freq(_ROWS_FIELD, _ROW_TERM)), int(self._searcher.num_docs)
        )

    def __len__(self) -> int:
        return int(self._searcher.num_docs)

    def _words(self, phrase: str) -> list[str]:
        return [str(w) for w in self._analyzer.analyze(phrase.strip('"').translate(_PRE_FOLD))]

    def _phrase_query(self, words: list[str]) -> Any:
        query = self._tv.Query
        if len(words) == 1:
            return query.term_query(self._schema, _FIELD, words[0])
        return query.phrase_query(self._schema, _FIELD, words)

    def _count(self, words: list[str]) -> int:
        query = self._tv.Query.const_score_query(self._phrase_query(words), 0.0)
        return int(self._searcher.search(query, 1, count=True).count)

    def doc_freq(self, phrase: str) -> int:
        """Live rows holding one quoted FTS phrase (its words in order, for several words).

        tantivy's dictionary counts a deleted row until a merge drops it, so while the index
        holds deleted rows a word's rows are counted (up to :data:`EXACT_COUNT_MAX`; a
        commoner word's dictionary count is capped at the live rows).
        """
        words = self._words(phrase)
        if not words:
            return 0
        if len(words) > 1:
            return self._count(words)
        hits = int(self._searcher.doc_freq(_FIELD, words[0]))
        if hits == 0 or self.scored_rows == len(self):
            return hits
        if hits <= EXACT_COUNT_MAX:
            return self._count(words)
        return min(hits, len(self))

    def idf(self, phrase: str) -> float:
        """The IDF tantivy scores ``phrase`` with: Σ over its words, deleted rows counted.

        :func:`ceiling_idf` × (k1 + 1) of it bounds the phrase's score in any row.
        """
        rows = self.scored_rows
        return math.fsum(
            ceiling_idf(rows, min(int(self._searcher.doc_freq(_FIELD, word)), rows))
            for word in self._words(phrase)
        )

    def search(
        self, phrases: list[str], limit: int, allowed: list[int] | None = None
    ) -> list[tuple[int, float]]:
        """The best ``limit`` rows holding any of the FTS ``phrases``, by BM25, best first.

        ``allowed``: when given, only these chunk ids (a filter, resolved by the store). The
        filtered top rows are the first allowed ones of the unfiltered ranking, so a broad
        filter takes them from :data:`OVER_FETCH` × ``limit`` unfiltered rows when enough
        pass (tried when the filter's share of the rows makes that likely); otherwise (a
        narrow filter) the ids go to tantivy as a set the rows must be in.
        At 1M chunks a set of 6,542 ids cost 10-14 ms, one of 418,688 ids 0.4-0.9 s
        (docs/benchmarks.md, "One million chunks: BM25 in tantivy").
        """
        tv = self._tv
        clauses = []
        for phrase in phrases:
            words = self._words(phrase)
            if words:
                clauses.append((tv.Occur.Should, self._phrase_query(words)))
        if not clauses or limit <= 0 or (allowed is not None and not allowed):
            return []
        query = tv.Query.boolean_query(clauses)
        if allowed is not None:
            count = OVER_FETCH * limit
            # Over-fetch only when, at the filter's share of the rows, enough would pass.
            if len(allowed) * count >= limit * len(self):
                ranked = self._top(query, count)
                passing = set(allowed)
                kept = [pair for pair in ranked if pair[0] in passing]
                if len(kept) >= limit or len(ranked) < count:
                    return kept[:limit]
            only = tv.Query.const_score_query(
                tv.Query.term_set_query(self._schema, "chunk_id", allowed), 0.0
            )
            query = tv.Query.boolean_query([(tv.Occur.Must, query), (tv.Occur.Must, only)])
        return self._top(query, limit)

    def _top(self, query: Any, limit: int) -> list[tuple[int, float]]:
        hits = self._searcher.search(query, limit, count=False).hits
        if not hits:
            return []
        ids = self._searcher.fast_field_values("chunk_id", [address for _, address in hits])
        ranked = [(int(c), float(s)) for (s, _), c in zip(hits, ids, strict=True)]
        # The same order as FTS5's channel: score, then chunk id (tantivy breaks ties by
        # segment and document, which a merge may change).
        ranked.sort(key=lambda pair: (-pair[1], pair[0]))
        return ranked


def _sweep(folder: Path) -> None:
    """Remove what killed rebuilds and stamp writes left (``.bm25-tantivy.*``).

    Only under the sync's lock: no other rebuild is running.
    """
    for leftover in folder.parent.glob(f".{folder.name}.*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def _unique(folder: Path, suffix: str) -> Path:
    """A sibling name no other rebuild uses: pids repeat (a container's sync is often pid 1)."""
    return folder.with_name(f".{folder.name}.{os.getpid()}-{secrets.token_hex(6)}.{suffix}")


def drop_lexical(root: Path) -> None:
    """Delete the index and its stamp (the KB shrank below the threshold, or a rebuild)."""
    folder, meta = lexical_paths(root)
    meta.unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    _sweep(folder)


_ROWS = (
    "SELECT f.rowid, c.doc_id, f.title, f.heading, f.text, f.idents "
    "FROM chunks_fts f JOIN chunks c ON c.chunk_id = f.rowid"
)


def _add_rows(writer: Any, rows: Iterable[tuple[Any, ...]]) -> int:
    tantivy = _tantivy()
    added = 0
    for chunk_id, doc_id, title, heading, text, idents in rows:
        doc = tantivy.Document()
        doc.add_unsigned("chunk_id", int(chunk_id))
        doc.add_text("doc", str(doc_id))
        doc.add_text(_ROWS_FIELD, _ROW_TERM)
        for value in (title, title, heading, text, idents):
            if value:
                doc.add_text(_FIELD, value.translate(_PRE_FOLD))
        writer.add_document(doc)
        added += 1
    return added


def _rebuild(folder: Path, conn: sqlite3.Connection) -> int:
    """Build the index whole in a new folder and swap it into place; the rows indexed."""
    tmp = _unique(folder, "tmp")
    tmp.mkdir(parents=True)
    try:
        index = _open(tmp)
        writer = index.writer(heap_size=_WRITER_HEAP, num_threads=min(2, os.cpu_count() or 1))
        size = _add_rows(writer, conn.execute(_ROWS))
        writer.commit()
        writer.wait_merging_threads()
        old = _unique(folder, "old")
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
        return size
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def wanted(config: ScaleConfig, conn: sqlite3.Connection) -> bool:
    """Whether a KB of this many chunks keeps the index (``[scale] bm25_index_min_chunks``)."""
    threshold = config.bm25_index_min_chunks
    return threshold > 0 and chunk_count(conn) >= threshold


class _Rebuild(Exception):
    """An incremental update would leave the index too far from a fresh one."""


def update_lexical(
    root: Path,
    store: Store,
    config: ScaleConfig,
    *,
    changed: list[str],
    removed: list[str],
) -> dict[str, int] | None:
    """Bring the tantivy index in line with the store's chunks (called by sync, under its lock).

    Args:
        root: the KB root.
        store: the open store, after the sync wrote every document.
        config: the ``[scale]`` settings.
        changed: ids of the documents this sync added or rewrote.
        removed: ids of the documents it removed.

    Returns ``{"removed": documents, "added": rows, "size": rows, "rebuilt": 0|1}``, or ``None``
    when the KB is below the threshold (the index is then deleted).
    """
    folder, meta_path = lexical_paths(root)
    if not wanted(config, store.conn):
        if folder.exists() or meta_path.exists():  # below it, a sync touches nothing else
            drop_lexical(root)
        return None
    # A rebuild killed before or during its swap left its folders; sync's lock means none
    # is running now.
    _sweep(folder)
    serial = store.get_meta("sync_serial")
    token = store.file_token()
    meta = read_stamp(meta_path)
    current = (
        meta is not None
        and serial is not None
        and meta.get("schema") == SCHEMA_VERSION
        and meta.get("store_schema") == STORE_SCHEMA
        and meta.get("store") == token
        and str(meta.get("sync_serial")) == str(int(serial) - 1)
        and folder.is_dir()
    )
    stamp = {
        "schema": SCHEMA_VERSION,
        "store_schema": STORE_SCHEMA,
        "store": token,
        "sync_serial": serial,
    }
    conn = store.conn
    if (
        current
        and meta is not None
        and not changed
        and not removed
        and meta.get("size") == chunk_count(conn)
    ):
        write_stamp(meta_path, {**meta, **stamp})
        return {"removed": 0, "added": 0, "size": int(meta.get("size", 0)), "rebuilt": 0}
    if current:
        try:
            index = _open(folder)
            before = LexicalIndex(index)
            gone = list(dict.fromkeys([*changed, *removed]))
            # Deleted rows stay in tantivy's counts and scores until a merge drops them: an
            # update that would leave too many (a re-chunk rewrites every document) rebuilds.
            doomed = sum(int(before._searcher.doc_freq("doc", d)) for d in gone)
            stale = before.scored_rows - len(before) + doomed
            if stale > MAX_DELETED_SHARE * before.scored_rows:
                raise _Rebuild(f"{stale} of {before.scored_rows} rows would be deleted ones")
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            for doc_id in gone:
                writer.delete_documents_by_term("doc", doc_id)
            added = 0
            docs = list(dict.fromkeys(changed))
            for start in range(0, len(docs), 500):
                part = docs[start : start + 500]
                added += _add_rows(
                    writer,
                    conn.execute(f"{_ROWS} WHERE c.doc_id IN ({','.join('?' * len(part))})", part),
                )
            writer.commit()
            writer.wait_merging_threads()
            index.reload()
            size = int(index.searcher().num_docs)
        except _Rebuild as exc:
            log.info("Pinakes: BM25 index: %s; rebuilding it.", exc)
            size = -1
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("Pinakes: BM25 index unreadable (%s); rebuilding it.", exc)
            size = -1
        if size >= 0 and size != chunk_count(conn):
            # Rows of a document the update was not told about: their chunk ids may name
            # other chunks by now (SQLite reuses freed ids).
            log.warning(
                "Pinakes: BM25 index holds %d rows for %d chunks; rebuilding it.",
                size,
                chunk_count(conn),
            )
        elif size >= 0:
            write_stamp(meta_path, {**stamp, "size": size})
            return {
                "removed": len(set(changed) | set(removed)),
                "added": added,
                "size": size,
                "rebuilt": 0,
            }
    # Without a stamp the index is never used: a kill during the rebuild leaves none.
    meta_path.unlink(missing_ok=True)
    size = _rebuild(folder, conn)
    write_stamp(meta_path, {**stamp, "size": size})
    return {"removed": 0, "added": size, "size": size, "rebuilt": 1}


def load_lexical(root: Path, store: Store, config: ScaleConfig) -> LexicalIndex | None:
    """The KB's tantivy index, if the KB is past the threshold and the index is current."""
    folder, meta_path = lexical_paths(root)
    if config.bm25_index_min_chunks <= 0 or not folder.is_dir():
        return None
    meta = read_stamp(meta_path)
    if (
        meta is None
        or meta.get("schema") != SCHEMA_VERSION
        or meta.get("store_schema") != STORE_SCHEMA
        or meta.get("store") != store.file_token()
        or str(meta.get("sync_serial")) != str(store.get_meta("sync_serial"))
        or meta.get("size") != chunk_count(store.conn)
    ):
        return None
    try:
        return LexicalIndex(_open(folder))
    except ImportError:
        log.warning("Pinakes: tantivy is not installed; BM25 uses FTS5.")
    except (OSError, ValueError, RuntimeError) as exc:
        log.warning("Pinakes: BM25 index unreadable (%s); BM25 uses FTS5.", exc)
    return None
