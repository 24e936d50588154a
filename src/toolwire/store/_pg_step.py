"""PostgreSQL: a step's begin (touch the session, insert the assistant message at the next position, record
its tool calls) and its end (the calls finished last, the tool message, the usage total and the last seq)
as ONE statement each, so each hook call costs one network round trip instead of five (BEGIN, three
statements, COMMIT). One statement is atomic by itself; it runs in autocommit.

The touch takes the session row lock first, as in the multi-statement form. The message's position is
read from the statement's snapshot: a writer of the same session that committed meanwhile (two runs never
hold one session's lease, so only in a race) makes the insert hit the ``(session_id, position)``
constraint, and the store runs the statement again.

Fencing: with an ``owner`` (the run's lock owner) both statements write only while that run still holds the
session's lock, unfenced (a takeover about to claim it fenced its epoch). The session row is claimed first (``UPDATE ... WHERE lock_owner``, ``FOR NO KEY UPDATE``), which
waits for a takeover claiming it at that moment and then re-checks the owner, so a run whose lease was taken
over writes nothing, and the statement's count is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from toolwire.messages import Message, Usage
from toolwire.store._sql_rows import dumps, parts_to_json, usage_to_json
from toolwire.store.records import CallCompletion, StepRecord

BEGIN_STEP = sa.text(
    """
WITH t AS (
    UPDATE toolwire_sessions SET updated_at = :now
    WHERE id = :sid
        AND (CAST(:owner AS text) IS NULL OR (lock_owner = CAST(:owner AS text) AND fenced_epoch < lock_epoch))
    RETURNING id
), m AS (
    INSERT INTO toolwire_messages (id, session_id, position, role, parts, provider, model, interaction_id,
        step, created_at, step_usage, finish_reason, step_started_at, step_finished_at)
    SELECT :mid, t.id,
        (SELECT coalesce(max(position) + 1, 0) FROM toolwire_messages WHERE session_id = :sid),
        :role, :parts, :provider, :model, :iid, :step, :created, :usage, :reason, :started, :finished
    FROM t
    ON CONFLICT (id, session_id) DO NOTHING
    RETURNING id
), c AS (
    INSERT INTO toolwire_tool_calls (session_id, tool_call_id, message_id, step, tool_name, args, status,
        is_error, provider, model, interaction_id)
    SELECT t.id, u.call_id, u.message_id, u.step, u.tool_name, u.args::json, u.status, false, u.provider,
        u.model, u.interaction_id
    FROM t, unnest(CAST(:c_ids AS text[]), CAST(:c_messages AS text[]), CAST(:c_steps AS integer[]),
        CAST(:c_names AS text[]), CAST(:c_args AS text[]), CAST(:c_statuses AS text[]),
        CAST(:c_providers AS text[]), CAST(:c_models AS text[]), CAST(:c_interactions AS text[]))
        WITH ORDINALITY AS u(call_id, message_id, step, tool_name, args, status, provider, model,
            interaction_id, n)
    ORDER BY u.n
    ON CONFLICT (session_id, message_id, tool_call_id) DO NOTHING
)
SELECT count(*) FROM t
"""
).bindparams(
    sa.bindparam("parts", type_=sa.JSON(none_as_null=True)),
    sa.bindparam("usage", type_=sa.JSON(none_as_null=True)),
)


def begin_step_params(record: StepRecord, now: float, owner: str | None = None) -> dict[str, Any]:
    message = record.message
    calls = record.tool_calls
    return {
        "now": now,
        "owner": owner,
        "sid": record.session_id,
        "mid": message.id,
        "role": message.role,
        "parts": parts_to_json(message.parts),
        "provider": message.provider,
        "model": message.model,
        "iid": record.interaction_id,
        "step": record.step,
        "created": message.created_at,
        "usage": usage_to_json(record.usage),
        "reason": record.finish_reason,
        "started": record.started_at,
        "finished": record.finished_at,
        "c_ids": [c.tool_call_id for c in calls],
        "c_messages": [c.message_id for c in calls],
        "c_steps": [c.step for c in calls],
        "c_names": [c.tool_name for c in calls],
        "c_args": [dumps(c.args) for c in calls],
        "c_statuses": [c.status for c in calls],
        "c_providers": [c.provider for c in calls],
        "c_models": [c.model for c in calls],
        "c_interactions": [c.interaction_id for c in calls],
    }


_USAGE_FIELDS = tuple(Usage.__dataclass_fields__)
# The usage total is summed by the statement itself, and only when the tool message was inserted now (or
# the step has none): a retry after a lost commit acknowledgement adds nothing twice.
_USAGE_SUM = ", ".join(
    f"'{name}', coalesce((usage ->> '{name}')::bigint, 0) + :u_{name}" for name in _USAGE_FIELDS
)
FINISH_STEP = sa.text(
    f"""
WITH held AS (
    SELECT id FROM toolwire_sessions
    WHERE id = CAST(:sid AS text)
        AND (CAST(:owner AS text) IS NULL OR (lock_owner = CAST(:owner AS text) AND fenced_epoch < lock_epoch))
    FOR NO KEY UPDATE
), m AS (
    INSERT INTO toolwire_messages (id, session_id, position, role, parts, provider, model, interaction_id,
        step, created_at)
    SELECT :mid, held.id,
        (SELECT coalesce(max(position) + 1, 0) FROM toolwire_messages WHERE session_id = CAST(:sid AS text)),
        'tool', :parts, :provider, :model, :iid, :step, :created
    FROM held
    WHERE CAST(:has_message AS boolean)
    ON CONFLICT (id, session_id) DO NOTHING
    RETURNING id
), c AS (
    UPDATE toolwire_tool_calls AS tc
    SET status = u.status, output = u.output::json, is_error = u.is_error, started_at = u.started_at,
        finished_at = u.finished_at
    FROM unnest(CAST(:c_messages AS text[]), CAST(:c_ids AS text[]), CAST(:c_statuses AS text[]),
        CAST(:c_outputs AS text[]), CAST(:c_errors AS boolean[]), CAST(:c_started AS double precision[]),
        CAST(:c_finished AS double precision[]))
        AS u(message_id, call_id, status, output, is_error, started_at, finished_at)
    WHERE tc.session_id = CAST(:sid AS text) AND tc.message_id = u.message_id AND tc.tool_call_id = u.call_id
        AND EXISTS (SELECT 1 FROM held)
), t AS (
    UPDATE toolwire_sessions
    SET updated_at = :now,
        last_seq = greatest(last_seq, CAST(:seq AS bigint)),
        usage = CASE
            WHEN CAST(:add_usage AS boolean)
                AND (NOT CAST(:has_message AS boolean) OR EXISTS (SELECT 1 FROM m))
            THEN json_build_object({_USAGE_SUM})
            ELSE usage
        END
    WHERE id IN (SELECT id FROM held)
    RETURNING id
)
SELECT count(*) FROM t
"""
).bindparams(sa.bindparam("parts", type_=sa.JSON(none_as_null=True)))


def finish_step_params(
    session_id: str,
    *,
    step: int,
    interaction_id: str,
    tool_message: Message | None,
    usage: Usage,
    last_seq: int,
    completed: Sequence[CallCompletion],
    now: float,
    owner: str | None = None,
) -> dict[str, Any]:
    message = tool_message
    return {
        "now": now,
        "owner": owner,
        "sid": session_id,
        "seq": last_seq,
        "has_message": message is not None,
        "mid": message.id if message is not None else None,
        "parts": parts_to_json(message.parts) if message is not None else None,
        "provider": message.provider if message is not None else None,
        "model": message.model if message is not None else None,
        "iid": interaction_id,
        "step": step,
        "created": message.created_at if message is not None else None,
        "add_usage": usage != Usage(),
        **{f"u_{name}": getattr(usage, name) for name in _USAGE_FIELDS},
        "c_messages": [c.message_id for c in completed],
        "c_ids": [c.tool_call_id for c in completed],
        "c_statuses": [c.status for c in completed],
        "c_outputs": [dumps(c.output) for c in completed],
        "c_errors": [c.is_error for c in completed],
        "c_started": [c.started_at for c in completed],
        "c_finished": [c.finished_at for c in completed],
    }
