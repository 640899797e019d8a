"""The SQLite store's SQL against sqlite-utils', per job, and sync timed end to end (issue 38).

Issue 38 asks the SQLite store to move onto sqlite-utils "wherever it serves, raw SQL only on
measured hot paths (say which, with numbers)". Three measurements, docs/benchmarks.md
("sqlite-utils on the SQLite store"):

``paths``
    Each statement the store runs on a hot path, raw against sqlite-utils' call for the same
    job, on tables shaped like the store's (tables.py), inside one transaction as sync runs
    them: one document's rows (3 tags, 4 fields, 5 links, 3 chunk vectors); the FTS5 row of a
    chunk; a batch of 500 vectors kept if present (``INSERT OR IGNORE``); a ``meta`` upsert
    (sync writes a few each sync and three for each document); search's reads (a chunk's
    row by id and a ``meta`` value).
``import``
    ``import sqlite_utils`` in a fresh interpreter that has already imported what a sync
    imports, with and without cached bytecode.
``create``
    ``Store.open(create=True)`` of a new store in a fresh interpreter that has already imported
    what a sync imports: what a first sync pays for its schema, the import of the schema's
    modules included (run it under two code versions to compare them).
``schema``
    A sync's per-document writes (a document of 6 chunks, 3 tags, 2 fields, 4 links, its
    vectors and a ``meta`` mark, one transaction each) into a store made by the earlier DDL
    script (tests/core/test_store_tables.py's ``REFERENCE``) against one made by tables.py:
    the schema must not change what a write costs.
``sync``
    A copy of a folder synced into a new SQLite store with the suite's FAKE hash embedder (so
    the store's own cost is timed, not a model's): first sync, a no-change sync, and warm
    search p50 / p95; ``--dump FILE`` writes every row of the store (for comparing two code
    versions' stores), ``--kb DIR`` syncs DIR itself (its sidecars, hence its ids, kept).

Usage::

    uv run python benchmarks/sqlite_utils_writes.py paths [--documents 3000]
    uv run python benchmarks/sqlite_utils_writes.py import
    uv run python benchmarks/sqlite_utils_writes.py create [--rounds 10]
    uv run python benchmarks/sqlite_utils_writes.py schema [--documents 1500]
    uv run python benchmarks/sqlite_utils_writes.py sync --folder golden/kb [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUERIES = (
    "how do I define a custom command",
    "pipeline input and output types",
    "leader election and majority",
    "environment variables in config",
    "how to sort a table by column",
    "retry policy with backoff",
    "loop over a list with each",
    "error handling",
    "register a plugin",
    "group by aggregation",
)


# -- paths ----------------------------------------------------------------------------------


def _store(folder: str) -> tuple[sqlite3.Connection, Any]:
    """A store's schema (tables.py) in ``folder``, and sqlite-utils over the same connection."""
    from pinakes_core.index.tables import create_schema, database

    conn = sqlite3.connect(os.path.join(folder, "bench.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    create_schema(conn, {"schema_version": "6", "generation": "0"})
    return conn, database(conn)


def _document_rows(i: int, vector: bytes) -> dict[str, list[dict[str, Any]]]:
    """One document's rows: 3 tags, 4 fields, 5 links, 3 chunk vectors (384 floats)."""
    doc = f"d{i}"
    return {
        "doc_tags": [{"doc_id": doc, "tag": f"t{j}"} for j in range(3)],
        "doc_meta": [
            {"doc_id": doc, "key": f"k{j}", "value_text": "v", "value_num": None} for j in range(4)
        ],
        "links": [
            {
                "src_doc": doc,
                "target": f"x{j}",
                "kind": "wiki",
                "rel": "links-to",
                "origin": "sidecar",
            }
            for j in range(5)
        ],
        "vectors": [{"embed_hash": f"h{i}-{j}", "vector": vector} for j in range(3)],
    }


def _insert_raw(
    conn: sqlite3.Connection, table: str, rows: list[dict[str, Any]], ignore: bool
) -> None:
    if not rows:
        return
    names = list(rows[0])
    verb = "INSERT OR IGNORE" if ignore else "INSERT"
    conn.executemany(
        f"{verb} INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        [tuple(r.values()) for r in rows],
    )


def _document(conn: sqlite3.Connection, i: int) -> None:
    conn.execute(
        "INSERT INTO documents(doc_id, path, title, content_hash, mtime_ns, size, synced_at) "
        "VALUES (?, ?, 't', 'h', 0, 0, 0)",
        (f"d{i}", f"p{i}.md"),
    )


def time_job(job: str, mode: str, n: int) -> float:
    """Microseconds per unit of ``job`` over ``n`` units, ``raw`` or ``sqlite-utils``."""
    folder = tempfile.mkdtemp()
    conn, db = _store(folder)
    vector = os.urandom(384 * 4)
    raw = mode == "raw"
    try:
        if job == "read":  # search's reads: a chunk row by id, a meta value
            conn.execute("BEGIN")
            for i in range(n):
                _document(conn, i)
                conn.execute(
                    "INSERT INTO chunks(chunk_id, doc_id, ordinal, heading_path, text, embed_hash, "
                    "start_line, end_line, tokens) VALUES (?, ?, 0, '[]', 'x', 'h', 1, 1, 1)",
                    (i + 1, f"d{i}"),
                )
            conn.execute("INSERT INTO meta(key, value) VALUES ('dim', '384')")
            conn.execute("COMMIT")
        started = time.perf_counter()
        conn.execute("BEGIN")
        for i in range(n):
            if job == "document":
                _document(conn, i)
                for table, rows in _document_rows(i, vector).items():
                    if raw:
                        _insert_raw(conn, table, rows, ignore=table == "vectors")
                    else:
                        db[table].insert_all(rows, ignore=table == "vectors")
            elif job == "fts":
                row = {"rowid": i + 1, "title": "A title", "heading": "Intro › Part",
                       "text": "some words of a chunk " * 20, "idents": "foo bar"}  # fmt: skip
                if raw:
                    conn.execute(
                        "INSERT INTO chunks_fts(rowid, title, heading, text, idents) "
                        "VALUES (?, ?, ?, ?, ?)",
                        tuple(row.values()),
                    )
                else:
                    db["chunks_fts"].insert(row)
            elif job == "vectors":  # a batch of 500, half of them stored already
                rows = [{"embed_hash": f"h{(i * 250 + j)}", "vector": vector} for j in range(500)]
                if raw:
                    _insert_raw(conn, "vectors", rows, ignore=True)
                else:
                    db["vectors"].insert_all(rows, ignore=True)
            elif job == "meta":
                if raw:
                    conn.execute(
                        "INSERT INTO meta(key, value) VALUES (?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        ("links_resolved", str(i)),
                    )
                else:
                    db["meta"].upsert({"key": "links_resolved", "value": str(i)}, pk="key")
            elif job == "read":
                if raw:
                    conn.execute(
                        "SELECT chunk_id, doc_id, ordinal FROM chunks WHERE chunk_id = ?", (i + 1,)
                    ).fetchone()
                    conn.execute("SELECT value FROM meta WHERE key = ?", ("dim",)).fetchone()
                else:
                    db["chunks"].get(i + 1)
                    next(db["meta"].rows_where("key = ?", ["dim"]))
        conn.execute("COMMIT")
        return (time.perf_counter() - started) / n * 1e6
    finally:
        conn.close()
        shutil.rmtree(folder, ignore_errors=True)


def paths(args: argparse.Namespace) -> dict[str, Any]:
    """Every job both ways, two alternating rounds; microseconds per unit."""
    units = {"document": args.documents, "fts": args.documents, "vectors": 40,
             "meta": args.documents, "read": args.documents}  # fmt: skip
    out: dict[str, Any] = {}
    for job, n in units.items():
        for mode in ("raw", "sqlite-utils", "raw", "sqlite-utils"):
            out.setdefault(job, {}).setdefault(mode, []).append(round(time_job(job, mode, n), 1))
    return out


# -- import ---------------------------------------------------------------------------------

_IMPORT_PROBE = """
import time
import numpy, pydantic, pluggy, click
import pinakes_core.kb, pinakes_core.index.sync
started = time.perf_counter()
import sqlite_utils
print(time.perf_counter() - started)
"""


def import_cost(args: argparse.Namespace) -> dict[str, Any]:
    """``import sqlite_utils`` after a sync's imports: seconds, fresh interpreters."""
    out: dict[str, Any] = {}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for label, extra in (("no bytecode cache", {"PYTHONDONTWRITEBYTECODE": "1"}), ("cached", {})):
        # An empty bytecode folder of its own: without a cache every module compiles each time.
        with tempfile.TemporaryDirectory() as cache:
            runs = []
            for _ in range(args.rounds + 1):  # the first run fills the cache (when it may)
                proc = subprocess.run(
                    [sys.executable, "-c", _IMPORT_PROBE],
                    env={**base, "PYTHONPYCACHEPREFIX": cache, **extra},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs.append(round(float(proc.stdout.strip()), 3))
            out[label] = runs[1:]
    return out


_CREATE_PROBE = """
import sys, tempfile, time
import numpy, pydantic, pluggy, click
import pinakes_core.kb, pinakes_core.index.sync
from pinakes_core.index.store import Store
with tempfile.TemporaryDirectory() as root:
    started = time.perf_counter()
    Store.open(__import__("pathlib").Path(root), create=True).close()
    print(time.perf_counter() - started)
"""


def create_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds to make a new store in a fresh interpreter (after a sync's imports)."""
    runs = []
    for _ in range(args.rounds):
        proc = subprocess.run(
            [sys.executable, "-c", _CREATE_PROBE], capture_output=True, text=True, check=True
        )
        runs.append(round(float(proc.stdout.strip()) * 1000, 1))
    return {"ms": runs, "median_ms": statistics.median(runs)}


def schema_writes(args: argparse.Namespace) -> dict[str, Any]:
    """Microseconds a document, stores made by the old DDL and by tables.py, alternating."""
    import numpy as np

    from pinakes_core.index import store as st
    from pinakes_core.index.backend import ChunkRecord, DocumentRecord, LinkRecord, SqliteBackend
    from pinakes_core.index.tables import create_schema

    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "core")]
    from test_store_tables import REFERENCE

    def make(kind: str, folder: Path) -> st.Store:
        conn = st._connect(folder / "x.db", create=True)
        if kind == "DDL script":
            conn.executescript(
                f"BEGIN;\n{REFERENCE}INSERT INTO meta(key, value) VALUES "
                "('schema_version', '6'), ('generation', '0');\nCOMMIT;"
            )
        else:
            create_schema(conn, {"schema_version": "6", "generation": "0"})
        return st.Store(conn, folder / "x.db", rebuilt_from=None, readers=-1)

    def document(i: int) -> DocumentRecord:
        chunks = tuple(
            ChunkRecord(
                j, ("H", "S"), f"text of chunk {j} of note {i} " * 30, f"e{i}-{j}", 1, 9, 120
            )
            for j in range(6)
        )
        links = tuple(LinkRecord(f"t{j}", "wiki", "links-to", "frontmatter") for j in range(4))
        return DocumentRecord(
            f"D{i:08d}", f"n/{i}.md", f"Note {i}", "h", 1, 1, tags=("a", "b", "c"),
            fields=(("k", "v", None), ("n", "1", 1.0)), chunks=chunks, links=links,
        )  # fmt: skip

    vector = np.ones(384, np.float32)
    out: dict[str, Any] = {"DDL script": [], "tables.py": []}
    for _ in range(3):
        for kind in out:
            with tempfile.TemporaryDirectory() as folder:
                store = make(kind, Path(folder))
                backend = SqliteBackend(store)
                started = time.perf_counter()
                for i in range(args.documents):
                    doc = document(i)
                    with store.transaction() as conn:
                        backend.put_document(conn, doc)
                        store.put_vectors(conn, {c.embed_hash: vector for c in doc.chunks})
                        store.set_meta(conn, "links_resolved", "0")
                out[kind].append(round((time.perf_counter() - started) / args.documents * 1e6))
                store.close()
    return out


# -- sync -----------------------------------------------------------------------------------


def _embedder(dim: int) -> Callable[[], Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import FakeHashEmbedder

    return lambda: FakeHashEmbedder(model_id=f"fake-hash-{dim}", dim=dim)


def dump(path: Path) -> dict[str, list[list[Any]]]:
    """Every row of every table of the store at ``path`` (FTS5's own tables as they are)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    ]
    out = {}
    for table in tables:
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
        out[table] = [[v.hex() if isinstance(v, bytes) else v for v in r] for r in rows]
    conn.close()
    return out


def sync_times(args: argparse.Namespace) -> dict[str, Any]:
    """First sync, no-change sync and warm search of a new SQLite store of ``--folder``."""
    from pinakes_core import KB

    tmp = Path(tempfile.mkdtemp(prefix="pnk-su-sync-"))
    try:
        root = args.kb or tmp / "kb"
        if args.kb is None:
            shutil.copytree(args.folder, root, ignore=shutil.ignore_patterns(".pinakes", ".git"))
        shutil.rmtree(root / ".pinakes", ignore_errors=True)
        if not (root / "pinakes.toml").exists():
            KB.init(root).close()
        kb = KB.open(root, embedder=_embedder(args.dim)())
        out: dict[str, Any] = {"load": round(os.getloadavg()[0], 1)}
        for name in ("first", "no change"):
            started = time.perf_counter()
            report = kb.sync()
            out[name] = {
                "seconds": round(time.perf_counter() - started, 3),
                "parts_s": report.parts_s,
            }
        times = []
        for query in QUERIES:
            kb.search(query, k=10)  # warm: vectors, caches
        for _ in range(args.rounds):
            for query in QUERIES:
                started = time.perf_counter()
                kb.search(query, k=10)
                times.append((time.perf_counter() - started) * 1000)
        times.sort()
        out["search_ms"] = {
            "p50": round(statistics.median(times), 2),
            "p95": round(times[int(0.95 * (len(times) - 1))], 2),
        }
        out["sqlite_utils_loaded"] = "sqlite_utils" in sys.modules
        kb.close()
        if args.dump:
            args.dump.write_text(json.dumps(dump(root / ".pinakes" / "index.db")))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("paths", help="each hot-path job, raw against sqlite-utils")
    p.add_argument("--documents", type=int, default=3000)
    p = sub.add_parser("import", help="import sqlite_utils after a sync's imports")
    p.add_argument("--rounds", type=int, default=3)
    p = sub.add_parser("create", help="make a new store, fresh interpreter")
    p.add_argument("--rounds", type=int, default=10)
    p = sub.add_parser("schema", help="per-document writes, old DDL store against tables.py's")
    p.add_argument("--documents", type=int, default=1500)
    p = sub.add_parser("sync", help="first and no-change sync, warm search, fake embedder")
    p.add_argument("--folder", type=Path, default=ROOT / "golden" / "kb")
    p.add_argument("--kb", type=Path, help="sync this folder itself, not a copy")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dump", type=Path, help="write every row of the store here (JSON)")
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 1)
    run = {
        "paths": paths,
        "import": import_cost,
        "create": create_cost,
        "schema": schema_writes,
        "sync": sync_times,
    }
    run = run[args.what]
    print(json.dumps({"what": args.what, "load": load, **run(args)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
