"""The index in PostgreSQL + pgvector: :class:`~pinakes_core.index.backend.IndexBackend` (issue 38).

Imported only when a KB or a caller asks for the ``postgres`` backend; it needs the extra
``pinakes-core[postgres]`` (psycopg 3) and a server with the ``vector`` extension.

Layout: one schema per KB (``pnk_<kb id>``, lower case), so several KBs share a database. Its
tables mirror the SQLite store's (documents, doc_tags, doc_meta, chunks, links, meta) plus:

* ``vectors(embed_hash, vector vector(dim))``: pgvector. Search is exact (a scan) below
  ``ann_min_chunks`` chunks; from there on an HNSW index (cosine) serves it (:meth:`ensure_ann`).
* every text column in byte order (``COLLATE "C"``), as SQLite compares: a path filter's
  range (``path >= ? AND path < ?``) and every ``ORDER BY`` on text mean the same on a server
  whose default collation is a language's.
* ``postings(lexeme, chunk_id, tf)``: lexical ranking. A text's words are the words SQLite's
  FTS5 stores for it (:func:`~pinakes_core.index.stemmer.terms`: split, case- and
  diacritic-folded and Porter-stemmed in Python exactly as ``porter unicode61
  remove_diacritics 2``, CJK runs as bigrams first), read through PostgreSQL's ``simple``
  configuration (:data:`TS_CONFIG`), which then only finds the spaces between them; a query's
  words and phrases are made the same way. PostgreSQL's own text search gives a parser,
  Snowball stemmers (``english``; ``porter``, which stems ``is`` to ``i`` where FTS5 leaves
  words under three bytes alone) and ``ts_rank_cd``, which has no inverse document
  frequency: a common word counts as much as a rare one. So this module keeps a postings
  table and scores BM25 in SQL (k1 1.2, b 0.75, the column weights of the FTS5 channel:
  names 2, headings 1.5, text and identifiers 1), which is what :meth:`PostgresStore.lexical`
  returns; :meth:`PostgresStore.ts_rank` is the stock ranking, kept for the comparison in
  docs/scaling.md. Past ``[scale] bm25_max_rows`` chunks a sync also keeps the postings
  ordered by their BM25 term weight (:data:`IMPACT_INDEX`, :meth:`PostgresStore.ensure_impacts`),
  which search reads best first.

One writer at a time per KB: a session advisory lock keyed on the schema (:meth:`writer`).
A transaction is PostgreSQL's own, so readers see a write whole or not at all; a rebuild is
written in a schema of its own and swapped in by one transaction (:meth:`publish`). A server that
is down or restarting fails with one sentence (:class:`~pinakes_core.index.backend.StoreUnavailableError`)
after a bounded number of tries; a read on a dropped connection reconnects once.

Why one module of this length (issue 37): :class:`PostgresStore` is one job, the whole
store contract over one PostgreSQL schema (lifecycle, document writes, the BM25 and vector
reads, links), and each method mirrors one of :class:`~pinakes_core.index.backend.SqliteBackend`;
split, the SQL of one table would spread over several modules.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.rows import tuple_row
from psycopg.types import TypeInfo

from pinakes_core.errors import IndexWriteError, LockError
from pinakes_core.index.backend import (
    ChunkHit,
    ChunkRecord,
    DatabaseError,
    DocumentRecord,
    LinkRecord,
    StoreUnavailableError,
)
from pinakes_core.index.bm25 import BM25_K1
from pinakes_core.index.query import query_terms, split_cjk
from pinakes_core.index.stemmer import terms
from pinakes_core.index.store import SCHEMA_VERSION, VectorMatrix

if TYPE_CHECKING:
    from pinakes_core.config import ScaleConfig

__all__ = ["CONNECT_TRIES", "PortableConnection", "PostgresPlace", "PostgresStore", "schema_name"]

#: Connection attempts before a down server is reported, and the pause before each retry (s).
CONNECT_TRIES = 3
RETRY_PAUSES = (0.5, 1.0, 2.0)
#: BM25's length normalisation (FTS5's and Lucene's default).
BM25_B = 0.75
#: Text search configuration the postings and every query go through: ``simple``, which only
#: lower-cases. The words it reads are already FTS5's (:func:`index_words`,
#: :func:`~pinakes_core.index.stemmer.terms`: split, folded and stemmed as SQLite's
#: ``porter unicode61 remove_diacritics 2`` does), so PostgreSQL's parser only finds the
#: spaces between them. No stop list: the postings hold every word FTS5 holds (``the``, ``s``
#: of ``partner's``), so a common query word is common here too, not absent from the KB.
TS_CONFIG = "simple"
#: What a schema of this version is: the store's schema version and how its words are made
#: (kept in ``meta.layout``). A schema of an older layout (PostgreSQL's Snowball ``english``,
#: with or without its stop list) is rebuilt by the next sync.
_WORDS = "fts5-porter"
_LAYOUT = f"{SCHEMA_VERSION}/{_WORDS}"
#: Column weights of the lexical ranking, as the FTS5 channel's: names, headings, text, idents.
_WEIGHTS = {"A": 2.0, "B": 1.5, "C": 1.0, "D": 1.0}
#: HNSW search breadth (pgvector's ``hnsw.ef_search``; its default of 40 caps results at 40).
EF_SEARCH = 200

_T = TypeVar("_T")

#: BM25 constants as the SQL takes them (k1 + 1, k1, b), shared with search (index/pgsearch).
BM25_ARGS = {"k1p": BM25_K1 + 1.0, "k1": BM25_K1, "b": BM25_B}
#: A term's IDF in SQL, from the rows holding it (``count(*)`` of its group) of ``n`` rows: the
#: one the SQLite backend scores with at the KB's size (``lucene``: tantivy's, Lucene's ln(1 +
#: (N - n + 0.5) / (n + 0.5)), from ``[scale] bm25_index_min_chunks`` chunks on; otherwise
#: FTS5's ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6 for a word in half the rows or more).
#: Python's is :func:`pinakes_core.index.pgsearch.term_idf`.
_IDF_SQL = (
    "CASE WHEN %(lucene)s THEN ln(1 + (%(n)s - count(*) + 0.5) / (count(*) + 0.5)) "
    "ELSE greatest(ln((%(n)s - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) END"
)


def phrase_tf_sql(tsv: str, text: str) -> str:
    """SQL of a phrase's tf in a row, as FTS5's ``bm25()`` counts a phrase: Σ column weight.

    ``text`` is the phrase's words space-joined (FTS5's, as :func:`index_words` makes them) and
    ``tsv`` the row's ``tsvector``: each position of its first word where the next words
    follow at the next positions, with the same weight (one column: FTS5 never matches a
    phrase across columns), counts that column's weight (:data:`_WEIGHTS`). A row that holds
    the phrase only across two columns has tf 0.
    """
    weight = " ".join(f"WHEN '{w}' THEN {v}" for w, v in _WEIGHTS.items())
    # The row's positions of the phrase's words alone, unnested once (pt_h): re-reading the
    # whole tsvector for each word at each position cost ~5x more (0.5-0.7 ms a row).
    return f"""(WITH pt_h AS MATERIALIZED (
            SELECT pt_u.lexeme AS lex, pt_s.pos, pt_s.w FROM unnest({tsv}) pt_u
            CROSS JOIN LATERAL unnest(pt_u.positions, pt_u.weights) pt_s(pos, w)
            WHERE pt_u.lexeme = ANY(string_to_array({text}, ' ')))
        SELECT coalesce(sum(CASE pt_f.w {weight} END), 0)::float8 FROM pt_h pt_f
        WHERE pt_f.lex = split_part({text}, ' ', 1) AND NOT EXISTS (
            SELECT 1 FROM unnest(string_to_array({text}, ' ')) WITH ORDINALITY pt_k(lex, j)
            WHERE pt_k.j > 1 AND NOT EXISTS (
                SELECT 1 FROM pt_h pt_r
                WHERE pt_r.lex = pt_k.lex AND pt_r.pos = pt_f.pos + pt_k.j - 1
                      AND pt_r.w = pt_f.w)))"""


#: The one BM25 statement (:meth:`PostgresStore.lexical`, and search's
#: :class:`~pinakes_core.index.pgsearch.PgLexicalIndex`): BM25 of the rows holding any of
#: ``lexemes``, plus one term per multi-word phrase of ``phrases`` whose tf is
#: the weights of the columns it stands in, as FTS5 counts it (:func:`phrase_tf_sql`;
#: its IDF from the rows holding it in order). IDF is :data:`_IDF_SQL`'s, over every row
#: (``n``); ``avg`` is the rows' mean length; ``{allowed}`` (a ``WHERE`` on ``chunk_id``, or
#: nothing) restricts only the rows scored. A lexeme given twice counts twice, as FTS5 sums
#: its phrases (``parser parsers`` is the stem ``parser`` twice).
BM25_SQL = """
WITH hits AS MATERIALIZED (
    SELECT lexeme, chunk_id, tf, length FROM postings WHERE lexeme = ANY(%(lexemes)s::text[])),
w AS (SELECT lexeme, {idf} * (SELECT count(*) FROM unnest(%(lexemes)s::text[]) q WHERE q = lexeme)
             AS idf FROM hits GROUP BY lexeme),
phrase_hits AS MATERIALIZED (
    SELECT p.i, c.chunk_id, c.length, {phrase_tf} AS tf
    FROM unnest(%(phrases)s::text[]) WITH ORDINALITY p(t, i)
    JOIN chunks c ON c.tsv @@ phraseto_tsquery(%(cfg)s, p.t)),
pw AS (SELECT i, {idf} AS idf FROM phrase_hits GROUP BY i),
terms AS (
    SELECT h.chunk_id, w.idf, h.tf, h.length FROM hits h JOIN w ON w.lexeme = h.lexeme
    UNION ALL
    SELECT ph.chunk_id, pw.idf, ph.tf, ph.length FROM phrase_hits ph JOIN pw ON pw.i = ph.i)
SELECT chunk_id, sum(idf * tf * %(k1p)s
                     / (tf + %(k1)s * (1 - %(b)s + %(b)s * length / %(avg)s))) AS score
FROM terms
{allowed}
GROUP BY chunk_id ORDER BY score DESC, chunk_id LIMIT %(k)s
""".replace("{idf}", _IDF_SQL).replace("{phrase_tf}", phrase_tf_sql("c.tsv", "p.t"))

#: BM25's row count and summed length, as a write keeps them in ``meta`` (counted if missing).
BM25_ROWS_SQL = """
SELECT coalesce((SELECT value::float8 FROM meta WHERE key = 'chunks'),
                (SELECT count(*) FROM chunks)),
       coalesce((SELECT value::float8 FROM meta WHERE key = 'chunk_length'),
                (SELECT sum(length) FROM chunks), 0)
"""


def mean_length(rows: float, total: float) -> float:
    """BM25's mean row length from :data:`BM25_ROWS_SQL`'s counts (at least 1: no empty KB divides)."""
    return max(float(total or 0) / max(float(rows or 0), 1.0), 1.0)


#: The impact index (issue 38): each lexeme's postings best first by their BM25 term weight
#: at a reference mean length A0 (:func:`impact_sql`), which search's BM25 past ``[scale]
#: bm25_max_rows`` reads in growing depths until the threshold algorithm's bound closes
#: (:class:`~pinakes_core.index.pgsearch.PgLexicalIndex`). Made by a sync past that many chunks
#: (:meth:`PostgresStore.ensure_impacts`), its A0 kept in ``meta.impact_avg``.
IMPACT_INDEX = "postings_by_impact"
#: The index is made again when the mean length has moved past this factor of its A0 (either
#: way): a posting's true weight is at most max(1, A / A0) × its A0 weight, so the bound stays
#: exact with that margin, but the further A is from A0 the less the order is the true one.
IMPACT_DRIFT = 1.25


def impact_sql(avg0: float) -> str:
    """A posting's impact: tf / (tf + K) at mean length ``avg0``, BM25's weight over (k1 + 1) IDF.

    The same text in the index's definition and in the query's ``ORDER BY``, so the planner
    reads the index (``avg0`` a literal of the expression).
    """
    return (
        f"(tf / (tf + {BM25_K1!r}::float8 * ({1.0 - BM25_B!r}::float8 + "
        f"{BM25_B!r}::float8 * length / {float(avg0)!r}::float8)))"
    )


#: :meth:`PostgresStore.lexical`'s first read: the query's distinct lexemes and the counts.
_LEXICAL_ARGS_SQL = f"""
SELECT (SELECT array_agg(DISTINCT x) FROM unnest(tsvector_to_array(to_tsvector(%s, %s))) x),
       r.* FROM ({BM25_ROWS_SQL}) r
"""
#: :meth:`PostgresStore.lexical`'s ranking: :data:`BM25_SQL` and each hit's document.
_LEXICAL_SQL = f"""
WITH s AS ({BM25_SQL.format(allowed="")})
SELECT s.chunk_id, c.doc_id, d.path, c.ordinal, s.score
FROM s JOIN chunks c ON c.chunk_id = s.chunk_id JOIN documents d ON d.doc_id = c.doc_id
ORDER BY s.score DESC, s.chunk_id
"""

#: A document's chunks and their postings in one statement. The arrays hold one value per
#: chunk, in order (WITH ORDINALITY: chunk ids follow it). A chunk's words are weighted as
#: the FTS5 channel weights its columns: names A, headings B, text C, identifier parts D; a
#: chunk's length is its number of positions; a posting's tf is the sum of its positions'
#: weights (:data:`_WEIGHTS`), its length the chunk's. The document's names are stemmed once.
_CHUNKS_SQL = (
    """
WITH n AS (SELECT setweight(to_tsvector(%(cfg)s, %(names)s), 'A') AS tsv),
x AS (
    SELECT x.*, n.tsv || setweight(to_tsvector(%(cfg)s, x.heading), 'B')
               || setweight(to_tsvector(%(cfg)s, x.words), 'C')
               || setweight(to_tsvector(%(cfg)s, x.index_idents), 'D') AS tsv
    FROM n, unnest(%(ordinal)s::int[], %(heading_path)s::text[], %(text)s::text[],
                   %(idents)s::text[], %(embed_hash)s::text[], %(start_line)s::int[],
                   %(end_line)s::int[], %(tokens)s::int[], %(page_start)s::int[],
                   %(page_end)s::int[], %(heading)s::text[], %(words)s::text[],
                   %(index_idents)s::text[])
         WITH ORDINALITY x(ordinal, heading_path, text, idents, embed_hash, start_line,
                           end_line, tokens, page_start, page_end, heading, words,
                           index_idents, i)),
c AS (
    INSERT INTO chunks(doc_id, ordinal, heading_path, text, idents, embed_hash, start_line,
                       end_line, tokens, page_start, page_end, tsv, length)
    SELECT %(doc)s, ordinal, heading_path, text, idents, embed_hash, start_line, end_line,
           tokens, page_start, page_end, tsv,
           (SELECT coalesce(sum(array_length(u.positions, 1)), 0) FROM unnest(x.tsv) u)
    FROM x ORDER BY i
    RETURNING chunk_id, tsv, length)
INSERT INTO postings(lexeme, chunk_id, tf, length)
SELECT u.lexeme, c.chunk_id, """
    + " + ".join(
        f"{v} * cardinality(array_positions(u.weights, '{w}'))" for w, v in _WEIGHTS.items()
    )
    + """, c.length
FROM c, unnest(c.tsv) u
"""
)

_SCHEMA = """
CREATE TABLE meta (key TEXT COLLATE "C" PRIMARY KEY, value TEXT COLLATE "C" NOT NULL);
CREATE TABLE documents (
    doc_id TEXT COLLATE "C" PRIMARY KEY,
    path TEXT COLLATE "C" NOT NULL UNIQUE,
    title TEXT COLLATE "C" NOT NULL,
    tags TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    aliases TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    content_hash TEXT COLLATE "C" NOT NULL,
    sidecar_hash TEXT COLLATE "C",
    mtime_ns BIGINT NOT NULL,
    size BIGINT NOT NULL,
    sidecar_mtime_ns BIGINT,
    sidecar_size BIGINT,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    synced_at DOUBLE PRECISION NOT NULL,
    meta TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    source_type TEXT COLLATE "C" NOT NULL DEFAULT 'markdown'
        CHECK (source_type IN ('markdown', 'text', 'pdf', 'code')),
    pages TEXT COLLATE "C",
    line_count INTEGER
);
CREATE INDEX documents_by_source_type ON documents(source_type);
CREATE TABLE doc_tags (
    doc_id TEXT COLLATE "C" NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    tag TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE INDEX doc_tags_by_tag ON doc_tags(tag);
CREATE TABLE doc_meta (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    doc_id TEXT COLLATE "C" NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    key TEXT COLLATE "C" NOT NULL,
    value_text TEXT COLLATE "C" NOT NULL,
    value_num DOUBLE PRECISION
);
CREATE INDEX doc_meta_by_doc ON doc_meta(doc_id);
CREATE INDEX doc_meta_by_text ON doc_meta(key, lower(value_text));
CREATE INDEX doc_meta_by_num ON doc_meta(key, value_num);
CREATE TABLE chunks (
    chunk_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    doc_id TEXT COLLATE "C" NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    heading_path TEXT COLLATE "C" NOT NULL,
    text TEXT COLLATE "C" NOT NULL,
    embed_hash TEXT COLLATE "C" NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    page_start INTEGER,
    page_end INTEGER,
    -- What SQLite keeps in its FTS5 table: the identifier parts, the weighted words, the length.
    idents TEXT COLLATE "C" NOT NULL DEFAULT '',
    tsv TSVECTOR NOT NULL,
    length DOUBLE PRECISION NOT NULL,
    UNIQUE (doc_id, ordinal)
);
CREATE INDEX chunks_by_hash ON chunks(embed_hash);
CREATE INDEX chunks_tsv ON chunks USING gin(tsv);
-- A chunk's length is repeated in each of its postings, so scoring reads postings only
-- (index-only) and joins chunks for the top k alone.
CREATE TABLE postings (
    lexeme TEXT COLLATE "C" NOT NULL,
    chunk_id BIGINT NOT NULL REFERENCES chunks(chunk_id) ON DELETE CASCADE,
    tf DOUBLE PRECISION NOT NULL,
    length DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (lexeme, chunk_id) INCLUDE (tf, length)
);
CREATE INDEX postings_by_chunk ON postings(chunk_id);
-- The dimension is fixed (``vector(dim)``) when the HNSW index is made (:meth:`ensure_ann`).
CREATE TABLE vectors (embed_hash TEXT COLLATE "C" PRIMARY KEY, vector vector NOT NULL);
CREATE TABLE links (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    src_doc TEXT COLLATE "C" NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    target TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('uri', 'markdown', 'wiki')),
    dst_kb TEXT COLLATE "C",
    dst_doc TEXT COLLATE "C",
    rel TEXT COLLATE "C" NOT NULL,
    origin TEXT COLLATE "C" NOT NULL CHECK (origin IN ('sidecar', 'frontmatter', 'reverse-scan')),
    reason TEXT COLLATE "C"
);
CREATE INDEX links_by_src ON links(src_doc);
CREATE INDEX links_by_dst ON links(dst_doc);
CREATE TABLE nodes (
    node_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    kind TEXT COLLATE "C" NOT NULL CHECK (kind IN ('chunk', 'doc', 'tag', 'heading', 'dir', 'entity')),
    key TEXT COLLATE "C" NOT NULL,
    label TEXT COLLATE "C",
    UNIQUE (kind, key)
);
CREATE TABLE edges (
    src BIGINT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
    dst BIGINT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
    kind TEXT COLLATE "C" NOT NULL,
    weight DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (src, dst, kind)
);
CREATE INDEX edges_by_dst ON edges(dst);
CREATE TABLE node_vectors (
    node_id BIGINT PRIMARY KEY REFERENCES nodes(node_id) ON DELETE CASCADE,
    embed_hash TEXT COLLATE "C" NOT NULL
);
CREATE INDEX node_vectors_by_hash ON node_vectors(embed_hash);
CREATE TABLE ner_texts (embed_hash TEXT COLLATE "C" PRIMARY KEY, entities TEXT COLLATE "C" NOT NULL);
CREATE TABLE entity_aliases (
    alias TEXT COLLATE "C" PRIMARY KEY,
    node_id BIGINT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE
);
CREATE INDEX entity_aliases_by_node ON entity_aliases(node_id);
"""


def schema_name(kb_id: str) -> str:
    """The schema of a KB: ``pnk_`` and its id in lower case (ids are ULIDs: ``[0-9a-z]``)."""
    cleaned = re.sub(r"[^0-9a-z_]", "_", kb_id.lower())
    return f"pnk_{cleaned}"[:63]


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "the configured database"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def index_words(text: str) -> str:
    """``text``'s words as SQLite's FTS5 stores them, space-joined.

    CJK runs as bigrams first (:func:`~pinakes_core.index.query.split_cjk`), as the SQLite
    store gives its text to FTS5, then split, folded and Porter-stemmed in Python
    (:func:`~pinakes_core.index.stemmer.terms`), for the ``simple`` configuration, which then
    only finds the spaces: PostgreSQL's own parser reads ``INC-2025-041`` as ``inc``,
    ``-2025``, ``-041`` (signed numbers), and its Snowball stemmers are not FTS5's Porter.
    A word of 2,047 bytes or more is the one PostgreSQL drops (with a NOTICE) where FTS5
    keeps it.
    """
    return " ".join(terms(split_cjk(text)))


def _query_words(text: str) -> str:
    """A query's content words (:func:`~pinakes_core.index.query.query_terms`), as :func:`index_words`."""
    return " ".join(terms(" ".join(query_terms(text))))


def _vector_text(vector: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


class PostgresStore:
    """One KB's index in a PostgreSQL schema (see the module docstring).

    Use :meth:`open`.
    """

    backend = "postgres"

    def __init__(self, url: str, kb_id: str, conn: psycopg.Connection[Any]) -> None:
        self.url = url
        self.kb_id = kb_id
        schema = schema_name(kb_id)
        #: the KB's schema; a rebuild writes :attr:`schema` = ``<home>__next`` until published.
        self.home = schema
        self.schema = schema
        #: the driver's connection (``%s`` placeholders), for this module's own SQL.
        self.raw = conn
        #: the connection the code above the store uses: the SQL both engines speak.
        self.conn = PortableConnection(self)
        # Advisory locks are (KB, what): 1 the writer, 2 making or swapping the schema.
        self._lock_key = zlib.crc32(f"pinakes:{schema}".encode()) - (1 << 31)
        self._rebuilt_from: str | None = None
        self._created: str | None = None
        # While a sync's writes are held in one transaction (:meth:`hold_writes`), a row
        # updated again and again keeps every version (none is dead to the other sessions
        # until the commit), so each update walks a longer chain: a bookkeeping value
        # written once per document made a 100k-note first sync quadratic. So the meta
        # values written are remembered and not written again unchanged, and the generation
        # is bumped once, when it is next read or at publish().
        self._meta_held: dict[str, str] = {}
        self._bump_due = False

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def open(
        cls, url: str, kb_id: str, *, create: bool = True, rebuild: bool = False
    ) -> PostgresStore:
        """Connect to ``url`` and open (with ``create``: make) the schema of KB ``kb_id``.

        With ``rebuild``, or when the schema holds another ``schema_version``, the index is
        built anew in ``<schema>__next``, invisible to readers until :meth:`publish` swaps it
        in (one transaction); ``rebuilt_from`` says what it replaces.

        Raises:
            StoreUnavailableError: if the server does not answer after :data:`CONNECT_TRIES`.
            IndexMissingError: (without ``create``) if the KB has no schema there.

        Without ``create`` a schema of any layout opens: a sync reads the ids and the
        document count of the index it is about to replace (``sync._id_history``,
        ``sync._keep_shared_index``), and readers go through ``KB``, which asks
        :meth:`PostgresPlace.current` first and syncs an index of another layout.
        """
        store = cls(url, kb_id, _connect(url))
        if create:
            store._ensure_schema(rebuild=rebuild)
        elif store._version(store.home) is not None:
            store._use_schema()
        else:
            from pinakes_core.errors import IndexMissingError

            store.close()
            raise IndexMissingError(
                f"The database {redact(url)} has no index of KB {kb_id} (schema {store.home}).",
                "Run `pnk sync` against it first.",
            )
        store._created = store._home_created()
        return store

    def _version(self, schema: str) -> str | None:
        """The layout of ``schema`` (as :data:`_LAYOUT`), or ``None`` without an index there."""
        found = self.raw.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'meta'",
            (schema,),
        ).fetchone()
        if found is None:
            return None
        # A schema of before ``meta.layout`` made its words with a text configuration of its
        # own (``pinakes_text``) or with ``english``: named so, it is not this layout.
        row = self.raw.execute(
            sql.SQL(
                "SELECT m.value, (SELECT l.value FROM {meta} l WHERE l.key = 'layout'), "
                "(SELECT c.cfgname FROM pg_ts_config c "
                "JOIN pg_namespace n ON n.oid = c.cfgnamespace "
                "WHERE n.nspname = %s AND c.cfgname = 'pinakes_text') "
                "FROM {meta} m WHERE m.key = 'schema_version'"
            ).format(meta=sql.Identifier(schema, "meta")),
            (schema,),
        ).fetchone()
        if row is None:
            return None
        return f"{row[0]}/{row[1] or row[2] or 'english'}"

    def _home_created(self) -> str | None:
        found = self.raw.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'meta'",
            (self.home,),
        ).fetchone()
        if found is None:
            return None
        row = self.raw.execute(
            sql.SQL("SELECT value FROM {}.meta WHERE key = 'created'").format(
                sql.Identifier(self.home)
            )
        ).fetchone()
        return None if row is None else str(row[0])

    def _ensure_schema(self, *, rebuild: bool) -> None:
        with self.raw.transaction():
            self.raw.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # Two first syncs of one KB racing: one creates the schema, the other waits here.
            self.raw.execute("SELECT pg_advisory_xact_lock(%s, 2)", (self._lock_key,))
            version = self._version(self.home)
            if version is not None and (rebuild or version != _LAYOUT):
                # As the SQLite store's: only a rebuild the schema forced names what it replaced.
                self._rebuilt_from = None if version == _LAYOUT else version
                self.schema = f"{self.home}__next"[:63]
                self.raw.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )
            if version is None or self.schema != self.home:
                exists = self.raw.execute(
                    "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                    (self.schema,),
                ).fetchone()
                if exists is None:
                    self.raw.execute(
                        sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema))
                    )
                self._use_schema()
                self.raw.execute(_SCHEMA)
                self.raw.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', %s), "
                    "('generation', '0'), ('created', %s), ('layout', %s)",
                    (str(SCHEMA_VERSION), f"{time.time():.6f}", _WORDS),
                )
        self._use_schema()

    def _use_schema(self) -> None:
        self.raw.execute(
            sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema))
        )
        _read_vectors_as_bytes(self.raw)
        # pgvector's default ef_search of 40 caps an HNSW search at 40 results.
        self.raw.execute(f"SET hnsw.ef_search = {EF_SEARCH}")

    def drop(self) -> None:
        """Delete this KB's schema (and a rebuild's) with everything in it (files are the truth)."""
        with self.raw.transaction():
            for schema in dict.fromkeys((self.schema, self.home)):
                self.raw.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )

    # -- reads with one reconnect ---------------------------------------------------------

    def _read(self, job: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """Run a read; on a dropped connection (outside a transaction) reconnect once and retry."""
        try:
            return job(self.raw)
        except psycopg.OperationalError as exc:
            if not self.raw.closed and self.raw.info.transaction_status not in (
                psycopg.pq.TransactionStatus.IDLE,
                psycopg.pq.TransactionStatus.UNKNOWN,
            ):
                raise _unavailable(self.url, exc) from None
            with contextlib.suppress(Exception):
                self.raw.close()
            self.raw = _connect(self.url)
            self._use_schema()
            try:
                return job(self.raw)
            except psycopg.OperationalError as again:
                raise _unavailable(self.url, again) from None

    # -- StoreLifecycle ---------------------------------------------------------------------

    @property
    def rebuilt_from(self) -> str | None:
        """The schema version a rebuild replaces, or ``None`` when this is no rebuild."""
        return self._rebuilt_from

    @property
    def pending(self) -> bool:
        """Whether this is a rebuild that :meth:`publish` has yet to swap in."""
        return self.schema != self.home

    def file_token(self) -> str | None:
        """The schema and its creation time: a rebuilt or re-made schema is a new store."""
        return f"pg:{self.home}:{self.get_meta('created')}"

    def publish(self) -> None:
        """Swap a rebuild in: drop the old schema and rename the new one, in one transaction.

        A reader's statement in flight finishes on the old tables (the drop waits for it);
        its next one reads the new tables, and :meth:`replaced` tells it so.
        """
        if self.pending:
            with self.raw.transaction():
                self.raw.execute("SELECT pg_advisory_xact_lock(%s, 2)", (self._lock_key,))
                self.raw.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.home))
                )
                self.raw.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                        sql.Identifier(self.schema), sql.Identifier(self.home)
                    )
                )
            self.schema = self.home
            self._use_schema()
            self._created = self._home_created()
        if not self.raw.autocommit:  # a sync's one transaction (hold_writes): now it is seen
            try:
                self._bump()
                # Counted once per sync, not after each of its writes (a scan of every chunk
                # each time made a 10k-note first sync quadratic: ~150 s of it).
                self._count_chunks()
                self.raw.commit()
            except psycopg.OperationalError as exc:
                raise _unavailable(self.url, exc) from None
            self.raw.autocommit = True
            self.raw.execute("RESET plan_cache_mode")
            self._meta_held.clear()

    def hold_writes(self) -> None:
        """Make everything written from now until :meth:`publish` one transaction.

        A sync's stores are opened so (:meth:`PostgresPlace.open`): each of its write
        transactions becomes a savepoint of one transaction that :meth:`publish` commits, so a
        reader on any machine sees the index before the sync or after it, never half of it. A
        sync that fails or is killed leaves nothing (the server rolls it back); the next one
        starts over.

        Its statements are planned at each run, not once for all (``plan_cache_mode``): the
        tables it fills have no statistics until it commits, so a plan made while they were
        small (a sequential scan of ``documents`` for each document's delete) stayed as they
        grew, and made a 100k-note first sync quadratic.
        """
        self.raw.execute("SET plan_cache_mode = force_custom_plan")
        self.raw.autocommit = False
        self._meta_held.clear()
        self._bump_due = False

    def replaced(self) -> bool:
        """Whether a rebuild was swapped in (or the schema dropped) since this store opened."""
        if self.pending:
            return False
        return self._read(lambda c: self._home_created()) != self._created

    @contextlib.contextmanager
    def _tx(self, conn: Any = None) -> Iterator[None]:
        """A transaction that bumps nothing (bookkeeping no query sees); all or nothing.

        ``conn`` is accepted for the SQLite store's signature (``store._tx(store.conn)``).

        Raises:
            StoreUnavailableError: if the connection drops; nothing of the transaction stays.
        """
        try:
            with self.raw.transaction():
                yield
        except psycopg.OperationalError as exc:
            self._meta_held.clear()
            raise _unavailable(self.url, exc) from None
        except BaseException:
            self._meta_held.clear()  # rolled back (to a savepoint): what it wrote is gone
            raise

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Several reads that see one state of the index (a ``REPEATABLE READ`` transaction).

        Inside a transaction already (a sync's own reads), the block simply runs in it.
        """
        if self.conn.in_transaction:
            yield
            return
        try:
            with self.raw.transaction():
                self.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield
        except psycopg.OperationalError as exc:
            raise _unavailable(self.url, exc) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PortableConnection]:
        """A transaction that bumps ``meta.generation``; all or nothing.

        Yields the portable connection (:class:`PortableConnection`).

        Raises:
            StoreUnavailableError: if the connection drops; nothing of the transaction stays.
        """
        try:
            with self.raw.transaction():
                yield self.conn
                if self.raw.autocommit:
                    self._bump_due = True
                    self._bump()
                    self._count_chunks()
                else:  # a sync's held writes: one bump, at the next read or publish()
                    self._bump_due = True
        except psycopg.OperationalError as exc:
            self._meta_held.clear()
            raise _unavailable(self.url, exc) from None
        except BaseException:
            self._meta_held.clear()  # rolled back (to a savepoint): what it wrote is gone
            raise

    def _bump(self) -> None:
        """Add one to ``meta.generation`` if a write transaction ended since the last bump."""
        if self._bump_due:
            self.raw.execute(
                "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'"
            )
            self._bump_due = False

    def _count_chunks(self) -> None:
        """BM25's N and total length in ``meta``, read by every lexical query (one scan)."""
        self.raw.execute(
            "INSERT INTO meta(key, value) SELECT k, v FROM (SELECT count(*)::text, "
            "coalesce(sum(length), 0)::text FROM chunks) s(n, total), "
            "LATERAL (VALUES ('chunks', s.n), ('chunk_length', s.total)) x(k, v) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )

    def close(self) -> None:
        """Close the connection (which lets go of a writer lock it holds)."""
        self.raw.close()

    def get_meta(self, key: str) -> str | None:
        """See :class:`~pinakes_core.index.backend.StoreLifecycle`."""

        def job(conn: psycopg.Connection[Any]) -> str | None:
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
            return None if row is None else str(row[0])

        return self._read(job)

    def set_meta(self, conn: Any, key: str, value: str) -> None:
        """See :class:`~pinakes_core.index.backend.StoreLifecycle`."""
        if not self._held_once(key, value):
            return
        _raw(conn).execute(
            "INSERT INTO meta(key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _held_once(self, key: str, value: str) -> bool:
        """Whether ``key = value`` must be written (always, except unchanged in held writes)."""
        if self.raw.autocommit:
            return True
        if self._meta_held.get(key) == value:
            return False
        self._meta_held[key] = value
        return True

    def generation(self) -> int:
        """See :class:`~pinakes_core.index.backend.StoreLifecycle`."""
        if self._bump_due:
            self._bump()  # inside the held transaction: this process sees its own writes
        return int(self.get_meta("generation") or 0)

    def load_vectors(self, dim: int) -> VectorMatrix:
        """See :class:`~pinakes_core.index.backend.StoreLifecycle` (vectors travel in binary).

        pgvector's binary output is read as bytes and decoded by NumPy in one pass: at 50k
        chunks 2.1 s against 20.2 s as text, a JSON parse per vector (load ~7; the text form
        made a server's first search, and its reload after every sync, ~7 min at 1M).
        """
        if self._vector_oid is None:
            info = TypeInfo.fetch(self.raw, "vector")
            assert info is not None  # the schema's vectors table needs the extension
            self._vector_oid = info.oid
        oid = self._vector_oid

        def job(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            with conn.cursor(binary=True) as cur:
                cur.adapters.register_loader(oid, _VectorRaw)
                return cur.execute(
                    "SELECT c.chunk_id, v.vector FROM chunks c "
                    "JOIN vectors v ON v.embed_hash = c.embed_hash ORDER BY c.chunk_id"
                ).fetchall()

        rows = self._read(job)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return VectorMatrix(ids, np.zeros((0, dim), np.float32))
        # Each value: its dimension (uint16), a zero (uint16), then big-endian float32s.
        raw = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.uint8)
        body = np.ascontiguousarray(raw.reshape(len(rows), 4 + 4 * dim)[:, 4:])
        matrix = body.view(">f4").reshape(len(rows), dim).astype(np.float32)
        return VectorMatrix(ids, matrix)

    # -- IndexBackend: writing --------------------------------------------------------------

    @contextlib.contextmanager
    def writer(self, *, wait: float = 30.0) -> Iterator[None]:
        """Hold this KB's writer lock (a session advisory lock) for the block.

        Raises:
            LockError: if another writer still holds it after ``wait`` seconds.
        """
        deadline = time.monotonic() + wait
        while not self._read(
            lambda c: _one(c.execute("SELECT pg_try_advisory_lock(%s, 1)", (self._lock_key,)))[0]
        ):
            if time.monotonic() >= deadline:
                raise LockError(
                    f"Another writer holds the index of schema {self.schema} in {redact(self.url)}.",
                    "Wait for its sync to finish, then run this again.",
                )
            time.sleep(0.1)
        try:
            yield
        finally:
            with contextlib.suppress(psycopg.OperationalError):
                self.raw.execute("SELECT pg_advisory_unlock(%s, 1)", (self._lock_key,))

    def put_document(self, conn: Any, doc: DocumentRecord) -> None:
        """See :class:`~pinakes_core.index.backend.IndexBackend`: one pipeline, one wait.

        Every statement goes out in one pipeline (psycopg's pipeline mode) and the client
        waits once, for all of them: the old row, the document, its tags and fields, its
        chunks with their postings (one statement, :data:`_CHUNKS_SQL`) and its links. What
        is stored is what the statement-per-row writer stored (``tests/core/test_pg_write.py``).
        """
        conn = _raw(conn)
        with conn.pipeline(), conn.cursor() as cur:
            cur.execute(
                "DELETE FROM documents WHERE doc_id = %s OR path = %s", (doc.doc_id, doc.path)
            )
            row = doc.row()
            cur.execute(
                f"INSERT INTO documents({', '.join(row)}, synced_at) "
                f"VALUES ({', '.join(['%s'] * len(row))}, extract(epoch FROM now()))",
                tuple(row.values()),
            )
            if doc.tags:
                cur.execute(
                    "INSERT INTO doc_tags(doc_id, tag) SELECT %s, t FROM unnest(%s::text[]) t",
                    (doc.doc_id, list(dict.fromkeys(doc.tags))),
                )
            if doc.fields:
                # WITH ORDINALITY: the fields get their rowids in the record's order.
                cur.execute(
                    "INSERT INTO doc_meta(doc_id, key, value_text, value_num) "
                    "SELECT %s, k, t, n FROM unnest(%s::text[], %s::text[], %s::float8[]) "
                    "WITH ORDINALITY x(k, t, n, i) ORDER BY i",
                    (
                        doc.doc_id,
                        [f[0] for f in doc.fields],
                        [f[1] for f in doc.fields],
                        [f[2] for f in doc.fields],
                    ),
                )
            if doc.chunks:
                chunks = doc.chunks
                cur.execute(
                    _CHUNKS_SQL,
                    {
                        "doc": doc.doc_id,
                        "cfg": TS_CONFIG,
                        "names": index_words(doc.names),
                        "ordinal": [c.ordinal for c in chunks],
                        "heading_path": [json.dumps(list(c.heading_path)) for c in chunks],
                        "text": [c.text for c in chunks],
                        "idents": [c.idents for c in chunks],
                        # FTS5 reads the idents as they are (no CJK split), stemmed too.
                        "index_idents": [" ".join(terms(c.idents)) for c in chunks],
                        "embed_hash": [c.embed_hash for c in chunks],
                        "start_line": [c.start_line for c in chunks],
                        "end_line": [c.end_line for c in chunks],
                        "tokens": [c.tokens for c in chunks],
                        "page_start": [c.page_start for c in chunks],
                        "page_end": [c.page_end for c in chunks],
                        "heading": [index_words(" › ".join(c.heading_path)) for c in chunks],
                        "words": [index_words(c.text) for c in chunks],
                    },
                )
            if doc.links:
                cur.execute(
                    "INSERT INTO links(src_doc, target, kind, rel, origin) "
                    "SELECT %s, t, k, r, o FROM unnest(%s::text[], %s::text[], %s::text[], "
                    "%s::text[]) WITH ORDINALITY x(t, k, r, o, i) ORDER BY i",
                    (
                        doc.doc_id,
                        [x.target for x in doc.links],
                        [x.kind for x in doc.links],
                        [x.rel for x in doc.links],
                        [x.origin for x in doc.links],
                    ),
                )

    def delete_document(self, conn: Any, doc_id: str) -> None:
        """See :class:`~pinakes_core.index.backend.IndexBackend` (the rest goes by cascade)."""
        conn = _raw(conn)
        conn.execute("DELETE FROM documents WHERE doc_id = %s", (doc_id,))

    #: The ``vector`` type's oid on this server, read at the first :meth:`put_vectors`.
    _vector_oid: int | None = None
    #: The dimension :meth:`put_vectors` found recorded (or recorded first) with no column
    #: change, so the next call of that dimension need not ask again.
    _dim_seen: int | None = None

    def put_vectors(self, conn: Any, vectors: dict[str, npt.NDArray[np.float32]]) -> None:
        """See :class:`~pinakes_core.index.backend.IndexBackend`; an existing vector is kept.

        Vectors travel in pgvector's binary form (:class:`_VectorDumper`), not as text, in one
        pipeline with the dimension's record: a sync's call per document waits once. A model
        of another dimension (after a model change emptied the table) frees the column's
        dimension again, and drops the HNSW index that needed it: the first call of a store,
        and any call of a dimension other than the last one's, asks which dimension was
        recorded before writing (one more round trip).
        """
        if not vectors:
            return
        conn = _raw(conn)
        dim = int(next(iter(vectors.values())).shape[0])
        if self._vector_oid is None:
            info = TypeInfo.fetch(conn, "vector")
            assert info is not None  # the schema's vectors table needs the extension
            self._vector_oid = info.oid
        record = (
            "INSERT INTO meta(key, value) VALUES ('dim', %s) ON CONFLICT (key) "
            "DO UPDATE SET value = excluded.value"
        )
        recorded = dim != self._dim_seen
        if recorded:
            self._meta_held.pop("dim", None)
            # The sub-select reads the snapshot the statement started from: the dimension before.
            before = _one(
                conn.execute(
                    record + " RETURNING (SELECT value FROM meta WHERE key = 'dim')", (str(dim),)
                )
            )[0]
            if before in (None, str(dim)):
                self._dim_seen = dim
            else:
                self._dim_seen = None  # a changed column is checked again at the next call
                conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
                conn.execute("ALTER TABLE vectors ALTER COLUMN vector TYPE vector")
        with conn.pipeline(), conn.cursor() as cur:
            if not recorded and self._held_once("dim", str(dim)):
                cur.execute(record, (str(dim),))
            cur.adapters.register_dumper(_Vector, _vector_dumper(self._vector_oid))
            cur.executemany(
                "INSERT INTO vectors(embed_hash, vector) VALUES (%s, %b) "
                "ON CONFLICT (embed_hash) DO NOTHING",
                [(h, _Vector(v)) for h, v in vectors.items()],
            )

    def ensure_ann(self, min_chunks: int) -> bool:
        """Keep an HNSW index on the vectors from ``min_chunks`` chunks on (0: never).

        Below the threshold the index is dropped and search scans exactly. Returns whether
        the index exists now. Bookkeeping of the engine's own, invisible to what a query
        finds: no generation bump, so a no-change sync leaves readers' caches valid.
        """
        dim = self.get_meta("dim")
        with self._tx(self.conn):
            count = int(_one(self.raw.execute("SELECT count(*) FROM chunks"))[0])
            if dim and min_chunks and count >= min_chunks:
                typed = _one(
                    self.raw.execute(
                        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'vectors'::regclass "
                        "AND attname = 'vector'"
                    )
                )[0]
                if int(typed) != int(dim):
                    self.raw.execute("DROP INDEX IF EXISTS vectors_hnsw")
                    self.raw.execute(
                        f"ALTER TABLE vectors ALTER COLUMN vector TYPE vector({int(dim)})"
                    )
                self.raw.execute(
                    "CREATE INDEX IF NOT EXISTS vectors_hnsw ON vectors "
                    "USING hnsw (vector vector_cosine_ops)"
                )
                return True
            self.raw.execute("DROP INDEX IF EXISTS vectors_hnsw")
            return False

    def ensure_impacts(self, min_chunks: int) -> bool:
        """Keep the impact index on the postings past ``min_chunks`` chunks (0: never).

        ``min_chunks`` is ``[scale] bm25_max_rows``: past it search's BM25 reads each query
        term's postings best first (:data:`IMPACT_INDEX`). The index is made at the current
        mean length and made again when that has moved past :data:`IMPACT_DRIFT` of it; below
        the threshold it is dropped. Returns whether it exists now. Bookkeeping, as
        :meth:`ensure_ann`: no generation bump (a reader holding the old A0 still ranks
        exactly, reading the postings in key order until the next write).
        """
        with self._tx(self.conn):
            n, total = _one(self.raw.execute(BM25_ROWS_SQL))
            count = int(n or 0)
            avg = mean_length(count, total)
            row = self.raw.execute(
                "SELECT value, to_regclass(%s) IS NOT NULL FROM meta WHERE key = 'impact_avg'",
                (IMPACT_INDEX,),
            ).fetchone()
            if min_chunks and count > min_chunks:
                if row is not None and row[1]:
                    ratio = avg / float(row[0])
                    if 1 / IMPACT_DRIFT <= ratio <= IMPACT_DRIFT:
                        return True
                avg0 = round(avg, 3)
                # Made beside the old one, which is dropped last: a drop locks the postings
                # against readers until the sync commits, a build does not (at 1M: ~4 min).
                fresh = f"{IMPACT_INDEX}_next"
                self.raw.execute(f"DROP INDEX IF EXISTS {fresh}")
                self.raw.execute(
                    f"CREATE INDEX {fresh} ON postings "
                    f"(lexeme, {impact_sql(avg0)} DESC) INCLUDE (chunk_id, tf, length)"
                )
                self.raw.execute(f"DROP INDEX IF EXISTS {IMPACT_INDEX}")
                self.raw.execute(f"ALTER INDEX {fresh} RENAME TO {IMPACT_INDEX}")
                self.raw.execute(
                    "INSERT INTO meta(key, value) VALUES ('impact_avg', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (repr(avg0),),
                )
                return True
            self.raw.execute(f"DROP INDEX IF EXISTS {IMPACT_INDEX}")
            self.raw.execute("DELETE FROM meta WHERE key = 'impact_avg'")
            return False

    # -- IndexBackend: reading --------------------------------------------------------------

    def documents(self) -> Iterator[DocumentRecord]:
        """See :class:`~pinakes_core.index.backend.IndexBackend`."""

        def job(conn: psycopg.Connection[Any]) -> list[DocumentRecord]:
            tags = _grouped(conn.execute("SELECT doc_id, tag FROM doc_tags ORDER BY doc_id, tag"))
            fields = _grouped(
                conn.execute(
                    "SELECT doc_id, key, value_text, value_num FROM doc_meta ORDER BY doc_id, rowid"
                )
            )
            links = _grouped(
                conn.execute(
                    "SELECT src_doc, target, kind, rel, origin FROM links "
                    "WHERE origin != 'reverse-scan' ORDER BY src_doc, rowid"
                )
            )
            chunks = _grouped(
                conn.execute(
                    "SELECT doc_id, ordinal, heading_path, text, embed_hash, start_line, "
                    "end_line, tokens, idents, page_start, page_end FROM chunks "
                    "ORDER BY doc_id, ordinal"
                )
            )
            return [
                DocumentRecord(
                    doc_id=r[0],
                    path=r[1],
                    title=r[2],
                    content_hash=r[3],
                    mtime_ns=int(r[4]),
                    size=int(r[5]),
                    tags=tuple(t[0] for t in tags.get(r[0], [])),
                    aliases=tuple(json.loads(r[6])),
                    source_type=r[7],
                    meta=json.loads(r[8]),
                    fields=tuple((f[0], f[1], f[2]) for f in fields.get(r[0], [])),
                    chunks=tuple(
                        ChunkRecord(
                            ordinal=c[0],
                            heading_path=tuple(json.loads(c[1])),
                            text=c[2],
                            embed_hash=c[3],
                            start_line=c[4],
                            end_line=c[5],
                            tokens=c[6],
                            idents=c[7],
                            page_start=c[8],
                            page_end=c[9],
                        )
                        for c in chunks.get(r[0], [])
                    ),
                    links=tuple(LinkRecord(*x) for x in links.get(r[0], [])),
                    sidecar_hash=r[9],
                    sidecar_mtime_ns=r[10],
                    sidecar_size=r[11],
                    pages=None if r[12] is None else tuple(json.loads(r[12])),
                    line_count=r[13],
                )
                for r in conn.execute(
                    "SELECT doc_id, path, title, content_hash, mtime_ns, size, aliases, "
                    "source_type, meta, sidecar_hash, sidecar_mtime_ns, sidecar_size, pages, "
                    "line_count FROM documents ORDER BY path"
                )
            ]

        yield from self._read(job)

    def vectors(self) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        """See :class:`~pinakes_core.index.backend.IndexBackend`."""

        def job(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return conn.execute("SELECT embed_hash, vector::text FROM vectors").fetchall()

        for h, text in self._read(job):
            yield h, np.asarray(json.loads(text), dtype=np.float32)

    def document_count(self) -> int:
        """See :class:`~pinakes_core.index.backend.IndexBackend`."""
        return self._count("documents")

    def chunk_count(self) -> int:
        """See :class:`~pinakes_core.index.backend.IndexBackend`."""
        return self._count("chunks")

    def _count(self, table: str) -> int:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        return int(self._read(lambda c: _one(c.execute(query))[0]))

    def lexical(self, text: str, k: int) -> list[ChunkHit]:
        """BM25 over the postings of PostgreSQL's stemmer (module docstring): :data:`BM25_SQL`.

        The statement search's BM25 channel runs (without its phrase terms), so the contract's
        ranking and search's are one. Two round trips: the query's lexemes and the counts,
        then the ranking with each hit's document.
        """
        words = _query_words(text)
        if not words:
            return []

        def job(conn: psycopg.Connection[Any]) -> list[ChunkHit]:
            lexemes, n, total = _one(conn.execute(_LEXICAL_ARGS_SQL, (TS_CONFIG, words)))
            if not lexemes:
                return []
            rows = conn.execute(
                _LEXICAL_SQL,
                {
                    **BM25_ARGS,
                    "lexemes": lexemes,
                    "phrases": [],
                    "cfg": TS_CONFIG,
                    "n": float(n or 0),
                    "lucene": False,  # FTS5's IDF, as the SQLite store's lexical() ranks
                    "avg": mean_length(n, total),
                    "k": k,
                },
            )
            return [ChunkHit(int(r[0]), r[1], r[2], int(r[3]), float(r[4])) for r in rows]

        return self._read(job)

    def ts_rank(self, text: str, k: int) -> list[ChunkHit]:
        """PostgreSQL's stock ranking: ``ts_rank_cd`` over any of the query's words.

        Kept to measure what text search alone gives (docs/scaling.md); search uses
        :meth:`lexical`.
        """
        words = _query_words(text)
        if not words:
            return []
        # ts_rank_cd takes weights in [0, 1]: the same ratios, halved.
        weights = "{" + ",".join(str(_WEIGHTS[w] / 2) for w in "DCBA") + "}"

        def job(conn: psycopg.Connection[Any]) -> list[ChunkHit]:
            rows = conn.execute(
                "WITH q AS (SELECT nullif(array_to_string(array(SELECT quote_literal(x) FROM "
                "unnest(tsvector_to_array(to_tsvector(%s, %s))) x), ' | '), '')::tsquery AS q) "
                "SELECT c.chunk_id, c.doc_id, d.path, c.ordinal, ts_rank_cd(%s::float4[], c.tsv, q.q) AS s "
                "FROM q, chunks c JOIN documents d ON d.doc_id = c.doc_id "
                "WHERE c.tsv @@ q.q ORDER BY s DESC, c.chunk_id LIMIT %s",
                (TS_CONFIG, words, weights, k),
            ).fetchall()
            return [ChunkHit(int(r[0]), r[1], r[2], int(r[3]), float(r[4])) for r in rows]

        return self._read(job)

    def nearest(self, vector: npt.NDArray[np.float32], k: int) -> list[ChunkHit]:
        """Cosine nearest chunks by pgvector: exact scan, or HNSW past :meth:`ensure_ann`."""
        literal = _vector_text(vector)

        def job(conn: psycopg.Connection[Any]) -> list[ChunkHit]:
            rows = conn.execute(
                "WITH top AS (SELECT embed_hash, vector <=> %s::vector AS distance "
                "FROM vectors ORDER BY distance LIMIT %s) "
                "SELECT c.chunk_id, c.doc_id, d.path, c.ordinal, 1 - top.distance FROM top "
                "JOIN chunks c ON c.embed_hash = top.embed_hash "
                "JOIN documents d ON d.doc_id = c.doc_id "
                "ORDER BY top.distance, c.chunk_id LIMIT %s",
                (literal, k, k),
            ).fetchall()
            return [ChunkHit(int(r[0]), r[1], r[2], int(r[3]), float(r[4])) for r in rows]

        return self._read(job)


class Row(tuple[Any, ...]):
    """A result row read by position or by column name, as ``sqlite3.Row`` is."""

    _names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._names)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    """The row class of one result shape, made once (a search runs the same few statements)."""
    return type("Row", (Row,), {"_names": {n: i for i, n in enumerate(names)}, "__slots__": ()})


def _row_factory(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], Row]:
    return _row_class(tuple(c.name for c in cursor.description or ()))


@functools.lru_cache(maxsize=4096)
def dialect(query: str) -> str:
    """``query`` with its ``?`` placeholders as the driver's ``%s`` (and a literal ``%`` doubled).

    Quoted text (``'…'``) and quoted names (``"…"``) are left as they are. This is the only
    rewriting: the SQL itself is written in the dialect both engines speak (:mod:`pinakes_core.index.backend`).
    """
    out: list[str] = []
    quote = ""
    for ch in query:
        if quote:
            out.append("%%" if ch == "%" else ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


class PortableConnection:
    """The store's connection for the code above it: SQLite's ``?`` SQL run on PostgreSQL.

    ``execute`` and ``executemany`` take SQL in the common dialect of SQLite and PostgreSQL
    (:mod:`pinakes_core.index.backend`) and return the driver's cursor, whose rows read by
    position or column name. A read outside a transaction whose connection dropped is retried
    once on a new connection; a statement the server refuses raises
    :class:`~pinakes_core.index.backend.DatabaseError`, a server that is gone
    :class:`~pinakes_core.index.backend.StoreUnavailableError`.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The driver's connection underneath (``%s`` placeholders)."""
        return self._store.raw

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (as ``sqlite3.Connection.in_transaction``)."""
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def execute(
        self, query: str, params: Sequence[Any] = (), *, plain: bool = False
    ) -> psycopg.Cursor[Any]:
        """Run one statement; see the class docstring (``plain``: rows as bare tuples)."""
        text = dialect(query)
        rows: Any = tuple_row if plain else _row_factory

        def job(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
            cursor = conn.cursor(row_factory=rows)
            return cursor.execute(text, tuple(params))

        return self._run(job)

    def chunk_count(self) -> int:
        """The number of chunks, as the last write counted them (``meta.chunks``)."""
        row = self.execute("SELECT value FROM meta WHERE key = 'chunks'").fetchone()
        if row is None:
            row = _one(self.execute("SELECT count(*) FROM chunks"))
        return int(row[0])

    def cursor(self) -> _PlainCursor:
        """A cursor whose rows are bare tuples once its ``row_factory`` is set to ``None``.

        As ``sqlite3``'s: sync reads its largest table this way (issue 14).
        """
        return _PlainCursor(self)

    def close(self) -> None:
        """Close the store's connection (for a connection used alone: :meth:`PostgresPlace.reader`)."""
        self._store.close()

    def executemany(self, query: str, rows: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        """Run one statement for each of ``rows``; see the class docstring."""
        text = dialect(query)
        batch = [tuple(r) for r in rows]

        def job(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
            cursor = conn.cursor(row_factory=_row_factory)
            cursor.executemany(text, batch)
            return cursor

        return self._run(job)

    def _run(self, job: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        try:
            return self._store._read(job)
        except psycopg.OperationalError as exc:
            raise _unavailable(self._store.url, exc) from None
        except psycopg.Error as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatabaseError(
                f"The PostgreSQL server refused a statement of the index ({reason}).",
                "This is a bug in Pinakes if it persists; `pnk sync --rebuild` rebuilds the index.",
            ) from exc


class _PlainCursor:
    """What ``sqlite3.Connection.cursor()`` gives the code above the store (see :meth:`PortableConnection.cursor`)."""

    def __init__(self, conn: PortableConnection) -> None:
        self._conn = conn
        #: ``None``: bare tuples; anything else: rows read by name too.
        self.row_factory: object = _row_factory

    def execute(self, query: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        """Run one statement (see :meth:`PortableConnection.execute`)."""
        return self._conn.execute(query, params, plain=self.row_factory is None)


class PostgresPlace:
    """A KB's index in a PostgreSQL schema (:class:`~pinakes_core.index.place.IndexPlace`).

    Nothing of it is on local disk: any number of machines read it, one writes at a time.
    """

    backend = "postgres"
    shared = True

    def __init__(self, url: str, kb_id: str) -> None:
        self.url = url
        self.kb_id = kb_id
        # One connection for the questions a server asks before each call, opened at the
        # first and kept (reopened if the server dropped it).
        self._probe: PostgresStore | None = None

    def _ask(self, question: Callable[[PostgresStore], _T]) -> _T:
        if self._probe is None or self._probe.raw.closed:
            self._probe = PostgresStore(self.url, self.kb_id, _connect(self.url))
        probe = self._probe
        return probe._read(lambda conn: question(probe))

    def _version(self) -> str | None:
        return self._ask(lambda store: store._version(store.home))

    def identity(self) -> object | None:
        """See :class:`~pinakes_core.index.place.IndexPlace`: the schema's creation time (a rebuild makes a new one)."""
        return self._ask(lambda store: store._home_created())

    def reader(self) -> PortableConnection:
        """See :class:`~pinakes_core.index.place.IndexPlace`: a connection of its own to the schema."""
        return PostgresStore.open(self.url, self.kb_id, create=False).conn

    def size(self) -> int:
        """See :class:`~pinakes_core.index.place.IndexPlace`: the schema's tables and indexes."""

        def question(store: PostgresStore) -> int:
            row = store.raw.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'",
                (store.home,),
            ).fetchone()
            return int(row[0]) if row else 0

        return self._ask(question)

    def close(self) -> None:
        """Close the connection :meth:`exists`, :meth:`current` and :meth:`identity` keep."""
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def exists(self) -> bool:
        """See :class:`~pinakes_core.index.place.IndexPlace` (one short connection)."""
        return self._version() is not None

    def current(self) -> bool:
        """See :class:`~pinakes_core.index.place.IndexPlace`."""
        return self._version() == _LAYOUT

    def open(self, *, create: bool = True, rebuild: bool = False) -> PostgresStore:
        """See :class:`~pinakes_core.index.place.IndexPlace` (:meth:`PostgresStore.open`).

        A store opened to write (``create``: a sync's) holds its writes until it publishes
        (:meth:`PostgresStore.hold_writes`): readers never see half a sync.
        """
        store = PostgresStore.open(self.url, self.kb_id, create=create, rebuild=rebuild)
        if create:
            store.hold_writes()
        return store

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """See :class:`~pinakes_core.index.place.IndexPlace`: the schema's advisory writer lock.

        Held on a connection of its own for the whole sync; like SQLite's lock file it does
        not wait: a sync running elsewhere fails this one at once.
        """
        store = PostgresStore.open(self.url, self.kb_id, create=True)
        try:
            with store.writer(wait=0.0):
                yield
        finally:
            store.close()

    def check_writable(self) -> None:
        """See :class:`~pinakes_core.index.place.IndexPlace`: a server that only reads is refused.

        A replica (a hot standby in recovery) or a server whose sessions are read-only cannot
        hold a sync: that is said in one sentence before anything starts. A role that may not
        write gets the server's refusal in one sentence at the first write.

        Raises:
            IndexWriteError: if the server at the URL only reads.
        """
        row = self._ask(
            lambda store: store.raw.execute(
                "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'"
            ).fetchone()
        )
        if row is not None and row[0]:
            raise IndexWriteError(
                f"The database {redact(self.url)} only reads (a replica, or a read-only server), "
                "so a sync cannot write the index there (search, show and status read it).",
                "Sync against the primary: its URL in PINAKES_DATABASE_URL (or [store] url).",
            )

    def refresh_indexes(
        self, store: Any, scale: ScaleConfig, changed: list[str], removed: list[str]
    ) -> None:
        """See :class:`~pinakes_core.index.place.IndexPlace`: HNSW, and the impact index.

        HNSW from ``[scale] ann_min_chunks`` chunks, the postings' impact index past ``[scale]
        bm25_max_rows`` (:meth:`PostgresStore.ensure_impacts`).
        """
        store.ensure_ann(scale.ann_min_chunks)
        store.ensure_impacts(scale.bm25_max_rows)

    def settle(self, store: Any) -> None:
        """See :class:`~pinakes_core.index.place.IndexPlace`: nothing is kept outside the database."""


class _Vector:
    """A vector on its way to a ``vector`` column in binary (:class:`_VectorDumper`)."""

    __slots__ = ("values",)

    def __init__(self, values: npt.NDArray[np.float32]) -> None:
        self.values = values


class _VectorDumper(Dumper):
    """pgvector's binary input: the dimension (uint16), a zero (uint16), big-endian float32s.

    Exactly the float32 values, as the text form's shortest ``repr`` also gave them, with no
    text to make or parse. Its ``oid`` is set to the server's ``vector`` type per use.
    """

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        values = np.asarray(obj.values, dtype=">f4")
        return struct.pack(">HH", values.shape[0], 0) + values.tobytes()


@functools.lru_cache(maxsize=8)
def _vector_dumper(oid: int) -> type[_VectorDumper]:
    """:class:`_VectorDumper` for a server whose ``vector`` type has ``oid``."""
    return type("_VectorDumperOid", (_VectorDumper,), {"oid": oid})


class _VectorBytes(Loader):
    """Reads a pgvector value as SQLite keeps a vector: its float32 values' bytes."""

    def load(self, data: Buffer) -> bytes:
        return np.asarray(json.loads(bytes(data)), dtype=np.float32).tobytes()


class _VectorRaw(Loader):
    """pgvector's binary output as it comes (:meth:`PostgresStore.load_vectors` decodes it)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def _read_vectors_as_bytes(conn: psycopg.Connection[Any]) -> None:
    """Make ``conn`` read ``vector`` columns as float32 bytes (``np.frombuffer`` reads them back)."""
    info = TypeInfo.fetch(conn, "vector")
    if info is not None:
        conn.adapters.register_loader(info.oid, _VectorBytes)


def _raw(conn: Any) -> psycopg.Connection[Any]:
    """The driver's connection of ``conn`` (a :class:`PortableConnection` or the driver's own)."""
    return conn.raw if isinstance(conn, PortableConnection) else conn


def _one(cursor: psycopg.Cursor[Any]) -> Any:
    row = cursor.fetchone()
    assert row is not None  # an aggregate or a function call always gives a row
    return row


def _grouped(rows: Any) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault(str(r[0]), []).append(tuple(r[1:]))
    return out


def _connect(url: str) -> psycopg.Connection[Any]:
    """Connect with a bounded retry: :data:`CONNECT_TRIES` tries, pausing between them.

    Raises:
        StoreUnavailableError: if every try fails.
    """
    last: Exception | None = None
    for attempt in range(CONNECT_TRIES):
        try:
            return psycopg.connect(url, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as exc:
            last = exc
            if attempt + 1 < CONNECT_TRIES:
                time.sleep(RETRY_PAUSES[min(attempt, len(RETRY_PAUSES) - 1)])
    assert last is not None
    raise _unavailable(url, last, tries=CONNECT_TRIES)


def _unavailable(url: str, exc: Exception, *, tries: int = 1) -> StoreUnavailableError:
    reason = (str(exc).strip().splitlines() or ["no answer"])[0].rstrip(".")
    after = f" after {tries} tries" if tries > 1 else ""
    return StoreUnavailableError(
        f"The PostgreSQL server at {redact(url)} did not answer{after} ({reason}).",
        "Start it (or wait for its restart) and run this again; check [store] url or "
        "PINAKES_DATABASE_URL if it is the wrong server. Nothing in the KB's folder was changed.",
    )
