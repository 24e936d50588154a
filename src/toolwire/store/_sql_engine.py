"""Engines and transactions for the SQL store: one write transaction at a time per call, on the right driver.

- PostgreSQL: the transaction body runs on the async driver (asyncpg) via ``run_sync``.
- SQLite: each whole transaction runs in one hop to a dedicated thread, on the sync driver (aiosqlite pays
  a thread round trip per statement), in WAL mode with ``synchronous=NORMAL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
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


@dataclass(slots=True)
class _Job:
    op: Callable[[sa.Connection], Any]
    """The transaction body (ignored when ``call`` is set: ``call()`` runs alone, e.g. dispose)."""
    write: bool
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    call: Callable[[], Any] | None = None


_STOP: Any = object()
GROUP_COMMIT_MAX = 64
"""At most this many queued write transactions share one commit (see :class:`ThreadRunner`)."""


class ThreadRunner:
    """SQLite: each whole transaction runs in one hop to a dedicated thread, on the sync driver.

    aiosqlite pays a thread round trip per statement (~0.2 ms each, ~10 per step); one hop per transaction
    makes the embedded store several times faster. One thread also serialises this process's writers,
    which SQLite would do anyway.

    Group commit: write transactions queued while the thread was busy (many sessions starting at once)
    run together in one ``BEGIN IMMEDIATE ... COMMIT``, each body as written, in queue order. If any
    body fails, that transaction is rolled back and every body of the group runs again alone, in its own
    transaction, so each caller gets exactly the outcome it would have had alone. (Bodies are functions
    of the connection only: running one again after a rollback is safe.) Reads queued among them run
    right after the group's commit: every caller awaits each call, so no read waits for a write of its
    own caller in the same group, and a read sees at least what was committed when it was queued.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.sync_engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._writer_conn: sa.Connection | None = None
        self._thread = threading.Thread(target=self._serve, name="toolwire-sqlite", daemon=True)
        self._thread.start()
        self._async_engine: AsyncEngine | None = None

    async def run(self, op: Callable[[sa.Connection], T], *, write: bool, single: bool = False) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Job(op, write, future, loop))
        return await future

    def _run_sync(self, op: Callable[[sa.Connection], T], write: bool) -> T:
        if write:
            return self._transaction(self._write_connection(), op)
        with self.sync_engine.connect() as conn:
            return op(conn)

    @staticmethod
    def _transaction(conn: sa.Connection, body: Callable[[sa.Connection], T]) -> T:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` sent on the driver's connection itself: SQLAlchemy's
        transaction (begin/commit events, state, reset) cost ~20 µs around each of a step's two
        transactions. A body that goes through ``conn.execute`` all the same starts SQLAlchemy's
        transaction inside this one (``_on_begin`` then sends nothing), and it is committed or rolled
        back through SQLAlchemy. Driver errors are raised as SQLAlchemy raises them."""
        driver = conn.connection.driver_connection
        assert isinstance(driver, sqlite3.Connection)
        _on_driver("BEGIN IMMEDIATE", lambda: driver.execute("BEGIN IMMEDIATE"))
        try:
            result = body(conn)
        except BaseException:
            if conn.in_transaction():
                conn.rollback()
            elif driver.in_transaction:
                _on_driver("ROLLBACK", driver.rollback)
            raise
        if conn.in_transaction():
            conn.commit()
        else:
            _on_driver("COMMIT", driver.commit)
        return result

    def _write_connection(self) -> sa.Connection:
        """The writer's connection, kept by the thread (a pool check-out per transaction cost ~20% of
        a small one); a connection SQLAlchemy invalidated is replaced."""
        conn = self._writer_conn
        if conn is None or conn.invalidated or conn.closed:
            conn = self._writer_conn = self._writer.connect()
        return conn

    def _close(self) -> None:
        if self._writer_conn is not None:
            self._writer_conn.close()
            self._writer_conn = None
        self.sync_engine.dispose()

    def _serve(self) -> None:
        held: _Job | None = None
        while True:
            job, held = (held, None) if held is not None else (self._jobs.get(), None)
            if job is _STOP:
                return
            if job.call is not None or not job.write:
                self._deliver([(job, *_outcome(job.call or partial(self._run_sync, job.op, False)))])
                continue
            group: list[_Job] = [job]
            reads: list[_Job] = []
            while len(group) + len(reads) < GROUP_COMMIT_MAX:
                try:
                    queued = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if queued is _STOP or queued.call is not None:
                    held = queued  # served next, in its place
                    break
                (group if queued.write else reads).append(queued)
            outcomes = self._commit(group)
            outcomes += [(r, *_outcome(partial(self._run_sync, r.op, False))) for r in reads]
            self._deliver(outcomes)

    def _commit(self, group: list[_Job]) -> list[tuple[_Job, Any, BaseException | None]]:
        if len(group) > 1:
            try:
                results = self._transaction(self._write_connection(), lambda c: [job.op(c) for job in group])
            except Exception:
                pass  # rolled back: each body runs again alone below
            else:
                return [(job, result, None) for job, result in zip(group, results, strict=True)]
        return [(job, *_outcome(partial(self._run_sync, job.op, True))) for job in group]

    def _deliver(self, outcomes: list[tuple[_Job, Any, BaseException | None]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, Any, BaseException | None]]] = {}
        for outcome in outcomes:
            by_loop.setdefault(outcome[0].loop, []).append(outcome)
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_settle, items)  # one wake-up of the loop for the group

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
        future: asyncio.Future[None] = loop.create_future()
        self._jobs.put(_Job(_nothing, True, future, loop, call=self._close))
        await future
        self._jobs.put(_STOP)
        if self._async_engine is not None:
            await self._async_engine.dispose()


def _on_driver(statement: str, call: Callable[[], object]) -> None:
    try:
        call()
    except sqlite3.Error as exc:
        raise DBAPIError.instance(statement, None, exc, sqlite3.Error, hide_parameters=True) from exc


def _nothing(conn: sa.Connection) -> None:
    return None


def _outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return call(), None
    except BaseException as exc:  # handed to the caller, whatever it is
        return None, exc


def _settle(items: list[tuple[_Job, Any, BaseException | None]]) -> None:
    for job, result, error in items:
        if job.future.done():  # its caller was cancelled meanwhile
            continue
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)


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
        _enter_wal(cursor)  # readers never block the writer, nor it them
        # WAL + NORMAL: a commit survives a process crash (SIGKILL); only an OS crash or power loss can drop
        # the last commits. FULL would fsync every one of the several commits per step (~10x slower).
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        statement = "BEGIN IMMEDIATE" if write else "BEGIN"
        driver = conn.connection.driver_connection
        if isinstance(driver, sqlite3.Connection):  # direct: through exec_driver_sql it cost as much as
            if not driver.in_transaction:  # the writer thread began it itself (ThreadRunner._transaction)
                driver.execute(statement)  # a step's statements (the aiosqlite engine goes the long way)
        else:
            conn.exec_driver_sql(statement)


def _enter_wal(cursor: Any) -> None:
    # Switching a new database to WAL takes an exclusive lock, and SQLite skips the busy handler for that
    # lock when another process is mid-change (to avoid a deadlock): processes racing on a fresh file get
    # "database is locked" at once. Retry within the busy timeout; once in WAL the pragma takes no lock.
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


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
