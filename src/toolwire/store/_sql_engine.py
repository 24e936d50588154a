"""Engines and transactions for the SQL store: one write transaction at a time per call, on the right driver.

- PostgreSQL: the transaction body runs on the async driver (asyncpg) via ``run_sync``.
- SQLite: each whole transaction runs in one hop to a dedicated thread, on the sync driver (aiosqlite pays
  a thread round trip per statement), in WAL mode with ``synchronous=NORMAL``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolwire.errors import ConfigError
from toolwire.store._sql_rows import dumps

T = TypeVar("T")

WRITE_OPTION = "toolwire_write"
SQLITE_BUSY_TIMEOUT_MS = 15_000
# PostgreSQL unique violation, serialization failure, deadlock: the transaction may simply be run again.
RETRYABLE_SQLSTATES = frozenset({"23505", "40001", "40P01"})
SQLITE_RETRYABLE_CODES = frozenset({1555, 2067})  # SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE


class AsyncRunner:
    """PostgreSQL: the transaction body runs on the async driver (asyncpg) via ``run_sync``.

    Round trips are the cost here, so: reads and single-statement writes run in autocommit (no
    ``BEGIN``/``ROLLBACK`` around one statement: PostgreSQL makes each statement atomic by itself, an
    ``executemany`` included), and connections are not pinged on checkout (a dead one fails its first
    statement and the store runs the operation again on a fresh one).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def run(self, op: Callable[[sa.Connection], T], *, write: bool, single: bool = False) -> T:
        if write and not single:
            async with self._writer.begin() as conn:
                return await conn.run_sync(op)
        async with self._autocommit.connect() as conn:
            return await conn.run_sync(op)

    async def dispose(self) -> None:
        await self.engine.dispose()


class ThreadRunner:
    """SQLite: each whole transaction runs in one hop to a dedicated thread, on the sync driver.

    aiosqlite pays a thread round trip per statement (~0.2 ms each, ~10 per step); one hop per transaction
    makes the embedded store several times faster. One thread also serialises this process's writers,
    which SQLite would do anyway.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.sync_engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolwire-sqlite")
        self._async_engine: AsyncEngine | None = None

    async def run(self, op: Callable[[sa.Connection], T], *, write: bool, single: bool = False) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run_sync, op, write)

    def _run_sync(self, op: Callable[[sa.Connection], T], write: bool) -> T:
        if write:
            with self._writer.begin() as conn:
                return op(conn)
        with self.sync_engine.connect() as conn:
            return op(conn)

    @property
    def engine(self) -> AsyncEngine:
        # For callers that want an AsyncEngine on the same file (inspection, ad-hoc queries).
        if self._async_engine is None:
            url = self.sync_engine.url.set(drivername="sqlite+aiosqlite")
            self._async_engine = create_async_engine(url, json_serializer=dumps)
            configure_sqlite(self._async_engine.sync_engine, url)
        return self._async_engine

    async def dispose(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self.sync_engine.dispose)
        self._thread.shutdown(wait=False)
        if self._async_engine is not None:
            await self._async_engine.dispose()


def normalise_url(url: str) -> URL:
    try:
        sa_url = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"not a database URL: {url!r}") from exc
    match sa_url.drivername:
        case "sqlite" | "sqlite+pysqlite":
            return sa_url.set(drivername="sqlite+aiosqlite")
        case "postgresql" | "postgres" | "postgresql+psycopg2":
            return sa_url.set(drivername="postgresql+asyncpg")
        case _:
            return sa_url


def configure_sqlite(engine: sa.Engine, url: URL) -> None:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module (it never emits it before SELECT or DDL); _on_begin does it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")  # first: the next pragmas may wait
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")  # readers never block the writer, nor it them
        # WAL + NORMAL: a commit survives a process crash (SIGKILL); only an OS crash or power loss can drop
        # the last commits. FULL would fsync every one of the several commits per step (~10x slower).
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def retryable(exc: DBAPIError) -> bool:
    """A lost race (unique violation), a serialization failure or a deadlock: running again can succeed."""
    state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    if state is not None:
        return state in RETRYABLE_SQLSTATES
    return getattr(exc.orig, "sqlite_errorcode", None) in SQLITE_RETRYABLE_CODES


def describe(exc: BaseException) -> str:
    # The driver's own message, without SQLAlchemy's rendering of the statement parameters (message content).
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return text[:300]
