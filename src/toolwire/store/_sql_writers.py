"""What the SQL store does differently on SQLite and PostgreSQL, as two classes chosen once when it opens.

The step writes are the hot path of every run: on PostgreSQL each is one statement (one round trip: raw
SQL in :mod:`toolwire.store._pg_step`), on SQLite a few statements in one local transaction. The rest are
the engines' other differences the store meets: the schema lock, the row lock of a conversation being
deleted, the replicas' event log (PostgreSQL only) and the dialect of ``INSERT ... ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from toolwire.messages import Message, Usage
from toolwire.store._pg_step import BEGIN_STEP, FINISH_STEP, begin_step_params, finish_step_params
from toolwire.store._sql_direct import write_rows
from toolwire.store._sql_rows import (
    COMPLETE_CALL,
    completion_row,
    finish_session,
    insert_message,
    refused_write,
    tool_call_row,
    touch,
    usage_to_json,
)
from toolwire.store.event_log import PURGE_EVENTS, end_command
from toolwire.store.records import CallCompletion, SessionInfo, StepRecord
from toolwire.store.schema import tool_calls

T = TypeVar("T")

# Any constant works; it only has to be the same in every process that creates the schema.
_SCHEMA_LOCK_KEY = 0x746F6F6C77697265  # "toolwire"


class Transactions(Protocol):
    """The store whose transactions a writer runs (``SQLStore``), looked up at each write (so a test can
    count them)."""

    def _write(
        self, what: str, op: Callable[[sa.Connection], T], *, single: bool = False
    ) -> Awaitable[T]: ...


class SQLiteWriter:
    """SQLite: a step's writes are a few statements in one transaction (its write lock is taken up front)."""

    postgres = False

    def __init__(self, store: Transactions) -> None:
        self._store = store
        self._ignoring: dict[tuple[str, tuple[str, ...]], sa.Insert] = {}

    def _dialect_insert(self, table: sa.Table) -> Any:
        return sqlite.insert(table)

    def insert_ignoring(self, table: sa.Table, conflict_columns: list[str]) -> sa.Insert:
        """``INSERT ... ON CONFLICT (conflict_columns) DO NOTHING`` (built once per table and key)."""
        key = (table.name, tuple(conflict_columns))
        statement = self._ignoring.get(key)
        if statement is None:
            statement = self._dialect_insert(table).on_conflict_do_nothing(index_elements=conflict_columns)
            self._ignoring[key] = statement
        return statement

    def lock_schema(self, conn: sa.Connection) -> None:
        """Before creating the schema: SQLite's write transaction already excludes every other writer."""

    def lock_rows(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """The rows of a conversation about to be deleted, locked until the transaction ends (SQLite's write
        lock does it already)."""
        return query

    def purge_events(
        self, conn: sa.Connection, ids: list[str], created_at: float, *, end_streams: bool = True
    ) -> None:
        """In a deleting or truncating transaction: drop these sessions' replayable events (SQLite keeps
        none: only PostgreSQL replicas share an event log)."""

    async def begin_step(self, record: StepRecord, fence: str | None) -> None:
        session_id = record.session_id
        rows = [tool_call_row(session_id, call) for call in record.tool_calls]

        def op(conn: sa.Connection) -> None:
            touch(conn, session_id, fence=fence)
            step_columns = {
                "step_usage": usage_to_json(record.usage),
                "finish_reason": record.finish_reason,
                "step_started_at": record.started_at,
                "step_finished_at": record.finished_at,
            }
            insert_message(
                conn,
                session_id,
                record.message,
                interaction_id=record.interaction_id,
                step=record.step,
                extra=step_columns,
            )
            if rows:
                # Idempotent per call: a retried step records each call once.
                ignoring = self.insert_ignoring(tool_calls, ["session_id", "message_id", "tool_call_id"])
                write_rows(conn, ignoring, rows)

        await self._store._write("begin a step", op)

    async def finish_step(
        self,
        session_id: str,
        *,
        step: int,
        interaction_id: str,
        tool_message: Message | None,
        usage: Usage,
        last_seq: int,
        completed: Sequence[CallCompletion],
        fence: str | None,
    ) -> None:
        rows = [completion_row(session_id, c) for c in completed]
        message_id = tool_message.id if tool_message is not None else None

        def op(conn: sa.Connection) -> None:
            # First: the session row (its usage summed in the statement, unless the tool message is
            # stored already: a retry after a lost commit acknowledgement), then the rows (idempotent).
            finish_session(
                conn, session_id, last_seq=last_seq, usage=usage, message_id=message_id, fence=fence
            )
            if rows:
                write_rows(conn, COMPLETE_CALL, rows)
            if tool_message is not None:
                insert_message(conn, session_id, tool_message, interaction_id=interaction_id, step=step)

        await self._store._write("finish a step", op)


class PostgresWriter(SQLiteWriter):
    """PostgreSQL: each step write is one statement (one round trip), the schema and a deleted
    conversation's rows are locked explicitly, and deletions purge the replicas' event log."""

    postgres = True

    def _dialect_insert(self, table: sa.Table) -> Any:
        return postgresql.insert(table)

    def lock_schema(self, conn: sa.Connection) -> None:
        # Concurrent CREATE TABLE IF NOT EXISTS can still collide on PostgreSQL's catalogs.
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK_KEY)))

    def lock_rows(self, query: sa.Select[Any]) -> sa.Select[Any]:
        return query.with_for_update()  # a run cannot take a lock of the tree while it is deleted

    def purge_events(
        self, conn: sa.Connection, ids: list[str], created_at: float, *, end_streams: bool = True
    ) -> None:
        """Drop the rows of these sessions' streams from the replicas' event log (if any server made one
        here), and (``end_streams``) tell every replica, at commit, to end the subscriptions of those
        streams with a reset (``created_at``: the conversation root's or newer, so every incarnation up
        to this one ends)."""
        if conn.execute(sa.text("SELECT to_regclass('toolwire_events')")).scalar() is None:
            return
        purge = sa.text(PURGE_EVENTS).bindparams(sa.bindparam("ids", type_=postgresql.ARRAY(sa.String)))
        conn.execute(purge, {"ids": ids})
        if not end_streams:
            return
        incarnation = SessionInfo(id="", created_at=created_at).incarnation
        for session_id in ids:
            conn.execute(
                sa.text("SELECT pg_notify('toolwire_control:' || current_schema(), :command)"),
                {"command": end_command(session_id, incarnation)},
            )

    async def begin_step(self, record: StepRecord, fence: str | None) -> None:
        session_id = record.session_id
        params = begin_step_params(record, time.time(), fence)

        def one(conn: sa.Connection) -> None:
            if conn.execute(BEGIN_STEP, params).scalar() != 1:
                raise refused_write(session_id, fence)

        await self._store._write("begin a step", one, single=True)

    async def finish_step(
        self,
        session_id: str,
        *,
        step: int,
        interaction_id: str,
        tool_message: Message | None,
        usage: Usage,
        last_seq: int,
        completed: Sequence[CallCompletion],
        fence: str | None,
    ) -> None:
        params = finish_step_params(
            session_id,
            step=step,
            interaction_id=interaction_id,
            tool_message=tool_message,
            usage=usage,
            last_seq=last_seq,
            completed=completed,
            now=time.time(),
            owner=fence,
        )

        def one(conn: sa.Connection) -> None:
            if conn.execute(FINISH_STEP, params).scalar() != 1:
                raise refused_write(session_id, fence)

        await self._store._write("finish a step", one, single=True)
