"""SQLStore behaviour on every engine: schema, sessions, lossless messages, the step hook, repair, usage, locks."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.store.conftest import Target
from toolwire.errors import ConfigError, SessionAccessError, SessionBusyError, StoreError, SubSessionError
from toolwire.messages import (
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolwire.store import INTERRUPTED_OUTPUT, SessionInfo, StepRecord, StoredStep, ToolCallRecord, open_store
from toolwire.store._locks import lock_owner
from toolwire.store.records import CallCompletion, TurnError
from toolwire.store.schema import messages as messages_table
from toolwire.store.sql import SQLStore

GOLDEN = Path(__file__).parent.parent / "golden" / "store"
SID = "sess_1"

EVERY_PART = Message(
    role="assistant",
    id="msg_every_part",
    session_id=SID,
    created_at=1767225600.1234567,
    provider="anthropic",
    model="claude-sonnet-4-5",
    parts=(
        ReasoningPart(
            text="The user wants the weather in Paris; call the tool.",
            signature="ErUBCkYIBRgCIkB3c2lnbmF0dXJl",
        ),
        ReasoningPart(redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5"),
        ReasoningPart(
            provider_metadata={"openai": {"itemId": "rs_68af01", "reasoningEncryptedContent": "gAAAAABo4x"}}
        ),
        TextPart(
            text="Checking the weather in Paris — un instant ☀️",
            provider_metadata={"openai": {"itemId": "msg_68af02"}},
        ),
        ToolCallPart(
            tool_call_id="toolu_01",
            tool_name="get_weather",
            args={"city": "Paris", "units": "metric"},
            args_json='{"city": "Paris",  "units":"metric"}',
            provider_metadata={"google": {"thoughtSignature": "CiQB0e2Kb1x"}},
            title="Weather in Paris",
        ),
        ToolCallPart(
            tool_call_id="srvtoolu_01",
            tool_name="web_search",
            args={"query": "paris weather"},
            provider_executed=True,
        ),
        ToolResultPart(
            tool_call_id="srvtoolu_01",
            tool_name="web_search",
            output=[{"url": "https://example.com/paris", "title": "Paris"}],
            provider_executed=True,
            provider_metadata={"anthropic": {"type": "web_search_tool_result"}},
        ),
        FilePart(
            media_type="image/png",
            data="iVBORw0KGgo=",
            filename="chart.png",
            provider_metadata={"openai": {"detail": "low"}},
        ),
        FilePart(media_type="application/pdf", url="https://example.com/report.pdf"),
    ),
)

# Outputs are any JSON value: nesting, unicode, NUL, integers past 64 bits, floats, null, booleans.
ANY_JSON_OUTPUTS: list[Any] = [
    "plain text",
    {"nested": {"list": [1, 2.5, -3, None, True, False], "empty": {}, "none": []}},
    "ünïcödé ✓ 東京 \u0000 after NUL",
    2**70,
    0.1,
    None,
    [],
]


def _info(session_id: str = SID, **kwargs: Any) -> SessionInfo:
    return SessionInfo(id=session_id, **kwargs)


def _call_record(call: ToolCallPart, message: Message, step: int) -> ToolCallRecord:
    return ToolCallRecord(
        session_id=SID,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        message_id=message.id,
        step=step,
        args=call.args,
        provider="openai",
        model="gpt-4.1",
        interaction_id="int_1",
    )


def _assistant_with_calls(*call_ids: str, message_id: str = "msg_a1") -> Message:
    return Message(
        role="assistant",
        id=message_id,
        session_id=SID,
        created_at=1767225601.5,
        provider="openai",
        model="gpt-4.1",
        parts=tuple(
            ToolCallPart(tool_call_id=call_id, tool_name="get_weather", args={"city": call_id})
            for call_id in call_ids
        ),
    )


def _step(message: Message, step: int = 1, usage: Usage | None = None) -> StepRecord:
    return StepRecord(
        session_id=SID,
        interaction_id="int_1",
        step=step,
        message=message,
        tool_calls=tuple(_call_record(c, message, step) for c in message.tool_calls),
        usage=usage or Usage(),
        finish_reason="tool-calls",
        started_at=10.0,
        finished_at=11.5,
    )


async def _positions(store: SQLStore, session_id: str = SID) -> list[tuple[int, str]]:
    query = (
        sa.select(messages_table.c.position, messages_table.c.id)
        .where(messages_table.c.session_id == session_id)
        .order_by(messages_table.c.position)
    )
    async with store.engine.connect() as conn:
        return [(row.position, row.id) for row in await conn.execute(query)]


# -- schema and engines ------------------------------------------------------------------------


async def test_open_creates_the_schema_once_and_keeps_data(target: Target) -> None:
    first = await target.open()
    second = await target.open()  # the schema exists now: creating it again must be a no-op
    try:
        await first.ensure_session(_info(user_id="u1"))
        await first.append_message(SID, Message.user("hi", id="m1", session_id=SID), interaction_id="i")
        await second.create_schema()
        third = await target.open()
        try:
            assert [m.id for m in await third.raw_messages(SID)] == ["m1"]
            assert (await third.get_session(SID)) is not None
        finally:
            await third.close()
    finally:
        await first.close()
        await second.close()


async def test_schema_is_the_same_on_every_engine(store: SQLStore) -> None:
    expected = {
        "toolwire_sessions": [
            "id", "parent_session_id", "user_session_id", "user_id", "agent_name", "title", "created_at",
            "updated_at", "last_seq", "usage", "lock_owner", "lock_expires_at", "lock_epoch", "fenced_epoch",
        ],
        "toolwire_messages": [
            "id", "session_id", "position", "role", "parts", "provider", "model", "interaction_id", "step",
            "created_at", "step_usage", "finish_reason", "step_started_at", "step_finished_at",
        ],
        "toolwire_tool_calls": [
            "id", "session_id", "tool_call_id", "message_id", "step", "tool_name", "args", "status", "output",
            "is_error", "started_at", "finished_at", "provider", "model", "interaction_id",
        ],
        "toolwire_compactions": [
            "id", "session_id", "first_kept_message_id", "summary", "provider", "model", "usage", "tokens_before",
            "tokens_after", "created_at",
        ],
        "toolwire_turn_errors": [
            "id", "session_id", "interaction_id", "error_type", "message", "retryable", "provider", "model",
            "created_at",
        ],
    }  # fmt: skip

    def columns(sync_conn: sa.Connection) -> dict[str, list[str]]:
        inspector = sa.inspect(sync_conn)
        return {
            name: [c["name"] for c in inspector.get_columns(name)] for name in inspector.get_table_names()
        }

    async with store.engine.connect() as conn:
        assert await conn.run_sync(columns) == expected


async def test_url_without_async_driver_is_rewritten(target: Target) -> None:
    url = target.url.replace("postgresql+asyncpg://", "postgresql://").replace(
        "sqlite+aiosqlite://", "sqlite://"
    )
    assert "+" not in url.split("://")[0]
    store = await SQLStore.open(url, **target.options)
    try:
        assert (
            store.engine.url.drivername
            == {"sqlite": "sqlite+aiosqlite", "postgres": "postgresql+asyncpg"}[target.engine]
        )
        assert await store.ensure_session(_info()) == await store.get_session(SID)
    finally:
        await store.close()


async def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'nested' / 'dir' / 'db.sqlite'}")
    assert isinstance(store, SQLStore)
    try:
        async with store.engine.connect() as conn:
            assert await conn.scalar(sa.text("PRAGMA journal_mode")) == "wal"
            assert await conn.scalar(sa.text("PRAGMA foreign_keys")) == 1
            assert await conn.scalar(sa.text("PRAGMA busy_timeout")) == 15000
    finally:
        await store.close()
    # The file is a real SQLite database, readable by the plain sqlite3 module.
    with sqlite3.connect(tmp_path / "nested" / "dir" / "db.sqlite") as raw:
        assert raw.execute("SELECT count(*) FROM toolwire_sessions").fetchone() == (0,)


async def test_open_failures_are_typed(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as unreachable:
        await SQLStore.open("postgresql+asyncpg://nobody:secret-pw@127.0.0.1:1/none")
    assert unreachable.value.__cause__ is not None
    assert "secret-pw" not in str(unreachable.value)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError):
        await SQLStore.open(f"sqlite+aiosqlite:///{blocker / 'db.sqlite'}")
    with pytest.raises(ConfigError):
        await SQLStore.open("not a url")
    with pytest.raises(ConfigError):
        await SQLStore.open("nosuchdialect://x/y")


# -- sessions ----------------------------------------------------------------------------------


async def test_sessions_ensure_get_and_list(store: SQLStore) -> None:
    created = await store.ensure_session(
        _info(
            "s_old",
            user_id="alice",
            parent_session_id="s_parent",
            user_session_id="s_user",
            agent_name="helper",
            title="Old chat",
            created_at=100.0,
            updated_at=100.0,
        )
    )
    assert created == SessionInfo(
        id="s_old",
        user_id="alice",
        parent_session_id="s_parent",
        user_session_id="s_user",
        agent_name="helper",
        title="Old chat",
        created_at=100.0,
        updated_at=100.0,
    )
    # Existing rows win: a second ensure with other fields returns the stored row unchanged.
    assert await store.ensure_session(_info("s_old", user_id="mallory", title="x")) == created
    await store.ensure_session(_info("s_mid", user_id="alice", created_at=200.0, updated_at=200.0))
    await store.ensure_session(_info("s_bob", user_id="bob", created_at=300.0, updated_at=300.0))
    assert await store.get_session("s_old") == created
    assert await store.get_session("missing") is None

    assert [s.id for s in await store.list_sessions(user_id="alice")] == ["s_mid", "s_old"]
    assert [s.id for s in await store.list_sessions()] == ["s_bob", "s_mid", "s_old"]
    assert [s.id for s in await store.list_sessions(limit=1)] == ["s_bob"]
    assert await store.list_sessions(user_id="nobody") == []

    # Writing to a session makes it the most recently updated one.
    await store.append_message("s_old", Message.user("again", session_id="s_old"), interaction_id="i")
    assert [s.id for s in await store.list_sessions(user_id="alice")] == ["s_old", "s_mid"]
    touched = await store.get_session("s_old")
    assert touched is not None and touched.updated_at > 1_000_000_000


async def test_writes_to_an_unknown_session_are_store_errors(store: SQLStore) -> None:
    with pytest.raises(StoreError, match="unknown session"):
        await store.append_message("nope", Message.user("hi"), interaction_id="i")
    with pytest.raises(StoreError, match="unknown session"):
        await store.lock_session("nope", "owner")
    assert await store.raw_messages("nope") == []


# -- messages ----------------------------------------------------------------------------------


async def test_every_part_type_round_trips_and_is_stored_as_golden(store: SQLStore) -> None:
    await store.ensure_session(_info())
    tool = Message(
        role="tool",
        id="msg_tool",
        session_id=SID,
        created_at=1767225602.25,
        parts=tuple(
            ToolResultPart(tool_call_id=f"call_{i}", tool_name="echo", output=output, is_error=i == 1)
            for i, output in enumerate(ANY_JSON_OUTPUTS)
        ),
    )
    user = Message.user("Weather in Paris?", id="msg_user", session_id=SID, created_at=1767225599.0)
    system = Message.system("Be brief.", id="msg_system", session_id=SID, created_at=1767225598.0)
    await store.append_message(SID, system, interaction_id="int_1")
    await store.append_message(SID, user, interaction_id="int_1")
    await store.begin_step(StepRecord(session_id=SID, interaction_id="int_1", step=1, message=EVERY_PART))
    await store.finish_step(SID, step=1, interaction_id="int_1", tool_message=tool, usage=Usage(), last_seq=3)

    assert await store.raw_messages(SID) == [system, user, EVERY_PART, tool]
    async with store.engine.connect() as conn:
        stored = await conn.scalar(
            sa.select(messages_table.c.parts).where(messages_table.c.id == EVERY_PART.id)
        )
    assert stored == json.loads((GOLDEN / "every_part.json").read_text())


async def test_message_session_id_and_idempotent_append(store: SQLStore) -> None:
    await store.ensure_session(_info())
    await store.ensure_session(_info("other"))
    detached = Message.user("no session", id="m_detached")
    await store.append_message(SID, detached, interaction_id="i")
    await store.append_message(SID, detached, interaction_id="i")  # a retried append stores it once
    # A stored message belongs to the session it was stored in.
    assert await store.raw_messages(SID) == [replace(detached, session_id=SID)]
    with pytest.raises(StoreError, match="belongs to session"):
        await store.append_message(SID, Message.user("x", session_id="other"), interaction_id="i")
    # Message identity is scoped to the session: the same id in another session is another message
    # (client-chosen ids must neither collide with nor reveal another user's).
    await store.append_message("other", detached, interaction_id="i")
    assert await _positions(store) == [(0, "m_detached")]
    assert await store.raw_messages("other") == [replace(detached, session_id="other")]


# -- the step hook -----------------------------------------------------------------------------


async def test_step_lifecycle_records_pending_calls_then_results(store: SQLStore) -> None:
    await store.ensure_session(_info())
    user = Message.user("two cities", id="msg_u1", session_id=SID, created_at=1767225600.0)
    await store.append_message(SID, user, interaction_id="int_1")
    assistant = _assistant_with_calls("call_a", "call_b")
    record = _step(assistant, usage=Usage(input_tokens=120, output_tokens=30, requests=1))
    await store.begin_step(record)
    await store.begin_step(record)  # a retried begin_step duplicates nothing

    pending = [
        ToolCallRecord(
            session_id=SID,
            tool_call_id=call_id,
            tool_name="get_weather",
            message_id="msg_a1",
            step=1,
            args={"city": call_id},
            provider="openai",
            model="gpt-4.1",
            interaction_id="int_1",
        )
        for call_id in ("call_a", "call_b")
    ]
    assert await store.tool_calls(SID) == pending
    assert await _positions(store) == [(0, "msg_u1"), (1, "msg_a1")]

    await store.complete_tool_call(
        SID,
        "call_b",
        status="error",
        output="city not found",
        is_error=True,
        started_at=12.0,
        finished_at=12.5,
    )
    await store.complete_tool_call(
        SID, "call_a", status="ok", output={"temp_c": 21}, is_error=False, started_at=12.0, finished_at=13.0
    )
    await store.complete_tool_call(  # a call the store never saw is ignored, like MemoryStore does
        SID, "call_unknown", status="ok", output=1, is_error=False, started_at=None, finished_at=None
    )
    assert await store.tool_calls(SID) == [
        replace(pending[0], status="ok", output={"temp_c": 21}, started_at=12.0, finished_at=13.0),
        replace(
            pending[1],
            status="error",
            output="city not found",
            is_error=True,
            started_at=12.0,
            finished_at=12.5,
        ),
    ]

    tool = Message(
        role="tool",
        id="msg_t1",
        session_id=SID,
        created_at=1767225603.0,
        parts=(
            ToolResultPart(tool_call_id="call_a", tool_name="get_weather", output={"temp_c": 21}),
            ToolResultPart(
                tool_call_id="call_b", tool_name="get_weather", output="city not found", is_error=True
            ),
        ),
    )
    await store.finish_step(
        SID, step=1, interaction_id="int_1", tool_message=tool, usage=record.usage, last_seq=9
    )
    assert await _positions(store) == [(0, "msg_u1"), (1, "msg_a1"), (2, "msg_t1")]
    assert await store.load_history(SID) == [user, assistant, tool]
    assert [r.status for r in await store.tool_calls(SID)] == ["ok", "error"]  # nothing marked interrupted
    session = await store.get_session(SID)
    assert session is not None
    assert (session.usage, session.last_seq) == (Usage(input_tokens=120, output_tokens=30, requests=1), 9)
    assert await store.steps(SID) == [
        StoredStep(
            message_id="msg_a1",
            interaction_id="int_1",
            step=1,
            usage=Usage(input_tokens=120, output_tokens=30, requests=1),
            finish_reason="tool-calls",
            started_at=10.0,
            finished_at=11.5,
            provider="openai",
            model="gpt-4.1",
        )
    ]


async def test_pending_call_is_repaired_as_interrupted_after_a_crash(target: Target) -> None:
    crashed = await target.open()
    await crashed.ensure_session(_info())
    user = Message.user("go", id="msg_u1", session_id=SID, created_at=1767225600.0)
    await crashed.append_message(SID, user, interaction_id="int_1")
    assistant = _assistant_with_calls("call_a")
    await crashed.begin_step(_step(assistant))
    await crashed.close()  # the process died while the tool ran: no complete_tool_call, no finish_step

    store = await target.open()
    try:
        interrupted = Message(
            role="tool",
            id="msg_a1:results",
            session_id=SID,
            created_at=assistant.created_at,
            parts=(
                ToolResultPart(
                    tool_call_id="call_a", tool_name="get_weather", output=INTERRUPTED_OUTPUT, is_error=True
                ),
            ),
        )
        # a plain reader (e.g. a history endpoint during a live run) repairs the view but writes nothing
        assert await store.load_history(SID) == [user, assistant, interrupted]
        assert [r.status for r in await store.tool_calls(SID)] == ["pending"]
        # the lock holder (the loop, starting a run) records the interruption
        assert await store.load_history(SID, mark_interrupted=True) == [user, assistant, interrupted]
        [row] = await store.tool_calls(SID)
        assert (row.status, row.output, row.is_error) == ("interrupted", INTERRUPTED_OUTPUT, True)
        assert await store.load_history(SID) == [user, assistant, interrupted]  # stable on the next load
        assert await store.raw_messages(SID) == [user, assistant]  # repair is a view; rows say interrupted
    finally:
        await store.close()


async def test_finished_call_without_tool_message_is_recovered_from_its_row(target: Target) -> None:
    crashed = await target.open()
    await crashed.ensure_session(_info())
    assistant = _assistant_with_calls("call_a", "call_b")
    await crashed.begin_step(_step(assistant))
    await crashed.complete_tool_call(
        SID, "call_a", status="ok", output={"temp_c": 21}, is_error=False, started_at=1.0, finished_at=2.0
    )
    await crashed.close()  # died after call_a finished, while call_b was still running

    store = await target.open()
    try:
        history = await store.load_history(SID, mark_interrupted=True)
        assert history[0] == assistant
        assert history[1].role == "tool"
        assert history[1].parts == (
            ToolResultPart(tool_call_id="call_a", tool_name="get_weather", output={"temp_c": 21}),
            ToolResultPart(
                tool_call_id="call_b", tool_name="get_weather", output=INTERRUPTED_OUTPUT, is_error=True
            ),
        )
        assert [(r.tool_call_id, r.status) for r in await store.tool_calls(SID)] == [
            ("call_a", "ok"),
            ("call_b", "interrupted"),
        ]
    finally:
        await store.close()


async def test_usage_totals_last_seq_and_per_step_usage(store: SQLStore) -> None:
    await store.ensure_session(_info())
    first = Usage(input_tokens=100, output_tokens=20, reasoning_tokens=5, cache_read_tokens=50, requests=1)
    second = Usage(input_tokens=140, output_tokens=10, cache_write_tokens=7, requests=1)
    await store.begin_step(_step(_assistant_with_calls(message_id="msg_s1"), step=1, usage=first))
    await store.finish_step(SID, step=1, interaction_id="int_1", tool_message=None, usage=first, last_seq=4)
    await store.begin_step(_step(_assistant_with_calls(message_id="msg_s2"), step=2, usage=second))
    await store.finish_step(SID, step=2, interaction_id="int_1", tool_message=None, usage=second, last_seq=3)

    session = await store.get_session(SID)
    assert session is not None
    assert session.usage == Usage(
        input_tokens=240,
        output_tokens=30,
        reasoning_tokens=5,
        cache_read_tokens=50,
        cache_write_tokens=7,
        requests=2,
    )
    assert session.last_seq == 4  # never goes backwards
    assert [(s.message_id, s.step, s.usage) for s in await store.steps(SID)] == [
        ("msg_s1", 1, first),
        ("msg_s2", 2, second),
    ]

    # Concurrent finish_step calls on one session lose no update of the JSON total.
    one = Usage(input_tokens=1, requests=1)
    await asyncio.gather(
        *(
            store.finish_step(
                SID, step=3, interaction_id="int_2", tool_message=None, usage=one, last_seq=10 + i
            )
            for i in range(12)
        )
    )
    session = await store.get_session(SID)
    assert session is not None
    assert (session.usage.input_tokens, session.usage.requests, session.last_seq) == (252, 14, 21)


async def test_a_retried_finish_step_writes_its_completions_and_adds_its_usage_once(store: SQLStore) -> None:
    # A retry after a lost commit acknowledgement sends the same step end again: the tool message is stored
    # once, the usage added once, and the completions it carries are the same rows (PostgreSQL runs the whole
    # step end as one statement; SQLite as one transaction).
    await store.ensure_session(_info())
    usage = Usage(input_tokens=9, output_tokens=4, requests=1)
    await store.begin_step(_step(_assistant_with_calls("call_a", "call_b"), usage=usage))
    await store.complete_tool_call(
        SID, "call_a", status="ok", output={"t": 1}, is_error=False, started_at=1.0, finished_at=2.0
    )
    tool = Message(
        role="tool",
        id="msg_t1",
        session_id=SID,
        created_at=1767225603.0,
        parts=(
            ToolResultPart(tool_call_id="call_a", tool_name="get_weather", output={"t": 1}),
            ToolResultPart(tool_call_id="call_b", tool_name="get_weather", output=None, is_error=True),
        ),
    )
    last = CallCompletion(
        tool_call_id="call_b",
        message_id="msg_a1",
        status="error",
        output=None,
        is_error=True,
        started_at=1.5,
        finished_at=3.0,
    )
    for _ in range(2):
        await store.finish_step(
            SID,
            step=1,
            interaction_id="int_1",
            tool_message=tool,
            usage=usage,
            last_seq=7,
            completed=[last],
        )
    assert await _positions(store) == [(0, "msg_a1"), (1, "msg_t1")]
    rows = {r.tool_call_id: r for r in await store.tool_calls(SID)}
    assert (rows["call_a"].status, rows["call_a"].output) == ("ok", {"t": 1})
    assert (rows["call_b"].status, rows["call_b"].output, rows["call_b"].is_error) == ("error", None, True)
    assert (rows["call_b"].started_at, rows["call_b"].finished_at) == (1.5, 3.0)
    session = await store.get_session(SID)
    assert session is not None
    assert (session.usage, session.last_seq) == (usage, 7)
    assert await store.load_history(SID) == [_assistant_with_calls("call_a", "call_b"), tool]


async def test_outputs_that_are_not_json_are_stored_as_their_repr(store: SQLStore) -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "Opaque(7)"

    await store.ensure_session(_info())
    assistant = _assistant_with_calls("call_a", "call_b")
    await store.begin_step(_step(assistant))
    await store.complete_tool_call(
        SID, "call_a", status="ok", output=Opaque(), is_error=False, started_at=None, finished_at=None
    )
    await store.complete_tool_call(
        SID, "call_b", status="ok", output=float("nan"), is_error=False, started_at=None, finished_at=None
    )
    assert [r.output for r in await store.tool_calls(SID)] == [
        {"unserializable": "Opaque(7)"},
        {"unserializable": "nan"},
    ]
    tool = Message(
        role="tool",
        id="msg_t1",
        session_id=SID,
        parts=(ToolResultPart(tool_call_id="call_a", tool_name="get_weather", output=Opaque()),),
    )
    await store.finish_step(SID, step=1, interaction_id="int_1", tool_message=tool, usage=Usage(), last_seq=1)
    stored = (await store.raw_messages(SID))[-1]
    assert stored.parts == (
        ToolResultPart(
            tool_call_id="call_a", tool_name="get_weather", output={"unserializable": "Opaque(7)"}
        ),
    )


# -- run locks ---------------------------------------------------------------------------------


async def test_session_lock_is_exclusive_reentrant_and_expires(store: SQLStore) -> None:
    await store.ensure_session(_info())
    await store.lock_session(SID, "run_a")
    await store.lock_session(SID, "run_a")  # the holder may claim again (renewal)
    with pytest.raises(SessionBusyError):
        await store.lock_session(SID, "run_b")
    await store.unlock_session(SID, "run_b")  # not the holder: no effect
    with pytest.raises(SessionBusyError):
        await store.lock_session(SID, "run_b")
    await store.unlock_session(SID, "run_a")
    await store.lock_session(SID, "run_b")
    await store.unlock_session(SID, "run_b")

    await store.lock_session(SID, "run_short", ttl=0.3)
    with pytest.raises(SessionBusyError):
        await store.lock_session(SID, "run_c")
    await asyncio.sleep(0.35)
    await store.lock_session(SID, "run_c")  # the holder died: its lock expired
    with pytest.raises(SessionBusyError):
        await store.lock_session(SID, "run_short")
    await store.unlock_session(SID, "run_c")

    # Owners naming host and pid: a holder process of this host that no longer exists is taken over
    # at once; one on another host is never judged dead here and keeps its lock until it expires.
    no_such_pid = 2**31 - 1
    this_host = lock_owner("probe").split("/")[0]
    await store.lock_session(SID, f"{this_host}/{no_such_pid}/run_killed")
    await store.lock_session(SID, lock_owner("run_d"))
    await store.unlock_session(SID, lock_owner("run_d"))
    await store.lock_session(SID, f"elsewhere.invalid/{no_such_pid}/run_remote")
    with pytest.raises(SessionBusyError):
        await store.lock_session(SID, lock_owner("run_e"))


async def test_a_takeover_claims_only_a_lease_still_held_and_expired(store: SQLStore) -> None:
    # Two replicas saw the same expired lease; the faster one took the run over, finished it and released
    # the session before the slower one claimed it: the slower one must not take a finished run again.
    await store.ensure_session(_info(user_id="u1"))
    await store.lock_session(SID, "dead_replica_run", ttl=0.2)
    with pytest.raises(SessionBusyError):  # the lease is still live
        await store.open_run(_info(user_id="u1"), "replica_b", ttl=60.0, takeover=True)
    await asyncio.sleep(0.25)
    await store.open_run(_info(user_id="u1"), "replica_a", ttl=60.0, takeover=True)  # expired: taken
    with pytest.raises(SessionBusyError):  # replica A holds it now
        await store.open_run(_info(user_id="u1"), "replica_b", ttl=60.0, takeover=True)
    await store.unlock_session(SID, "replica_a")  # A finished the run
    with pytest.raises(SessionBusyError):  # released, not expired: nothing to take over
        await store.open_run(_info(user_id="u1"), "replica_b", ttl=60.0, takeover=True)
    await store.open_run(_info(user_id="u1"), "next_turn", ttl=60.0)  # an ordinary run still starts


async def test_open_run_creates_checks_the_owner_locks_and_reads_in_one_step(store: SQLStore) -> None:
    info, opened = await store.open_run(_info(user_id="u1"), "run_a", ttl=60.0)
    assert (info.id, info.user_id, opened.messages, opened.awaited) == (SID, "u1", [], [])
    # A new session is created as ensure_session creates one, and locked in the same statement.
    assert await store.get_session(SID) == info
    assert await store.run_in_progress(SID)
    with pytest.raises(SessionBusyError):  # the run holds the lock
        await store.lock_session(SID, "run_b")
    with pytest.raises(SessionBusyError):
        await store.open_run(_info(user_id="u1"), "run_b", ttl=60.0)

    # Another user is refused before anything is locked: the holder keeps the lock, the owner stays.
    await store.unlock_session(SID, "run_a")
    with pytest.raises(SessionAccessError):
        await store.open_run(_info(user_id="u2"), "run_c", ttl=60.0)
    await store.lock_session(SID, "run_d")  # free: the refused run did not take it
    await store.unlock_session(SID, "run_d")
    stored = await store.get_session(SID)
    assert stored is not None and stored.user_id == "u1"

    # The run's reads: its history repaired, and a call left pending by a dead run recorded as interrupted.
    user = Message.user("go", id="msg_u1", session_id=SID, created_at=1767225600.0)
    await store.append_message(SID, user, interaction_id="int_1")
    assistant = _assistant_with_calls("call_a")
    await store.begin_step(_step(assistant))
    _, opened = await store.open_run(_info(user_id="u1"), "run_e", ttl=60.0)
    assert opened.messages == await store.load_history(SID)
    assert opened.messages[:2] == [user, assistant] and opened.interrupted == [("msg_a1", "call_a")]
    [row] = await store.tool_calls(SID)
    assert row.status == "interrupted"


async def test_open_run_top_level_refuses_a_sub_session_after_the_owner(store: SQLStore) -> None:
    root = SessionInfo(id="root", user_session_id="root", user_id="u1")
    sub = SessionInfo(id="sub", parent_session_id="root", user_session_id="root", user_id="u1")
    await store.ensure_session(root)
    await store.ensure_session(sub)
    top = SessionInfo(id="sub", user_session_id="sub", user_id="u1")
    with pytest.raises(SubSessionError):
        await store.open_run(top, "run_a", ttl=60.0, top_level=True)
    with pytest.raises(SessionAccessError) as stranger:  # not yours comes first: nothing more is told
        await store.open_run(SessionInfo(id="sub", user_id="u2"), "run_b", ttl=60.0, top_level=True)
    assert not isinstance(stranger.value, SubSessionError)
    assert not await store.run_in_progress("sub")  # refused before the lock
    await store.open_run(top, "run_c", ttl=60.0)  # without top_level a library run may still use it
    info, _ = await store.open_run(SessionInfo(id="new", user_id="u1"), "run_d", ttl=60.0, top_level=True)
    assert info.parent_session_id is None and await store.run_in_progress("new")


# -- transactions ------------------------------------------------------------------------------


async def test_a_transaction_that_loses_a_unique_race_is_retried(store: SQLStore) -> None:
    await store.ensure_session(_info())
    await store.append_message(SID, Message.user("first", id="m0", session_id=SID), interaction_id="i")
    attempts: list[int] = []

    def op(conn: sa.Connection) -> None:
        # The first attempt takes a stale position, as a writer that raced another one would.
        attempts.append(len(attempts))
        position = 0 if len(attempts) == 1 else 1
        row = {
            "id": "m1",
            "session_id": SID,
            "position": position,
            "role": "user",
            "parts": [],
            "created_at": 1.0,
        }
        conn.execute(sa.insert(messages_table).values(**row))

    await store._write("insert a message", op)
    assert attempts == [0, 1]
    assert await _positions(store) == [(0, "m0"), (1, "m1")]

    def invalid(conn: sa.Connection) -> None:
        attempts.append(len(attempts))
        row = {"id": "m2", "session_id": SID, "position": 2, "role": "robot", "parts": [], "created_at": 1.0}
        conn.execute(sa.insert(messages_table).values(**row))

    with pytest.raises(StoreError, match="store failed to insert a bad row") as failed:
        await store._write("insert a bad row", invalid)
    assert attempts == [0, 1, 2]  # a constraint that cannot pass on a second try is not retried
    assert isinstance(failed.value.__cause__, sa.exc.IntegrityError)


async def test_a_turn_error_is_kept_once_per_turn_and_goes_with_its_turn(store: SQLStore) -> None:
    await store.ensure_session(_info(user_id="u1"))
    await store.append_message(SID, Message.user("hi", id="m1", session_id=SID), interaction_id="i1")
    failed = TurnError(
        session_id=SID,
        interaction_id="i1",
        error_type="ProviderHTTPError",
        message="model not loaded \u0000",
        retryable=True,
        provider="ollama",
        model="llama3",
        created_at=time.time(),
    )
    await store.record_turn_error(failed)
    await store.record_turn_error(failed)  # a retried write after a lost acknowledgement: kept once
    assert await store.turn_errors(SID) == [
        replace(failed, message="model not loaded \ufffd")
    ]  # PostgreSQL text holds no NUL
    assert [m.role for m in await store.load_history(SID)] == ["user"]  # no message for the model
    assert await store.truncate_history(SID, "m1")  # an edit from the failed turn's prompt
    assert await store.turn_errors(SID) == []
