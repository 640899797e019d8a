"""A STAND-IN for the PostgreSQL connection adapter (issue 38, the lead's ``PostgresStore.conn``).

Search's SQL above the store is written with ``?`` placeholders (the dialect SQLite and
PostgreSQL share); the lead's adapter rewrites them to psycopg's ``%s``. Until it lands on
this branch, the search tests and ``benchmarks/pg_channels.py`` wrap a ``PostgresStore`` in
:class:`QmarkStore`, which does only that rewrite on ``conn``; everything else (``_read``,
``nearest``, ``load_vectors``, ``backend`` …) is the store's own. Delete this module once
``PostgresStore.conn`` takes ``?`` SQL.
"""

from __future__ import annotations

from typing import Any


class QmarkConnection:
    """``execute(sql, params)`` with ``?`` placeholders over a psycopg connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self._conn.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(params))


class QmarkStore:
    """A ``PostgresStore`` whose ``conn`` takes ``?`` SQL (see the module docstring)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def conn(self) -> QmarkConnection:
        return QmarkConnection(self._store.conn)
