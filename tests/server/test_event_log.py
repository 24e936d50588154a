"""The replicas' shared event hub on a real PostgreSQL (issue 32, items 4, 8, 11 and 15): a replay is
bounded by bytes and read in pages, a resume finds a turn without parsing event bodies (so a body holding
U+0000 is no 500), and the hub remembers sub-sessions only while their conversation's run goes on."""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolwire.events import InteractionEnd, InteractionStart, TextDeltaEvent, UserTurnStart
from toolwire.messages import Message, TextPart
from toolwire.server.hub import EventHub, StreamKey
from toolwire.server.shared_hub import SharedEventHub
from toolwire.store.event_log import EventLog, LogRow
from toolwire.store.sql import SQLStore

POSTGRES_ENV = "TOOLWIRE_TEST_POSTGRES_URL"
pytestmark = pytest.mark.postgres


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} is not set in CI")
        pytest.skip(f"{POSTGRES_ENV} not set (scripts/postgres.sh starts a local server)")
    schema = f"tw_log_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(url)
    async with admin.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    # The store's tables first, as on a server (event rows are fenced against the sessions table).
    store = await SQLStore.open(f"{url}?schema={schema}")
    await store.close()
    engine = create_async_engine(url, connect_args={"server_settings": {"search_path": schema}})
    try:
        yield engine
    finally:
        await engine.dispose()
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await admin.dispose()


async def _written(hub: SharedEventHub, key: StreamKey, count: int) -> None:
    """Wait until ``count`` rows of the stream are in the log (the writer task is asynchronous)."""
    for _ in range(3000):
        if await hub.log.max_id(*key) and len(await hub.log.after_seq(*key, 0, count + 1)) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the events were not written")


def _delta(session_id: str, seq: int, text: str) -> TextDeltaEvent:
    return TextDeltaEvent(session_id=session_id, seq=seq, id="t", delta=text, message_id="m")


async def _drain(subscription: object) -> list[object]:
    items = []
    get = subscription.get  # type: ignore[attr-defined]
    queued = subscription.has_queued  # type: ignore[attr-defined]
    while queued():
        items.append(await get())
    return items


async def test_a_replay_is_bounded_by_bytes_and_read_in_pages(engine: AsyncEngine) -> None:
    """A reader resuming far back in a stream of large events gets a ``stream-reset`` (it reloads the
    history) without the replica ever holding the backlog; a replay within the bound comes whole, in order,
    across pages."""
    hub = SharedEventHub(engine, replay_bytes=1_000_000, page_rows=50, page_bytes=200_000)
    await hub.start()
    try:
        key = StreamKey("big", 7)
        for seq in range(1, 301):  # 300 events of 20,000 characters: 6 MB of bodies
            hub.publish(_delta("big", seq, "x" * 20_000), 7)
        await _written(hub, key, 300)

        tracemalloc.start()
        try:
            subscription = await hub.open(key, after=0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        items = await _drain(subscription)
        subscription.close()
        assert [item.event for item in items] == [None]  # type: ignore[attr-defined]
        # The backlog is 6 MB of bodies (parsed, several times that); the replay held about its bound.
        assert peak < 3_000_000, peak

        # 40 events (800 KB) from the middle: all of them, in order, read in pages of 200 KB.
        middle = (await hub.log.after_seq(*key, 260, 1))[0][0] - 1
        subscription = await hub.open(key, after=middle)
        items = await _drain(subscription)
        subscription.close()
        assert [item.event.seq for item in items] == list(range(261, 301))  # type: ignore[attr-defined]
    finally:
        await hub.close()


async def test_a_resume_finds_the_turn_without_parsing_bodies_even_with_u0000(engine: AsyncEngine) -> None:
    """``GET /api/chat/{id}/stream`` asks the log for the open turn: read from marker columns, so an event
    holding U+0000 (which ``jsonb`` refuses) no longer makes it fail, and a turn thousands of events long
    is found by its markers alone."""
    hub = SharedEventHub(engine)
    await hub.start()
    try:
        key = StreamKey("nul", 3)
        hub.publish(InteractionStart(session_id="nul", seq=1, prompt="a\x00b"), 3)
        message = Message(role="user", parts=(TextPart("a\x00b"),), session_id="nul")
        hub.publish(UserTurnStart(session_id="nul", seq=2, message=message), 3)
        for seq in range(3, 2003):
            hub.publish(_delta("nul", seq, "\x00 text"), 3)
        await _written(hub, key, 2002)
        turn = await hub.open_turn(key)
        assert turn is not None
        first = (await hub.log.after_seq(*key, 0, 1))[0][0]
        assert turn.after == first - 1 and turn.live_from == first
        subscription = await hub.open(key, turn.after)
        items = await _drain(subscription)
        subscription.close()
        assert items[0].event.prompt == "a\x00b"  # type: ignore[attr-defined]
        assert len(items) == 2002

        hub.publish(InteractionEnd(session_id="nul", seq=2003, status="completed"), 3)
        await _written(hub, key, 2003)
        assert await hub.open_turn(key) is None
        # Another incarnation of the id has no turn, and no markers of this one.
        assert await hub.open_turn(StreamKey("nul", 4)) is None
    finally:
        await hub.close()


def _sub_agent_turn(hub: EventHub | SharedEventHub, root: str, n: int) -> None:
    child = f"{root}.sub_{n:016x}"
    hub.publish(InteractionStart(session_id=root, seq=1), 1)
    hub.publish(InteractionStart(session_id=child, seq=1, parent_session_id=root, user_session_id=root), 1)
    hub.publish(
        InteractionEnd(
            session_id=child, seq=2, status="completed", parent_session_id=root, user_session_id=root
        ),
        1,
    )
    hub.publish(InteractionEnd(session_id=root, seq=2, status="completed"), 1)


async def test_the_hubs_forget_sub_sessions_when_their_conversation_run_ends(engine: AsyncEngine) -> None:
    """The parent map held every sub-session ever seen; now it holds those of running turns only."""
    shared = SharedEventHub(engine)
    await shared.start()
    local = EventHub()
    try:
        for n in range(200):
            for hub in (shared, local):
                _sub_agent_turn(hub, f"conv{n}", n)
        assert len(shared._ancestry) == 0 and len(local._ancestry) == 0
        # While a turn runs, its sub-agent's events reach the conversation's stream too.
        subscription = local.subscribe(StreamKey("live", 1))
        local.publish(InteractionStart(session_id="live", seq=1), 1)
        local.publish(
            TextDeltaEvent(
                session_id="live.sub_1",
                seq=1,
                id="t",
                delta="hi",
                message_id="m",
                parent_session_id="live",
                user_session_id="live",
            ),
            1,
        )
        assert len(local._ancestry) == 1
        items = await _drain(subscription)
        assert [item.event.session_id for item in items] == ["live", "live.sub_1"]  # type: ignore[attr-defined]
    finally:
        await shared.close()


async def test_a_batch_written_again_adds_no_row_and_keeps_its_first_ids(engine: AsyncEngine) -> None:
    """The writer sends a batch again when its connection dropped after the commit but before the answer
    (a database outage): the rows were written once, so the second write adds none and returns their first
    ids, and the replica delivers them once, in order (before: every event twice, under new cursors)."""
    log = EventLog(engine)
    await log.create()
    conn, driver = await log.dedicated()
    try:
        rows = [LogRow("s", "s", 1, seq, f'{{"type":"custom","seq":{seq}}}') for seq in (1, 2, 3)]
        first = await log.insert(driver, rows, time.time())
        more = LogRow("s", "s", 1, 4, '{"type":"custom","seq":4}')
        again = await log.insert(driver, [*rows, more], time.time())
        assert again[:3] == first and again[3] is not None and again[3] > max(i for i in first if i)
        assert [seq for _, _, seq in await log.after_seq("s", 1, 0, 10)] == [1, 2, 3, 4]
    finally:
        await conn.close()
