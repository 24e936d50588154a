"""The statements written on every step, run on SQLite's own cursor inside SQLAlchemy's transaction.

SQLAlchemy Core spends ~25 µs per ``Connection.execute`` around a SQLite statement that itself costs
~15 µs (events, cache look-up, parameter processing, result set-up), and a tool step runs about ten.
Here each statement is compiled once per dialect and parameter names (SQL text, positional order, the
columns' own bind processors: JSON, timestamps), then run on the DBAPI cursor of the same connection,
so it is part of the same transaction. PostgreSQL keeps ``Connection.execute`` (asyncpg is reached
through SQLAlchemy's async bridge there).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc


@dataclass(frozen=True, slots=True)
class _Compiled:
    statement: sa.Executable
    """Held, so the ``id`` keying this entry is never reused by another statement."""
    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    literals: Mapping[str, Any]
    """The values of binds the statement carries itself (the ``1`` of ``max(position) + 1``)."""

    def values(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for name, process in zip(self.names, self.processors, strict=True):
            value = params[name] if name in params else self.literals[name]
            out.append(value if process is None else process(value))
        return tuple(out)


_compiled: dict[tuple[int, str, tuple[str, ...]], _Compiled] = {}


def _compile(conn: sa.Connection, statement: sa.Executable, keys: tuple[str, ...]) -> _Compiled:
    dialect = conn.dialect
    cache_key = (id(statement), dialect.name, keys)
    found = _compiled.get(cache_key)
    if found is None or found.statement is not statement:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))  # type: ignore[attr-defined]
        names = tuple(compiled.positiontup or ())
        binds = {name: compiled.binds[name] for name in names}
        processors = tuple(binds[name].type.bind_processor(dialect) for name in names)  # names repeat
        literals = {name: bind.effective_value for name, bind in binds.items() if not bind.required}
        found = _compiled[cache_key] = _Compiled(statement, compiled.string, names, processors, literals)
    return found


def write_rows(
    conn: sa.Connection, statement: sa.Executable, params: Mapping[str, Any] | Sequence[Mapping[str, Any]]
) -> int:
    """Run an INSERT or UPDATE (many parameter sets: one ``executemany``); returns the rows it changed.

    The statements given here are module constants: their ``id`` keys the compiled form."""
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, params).rowcount
    many = not isinstance(params, Mapping)
    rows: Sequence[Mapping[str, Any]] = params if many else [params]  # type: ignore[assignment, list-item]
    if not rows:
        return 0
    compiled = _compile(conn, statement, tuple(rows[0]))
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        if many:
            cursor.executemany(compiled.sql, [compiled.values(row) for row in rows])
        else:
            cursor.execute(compiled.sql, compiled.values(rows[0]))
        return int(cursor.rowcount)
    except sqlite3.Error as exc:
        raise _wrapped(compiled, exc) from exc
    finally:
        cursor.close()


def first_row(
    conn: sa.Connection, statement: sa.Executable, params: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    """The first row of a SELECT whose columns need no conversion (ids, numbers), or ``None``."""
    if conn.dialect.name != "sqlite":
        row = conn.execute(statement, params).first()
        return tuple(row) if row is not None else None
    compiled = _compile(conn, statement, tuple(params))
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        found = cursor.execute(compiled.sql, compiled.values(params)).fetchone()
        return tuple(found) if found is not None else None
    except sqlite3.Error as exc:
        raise _wrapped(compiled, exc) from exc
    finally:
        cursor.close()


def _wrapped(compiled: _Compiled, exc: sqlite3.Error) -> sa.exc.StatementError:
    """The driver's error as SQLAlchemy raises it (``IntegrityError``...), so the store's retry and
    ``StoreError`` rules see one kind of error whichever path ran the statement."""
    return sa.exc.DBAPIError.instance(compiled.sql, None, exc, sqlite3.Error, hide_parameters=True)
