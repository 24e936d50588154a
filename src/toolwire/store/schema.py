"""The SQL schema behind the store hook: one set of SQLAlchemy Core tables for SQLite and PostgreSQL.

Choices that hold for both engines:

- Timestamps are ``DOUBLE PRECISION`` seconds since the epoch (``time.time()``), the same floats the
  canonical types carry, so a message's ``created_at`` round-trips bit for bit and no timezone
  handling differs between engines.
- JSON columns use the generic :class:`sqlalchemy.JSON` (``json`` on PostgreSQL, text on SQLite):
  ``json`` keeps the document as written, where ``jsonb`` would reject ``\\u0000`` in tool outputs.
- Per-step data (usage, finish reason, model timings) lives on the step's assistant message row: a
  step is exactly one assistant message, so a separate ``steps`` table would only repeat its keys.
- No column holds configuration, headers or credentials: the store only ever receives messages.
"""

from __future__ import annotations

from typing import get_args

import sqlalchemy as sa

from toolwire.events import ToolCallStatus

metadata = sa.MetaData()

_ID = sa.String(255)
_Timestamp = sa.Double
# SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias), not a BIGINT one.
_RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

TOOL_CALL_STATUSES: tuple[str, ...] = ("pending", *get_args(ToolCallStatus))
"""Every stored status: ``pending``, then how a call ended or why it waits (:data:`ToolCallStatus`)."""
STATUS_CHECK = "status IN (" + ", ".join(f"'{s}'" for s in TOOL_CALL_STATUSES) + ")"
"""The CHECK of ``toolwire_tool_calls.status`` (``upgrade_schema`` widens an older database's one)."""

sessions = sa.Table(
    "toolwire_sessions",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("parent_session_id", _ID, nullable=True, index=True),
    sa.Column("user_session_id", _ID, nullable=True),
    sa.Column("user_id", _ID, nullable=True),
    sa.Column("agent_name", sa.String(255), nullable=True),
    sa.Column("title", sa.Text, nullable=True),
    sa.Column("created_at", _Timestamp, nullable=False),
    sa.Column("updated_at", _Timestamp, nullable=False),
    sa.Column("last_seq", sa.BigInteger, nullable=False, default=0),
    sa.Column("usage", sa.JSON, nullable=False),
    sa.Column("lock_owner", sa.String(255), nullable=True),
    sa.Column("lock_expires_at", _Timestamp, nullable=True),
    # Fencing: every claim of the lock adds one to ``lock_epoch``; a takeover sets ``fenced_epoch`` to the
    # epoch it takes the lease from, so that run's late events are refused (``store.event_log``).
    sa.Column("lock_epoch", sa.BigInteger, nullable=False, default=0, server_default="0"),
    sa.Column("fenced_epoch", sa.BigInteger, nullable=False, default=0, server_default="0"),
    sa.Index("ix_toolwire_sessions_user_updated", "user_id", "updated_at"),
    sa.Index("ix_toolwire_sessions_updated", "updated_at"),
)

messages = sa.Table(
    "toolwire_messages",
    metadata,
    # A message id is unique within its session only: ids may come from clients (AI SDK UI message ids),
    # and one user's ids must neither collide with nor reveal another user's.
    sa.Column("id", _ID, primary_key=True),
    sa.Column("session_id", _ID, sa.ForeignKey(sessions.c.id, ondelete="CASCADE"), primary_key=True),
    # Dense and monotonic per session, starting at 0: the order of the history.
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    # ``parts_to_jsonable`` of the message parts, provider metadata included.
    sa.Column("parts", sa.JSON, nullable=False),
    sa.Column("provider", sa.String(255), nullable=True),
    sa.Column("model", sa.String(255), nullable=True),
    sa.Column("interaction_id", _ID, nullable=True),
    sa.Column("step", sa.Integer, nullable=True),
    sa.Column("created_at", _Timestamp, nullable=False),
    # The step columns below are set only on the assistant message a step produced (begin_step).
    sa.Column("step_usage", sa.JSON, nullable=True),
    sa.Column("finish_reason", sa.String(64), nullable=True),
    sa.Column("step_started_at", _Timestamp, nullable=True),
    sa.Column("step_finished_at", _Timestamp, nullable=True),
    sa.UniqueConstraint("session_id", "position", name="uq_toolwire_messages_session_position"),
    sa.CheckConstraint("role IN ('system', 'user', 'assistant', 'tool')", name="ck_toolwire_messages_role"),
)

tool_calls = sa.Table(
    "toolwire_tool_calls",
    metadata,
    # Recorded order: rows are listed by this column.
    sa.Column("id", _RowId, primary_key=True, autoincrement=True),
    sa.Column("session_id", _ID, sa.ForeignKey(sessions.c.id, ondelete="CASCADE"), nullable=False),
    sa.Column("tool_call_id", sa.String(255), nullable=False),
    sa.Column("message_id", _ID, nullable=False),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("tool_name", sa.String(255), nullable=False),
    sa.Column("args", sa.JSON, nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("output", sa.JSON, nullable=True),
    sa.Column("is_error", sa.Boolean, nullable=False, default=False),
    sa.Column("started_at", _Timestamp, nullable=True),
    sa.Column("finished_at", _Timestamp, nullable=True),
    sa.Column("provider", sa.String(255), nullable=True),
    sa.Column("model", sa.String(255), nullable=True),
    sa.Column("interaction_id", _ID, nullable=True),
    # Providers may repeat a call id in later steps: a call is named by its assistant message too.
    sa.UniqueConstraint(
        "session_id", "message_id", "tool_call_id", name="uq_toolwire_tool_calls_session_message_call"
    ),
    sa.CheckConstraint(STATUS_CHECK, name="ck_toolwire_tool_calls_status"),
)


turn_errors = sa.Table(
    "toolwire_turn_errors",
    metadata,
    # The error that ended a turn (store.records.TurnError): shown with the turn, never sent to a model.
    sa.Column("id", _RowId, primary_key=True, autoincrement=True),
    sa.Column(
        "session_id", _ID, sa.ForeignKey(sessions.c.id, ondelete="CASCADE"), nullable=False, index=True
    ),
    sa.Column("interaction_id", _ID, nullable=False),
    sa.Column("error_type", sa.String(255), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("retryable", sa.Boolean, nullable=False, default=False),
    sa.Column("provider", sa.String(255), nullable=True),
    sa.Column("model", sa.String(255), nullable=True),
    sa.Column("created_at", _Timestamp, nullable=False),
    # One per turn: a write retried after a lost acknowledgement is ignored.
    sa.UniqueConstraint("session_id", "interaction_id", name="uq_toolwire_turn_errors_session_interaction"),
)

compactions = sa.Table(
    "toolwire_compactions",
    metadata,
    # A summary standing for the start of a session's history in what runs send (toolwire.agent._compaction).
    sa.Column("id", _ID, primary_key=True),
    sa.Column(
        "session_id", _ID, sa.ForeignKey(sessions.c.id, ondelete="CASCADE"), nullable=False, index=True
    ),
    sa.Column("first_kept_message_id", _ID, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("provider", sa.String(255), nullable=True),
    sa.Column("model", sa.String(255), nullable=True),
    sa.Column("usage", sa.JSON, nullable=False),
    sa.Column("tokens_before", sa.Integer, nullable=False),
    sa.Column("tokens_after", sa.Integer, nullable=False),
    sa.Column("created_at", _Timestamp, nullable=False),
)
