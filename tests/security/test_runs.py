"""Careless and hostile clients against the run machinery of a real ``toolwire serve``: the next turn right
after ``[DONE]``, events from a busy tool in publication order, text that cannot be encoded, repaired
histories within live limits, malformed input, memory of finished streams, paging."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets
import websockets.exceptions

from toolwire import open_store
from toolwire.events import ToolCallComplete, event_from_dict
from toolwire.messages import Message, ToolCallPart
from toolwire.server.hub import EventHub, StreamKey
from toolwire.store import INTERRUPTED_OUTPUT, SessionInfo, StepRecord, ToolCallRecord
from toolwire.transcript import Transcript

from .agents import SURROGATE_TEXT, build
from .conftest import idle as _finish
from .conftest import serve

pytestmark = pytest.mark.timeout(180)
ALICE = "tok-alice"


def _frames(raw: str) -> list[dict[str, Any]]:
    out = []
    for line in raw.splitlines():
        if line.startswith("data: {"):
            out.append(json.loads(line[6:]))
    return out


async def test_a_client_that_saw_the_end_can_always_start_the_next_turn(tmp_path: Path) -> None:
    """Clients send the next message the instant they see the end of a turn: the AI SDK client on
    [DONE] (``sendAutomaticallyWhen``), a native client on ``interaction-end``."""
    trials = 30
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        messages: list[dict[str, Any]] = []
        statuses = []
        for turn in range(trials):
            messages.append(
                {"id": f"u{turn}", "role": "user", "parts": [{"type": "text", "text": "lookup T7"}]}
            )
            async with alice.stream(
                "POST", "/api/chat", json={"id": "fast", "messages": messages}
            ) as response:
                statuses.append(response.status_code)
                async for line in response.aiter_lines():
                    if line == "data: [DONE]":
                        break
        assert (await alice.post("/api/sessions", json={"session_id": "native"})).status_code == 201
        async with alice.stream("GET", "/api/sessions/native/events") as events:
            lines = events.aiter_lines()
            for _ in range(trials):
                posted = await alice.post("/api/sessions/native/messages", json={"text": "lookup T8"})
                statuses.append(posted.status_code)
                if posted.status_code != 202:
                    break
                async for line in lines:
                    if line.startswith("data: {") and json.loads(line[6:])["type"] == "interaction-end":
                        break
    assert statuses == [200] * trials + [202] * trials, statuses


async def test_progress_and_messages_survive_heartbeats_in_order(tmp_path: Path) -> None:
    count = 40
    async with (
        serve(tmp_path, env={"TW_HEARTBEAT": "0.005"}) as server,
        server.client(ALICE) as alice,
    ):
        assert (await alice.post("/api/sessions", json={"session_id": "p"})).status_code == 201
        events: list[dict[str, Any]] = []
        async with alice.stream("GET", "/api/sessions/p/events") as stream:
            posted = await alice.post("/api/sessions/p/messages", json={"text": f"progress {count}"})
            assert posted.status_code == 202
            async for line in stream.aiter_lines():
                if line.startswith("data: {"):
                    events.append(json.loads(line[6:]))
                    if events[-1]["type"] == "interaction-end":
                        break
    kinds = [e["type"] for e in events]
    assert kinds.count("tool-progress") == count and kinds.count("system-message") == count
    assert kinds.count("tool-call-heartbeat") > 0  # heartbeats really were interleaved
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq must follow publication order"
    # A consumer that drops lower seqs as replays (Transcript, the page) keeps every one of them.
    transcript = Transcript()
    last_progress = None
    for data in events:
        event = event_from_dict(data)
        if isinstance(event, ToolCallComplete):
            last_progress = next(iter(transcript.active_tools.values())).progress
        transcript.apply(event)
    assert last_progress == 1.0
    notes = [m for m in transcript.messages if m.role == "system"]
    assert len(notes) == count, len(notes)


async def test_text_that_cannot_be_encoded_is_cleaned_once_live_and_stored(tmp_path: Path) -> None:
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "surrogate"}]}
        response = await alice.post("/api/chat", json={"id": "sur", "messages": [user]})
        assert response.status_code == 200
        chunks = _frames(response.text)
        assert chunks[-1]["type"] == "finish", chunks[-3:]  # the stream did not die mid-way
        live = "".join(c.get("delta", "") for c in chunks if c["type"] == "text-delta")
        stored = (await _finish(alice, "sur"))["messages"][-1]["parts"][0]["text"]
    assert live == stored == SURROGATE_TEXT.replace("\ud800", "\ufffd")
    assert "Traceback" not in server.log_text()


async def test_repaired_results_obey_the_live_truncation_rule(tmp_path: Path) -> None:
    """A 200,000-character result recovered from its tool-call row after a crash reaches the model cut to
    max_tool_output_chars, exactly as a live result would."""
    agent = build()  # max_tool_output_chars 2000
    store = await open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        agent.use_store(store)
        await store.ensure_session(SessionInfo(id="r"))
        await store.append_message("r", Message.user("big", id="u"), interaction_id="i")
        call = ToolCallPart(tool_call_id="call_1", tool_name="big_output", args={})
        assistant = Message(role="assistant", parts=(call,), id="a", session_id="r")
        record = ToolCallRecord(
            session_id="r", tool_call_id="call_1", tool_name="big_output", message_id="a", step=1
        )
        await store.begin_step(
            StepRecord(session_id="r", interaction_id="i", step=1, message=assistant, tool_calls=(record,))
        )
        # the tool finished and its full output was recorded; the process died before finish_step
        await store.complete_tool_call(
            "r", "call_1", message_id="a", status="ok", output="y" * 200_000, is_error=False,
            started_at=0.0, finished_at=1.0,
        )  # fmt: skip
        history = await store.load_history("r", max_output_chars=agent.max_tool_output_chars)
        output = history[2].tool_results[0].output
        assert isinstance(output, str) and len(output) < 2_200 and output.startswith("y" * 2000)
        assert "output truncated" in output
        result = await agent.run("secret next", session_id="r")
        assert result.output == "next"
        sent = agent.model.requests[-1].messages  # type: ignore[attr-defined]
        assert max(len(json.dumps(m.tool_results[0].output)) for m in sent if m.role == "tool") < 2_200
    finally:
        await store.close()


async def test_a_call_id_repeated_in_a_later_step_never_aliases_the_earlier_call(tmp_path: Path) -> None:
    """Some servers number calls per response (call_0 every step). A crash during the second call_0 must
    leave it interrupted, not borrow the first call_0's result."""
    store = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        await store.ensure_session(SessionInfo(id="a"))
        await store.append_message("a", Message.user("repeat", id="u"), interaction_id="i")
        for step, message_id in ((1, "m1"), (2, "m2")):
            call = ToolCallPart(tool_call_id="call_0", tool_name="lookup", args={"txn": f"T{step}"})
            message = Message(role="assistant", parts=(call,), id=message_id, session_id="a")
            record = ToolCallRecord(
                session_id="a", tool_call_id="call_0", tool_name="lookup", message_id=message_id, step=step
            )
            await store.begin_step(
                StepRecord(
                    session_id="a", interaction_id="i", step=step, message=message, tool_calls=(record,)
                )
            )
            if step == 1:
                await store.complete_tool_call(
                    "a", "call_0", message_id="m1", status="ok", output="first result", is_error=False,
                    started_at=0.0, finished_at=1.0,
                )  # fmt: skip
                await store.finish_step(
                    "a", step=1, interaction_id="i", tool_message=None, usage=_usage(), last_seq=1
                )
        history = await store.load_history("a", mark_interrupted=True)
        outputs = [m.tool_results[0].output for m in history if m.role == "tool"]
        assert outputs == ["first result", INTERRUPTED_OUTPUT]
        assert [r.status for r in await store.tool_calls("a")] == ["ok", "interrupted"]
    finally:
        await store.close()


def _usage() -> Any:
    from toolwire.messages import Usage

    return Usage()


async def test_malformed_input_is_a_typed_4xx_and_never_a_traceback(tmp_path: Path) -> None:
    deep = "[" * 500 + "]" * 500
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        json_headers = {"content-type": "application/json"}
        for path in ("/api/chat", "/api/sessions", "/api/sessions/x/messages"):
            response = await alice.post(path, content=deep, headers=json_headers)
            assert response.status_code == 400, (path, response.status_code)
        nested: Any = {"leaf": 1}
        for _ in range(500):
            nested = {"n": nested}
        tool_part = {
            "type": "tool-lookup",
            "toolCallId": "c",
            "state": "output-available",
            "input": {},
            "output": nested,
        }
        chat = {
            "id": "deep",
            "messages": [
                {"id": "a", "role": "assistant", "parts": [tool_part]},
                {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
            ],
        }
        assert (await alice.post("/api/chat", json=chat)).status_code == 400
        for n, cursor in enumerate(("١٢٣", "²", "12a", "-1", "9" * 40)):
            created = await alice.post("/api/sessions", json={"session_id": f"c{n}"})
            assert created.status_code == 201
            assert (await alice.get(f"/api/sessions/c{n}/events?after={cursor}")).status_code == 400, cursor
            response = await alice.get(
                f"/api/sessions/c{n}/events", headers={"last-event-id": cursor.encode()}
            )
            assert response.status_code == 400, cursor
        for query in ("limit=0", "limit=x", "limit=١", "cursor=nope", "cursor=1.5~"):
            assert (await alice.get(f"/api/sessions?{query}")).status_code == 400, query
        ws_url = server.ws_url("/api/sessions/w/ws", ALICE)
        for frame, code in ((b"\x00\x01binary", 1003), ("{not json", 1007), ("[" * 500 + "]" * 500, 1007)):
            async with websockets.connect(ws_url) as ws:
                await ws.send(frame)
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), 10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == code
    log = server.log_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]


async def test_sessions_are_listed_a_page_at_a_time_top_level_only(tmp_path: Path) -> None:
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        for n in range(7):
            assert (await alice.post("/api/sessions", json={"session_id": f"s{n}"})).status_code == 201
        assert (await alice.post("/api/sessions/s3/messages", json={"text": "delegate x"})).status_code == 202
        await _finish(alice, "s3")
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            query = "limit=3" + (f"&cursor={cursor}" if cursor else "")
            page = (await alice.get(f"/api/sessions?{query}")).json()
            seen += [s["session_id"] for s in page["sessions"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == [f"s{n}" for n in range(7)] and pages == 3
        assert seen[0] == "s3"  # most recently updated first


def test_finished_streams_release_their_memory() -> None:
    """A finished 5,000-delta turn no longer stays in memory until 10,000 other streams exist."""
    from toolwire.events import TextDeltaEvent

    hub = EventHub(buffer_bytes=200_000, retain_seconds=0.05)
    for seq in range(1, 5_001):
        hub.publish(TextDeltaEvent(session_id="done", seq=seq, id="t", delta="x" * 200, message_id="m"), 1)
    assert hub.held_bytes() <= 200_000 + 1_000  # the byte bound holds while the stream is live
    import time

    time.sleep(0.06)
    hub.sweep()
    assert hub.held_bytes() == 0
    # a client coming back with an old cursor is told to reload the history
    assert hub.subscribe(StreamKey("done", 1), after=12345)._subscriber.queue.get_nowait().event is None  # type: ignore[union-attr]


async def test_after_a_crash_the_history_shows_finished_results_and_interrupted_calls(tmp_path: Path) -> None:
    """The process died with two calls of one step in flight; one had finished. A restarted server serves
    the repaired history: the finished result as it was, the other call answered as interrupted, so the
    page and any client show both instead of a spinner, and the owner alone can read it."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'crashed.db'}"
    store = await open_store(url)
    try:
        await store.ensure_session(SessionInfo(id="crashed", user_id="alice"))
        await store.append_message("crashed", Message.user("two lookups", id="u"), interaction_id="i")
        calls = (
            ToolCallPart(tool_call_id="call_a", tool_name="lookup", args={"ticket": "T1"}),
            ToolCallPart(tool_call_id="call_b", tool_name="lookup", args={"ticket": "T2"}),
        )
        assistant = Message(role="assistant", parts=calls, id="a", session_id="crashed")
        records = tuple(
            ToolCallRecord(
                session_id="crashed", tool_call_id=c.tool_call_id, tool_name="lookup", message_id="a", step=1
            )
            for c in calls
        )
        await store.begin_step(
            StepRecord(
                session_id="crashed", interaction_id="i", step=1, message=assistant, tool_calls=records
            )
        )
        await store.complete_tool_call(
            "crashed", "call_a", message_id="a", status="ok", output="T1 is solved", is_error=False,
            started_at=0.0, finished_at=1.0,
        )  # fmt: skip
    finally:
        await store.close()  # the "crash": nothing else is written

    async with (
        serve(tmp_path, store_url=url) as server,
        server.client(ALICE) as alice,
        server.client("tok-mallory") as mallory,
    ):
        history = (await alice.get("/api/sessions/crashed/messages")).json()
        foreign = await mallory.get("/api/sessions/crashed/messages")
    assert foreign.status_code == 404
    assert history["running"] is False
    results = {
        part["tool_call_id"]: part
        for message in history["messages"]
        for part in message["parts"]
        if part.get("type") == "tool-result"
    }
    assert set(results) == {"call_a", "call_b"}
    assert results["call_a"]["output"] == "T1 is solved" and not results["call_a"].get("is_error")
    assert results["call_b"]["output"] == INTERRUPTED_OUTPUT and results["call_b"]["is_error"] is True


def test_a_finished_turn_keeps_its_text_about_once_not_delta_by_delta() -> None:
    """A 100 KB answer streamed as 5,000 deltas held ~33x its text in the in-process hub until the stream
    aged out (tracemalloc, with a subscriber that serialised every event); once the run ends its deltas are
    merged: a client resuming from before the turn gets the text whole, one resuming inside it is told to
    reload the history, and a live turn still replays delta by delta."""
    import gc
    import tracemalloc

    from toolwire.events import InteractionEnd, InteractionStart, TextDeltaEvent

    hub = EventHub()
    key = StreamKey("long", 1)
    # Only what this test and the hub allocate counts (other tests' threads may allocate meanwhile).
    ours = [
        tracemalloc.Filter(True, pattern, all_frames=True)
        for pattern in (__file__, "*/toolwire/server/hub.py", "*/toolwire/events.py")
    ]
    tracemalloc.start(8)
    try:
        subscription = hub.subscribe(key)
        before = hub.subscribe(key)._subscriber  # type: ignore[attr-defined]
        start_cursor = 0
        baseline = tracemalloc.take_snapshot().filter_traces(ours)
        hub.publish(InteractionStart(session_id="long", seq=1), 1)
        start_cursor = hub._streams[key].cursor
        for seq in range(2, 5_002):
            hub.publish(TextDeltaEvent(session_id="long", seq=seq, id="t", delta="x" * 20, message_id="m"), 1)
        middle = start_cursor + 2_500
        live = hub.subscribe(key, after=start_cursor)._subscriber  # type: ignore[attr-defined]
        assert live.queue.qsize() == 5_000  # a live turn: delta by delta
        hub.publish(InteractionEnd(session_id="long", seq=5_002, status="completed"), 1)
        while subscription.has_queued():
            subscription._subscriber.queue.get_nowait().as_dict()  # type: ignore[attr-defined]
        subscription.close()
        for queue in (before.queue, live.queue):
            while not queue.empty():
                queue.get_nowait()
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(ours)
        held = sum(stat.size_diff for stat in after.compare_to(baseline, "filename"))
    finally:
        tracemalloc.stop()
    assert held < 3 * 100_000, held
    assert hub.held_bytes() < 2 * 100_000

    resumed = hub.subscribe(key, after=start_cursor)._subscriber  # type: ignore[attr-defined]
    items = [resumed.queue.get_nowait() for _ in range(resumed.queue.qsize())]
    assert [type(i.event).__name__ for i in items] == ["TextDeltaEvent", "InteractionEnd"]
    assert items[0].event.delta == "x" * 100_000 and items[0].event.seq == 5_001
    inside = hub.subscribe(key, after=middle)._subscriber  # type: ignore[attr-defined]
    assert [i.event for i in (inside.queue.get_nowait() for _ in range(inside.queue.qsize()))] == [None]
