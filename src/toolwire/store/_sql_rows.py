"""Statements built once and the mapping between rows and canonical types, for the SQL store."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from pydantic_core import PydanticSerializationError
from sqlalchemy.dialects import postgresql, sqlite

from toolwire._text import without_nul
from toolwire.errors import ConfigError, LeaseLostError, StoreError
from toolwire.messages import (
    Message,
    Part,
    ToolResultPart,
    Usage,
    UsageAdapter,
    parts_from_jsonable,
    parts_to_jsonable,
)
from toolwire.store._sql_direct import write_rows
from toolwire.store.history import INTERRUPTED_OUTPUT
from toolwire.store.records import CallCompletion, CompactionRecord, SessionInfo, ToolCallRecord
from toolwire.store.schema import STATUS_CHECK, compactions, messages, sessions, tool_calls

MARK_INTERRUPTED = (
    sa.update(tool_calls)
    .where(
        tool_calls.c.session_id == sa.bindparam("i_session"),
        tool_calls.c.message_id == sa.bindparam("i_message"),
        tool_calls.c.tool_call_id == sa.bindparam("i_call"),
        tool_calls.c.status == "pending",
    )
    .values(status="interrupted", output=INTERRUPTED_OUTPUT, is_error=True)
)
COMPLETE_CALL = (
    sa.update(tool_calls)
    .where(
        tool_calls.c.session_id == sa.bindparam("b_session_id"),
        tool_calls.c.message_id == sa.bindparam("b_message_id"),
        tool_calls.c.tool_call_id == sa.bindparam("b_tool_call_id"),
    )
    .values(
        status=sa.bindparam("status"),
        output=sa.bindparam("output"),
        is_error=sa.bindparam("is_error"),
        started_at=sa.bindparam("started_at"),
        finished_at=sa.bindparam("finished_at"),
    )
)
HELD_BY = sa.select(sessions.c.id).where(
    sessions.c.id == sa.bindparam("b_session_id"),
    sessions.c.lock_owner == sa.bindparam("b_owner"),
    sessions.c.fenced_epoch < sessions.c.lock_epoch,
)
COMPLETE_HELD_CALL = COMPLETE_CALL.where(sa.exists(HELD_BY.with_for_update(read=True)))
""":data:`COMPLETE_CALL` for a run holding the session's lease (``b_owner``): a write of a run whose lease was
taken over changes nothing. On PostgreSQL the session row is read ``FOR SHARE``: the check waits for a takeover
claiming the lease at that moment and sees its outcome, so the zombie's write and the takeover's reading of the
calls are never interleaved."""


def check_schema(conn: sa.Connection) -> None:
    """Refuse a database made by toolwire 0.1 (global message ids, calls keyed by id only)."""
    keys = sa.inspect(conn).get_pk_constraint(messages.name).get("constrained_columns") or []
    if "session_id" not in keys:
        raise ConfigError(
            "this database was created by toolwire 0.1 (message ids were global); "
            "export what you need and start a new database file or schema"
        )


def upgrade_schema(conn: sa.Connection, *, postgres: bool) -> None:
    """Bring tables made by an earlier toolwire to this schema (in the schema-creating transaction).

    Columns added since: the lease epochs of the session row (``lock_epoch``, ``fenced_epoch``), added with
    their default 0 (both engines add a column in place).

    The constraint changed so far: the statuses of paused runs (``awaiting_*``, ``denied``, ``unanswered``, and
    since ``awaiting_input`` was added, every database made before it), which
    the ``status`` CHECK of an older database refuses (``status`` was also ``VARCHAR(16)``). PostgreSQL
    alters the column and the constraint in place; SQLite cannot alter a constraint, so the table is
    rebuilt and its rows copied (https://sqlite.org/lang_altertable.html#otheralter). A no-op once done.
    """
    inspector = sa.inspect(conn)
    present = {column["name"] for column in inspector.get_columns(sessions.name)}
    for column in ("lock_epoch", "fenced_epoch"):
        if column not in present:
            conn.execute(
                sa.text(f"ALTER TABLE {sessions.name} ADD COLUMN {column} BIGINT NOT NULL DEFAULT 0")
            )
    name = "ck_toolwire_tool_calls_status"
    checks = inspector.get_check_constraints(tool_calls.name)
    current = next((str(c["sqltext"]) for c in checks if c.get("name") == name), None)
    if current is None or "awaiting_input" in current:
        return
    table = tool_calls.name
    if postgres:
        conn.execute(sa.text(f"ALTER TABLE {table} DROP CONSTRAINT {name}"))
        conn.execute(sa.text(f"ALTER TABLE {table} ALTER COLUMN status TYPE VARCHAR(32)"))
        conn.execute(sa.text(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({STATUS_CHECK})"))
        return
    scratch = sa.MetaData()
    sessions.to_metadata(scratch)  # the foreign key's target
    rebuilt = tool_calls.to_metadata(scratch, name=f"{table}_upgrade")
    rebuilt.create(conn)
    columns = ", ".join(column.name for column in tool_calls.columns)
    conn.execute(sa.text(f"INSERT INTO {rebuilt.name} ({columns}) SELECT {columns} FROM {table}"))
    conn.execute(sa.text(f"DROP TABLE {table}"))
    conn.execute(sa.text(f"ALTER TABLE {rebuilt.name} RENAME TO {table}"))


_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
"""``json.dumps(value, allow_nan=False, separators=...)`` without building an encoder on every call."""


def dumps(value: Any) -> str:
    """The JSON serializer of every JSON column: never fails, so a strange tool output cannot lose a step."""
    try:
        return _ENCODE(value)
    except (TypeError, ValueError, RecursionError):
        return json.dumps({"unserializable": safe_repr(value)}, separators=(",", ":"))


def safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def parts_to_json(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        try:
            out.extend(parts_to_jsonable([part]))
        except PydanticSerializationError as exc:
            if not isinstance(part, ToolResultPart):
                raise StoreError(f"cannot serialise a {part.type} part: {exc}") from exc
            wrapped = {"unserializable": safe_repr(part.output)}
            out.extend(parts_to_jsonable([replace(part, output=wrapped)]))
    return out


def usage_to_json(usage: Usage) -> dict[str, Any]:
    data: dict[str, Any] = UsageAdapter.dump_python(usage, mode="json")
    return data


def usage_from_json(data: Any) -> Usage:
    return UsageAdapter.validate_python(data) if data else Usage()


# The statements run on every step are built once: building one costs as much as executing it.
TOUCH = (
    sa.update(sessions).where(sessions.c.id == sa.bindparam("t_id")).values(updated_at=sa.bindparam("t_now"))
)
TOUCH_HELD = TOUCH.where(
    sessions.c.lock_owner == sa.bindparam("t_owner"), sessions.c.fenced_epoch < sessions.c.lock_epoch
)
""":data:`TOUCH` by the run holding the session's lock (``t_owner``), not fenced by a takeover about to claim
it: nothing changes once it was (or is being) taken over."""
TOUCH_SEQ = (
    sa.update(sessions)
    .where(sessions.c.id == sa.bindparam("t_id"))
    .values(
        updated_at=sa.bindparam("t_now"),
        last_seq=sa.case(
            (
                sessions.c.last_seq < sa.bindparam("t_seq", type_=sa.Integer),
                sa.bindparam("t_seq", type_=sa.Integer),
            ),
            else_=sessions.c.last_seq,
        ),
    )
)
_MESSAGE_COLUMNS = (
    "id",
    "session_id",
    "position",
    "role",
    "parts",
    "provider",
    "model",
    "interaction_id",
    "step",
    "created_at",
    "step_usage",
    "finish_reason",
    "step_started_at",
    "step_finished_at",
)


def _bind_type(column_type: sa.types.TypeEngine[Any]) -> sa.types.TypeEngine[Any]:
    # A missing JSON value is SQL NULL, as a plain INSERT writes it (not the JSON document ``null``).
    return sa.JSON(none_as_null=True) if isinstance(column_type, sa.JSON) else column_type


# The slot and the insert in ONE statement (PostgreSQL: one round trip; SQLite: one statement of the writer
# thread's instead of two). A message stored already (a retried write) inserts nothing; a position taken
# meanwhile is a unique violation, and the transaction is retried.
def _insert_at_next_position(dialect_insert: Callable[[sa.Table], Any]) -> Any:
    return (
        dialect_insert(messages)
        .from_select(
            list(_MESSAGE_COLUMNS),
            sa.select(
                *(
                    sa.select(sa.func.coalesce(sa.func.max(messages.c.position) + 1, 0))
                    .where(messages.c.session_id == sa.bindparam("p_session_id"))
                    .scalar_subquery()
                    if name == "position"
                    else sa.bindparam(f"p_{name}", type_=_bind_type(messages.c[name].type))
                    for name in _MESSAGE_COLUMNS
                )
            ).where(sa.true()),  # SQLite: without a WHERE, its parser may read the ON CONFLICT as a join's ON
        )
        .on_conflict_do_nothing(index_elements=["id", "session_id"])
    )


PG_INSERT_MESSAGE = _insert_at_next_position(postgresql.insert)
SQLITE_INSERT_MESSAGE = _insert_at_next_position(sqlite.insert)
"""The same on SQLite: one statement per message instead of a look-up of its slot and an insert."""
HAS_MESSAGES = sa.select(messages.c.id).where(messages.c.session_id == sa.bindparam("h_session")).limit(1)
SESSION_MESSAGES = (
    sa.select(messages)
    .where(messages.c.session_id == sa.bindparam("q_session"))
    .order_by(messages.c.position)
)
"""A session's messages in order, built once: building the select per call cost more than running it."""
SESSION_TOOL_CALLS = (
    sa.select(tool_calls)
    .where(tool_calls.c.session_id == sa.bindparam("q_session"))
    .order_by(tool_calls.c.id)
)


def touch(
    conn: sa.Connection, session_id: str, *, last_seq: int | None = None, fence: str | None = None
) -> None:
    """Bump ``updated_at`` (and ``last_seq``); on PostgreSQL its row lock serialises the session's writers.
    ``fence``: only while that run holds the session's lock, else :class:`LeaseLostError` (the transaction
    writes nothing)."""
    if fence is not None:
        changed = write_rows(conn, TOUCH_HELD, {"t_id": session_id, "t_now": time.time(), "t_owner": fence})
    elif last_seq is None:
        changed = write_rows(conn, TOUCH, {"t_id": session_id, "t_now": time.time()})
    else:
        changed = write_rows(conn, TOUCH_SEQ, {"t_id": session_id, "t_now": time.time(), "t_seq": last_seq})
    if changed != 1:
        raise refused_write(session_id, fence)


def refused_write(session_id: str, fence: str | None) -> StoreError:
    """The error of a write whose session row did not match: a lost lease when the write was fenced."""
    if fence is not None:
        return LeaseLostError(f"session {session_id}: the run's lease was taken over; its write was refused")
    return StoreError(f"unknown session {session_id!r}: call ensure_session first")


_USAGE_FIELDS = tuple(Usage.__dataclass_fields__)
SQLITE_FINISH_SESSION = sa.text(
    f"""
UPDATE {sessions.name}
SET updated_at = :t_now,
    last_seq = CASE WHEN last_seq < :t_seq THEN :t_seq ELSE last_seq END,
    usage = CASE
        WHEN :t_add AND NOT EXISTS (SELECT 1 FROM {messages.name} WHERE id = :t_mid AND session_id = :t_id)
        THEN json_object({
        ", ".join(
            f"'{name}', coalesce(json_extract(usage, '$.{name}'), 0) + :u_{name}" for name in _USAGE_FIELDS
        )
    })
        ELSE usage
    END
WHERE id = :t_id AND (:t_owner IS NULL OR (lock_owner = :t_owner AND fenced_epoch < lock_epoch))
"""
)
"""SQLite, a step's end for the session row: ``updated_at``, ``last_seq`` and the usage total summed by
the statement itself (no read of the total, no JSON round trip in Python), added only when the step's
tool message is not stored yet: a retry after a lost commit acknowledgement adds nothing twice."""


def finish_session(
    conn: sa.Connection,
    session_id: str,
    *,
    last_seq: int,
    usage: Usage,
    message_id: str | None,
    fence: str | None = None,
) -> None:
    """:data:`SQLITE_FINISH_SESSION`, run before the tool message ``message_id`` is inserted (``fence``: by the
    run holding the lock, as :func:`touch`)."""
    params: dict[str, Any] = {
        "t_id": session_id,
        "t_owner": fence,
        "t_now": time.time(),
        "t_seq": last_seq,
        "t_add": usage != Usage(),
        "t_mid": message_id,
        **{f"u_{name}": getattr(usage, name) for name in _USAGE_FIELDS},
    }
    if write_rows(conn, SQLITE_FINISH_SESSION, params) != 1:
        raise refused_write(session_id, fence)


def insert_message(
    conn: sa.Connection,
    session_id: str,
    message: Message,
    *,
    interaction_id: str,
    step: int | None = None,
    extra: dict[str, Any] | None = None,
) -> bool:
    """Insert at the session's next position; False when this message id is already stored there."""
    if message.session_id not in (None, session_id):
        raise StoreError(f"message {message.id} belongs to session {message.session_id}, not {session_id}")
    row = {
        "id": message.id,
        "session_id": session_id,
        "role": message.role,
        "parts": parts_to_json(message.parts),
        "provider": message.provider,
        "model": message.model,
        "interaction_id": interaction_id,
        "step": step,
        "created_at": message.created_at,
        **(extra or {}),
    }
    params = {f"p_{name}": row.get(name) for name in _MESSAGE_COLUMNS if name != "position"}
    if conn.dialect.name == "postgresql":
        return bool(conn.execute(PG_INSERT_MESSAGE, params).rowcount == 1)
    return write_rows(conn, SQLITE_INSERT_MESSAGE, params) == 1


def session_values(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "parent_session_id": info.parent_session_id,
        "user_session_id": info.user_session_id,
        "user_id": info.user_id,
        "agent_name": info.agent_name,
        "title": info.title,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "last_seq": info.last_seq,
        "usage": usage_to_json(info.usage),
        "lock_epoch": 0,
        "fenced_epoch": 0,
    }


def completion_row(session_id: str, c: CallCompletion, fence: str | None = None) -> dict[str, Any]:
    """The parameters of :data:`COMPLETE_CALL` for one call's end (of :data:`COMPLETE_HELD_CALL` with
    ``fence``, the lock owner of the run writing it)."""
    fenced = {} if fence is None else {"b_owner": fence}
    return {
        **fenced,
        "b_session_id": session_id,
        "b_message_id": c.message_id,
        "b_tool_call_id": c.tool_call_id,
        "status": c.status,
        "output": c.output,
        "is_error": c.is_error,
        "started_at": c.started_at,
        "finished_at": c.finished_at,
    }


def tool_call_row(session_id: str, call: ToolCallRecord) -> dict[str, Any]:
    if call.session_id != session_id:
        raise StoreError(f"call {call.tool_call_id} belongs to session {call.session_id}, not {session_id}")
    return {
        "session_id": session_id,
        "tool_call_id": call.tool_call_id,
        "message_id": call.message_id,
        "step": call.step,
        "tool_name": call.tool_name,
        "args": call.args,
        "status": call.status,
        "output": call.output,
        "is_error": call.is_error,
        "started_at": call.started_at,
        "finished_at": call.finished_at,
        "provider": call.provider,
        "model": call.model,
        "interaction_id": call.interaction_id,
    }


def session_from_row(row: sa.Row[Any]) -> SessionInfo:
    return SessionInfo(
        id=row.id,
        parent_session_id=row.parent_session_id,
        user_session_id=row.user_session_id,
        user_id=row.user_id,
        agent_name=row.agent_name,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_seq=row.last_seq,
        usage=usage_from_json(row.usage),
    )


def message_from_row(row: sa.Row[Any]) -> Message:
    return Message(
        role=row.role,
        parts=parts_from_jsonable(row.parts),
        id=row.id,
        session_id=row.session_id,
        created_at=row.created_at,
        provider=row.provider,
        model=row.model,
    )


def tool_call_from_row(row: sa.Row[Any]) -> ToolCallRecord:
    return ToolCallRecord(
        session_id=row.session_id,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        message_id=row.message_id,
        step=row.step,
        args=row.args,
        status=row.status,
        output=row.output,
        is_error=row.is_error,
        started_at=row.started_at,
        finished_at=row.finished_at,
        provider=row.provider,
        model=row.model,
        interaction_id=row.interaction_id,
    )


LATEST_COMPACTION = (
    sa.select(compactions)
    .where(compactions.c.session_id == sa.bindparam("q_session"))
    .order_by(compactions.c.created_at.desc(), compactions.c.id.desc())
    .limit(1)
)
"""The session's latest summary, read as a run opens it (typed: its usage is JSON)."""


def compaction_row(record: CompactionRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "session_id": record.session_id,
        "first_kept_message_id": record.first_kept_message_id,
        "summary": without_nul(record.summary),  # PostgreSQL text holds no U+0000
        "provider": record.provider,
        "model": record.model,
        "usage": usage_to_json(record.usage),
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
        "created_at": record.created_at,
    }


def compaction_from_row(row: Any) -> CompactionRecord:
    return CompactionRecord(
        id=row.id,
        session_id=row.session_id,
        first_kept_message_id=row.first_kept_message_id,
        summary=row.summary,
        provider=row.provider,
        model=row.model,
        usage=usage_from_json(row.usage),
        tokens_before=row.tokens_before,
        tokens_after=row.tokens_after,
        created_at=row.created_at,
    )
