"""Sync's per-document writes: raw ``executemany`` against sqlite-utils' ``insert_all`` (issue 38).

Issue 38 asks the SQLite store to move onto sqlite-utils "wherever it serves, raw SQL only on
measured hot paths". The rows sync writes for each document (its tags, frontmatter fields,
links and chunk vectors, the vectors with ``INSERT OR IGNORE``) are the hot path of a first
sync; this times them both ways, inside one transaction as sync does, on tables shaped like the
store's. sqlite-utils is not a dependency of the project, so run it with uv's ``--with``::

    uv run --with sqlite-utils python benchmarks/sqlite_utils_writes.py [--documents N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import tempfile
import time
from typing import Any

import sqlite_utils  # type: ignore[import-not-found, unused-ignore]

SCHEMA = """
CREATE TABLE documents (doc_id TEXT PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE doc_tags (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE TABLE doc_meta (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    key TEXT NOT NULL, value_text TEXT NOT NULL, value_num REAL
);
CREATE TABLE links (
    src_doc TEXT NOT NULL, target TEXT NOT NULL, kind TEXT NOT NULL, rel TEXT NOT NULL,
    origin TEXT NOT NULL
);
CREATE TABLE vectors (embed_hash TEXT PRIMARY KEY, vector BLOB NOT NULL);
"""


def rows_of(i: int, vector: bytes) -> dict[str, list[tuple[Any, ...]]]:
    """One document's rows: 3 tags, 4 fields, 5 links, 3 chunk vectors (384 floats)."""
    doc = f"d{i}"
    return {
        "doc_tags": [(doc, f"t{j}") for j in range(3)],
        "doc_meta": [(doc, f"k{j}", "v", None) for j in range(4)],
        "links": [(doc, f"x{j}", "wiki", "links_to", "sidecar") for j in range(5)],
        "vectors": [(f"h{i}-{j}", vector) for j in range(3)],
    }


def run(mode: str, documents: int) -> float:
    """Microseconds per document to write ``documents`` documents' rows, ``raw`` or ``sqlite-utils``."""
    folder = tempfile.mkdtemp()
    conn = sqlite3.connect(os.path.join(folder, "bench.db"), isolation_level=None)
    conn.executescript(SCHEMA)
    db = sqlite_utils.Database(conn)
    vector = os.urandom(384 * 4)
    columns = {
        "doc_tags": ("doc_id", "tag"),
        "doc_meta": ("doc_id", "key", "value_text", "value_num"),
        "links": ("src_doc", "target", "kind", "rel", "origin"),
        "vectors": ("embed_hash", "vector"),
    }
    started = time.perf_counter()
    conn.execute("BEGIN")
    for i in range(documents):
        conn.execute("INSERT INTO documents VALUES (?, ?)", (f"d{i}", f"p{i}.md"))
        for table, rows in rows_of(i, vector).items():
            names = columns[table]
            if mode == "raw":
                ignore = " OR IGNORE" if table == "vectors" else ""
                marks = ", ".join("?" * len(names))
                sql = f"INSERT{ignore} INTO {table}({', '.join(names)}) VALUES ({marks})"
                conn.executemany(sql, rows)
            else:
                db[table].insert_all(
                    (dict(zip(names, row, strict=True)) for row in rows), ignore=table == "vectors"
                )
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    shutil.rmtree(folder, ignore_errors=True)
    return elapsed / documents * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=3000)
    args = parser.parse_args()
    for mode in ("raw", "sqlite-utils", "raw", "sqlite-utils"):
        print(f"{mode}: {run(mode, args.documents):.1f} µs per document")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
