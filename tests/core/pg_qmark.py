"""A STAND-IN for the PostgreSQL connection adapter (issue 38, the lead's ``PostgresStore.conn``).

Search's SQL above the store is written in the dialect SQLite and PostgreSQL share, with ``?``
placeholders, rows read by position or by column name, JSON columns as text (the lead's
mirrored schema keeps them as TEXT). Until the adapter lands on this branch, the search tests
and ``benchmarks/pg_channels.py`` wrap a ``PostgresStore`` in :class:`QmarkStore`, whose
``conn`` does only that: ``?`` to ``%s``, rows that answer ``row[0]`` and ``row["path"]``,
``jsonb`` read as its text. Everything else (``_read``, ``nearest``, ``load_vectors``,
``backend`` …) is the store's own. Delete this module once ``PostgresStore.conn`` does it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from psycopg.types.string import TextLoader


class Row(tuple):  # type: ignore[type-arg]
    """A row read by position or by column name, as ``sqlite3.Row``."""

    names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


def _rows(cursor: Any) -> Any:
    names = tuple(c.name for c in cursor.description or ())

    def make(values: Sequence[Any]) -> Row:
        row = Row(values)
        row.names = names
        return row

    return make


class QmarkConnection:
    """``execute(sql, params)`` with ``?`` placeholders over a psycopg connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        cursor = self._conn.cursor(row_factory=_rows)
        cursor.adapters.register_loader("jsonb", TextLoader)
        return cursor.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(params))


class QmarkStore:
    """A ``PostgresStore`` whose ``conn`` takes ``?`` SQL (see the module docstring)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def conn(self) -> QmarkConnection:
        return QmarkConnection(self._store.conn)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[QmarkConnection]:
        with self._store.transaction() as conn:
            yield QmarkConnection(conn)

    def set_meta(self, conn: Any, key: str, value: str) -> None:
        raw = conn._conn if isinstance(conn, QmarkConnection) else conn
        self._store.set_meta(raw, key, value)
