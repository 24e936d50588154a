"""A database made before paused runs existed is upgraded when opened, on both engines: its rows kept,
the new statuses accepted, anything else still refused, and opening it again changes nothing."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from tests.store.conftest import Target
from toolwire.errors import StoreError
from toolwire.messages import Message, TextPart, ToolCallPart
from toolwire.store import SessionInfo, StepRecord, ToolCallRecord
from toolwire.store.schema import messages, sessions, tool_calls

OLD_STATUSES = "status IN ('pending', 'ok', 'error', 'interrupted', 'blocked', 'cancelled')"
BEFORE_INPUT = (
    "status IN ('pending', 'ok', 'error', 'interrupted', 'blocked', 'cancelled', 'denied', 'unanswered', "
    "'awaiting_approval', 'awaiting_output', 'awaiting_subagent')"
)
"""The CHECK of the release before calls could wait for input (``awaiting_input``)."""


def previous_schema(check: str = OLD_STATUSES) -> sa.MetaData:
    """The tables as the previous release created them: ``status VARCHAR(16)`` and the old CHECK."""
    old = sa.MetaData()
    sessions.to_metadata(old)
    messages.to_metadata(old)
    calls = tool_calls.to_metadata(old)
    calls.c.status.type = sa.String(16)
    for constraint in [c for c in calls.constraints if isinstance(c, sa.CheckConstraint)]:
        calls.constraints.discard(constraint)
    calls.append_constraint(sa.CheckConstraint(check, name="ck_toolwire_tool_calls_status"))
    return old


async def create_previous(
    target: Target, check: str = OLD_STATUSES, refused: str = "awaiting_approval"
) -> None:
    engine = create_async_engine(target.url, **target.options)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(previous_schema(check).create_all)
            await conn.execute(
                sa.insert(sessions).values(id="old", created_at=1.0, updated_at=1.0, last_seq=3, usage={})
            )
            await conn.execute(
                sa.insert(tool_calls).values(
                    session_id="old",
                    tool_call_id="c1",
                    message_id="m1",
                    step=1,
                    tool_name="lookup",
                    args={"q": 1},
                    status="ok",
                    output={"found": True},
                    is_error=False,
                )
            )
            with_old_check = sa.insert(tool_calls).values(
                session_id="old",
                tool_call_id="c2",
                message_id="m1",
                step=1,
                tool_name="refund",
                args={},
                status=refused,
                is_error=False,
            )
            try:
                async with conn.begin_nested():
                    await conn.execute(with_old_check)
            except sa.exc.DBAPIError:
                pass
            else:
                raise AssertionError("the previous schema should refuse the new statuses")
    finally:
        await engine.dispose()


async def test_an_older_database_accepts_paused_runs_after_opening(target: Target) -> None:
    await create_previous(target)
    store = await target.open()
    try:
        (row,) = await store.tool_calls("old")
        assert (row.tool_call_id, row.status, row.output, row.args) == ("c1", "ok", {"found": True}, {"q": 1})
        await store.ensure_session(SessionInfo(id="new"))
        message = Message(
            role="assistant",
            id="m2",
            session_id="new",
            parts=(TextPart(text="asking"), ToolCallPart(tool_call_id="c9", tool_name="refund", args={})),
        )
        waiting = ToolCallRecord(
            session_id="new",
            tool_call_id="c9",
            tool_name="refund",
            message_id="m2",
            step=1,
            status="awaiting_subagent",
        )
        await store.begin_step(
            StepRecord(session_id="new", interaction_id="i", step=1, message=message, tool_calls=(waiting,))
        )
        await store.complete_tool_call(
            "new",
            "c9",
            message_id="m2",
            status="unanswered",
            output="x",
            is_error=True,
            started_at=None,
            finished_at=None,
        )
        assert [r.status for r in await store.tool_calls("new")] == ["unanswered"]
        try:
            await store.complete_tool_call(
                "new",
                "c9",
                message_id="m2",
                status="bogus",
                output=None,
                is_error=False,  # type: ignore[arg-type]
                started_at=None,
                finished_at=None,
            )
        except StoreError:
            pass
        else:
            raise AssertionError("the upgraded CHECK must still refuse unknown statuses")
    finally:
        await store.close()
    again = await target.open()  # a second open finds the schema current and changes nothing
    try:
        assert [r.tool_call_id for r in await again.tool_calls("old")] == ["c1"]
        assert [r.status for r in await again.tool_calls("new")] == ["unanswered"]
    finally:
        await again.close()


async def test_a_database_made_before_awaiting_input_accepts_it_after_opening(target: Target) -> None:
    await create_previous(target, BEFORE_INPUT, refused="awaiting_input")
    store = await target.open()
    try:
        await store.ensure_session(SessionInfo(id="asked"))
        message = Message(
            role="assistant",
            id="m3",
            session_id="asked",
            parts=(ToolCallPart(tool_call_id="c5", tool_name="book", args={}),),
        )
        row = ToolCallRecord(
            session_id="asked", tool_call_id="c5", tool_name="book", message_id="m3", step=1, status="pending"
        )
        await store.begin_step(
            StepRecord(session_id="asked", interaction_id="i", step=1, message=message, tool_calls=(row,))
        )
        question = {"message": "When?", "mode": "form", "requested_schema": {}, "url": None, "server": "s"}
        await store.complete_tool_call(
            "asked",
            "c5",
            message_id="m3",
            status="awaiting_input",
            output={"question": question, "answered": []},
            is_error=False,
            started_at=None,
            finished_at=None,
        )
        [stored] = await store.tool_calls("asked")
        assert (stored.status, stored.awaiting, stored.output["question"]) == (
            "awaiting_input",
            "input",
            question,
        )
        assert [r.tool_call_id for r in await store.tool_calls("old")] == ["c1"]
    finally:
        await store.close()


async def test_an_older_database_gains_the_lease_epochs_when_opened(target: Target) -> None:
    """A database made before fencing (no ``lock_epoch`` / ``fenced_epoch``): opening it adds both, its rows
    start at epoch 0, and the next claim of a session is epoch 1."""
    await (await target.open()).close()
    engine = create_async_engine(target.url, **target.options)
    try:
        async with engine.begin() as conn:
            for column in ("lock_epoch", "fenced_epoch"):
                await conn.execute(sa.text(f"ALTER TABLE toolwire_sessions DROP COLUMN {column}"))
            await conn.execute(
                sa.text(
                    "INSERT INTO toolwire_sessions (id, created_at, updated_at, last_seq, usage) "
                    "VALUES ('old', 1.0, 1.0, 3, '{}')"
                )
            )
    finally:
        await engine.dispose()
    store = await target.open()
    try:
        _, opened = await store.open_run(SessionInfo(id="old"), "elsewhere~0/1.1/int_a", ttl=60.0)
        assert opened.epoch == 1
        await store.fence_expired("old")  # live: nothing fenced, and the new column is there to write
        assert await store.renew_lease("old", "elsewhere~0/1.1/int_a", ttl=60.0)
    finally:
        await store.close()
