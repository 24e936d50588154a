"""The executor's inbox: items in order, a waiting reader woken by a put, heartbeat ticks when idle."""

from __future__ import annotations

import asyncio

from toolwire.tools._inbox import TICK, Inbox


async def test_items_come_out_in_order_and_wake_a_waiting_reader() -> None:
    inbox = Inbox()
    inbox.put_nowait(1)
    inbox.put_nowait(2)
    assert [await inbox.get(), inbox.get_nowait(), inbox.empty()] == [1, 2, True]
    reader = asyncio.ensure_future(inbox.get())
    await asyncio.sleep(0)
    assert not reader.done()
    inbox.put_nowait("late")
    assert await reader == "late"


async def test_an_idle_inbox_ticks_for_heartbeats_and_keeps_what_arrives_after() -> None:
    inbox = Inbox()
    assert await inbox.get(0.01) is TICK
    asyncio.get_running_loop().call_later(0.01, inbox.put_nowait, "x")
    assert await inbox.get(5) == "x"


async def test_a_cancelled_reader_loses_nothing() -> None:
    inbox = Inbox()
    reader = asyncio.ensure_future(inbox.get())
    await asyncio.sleep(0)
    reader.cancel()
    await asyncio.sleep(0)
    inbox.put_nowait("kept")
    assert reader.cancelled() and await inbox.get() == "kept"
