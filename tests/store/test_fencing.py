"""Fencing of run leases in the store (issue 32, item 3): once another run took a session's lease over, every
write of the run that lost it is refused (nothing written), its renewal never claims the lock back, and each
claim counts an epoch. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.store.test_sql_store import SID, _assistant_with_calls, _info, _step
from toolwire.errors import LeaseLostError
from toolwire.messages import Message, ToolResultPart, Usage
from toolwire.store import INTERRUPTED_OUTPUT
from toolwire.store.records import CallCompletion
from toolwire.store.schema import sessions
from toolwire.store.sql import SQLStore

# Owners on another host: never judged dead by this process, so only leases decide.
ZOMBIE = "elsewhere~0/1.1/int_zombie"
TAKER = "elsewhere~0/2.1/int_taker"


async def _lock_row(store: SQLStore) -> tuple[str | None, int, int]:
    query = sa.select(sessions.c.lock_owner, sessions.c.lock_epoch, sessions.c.fenced_epoch).where(
        sessions.c.id == SID
    )
    async with store.engine.connect() as conn:
        row = (await conn.execute(query)).one()
    return row.lock_owner, row.lock_epoch, row.fenced_epoch


async def test_a_run_whose_lease_was_taken_over_writes_nothing(store: SQLStore) -> None:
    _, first = await store.open_run(_info(user_id="u1"), ZOMBIE, ttl=60.0)
    user = Message.user("pay bob", id="msg_u1", session_id=SID, created_at=1767225600.0)
    await store.append_message(SID, user, interaction_id="int_zombie", fence=ZOMBIE)
    assistant = _assistant_with_calls("call_a")
    await store.begin_step(_step(assistant), fence=ZOMBIE)
    assert await store.renew_lease(SID, ZOMBIE, ttl=0.0)  # its own lease: renewed (to expire now)

    await store.fence_expired(SID)  # a replica about to take the expired lease over fences it first
    assert not await store.renew_lease(SID, ZOMBIE, ttl=60.0)  # fenced: not even its own lease
    _, taken = await store.open_run(_info(user_id="u1"), TAKER, ttl=60.0, takeover=True)
    assert (first.epoch, taken.epoch) == (1, 2)
    assert taken.interrupted == [("msg_a1", "call_a")]

    # Every write of the zombie is refused and changes nothing.
    late = Message.user("late", id="msg_late", session_id=SID)
    with pytest.raises(LeaseLostError):
        await store.append_message(SID, late, interaction_id="int_zombie", fence=ZOMBIE)
    with pytest.raises(LeaseLostError):
        await store.begin_step(
            _step(_assistant_with_calls("call_b", message_id="msg_a2"), step=2), fence=ZOMBIE
        )
    await store.complete_tool_call(
        SID,
        "call_a",
        message_id="msg_a1",
        status="ok",
        output="sent",
        is_error=False,
        started_at=1.0,
        finished_at=2.0,
        fence=ZOMBIE,
    )
    result = Message(
        role="tool",
        id="msg_t1",
        session_id=SID,
        parts=(ToolResultPart(tool_call_id="call_a", tool_name="get_weather", output="sent"),),
    )
    with pytest.raises(LeaseLostError):
        await store.finish_step(
            SID,
            step=1,
            interaction_id="int_zombie",
            tool_message=result,
            usage=Usage(input_tokens=5),
            last_seq=40,
            completed=[
                CallCompletion(
                    tool_call_id="call_a",
                    message_id="msg_a1",
                    status="ok",
                    output="sent",
                    is_error=False,
                    started_at=1.0,
                    finished_at=2.0,
                )
            ],
            fence=ZOMBIE,
        )
    [row] = await store.tool_calls(SID)
    assert (row.status, row.output) == ("interrupted", INTERRUPTED_OUTPUT)  # the takeover's, not the zombie's
    assert [m.id for m in await store.raw_messages(SID)] == ["msg_u1", "msg_a1"]
    stored = await store.get_session(SID)
    assert stored is not None and stored.last_seq == 0 and stored.usage == Usage()

    # The holder writes; once it released the session, the zombie's renewal does not claim it back.
    await store.finish_step(
        SID, step=1, interaction_id="int_taker", tool_message=None, usage=Usage(), last_seq=7, fence=TAKER
    )
    await store.unlock_session(SID, TAKER)
    assert not await store.renew_lease(SID, ZOMBIE, ttl=60.0)
    assert await _lock_row(store) == (None, 2, 1)
    assert not await store.run_in_progress(SID)
    _, nxt = await store.open_run(_info(user_id="u1"), "elsewhere~0/3.1/int_next", ttl=60.0)
    assert nxt.epoch == 3  # a new session's first claim is epoch 1; every later claim counts


async def test_fencing_leaves_a_lease_that_was_renewed_or_released_alone(store: SQLStore) -> None:
    await store.open_run(_info(user_id="u1"), ZOMBIE, ttl=60.0)
    await store.fence_expired(SID)  # live: not fenced
    assert await _lock_row(store) == (ZOMBIE, 1, 0)
    await store.unlock_session(SID, ZOMBIE)
    await store.fence_expired(SID)  # released: nothing to fence
    assert await _lock_row(store) == (None, 1, 0)
