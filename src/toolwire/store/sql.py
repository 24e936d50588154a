"""The SQL store: SQLAlchemy 2 Core over SQLite (sync driver on one writer thread) or PostgreSQL (asyncpg),
one schema. Engines and transactions are in ``_sql_engine``; statements and row mapping in ``_sql_rows``.

Concurrency model, the same on both engines:

- Every write transaction first touches its session row (``UPDATE ... SET updated_at``). On PostgreSQL
  that takes the row lock, so two writers of one session queue up there and each sees the other's
  messages when it computes ``max(position) + 1``; writers of different sessions never wait for each
  other. On SQLite every write transaction starts with ``BEGIN IMMEDIATE``, which takes the database
  write lock up front (a deferred ``BEGIN`` that later upgrades fails at once with "database is
  locked" instead of waiting ``busy_timeout``).
- The ``(session_id, position)`` unique constraint is the last line of defence: a conflicting insert
  rolls the whole transaction back and it is retried, so positions stay dense and unique.
- Runs on one session are serialised across processes by :meth:`SQLStore.lock_session`, an atomic
  conditional ``UPDATE`` of the session row's lock columns (clock: ``time.time()`` of the caller; a
  lock whose owner names a dead process of this host is taken over without waiting for expiry).

Every SQLAlchemy or driver error leaves this module as :class:`~toolwire.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolwire._text import without_nul
from toolwire.errors import ConfigError, MissingExtraError, SessionBusyError, StoreError
from toolwire.messages import Message, Usage
from toolwire.store._locks import owner_is_dead
from toolwire.store._sql_direct import write_rows
from toolwire.store._sql_engine import (
    AsyncRunner,
    ThreadRunner,
    configure_sqlite,
    describe,
    normalise_url,
    retryable,
)
from toolwire.store._sql_leases import EXPIRED_RUNS, FENCE_EXPIRED, RAISE_LAST_SEQ, RENEW_LEASE, lease_seconds
from toolwire.store._sql_rows import (
    COMPLETE_CALL,
    COMPLETE_HELD_CALL,
    HAS_MESSAGES,
    LATEST_COMPACTION,
    MARK_INTERRUPTED,
    SESSION_MESSAGES,
    SESSION_TOOL_CALLS,
    check_schema,
    compaction_from_row,
    compaction_row,
    completion_row,
    dumps,
    insert_message,
    message_from_row,
    session_from_row,
    session_values,
    tool_call_from_row,
    tool_call_row,
    touch,
    upgrade_schema,
    usage_from_json,
)
from toolwire.store._sql_writers import PostgresWriter, SQLiteWriter
from toolwire.store.base import DEFAULT_URL, Store, repaired_history
from toolwire.store.records import (
    CallCompletion,
    CallKey,
    CompactionRecord,
    OpenedHistory,
    SessionInfo,
    StepRecord,
    StoredStep,
    ToolCallRecord,
    ToolCallRowStatus,
    TurnError,
    check_owner,
)
from toolwire.store.replication import Replication
from toolwire.store.schema import compactions, messages, metadata, sessions, tool_calls, turn_errors

T = TypeVar("T")

_MAX_ATTEMPTS = 8


class SQLStore(Store):
    """The store hook over SQLite or PostgreSQL. Create it with :meth:`SQLStore.open`."""

    def __init__(self, runner: AsyncRunner | ThreadRunner, *, postgres: bool) -> None:
        self._runner = runner
        # What differs between the engines, chosen once (the step writes first of all).
        self._writer = PostgresWriter(self) if postgres else SQLiteWriter(self)
        self._completions: list[tuple[Any, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._batch_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    async def open(cls, url: str = DEFAULT_URL, **engine_options: Any) -> SQLStore:
        """Connect and create the schema if it is missing (safe when several processes start at once).

        ``engine_options`` go to :func:`~sqlalchemy.ext.asyncio.create_async_engine` (pool sizes,
        ``connect_args``); the JSON serializer is always the store's own.
        """
        sa_url = normalise_url(url)
        shown = sa_url.render_as_string(hide_password=True)
        options: dict[str, Any] = {**engine_options, "json_serializer": dumps}
        postgres = sa_url.get_backend_name() == "postgresql"
        runner: AsyncRunner | ThreadRunner
        lease_ttl = lease_seconds(sa_url.query.get("lease_ttl")) if postgres else None
        sa_url = sa_url.difference_update_query(["lease_ttl"])
        if postgres and "schema" in sa_url.query:
            # ``?schema=NAME``: keep toolwire's tables in that schema (it must exist).
            schema = sa_url.query["schema"]
            sa_url = sa_url.difference_update_query(["schema"])
            connect_args = dict(options.pop("connect_args", {}))
            settings = dict(connect_args.get("server_settings", {}))
            settings["search_path"] = schema if isinstance(schema, str) else schema[-1]
            options["connect_args"] = {**connect_args, "server_settings": settings}
        try:
            if postgres:
                # No ping per checkout (3 round trips): a connection the database dropped fails its first
                # statement and _write/_read run the operation again, so replicas outlive restarts.
                options.setdefault("pool_pre_ping", False)
                runner = AsyncRunner(create_async_engine(sa_url, **options))
            else:
                sync_url = sa_url.set(drivername="sqlite")
                connect_args = {"check_same_thread": False, **options.pop("connect_args", {})}
                engine = sa.create_engine(sync_url, connect_args=connect_args, **options)
                configure_sqlite(engine, sync_url)
                runner = ThreadRunner(engine)
        except ImportError as exc:
            if postgres and exc.name == "asyncpg":
                raise MissingExtraError("postgres", "PostgreSQL stores", missing=exc.name) from exc
            raise ConfigError(f"cannot open store {shown}: {exc}") from exc
        except (ArgumentError, TypeError) as exc:
            raise ConfigError(f"cannot open store {shown}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot open store {shown}: {exc}") from exc
        store = cls(runner, postgres=postgres)
        store.lease_ttl = lease_ttl
        try:
            await store.create_schema()
        except OSError as exc:
            await runner.dispose()
            raise StoreError(f"cannot open store {shown}: {exc}") from exc
        except BaseException:
            await runner.dispose()
            raise
        return store

    @property
    def engine(self) -> AsyncEngine:
        """An async engine on this store's database (on SQLite a separate one, made on first use)."""
        return self._runner.engine

    async def create_schema(self) -> None:
        """Create missing tables and indexes; a no-op when they exist."""

        def op(conn: sa.Connection) -> None:
            self._writer.lock_schema(conn)
            metadata.create_all(conn)
            check_schema(conn)
            upgrade_schema(conn, postgres=self._writer.postgres)

        await self._write("create the schema", op)

    async def close(self) -> None:
        await self._runner.dispose()

    # -- sessions ------------------------------------------------------------------------------

    async def ensure_session(self, info: SessionInfo) -> SessionInfo:
        return await self._write("ensure a session", lambda conn: self._ensure_session(conn, info))

    def _ensure_session(self, conn: sa.Connection, info: SessionInfo) -> SessionInfo:
        """Insert the row unless it exists, then read it: the first writer fixes the owner, atomically."""
        values = session_values(info)
        conn.execute(self._writer.insert_ignoring(sessions, ["id"]).values(**values))
        row = (conn.execute(sa.select(sessions).where(sessions.c.id == info.id))).one()
        return session_from_row(row)

    async def create_session(self, info: SessionInfo) -> bool:
        values = session_values(info)

        def op(conn: sa.Connection) -> bool:
            return bool(
                conn.execute(self._writer.insert_ignoring(sessions, ["id"]).values(**values)).rowcount == 1
            )

        return await self._write("create a session", op, single=True)

    async def get_session(self, session_id: str) -> SessionInfo | None:
        query = sa.select(sessions).where(sessions.c.id == session_id)
        row = await self._read("read a session", lambda conn: conn.execute(query).first())
        return None if row is None else session_from_row(row)

    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        user_session_id: str | None = None,
        limit: int = 100,
        top_level: bool = False,
        after: tuple[float, str] | None = None,
    ) -> list[SessionInfo]:
        query = sa.select(sessions).order_by(sessions.c.updated_at.desc(), sessions.c.id).limit(limit)
        if user_id is not None:
            query = query.where(sessions.c.user_id == user_id)
        if top_level:
            query = query.where(sessions.c.parent_session_id.is_(None))
        if after is not None:
            stamp, last_id = after
            query = query.where(
                sa.or_(
                    sessions.c.updated_at < stamp,
                    sa.and_(sessions.c.updated_at == stamp, sessions.c.id > last_id),
                )
            )
        if user_session_id is not None:
            query = query.where(
                sa.or_(sessions.c.user_session_id == user_session_id, sessions.c.id == user_session_id)
            )
        rows = await self._read("list sessions", lambda conn: conn.execute(query).all())
        return [session_from_row(row) for row in rows]

    # -- the hook ------------------------------------------------------------------------------

    async def append_message(
        self, session_id: str, message: Message, *, interaction_id: str, fence: str | None = None
    ) -> None:
        def op(conn: sa.Connection) -> None:
            touch(conn, session_id, fence=fence)
            insert_message(conn, session_id, message, interaction_id=interaction_id)

        await self._write("append a message", op)

    async def import_history(
        self, info: SessionInfo, messages: Sequence[Message], *, interaction_id: str
    ) -> bool:
        def op(conn: sa.Connection) -> bool:
            stored = self._ensure_session(conn, info)
            check_owner(stored, info.user_id)  # raises before anything of this request is written
            touch(conn, info.id)  # takes the session row lock on PostgreSQL: one import at a time
            if conn.execute(HAS_MESSAGES, {"h_session": info.id}).first() is not None:
                return False  # the store holds the conversation already: it stays authoritative
            for message in messages:
                insert_message(conn, info.id, message, interaction_id=interaction_id)
            return True

        return await self._write("import a history", op)

    async def begin_step(self, record: StepRecord, *, fence: str | None = None) -> None:
        await self._writer.begin_step(record, fence)

    async def complete_tool_call(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        status: ToolCallRowStatus,
        output: Any,
        is_error: bool,
        started_at: float | None,
        finished_at: float | None,
        message_id: str | None = None,
        fence: str | None = None,
    ) -> None:
        if message_id is None:  # the latest call with this id (callers that do not know the message)
            latest = (
                sa.select(tool_calls.c.message_id)
                .where(tool_calls.c.session_id == session_id, tool_calls.c.tool_call_id == tool_call_id)
                .order_by(tool_calls.c.id.desc())
                .limit(1)
            )
            found = await self._read("find a tool call", lambda conn: conn.execute(latest).scalar())
            if found is None:
                return
            message_id = found
        row = completion_row(
            session_id,
            CallCompletion(
                tool_call_id=tool_call_id,
                message_id=message_id,
                status=status,
                output=output,
                is_error=is_error,
                started_at=started_at,
                finished_at=finished_at,
            ),
            fence,
        )
        # Group commit: completions that arrive while a write is in flight (parallel calls finishing
        # together) share the next transaction. Each caller still returns only once its row is durable.
        loop = asyncio.get_running_loop()
        if self._batch_loop is not loop:
            if self._completions:  # a batch of another event loop is pending: do not mix futures

                def alone(conn: sa.Connection) -> None:
                    conn.execute(COMPLETE_HELD_CALL if fence is not None else COMPLETE_CALL, [row])

                await self._write("complete a tool call", alone, single=True)
                return
            self._batch_loop = loop
        done: asyncio.Future[None] = loop.create_future()
        self._completions.append((row, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush_completions())
        await asyncio.shield(done)

    async def _flush_completions(self) -> None:
        while self._completions:
            batch, self._completions = self._completions, []

            def op(conn: sa.Connection, batch: list[tuple[Any, asyncio.Future[None]]] = batch) -> None:
                # One executemany per kind in the batch: the rows of runs holding a lease are written only
                # while they still hold it (a refused row is noticed at the run's next fenced write).
                held = [row for row, _ in batch if "b_owner" in row]
                free = [row for row, _ in batch if "b_owner" not in row]
                if held:
                    write_rows(conn, COMPLETE_HELD_CALL, held)
                if free:
                    write_rows(conn, COMPLETE_CALL, free)

            try:
                await self._write("complete a tool call", op, single=True)
            except BaseException as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc if isinstance(exc, Exception) else StoreError(str(exc)))
                if not isinstance(exc, Exception):
                    raise
            else:
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)

    async def finish_step(
        self,
        session_id: str,
        *,
        step: int,
        interaction_id: str,
        tool_message: Message | None,
        usage: Usage,
        last_seq: int,
        completed: Sequence[CallCompletion] = (),
        fence: str | None = None,
    ) -> None:
        await self._writer.finish_step(
            session_id,
            step=step,
            interaction_id=interaction_id,
            tool_message=tool_message,
            usage=usage,
            last_seq=last_seq,
            completed=completed,
            fence=fence,
        )

    async def raw_messages(self, session_id: str) -> list[Message]:
        key = {"q_session": session_id}
        rows = await self._read("read messages", lambda conn: conn.execute(SESSION_MESSAGES, key).all())
        return [message_from_row(row) for row in rows]

    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        key = {"q_session": session_id}
        rows = await self._read("read tool calls", lambda conn: conn.execute(SESSION_TOOL_CALLS, key).all())
        return [tool_call_from_row(row) for row in rows]

    async def record_compaction(self, record: CompactionRecord, *, fence: str | None = None) -> None:
        row = compaction_row(record)

        def op(conn: sa.Connection) -> None:
            touch(conn, record.session_id, fence=fence)
            conn.execute(self._writer.insert_ignoring(compactions, ["id"]), row)  # a retry writes it once

        await self._write("record a compaction", op)

    async def compactions(self, session_id: str) -> list[CompactionRecord]:
        query = (
            sa.select(compactions)
            .where(compactions.c.session_id == session_id)
            .order_by(compactions.c.created_at, compactions.c.id)
        )
        rows = await self._read("read compactions", lambda conn: conn.execute(query).all())
        return [compaction_from_row(row) for row in rows]

    async def hold_call(self, record: ToolCallRecord, *, fence: str | None = None) -> None:
        row = tool_call_row(record.session_id, record)

        def op(conn: sa.Connection) -> None:
            touch(conn, record.session_id, fence=fence)
            keys = ["session_id", "message_id", "tool_call_id"]
            conn.execute(self._writer.insert_ignoring(tool_calls, keys), row)  # a retry writes it once

        await self._write("hold a run", op)

    async def record_turn_error(self, record: TurnError, *, fence: str | None = None) -> None:
        row = {f: getattr(record, f) for f in TurnError.__dataclass_fields__}
        row["message"] = without_nul(record.message)  # PostgreSQL text holds no U+0000

        def op(conn: sa.Connection) -> None:
            touch(conn, record.session_id, fence=fence)
            # One per turn: a retry after a lost acknowledgement writes nothing twice.
            conn.execute(self._writer.insert_ignoring(turn_errors, ["session_id", "interaction_id"]), row)

        await self._write("record a turn's error", op)

    async def turn_errors(self, session_id: str) -> list[TurnError]:
        columns = [turn_errors.c[f] for f in TurnError.__dataclass_fields__]
        query = sa.select(*columns).where(turn_errors.c.session_id == session_id).order_by(turn_errors.c.id)
        rows = await self._read("read turn errors", lambda conn: conn.execute(query).all())
        return [TurnError(**row._asdict()) for row in rows]

    async def mark_interrupted(self, session_id: str, calls: Sequence[CallKey]) -> None:
        if not calls:
            return
        rows = _interrupted_rows(session_id, calls)

        def op(conn: sa.Connection) -> None:
            conn.execute(MARK_INTERRUPTED, rows)

        await self._write("mark tool calls interrupted", op, single=True)

    async def steps(self, session_id: str) -> list[StoredStep]:
        """Per-step usage, finish reason and model timings of the session, in history order."""
        query = (
            sa.select(messages)
            .where(messages.c.session_id == session_id, messages.c.step_usage.is_not(None))
            .order_by(messages.c.position)
        )
        rows = await self._read("read steps", lambda conn: conn.execute(query).all())
        return [
            StoredStep(
                message_id=row.id,
                interaction_id=row.interaction_id,
                step=row.step,
                usage=usage_from_json(row.step_usage),
                finish_reason=row.finish_reason,
                started_at=row.step_started_at,
                finished_at=row.step_finished_at,
                provider=row.provider,
                model=row.model,
            )
            for row in rows
        ]

    # -- run locks -----------------------------------------------------------------------------

    async def lock_session(self, session_id: str, owner: str, *, ttl: float = 600.0) -> None:
        """Claim the session for one run; raise :class:`SessionBusyError` if a live run of another owner holds it.

        The claim succeeds when the lock is free, expired, already held by ``owner`` (which renews it),
        or held by a process of this host that no longer exists (owners made by
        :func:`~toolwire.store.base.lock_owner`): a killed run need not wait out ``ttl``.
        """
        await self._write("lock a session", lambda conn: self._lock_session(conn, session_id, owner, ttl))

    def replication(self) -> Replication | None:
        if self.lease_ttl is None:
            return None
        return Replication(
            engine=self.engine,
            lease_ttl=self.lease_ttl,
            expired_runs=self.expired_runs,
            fence_expired=self.fence_expired,
            raise_last_seq=self.raise_last_seq,
        )

    async def expired_runs(self, limit: int = 20) -> list[tuple[str, str | None, str]]:
        """Top-level sessions whose run lease expired (its replica died): (session id, user id, the dead
        run's lease owner, which names its interaction), oldest expiry first. Sub-agent sessions are
        continued by their conversation's run."""
        params = {"x_now": time.time(), "x_limit": limit}
        rows = await self._read("find expired runs", lambda conn: conn.execute(EXPIRED_RUNS, params).all())
        return [(row.id, row.user_id, row.lock_owner) for row in rows]

    async def raise_last_seq(self, session_id: str, seq: int) -> None:
        """Record that events up to ``seq`` were published (a run taking over numbers after them)."""
        params = {"r_id": session_id, "r_seq": seq}

        def op(conn: sa.Connection) -> None:
            conn.execute(RAISE_LAST_SEQ, params)

        await self._write("raise the last seq", op, single=True)

    async def set_title(self, session_id: str, title: str, *, only_if_empty: bool = False) -> bool:
        statement = sa.update(sessions).where(sessions.c.id == session_id).values(title=title)
        if only_if_empty:
            statement = statement.where(sessions.c.title.is_(None))

        def op(conn: sa.Connection) -> bool:
            return bool(conn.execute(statement).rowcount == 1)

        return await self._write("set a title", op, single=True)

    async def delete_session(self, session_id: str) -> bool:
        in_tree = sa.or_(sessions.c.id == session_id, sessions.c.user_session_id == session_id)
        query = sa.select(
            sessions.c.id, sessions.c.lock_owner, sessions.c.lock_expires_at, sessions.c.created_at
        ).where(in_tree)
        query = self._writer.lock_rows(query)

        def op(conn: sa.Connection) -> bool:
            rows = conn.execute(query).all()
            if not rows:
                return False
            now = time.time()
            for row in rows:
                expires = row.lock_expires_at
                if (
                    row.lock_owner
                    and expires is not None
                    and expires > now
                    and not owner_is_dead(row.lock_owner)
                ):
                    raise SessionBusyError(f"session {session_id} is busy with a run")
            ids = [row.id for row in rows]
            conn.execute(sa.delete(compactions).where(compactions.c.session_id.in_(ids)))
            conn.execute(sa.delete(turn_errors).where(turn_errors.c.session_id.in_(ids)))
            conn.execute(sa.delete(tool_calls).where(tool_calls.c.session_id.in_(ids)))
            conn.execute(sa.delete(messages).where(messages.c.session_id.in_(ids)))
            conn.execute(sa.delete(sessions).where(sessions.c.id.in_(ids)))
            self._writer.purge_events(conn, ids, max(row.created_at for row in rows))
            return True

        return await self._write("delete a conversation", op)

    async def truncate_history(self, session_id: str, from_message_id: str) -> bool:
        first = sa.select(messages.c.position, messages.c.created_at).where(
            messages.c.session_id == session_id, messages.c.id == from_message_id
        )

        def op(conn: sa.Connection) -> bool:
            row = conn.execute(first).first()
            if row is None:
                return False
            root_created = conn.execute(
                sa.select(sessions.c.created_at).where(sessions.c.id == session_id)
            ).scalar_one()
            cut = sa.and_(messages.c.session_id == session_id, messages.c.position >= row.position)
            dropped = sa.select(messages.c.id).where(cut)
            conn.execute(
                sa.delete(tool_calls).where(
                    tool_calls.c.session_id == session_id, tool_calls.c.message_id.in_(dropped)
                )
            )
            conn.execute(sa.delete(messages).where(cut))
            # The errors of the dropped turns go with them (they ended after the cut).
            conn.execute(
                sa.delete(turn_errors).where(
                    turn_errors.c.session_id == session_id, turn_errors.c.created_at >= row.created_at
                )
            )
            subs = sa.select(sessions.c.id).where(
                sessions.c.user_session_id == session_id,
                sessions.c.id != session_id,
                sessions.c.created_at >= row.created_at,
            )
            sub_ids = [r.id for r in conn.execute(subs).all()]
            if sub_ids:
                conn.execute(sa.delete(compactions).where(compactions.c.session_id.in_(sub_ids)))
                conn.execute(sa.delete(turn_errors).where(turn_errors.c.session_id.in_(sub_ids)))
                conn.execute(sa.delete(tool_calls).where(tool_calls.c.session_id.in_(sub_ids)))
                conn.execute(sa.delete(messages).where(messages.c.session_id.in_(sub_ids)))
                conn.execute(sa.delete(sessions).where(sessions.c.id.in_(sub_ids)))
            conn.execute(
                sa.update(sessions).where(sessions.c.id == session_id).values(updated_at=time.time())
            )
            # The dropped turns leave the replicas' replay too. No end command: the same incarnation goes
            # on, and the command could reach this replica after the editor's new subscription.
            self._writer.purge_events(conn, [session_id, *sub_ids], root_created, end_streams=False)
            return True

        return await self._write("truncate a conversation", op)

    def _lock_session(
        self, conn: sa.Connection, session_id: str, owner: str, ttl: float, *, takeover: bool = False
    ) -> int:
        """:meth:`lock_session` inside ``conn``'s transaction; returns the claim's epoch (each claim adds one).
        A ``takeover`` claims only a lease still held by a dead or expired run: one that was released
        meanwhile (the faster replica took the run over and finished it) is not taken again."""
        now = time.time()
        held = {"lock_owner": owner, "lock_expires_at": now + ttl, "lock_epoch": sessions.c.lock_epoch + 1}
        expired = sessions.c.lock_expires_at <= now
        claimable = (
            sa.and_(sessions.c.lock_owner.is_not(None), expired)
            if takeover
            else sa.or_(sessions.c.lock_owner.is_(None), sessions.c.lock_owner == owner, expired)
        )

        def claim(condition: sa.ColumnElement[bool]) -> int | None:
            """The lock taken, with its new epoch, where ``condition`` still holds (else ``None``)."""
            update = (
                sa.update(sessions)
                .where(sessions.c.id == session_id, condition)
                .values(**held)
                .returning(sessions.c.lock_epoch)
            )
            epoch = conn.execute(update).scalar()
            return None if epoch is None else int(epoch)

        epoch = claim(claimable)
        if epoch is not None:
            return epoch
        query = sa.select(sessions.c.lock_owner).where(sessions.c.id == session_id)
        row = (conn.execute(query)).first()
        if row is None:
            raise StoreError(f"unknown session {session_id!r}: call ensure_session first")
        holder = row.lock_owner
        if (holder is None and not takeover) or (holder is not None and owner_is_dead(holder)):
            # Freed meanwhile, or its holder was killed: claim it on condition that it is still so,
            # so of two processes taking over only one wins.
            same = sessions.c.lock_owner.is_(None) if holder is None else sessions.c.lock_owner == holder
            epoch = claim(same)
            if epoch is not None:
                return epoch
        raise SessionBusyError(f"session {session_id} is busy with another run")

    async def open_run(
        self,
        info: SessionInfo,
        owner: str,
        *,
        ttl: float,
        max_output_chars: int = 0,
        takeover: bool = False,
        top_level: bool = False,
    ) -> tuple[SessionInfo, OpenedHistory]:
        """:meth:`Store.open_run` in one write transaction: a burst of starting runs costs one group commit
        on SQLite's writer thread (one pooled connection on PostgreSQL) instead of three writes and two reads
        each. A refused owner or a busy lock raises inside it, so nothing is written."""
        key = {"q_session": info.id}
        create = self._writer.insert_ignoring(sessions, ["id"])
        new_row = session_values(info)

        def op(conn: sa.Connection) -> tuple[SessionInfo, OpenedHistory]:
            if not takeover:  # (a takeover claims only a lease held before: never a new session)
                locked = {
                    **new_row,
                    "lock_owner": owner,
                    "lock_expires_at": time.time() + ttl,
                    "lock_epoch": 1,
                }
                if write_rows(conn, create, locked) == 1:
                    # A new session, created already locked by this run: the caller owns it and it has
                    # no history, so there is nothing more to check or read (one statement, not five).
                    fresh = repaired_history([], [], max_output_chars=max_output_chars, mark_interrupted=True)
                    return info, replace(fresh, epoch=1)
            stored = self._ensure_session(conn, info)
            check_owner(stored, info.user_id, parent_session_id=info.parent_session_id, top_level=top_level)
            epoch = self._lock_session(conn, info.id, owner, ttl, takeover=takeover)
            opened = repaired_history(
                [message_from_row(row) for row in conn.execute(SESSION_MESSAGES, key)],
                [tool_call_from_row(row) for row in conn.execute(SESSION_TOOL_CALLS, key)],
                max_output_chars=max_output_chars,
                mark_interrupted=True,
            )
            if opened.interrupted:
                conn.execute(MARK_INTERRUPTED, _interrupted_rows(info.id, opened.interrupted))
            latest = conn.execute(LATEST_COMPACTION, key).first()
            compaction = compaction_from_row(latest) if latest is not None else None
            return stored, replace(opened, epoch=epoch, compaction=compaction)

        return await self._write("open a run", op)

    async def renew_lease(self, session_id: str, owner: str, *, ttl: float) -> bool:
        """Extend the lock ``owner`` holds; ``False`` (changing nothing) when it no longer holds it. Never
        claims: a run whose lease was taken over and then released must not take the free lock back."""
        params = {"n_id": session_id, "n_owner": owner, "n_expires": time.time() + ttl}

        def op(conn: sa.Connection) -> bool:
            return bool(conn.execute(RENEW_LEASE, params).rowcount == 1)

        return await self._write("renew a run lease", op, single=True)

    async def fence_expired(self, session_id: str) -> None:
        """Fence the run whose lease on ``session_id`` expired (a takeover is about to claim it): its events
        are refused from now on (``fenced_epoch``), before the taker reads the highest published seq. A
        lease released or renewed meanwhile is left alone."""
        params = {"f_id": session_id, "f_now": time.time()}

        def op(conn: sa.Connection) -> None:
            conn.execute(FENCE_EXPIRED, params)

        await self._write("fence an expired run", op, single=True)

    async def unlock_session(self, session_id: str, owner: str) -> None:
        statement = (
            sa.update(sessions)
            .where(sessions.c.id == session_id, sessions.c.lock_owner == owner)
            .values(lock_owner=None, lock_expires_at=None)
        )

        def op(conn: sa.Connection) -> None:
            conn.execute(statement)

        await self._write("unlock a session", op, single=True)

    async def run_in_progress(self, session_id: str) -> bool:
        query = sa.select(sessions.c.lock_owner, sessions.c.lock_expires_at).where(
            sessions.c.id == session_id
        )
        row = await self._read("read a session lock", lambda conn: conn.execute(query).first())
        if row is None or row.lock_owner is None or row.lock_expires_at is None:
            return False
        return bool(row.lock_expires_at > time.time()) and not owner_is_dead(row.lock_owner)

    # -- plumbing ------------------------------------------------------------------------------

    async def _write(self, what: str, op: Callable[[sa.Connection], T], *, single: bool = False) -> T:
        """Run ``op`` in one write transaction, retrying it when a concurrent writer won a race or its
        connection was found dead. ``single``: ``op`` runs one statement (autocommit on PostgreSQL)."""
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            try:
                return await self._runner.run(op, write=True, single=single)
            except DBAPIError as exc:
                if attempt == _MAX_ATTEMPTS or not (retryable(exc) or exc.connection_invalidated):
                    raise _failed(what, exc) from exc
            except (SQLAlchemyError, OSError) as exc:
                raise _failed(what, exc) from exc
            await asyncio.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read(self, what: str, op: Callable[[sa.Connection], T]) -> T:
        for attempt in (1, 2):
            try:
                return await self._runner.run(op, write=False)
            except DBAPIError as exc:
                if attempt == 2 or not exc.connection_invalidated:  # a pooled connection the database dropped
                    raise _failed(what, exc) from exc
            except (SQLAlchemyError, OSError) as exc:
                raise _failed(what, exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover


def _failed(what: str, exc: BaseException) -> StoreError:
    """The :class:`StoreError` of a failed operation, marked ``unreachable`` when the database could not be
    reached: no connection (refused, reset: ``OSError``), a connection it dropped, or one it refused while
    starting or stopping (the driver's connection errors, which SQLAlchemy reports as ``OperationalError``
    or ``InterfaceError``)."""
    error = StoreError(f"store failed to {what}: {describe(exc)}")
    error.unreachable = isinstance(exc, OSError | OperationalError | InterfaceError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )
    return error


def _interrupted_rows(session_id: str, calls: Sequence[CallKey]) -> list[dict[str, str]]:
    return [{"i_session": session_id, "i_message": m, "i_call": c} for m, c in calls]
