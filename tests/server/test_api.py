"""The server over real loopback HTTP: AI SDK stream, native events, resume, history, busy sessions, cancel."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import websockets

from toolwire import Agent, RunContext, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import EventHub, Limits, create_app
from toolwire.server.hub import StreamKey
from toolwire.store import MemoryStore

from .conftest import live_server, parse_sse, read_sse

SIGNATURE = {"google": {"thoughtSignature": "c2lnLWdlbWluaQ=="}}


def lookup(txn: str) -> dict[str, str]:
    """Look a transaction up."""
    return {"txn": txn, "status": "settled", "authorized_by": "Dana"}


def gemini_like_script() -> list[list[Any]]:
    return [
        [
            ToolCallPart(
                tool_call_id="c1", tool_name="lookup", args={"txn": "TXN_1"}, provider_metadata=SIGNATURE
            )
        ],
        [TextPart(text="TXN_1 is settled.")],
        [TextPart(text="Dana authorized it.")],
    ]


def ui_chunks(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["data"] for f in frames if f["data"] != "[DONE]"]


async def test_ai_sdk_chat_stream_shape_and_second_turn_keeps_provider_metadata() -> None:
    model = ScriptedModel(gemini_like_script())
    store = MemoryStore()
    app = create_app(Agent(model, tools=[lookup]), store=store)
    async with live_server(app) as server, server.client() as client:
        first_user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Status of TXN_1?"}]}
        body = {"id": "chat-1", "messages": [first_user], "trigger": "submit-message"}
        response = await client.post("/api/chat", json=body)
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = parse_sse(response.text)
        assert frames[-1]["data"] == "[DONE]"
        chunks = ui_chunks(frames)
        types = [c["type"] for c in chunks]
        assert types[0] == "start" and types[-1] == "finish"
        assert (
            types.index("tool-input-start")
            < types.index("tool-input-delta")
            < types.index("tool-input-available")
        )
        assert types.index("tool-input-available") < types.index("tool-output-available")
        assert types.count("start-step") == types.count("finish-step") == 2
        available = next(c for c in chunks if c["type"] == "tool-input-available")
        assert available["providerMetadata"] == SIGNATURE and available["input"] == {"txn": "TXN_1"}
        output = next(c for c in chunks if c["type"] == "tool-output-available")
        assert output["output"]["authorized_by"] == "Dana"
        assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "TXN_1 is settled."
        assert chunks[-1]["finishReason"] == "stop"

        # The client re-submits the whole conversation; the next model request carries the signature.
        assistant = {
            "id": chunks[0]["messageId"],
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "tool-lookup",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"txn": "TXN_1"},
                    "output": output["output"],
                    "callProviderMetadata": SIGNATURE,
                },
                {"type": "step-start"},
                {"type": "text", "text": "TXN_1 is settled.", "state": "done"},
            ],
        }
        second = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Who authorized it?"}]}
        body = {"id": "chat-1", "messages": [first_user, assistant, second], "trigger": "submit-message"}
        response = await client.post("/api/chat", json=body)
        assert response.status_code == 200
        assert "Dana authorized it." in "".join(
            c.get("delta", "") for c in ui_chunks(parse_sse(response.text))
        )
    sent = model.requests[-1].messages
    calls = [p for m in sent for p in m.tool_calls]
    assert [c.provider_metadata for c in calls] == [SIGNATURE]
    assert (
        len([m for m in sent if m.role == "user"]) == 2
    )  # stored history, not duplicated by the re-submission
    stored = await store.raw_messages("chat-1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant"]


async def test_conversation_unknown_to_the_store_is_seeded_from_the_client_messages() -> None:
    model = ScriptedModel([[TextPart(text="Dana did.")]])
    store = MemoryStore()
    app = create_app(Agent(model, tools=[lookup]), store=store)
    messages = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Status of TXN_1?"}]},
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "look it up"},
                {
                    "type": "tool-lookup",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"txn": "TXN_1"},
                    "output": {"status": "settled"},
                    "callProviderMetadata": SIGNATURE,
                },
                {
                    "type": "dynamic-tool",
                    "toolName": "audit",
                    "toolCallId": "c2",
                    "state": "output-error",
                    "input": {},
                    "errorText": "denied",
                },
                {"type": "step-start"},
                {"type": "text", "text": "Settled."},
            ],
        },
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Who authorized it?"}]},
    ]
    async with live_server(app) as server, server.client() as client:
        response = await client.post("/api/chat", json={"id": "imported", "messages": messages})
        assert response.status_code == 200, response.text
    sent = model.requests[0].messages
    roles = [m.role for m in sent if m.role != "system"]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    calls = {c.tool_call_id: c for m in sent for c in m.tool_calls}
    assert calls["c1"].provider_metadata == SIGNATURE
    results = {r.tool_call_id: r for m in sent for r in m.tool_results}
    assert results["c2"].is_error and results["c2"].output == "denied"
    assert results["c1"].output == {"status": "settled"}


async def test_client_version_decides_the_fields() -> None:
    titled = ToolCallPart(
        tool_call_id="c1", tool_name="lookup", args={"txn": "T"}, provider_metadata=SIGNATURE, title="Lookup"
    )

    async def chunks_for(version: str) -> list[dict[str, Any]]:
        model = ScriptedModel([[titled], [TextPart(text="ok")]])
        app = create_app(Agent(model, tools=[lookup]), store=MemoryStore())
        async with live_server(app) as server, server.client() as client:
            user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
            response = await client.post(
                "/api/chat",
                json={"id": "v", "messages": [user]},
                headers={"x-toolwire-ai-sdk-version": version},
            )
            return ui_chunks(parse_sse(response.text))

    def by_type(chunks: list[dict[str, Any]], kind: str) -> dict[str, Any]:
        return next(c for c in chunks if c["type"] == kind)

    old5 = await chunks_for("5.0.50")
    assert "finishReason" not in by_type(old5, "finish")
    assert "title" not in by_type(old5, "tool-input-start") and "title" not in by_type(
        old5, "tool-input-available"
    )
    assert by_type(old5, "tool-input-available")["providerMetadata"] == SIGNATURE
    assert "providerMetadata" not in by_type(old5, "tool-input-start")
    new5 = await chunks_for("5.0.200")
    assert by_type(new5, "finish")["finishReason"] == "stop"
    early6 = await chunks_for("6.0.38")
    assert by_type(early6, "tool-input-start")["title"] == "Lookup"
    assert "providerMetadata" not in by_type(early6, "tool-input-start")
    late6 = await chunks_for("6.0.39")
    assert by_type(late6, "tool-input-start")["providerMetadata"] == SIGNATURE


async def test_native_events_stream_resume_and_reset() -> None:
    model = ScriptedModel(gemini_like_script())
    app = create_app(Agent(model, tools=[lookup]), store=MemoryStore())
    async with live_server(app) as server, server.client() as client:
        history = (await client.get("/api/sessions/s1/messages")).status_code
        assert history == 404  # not created yet
        assert (await client.get("/api/sessions/s1/events")).status_code == 404
        posted = await client.post("/api/sessions/s1/messages", json={"text": "Status of TXN_1?"})
        assert posted.status_code == 202
        cursor = posted.json()["cursor"]
        async with client.stream("GET", f"/api/sessions/s1/events?after={cursor}") as events:
            assert events.status_code == 200
            frames = await read_sse(events, until=lambda f: f["data"].get("type") == "interaction-end")
        types = [f["data"]["type"] for f in frames]
        assert (
            types[0] == "interaction-start" and "user-turn-start" in types and types[-1] == "interaction-end"
        )
        cursors = [int(f["id"]) for f in frames]
        assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
        seqs = [f["data"]["seq"] for f in frames]
        assert seqs == sorted(seqs)

        # Resume from the middle: exactly the rest, in order.
        middle = cursors[len(cursors) // 2]
        async with client.stream(
            "GET", "/api/sessions/s1/events", headers={"last-event-id": str(middle)}
        ) as again:
            rest = await read_sse(again, until=lambda f: f["data"].get("type") == "interaction-end")
        assert [int(f["id"]) for f in rest] == [c for c in cursors if c > middle]

        # A cursor this process never issued (a restarted server's client): reload history.
        async with client.stream("GET", "/api/sessions/s1/events?after=5") as stale:
            reset = await read_sse(stale, until=lambda f: True)
        assert reset[0]["data"] == {"type": "stream-reset"}

        for _ in range(200):  # the run records its last seq just after publishing interaction-end
            body = (await client.get("/api/sessions/s1/messages")).json()
            if not body["running"]:
                break
            await asyncio.sleep(0.02)
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert body["last_seq"]["s1"] >= max(seqs)
        assert body["cursor"] == cursors[-1]
        listed = (await client.get("/api/sessions")).json()["sessions"]
        assert [s["session_id"] for s in listed] == ["s1"]


async def test_busy_session_is_rejected_and_cancel_stores_cancelled() -> None:
    started = asyncio.Event()

    async def slow(ctx: RunContext[Any]) -> str:
        """Takes long."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    model = ScriptedModel(
        [[ToolCallPart(tool_call_id="c1", tool_name="slow", args={})], [TextPart(text="x")]]
    )
    store = MemoryStore()
    app = create_app(Agent(model, tools=[slow]), store=store)
    async with live_server(app) as server, server.client() as client:
        assert (await client.post("/api/sessions/b/messages", json={"text": "go"})).status_code == 202
        await asyncio.wait_for(started.wait(), 10)
        busy = await client.post("/api/sessions/b/messages", json={"text": "again"})
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "session_busy"
        chat = await client.post(
            "/api/chat",
            json={"id": "b", "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]},
        )
        assert chat.status_code == 409
        cancelled = await client.post("/api/sessions/b/cancel")
        assert cancelled.json()["cancelled"] is True
    records = await store.tool_calls("b")
    assert [r.status for r in records] == ["cancelled"]
    history = await store.load_history("b")
    assert history[-1].role == "tool" and history[-1].tool_results[0].is_error


async def test_client_disconnect_mid_stream_leaves_the_run_running_and_stored() -> None:
    release = asyncio.Event()

    async def wait_a_bit() -> str:
        """Waits."""
        await release.wait()
        return "done waiting"

    model = ScriptedModel(
        [[ToolCallPart(tool_call_id="c1", tool_name="wait_a_bit", args={})], [TextPart(text="end")]]
    )
    store = MemoryStore()
    app = create_app(Agent(model, tools=[wait_a_bit]), store=store)
    async with live_server(app) as server:
        async with (
            server.client() as client,
            client.stream(
                "POST",
                "/api/chat",
                json={"id": "d", "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]},
            ) as response,
        ):
            await read_sse(
                response,
                until=lambda f: f["data"] != "[DONE]" and f["data"]["type"] == "tool-input-available",
            )
        # the client is gone; the tool finishes afterwards and the run completes and is stored
        release.set()
        for _ in range(200):
            if not server.app.state.toolwire.runs.running("d"):
                break
            await asyncio.sleep(0.02)
    history = await store.load_history("d")
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2].tool_results[0].output == "done waiting"


async def test_sub_agent_events_are_forwarded_in_order_even_thousands() -> None:
    long_text = "x" * 3000
    sub = Agent(
        ScriptedModel(
            [
                [ToolCallPart(tool_call_id="call_1", tool_name="lookup", args={"txn": "T9"})],
                [TextPart(text=long_text)],
            ],
            chunk_size=1,
        ),
        tools=[lookup],
        name="researcher",
    )
    main = Agent(
        ScriptedModel(
            [
                [ToolCallPart(tool_call_id="call_1", tool_name="researcher", args={"task": "find T9"})],
                [TextPart(text="Done.")],
            ]
        ),
        tools=[sub.as_tool("researcher", "Researches")],
    )
    store = MemoryStore()
    app = create_app(main, store=store)
    async with live_server(app) as server, server.client() as client:
        created = await client.post("/api/sessions", json={"session_id": "m"})
        assert created.status_code == 201
        async with client.stream("GET", "/api/sessions/m/events") as events:
            assert (await client.post("/api/sessions/m/messages", json={"text": "go"})).status_code == 202
            frames = await read_sse(
                events,
                until=lambda f: f["data"]["type"] == "interaction-end" and f["data"]["session_id"] == "m",
            )
        child = next(  # the sub-session's id is random: read it from its first event
            f["data"]["session_id"]
            for f in frames
            if f["data"]["type"] == "interaction-start" and f["data"].get("parent_session_id") == "m"
        )
        child_text = "".join(
            f["data"]["delta"]
            for f in frames
            if f["data"]["session_id"] == child and f["data"]["type"] == "text-delta"
        )
        assert child_text == long_text
        kinds = [(f["data"]["session_id"], f["data"]["type"]) for f in frames]
        active = kinds.index(("m", "tool-call-active"))
        complete = kinds.index(("m", "tool-call-complete"))
        inside = [k for k in kinds[active:complete] if k[0] == child]
        assert len(inside) > 3000
        assert all(f["data"]["parent_session_id"] == "m" for f in frames if f["data"]["session_id"] == child)

        # The child's own stream and the merged history both hold the sub-session.
        body = (await client.get("/api/sessions/m/messages")).json()
        assert body["parents"] == {child: "m"}
        sessions = {m["session_id"] for m in body["messages"]}
        assert sessions == {"m", child}
        listed = [s["session_id"] for s in (await client.get("/api/sessions")).json()["sessions"]]
        assert listed == ["m"]  # sub-sessions are not conversations of their own


async def test_websocket_carries_events_and_takes_messages() -> None:
    model = ScriptedModel(gemini_like_script())
    app = create_app(Agent(model, tools=[lookup]), store=MemoryStore())
    async with live_server(app) as server:
        ws_url = server.url.replace("http", "ws") + "/api/sessions/w/ws"
        async with websockets.connect(ws_url) as ws:
            await ws.send(json.dumps({"type": "user-message", "text": "Status?"}))
            seen: list[dict[str, Any]] = []
            async with asyncio.timeout(10):
                while True:
                    frame = json.loads(await ws.recv())
                    if "event" in frame:
                        seen.append(frame)
                        if frame["event"]["type"] == "interaction-end":
                            break
        types = [f["event"]["type"] for f in seen]
        assert types[0] == "interaction-start" and "tool-call-complete" in types
        assert all(isinstance(f["cursor"], int) for f in seen)


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/api/chat", b"{not json", 400),
        ("/api/chat", json.dumps({"id": "x", "messages": "no"}).encode(), 400),
        ("/api/chat", json.dumps({"id": "../etc", "messages": []}).encode(), 400),
        ("/api/chat", json.dumps({"id": "x", "messages": []}).encode(), 400),
        (
            "/api/chat",
            json.dumps({"id": "x", "messages": [{"role": "assistant", "parts": []}]}).encode(),
            400,
        ),
        ("/api/sessions/x/messages", json.dumps({"text": ""}).encode(), 400),
        ("/api/sessions/x/messages", json.dumps({"text": "y" * 600}).encode(), 413),
        ("/api/sessions/x/messages", b"x" * 5000, 413),
    ],
)
async def test_bad_requests_get_typed_errors(path: str, body: bytes, status: int) -> None:
    model = ScriptedModel([[TextPart(text="x")]])
    store = MemoryStore()
    limits = Limits(max_body_bytes=4000, max_prompt_chars=500, max_messages=10)
    app = create_app(Agent(model), store=store, limits=limits)
    async with live_server(app) as server, server.client() as client:
        response = await client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert set(error) == {"type", "message"} and error["message"]
    assert model.requests == [] and await store.list_sessions() == []


async def test_too_many_messages_is_413() -> None:
    app = create_app(Agent(ScriptedModel([])), store=MemoryStore(), limits=Limits(max_messages=3))
    user = {"role": "user", "parts": [{"type": "text", "text": "x"}]}
    async with live_server(app) as server, server.client() as client:
        response = await client.post("/api/chat", json={"id": "x", "messages": [user] * 4})
        assert response.status_code == 413


async def test_slow_subscriber_is_cut_off_with_a_reset_not_slowing_the_run() -> None:
    hub = EventHub(subscriber_limit=50)
    model = ScriptedModel([[TextPart(text="y" * 2000)]], chunk_size=1)
    store = MemoryStore()
    app = create_app(Agent(model), store=store, hub=hub)
    async with live_server(app) as server, server.client() as client:
        assert (await client.post("/api/sessions", json={"session_id": "slow"})).status_code == 201
        info = await store.get_session("slow")
        assert info is not None
        subscription = hub.subscribe(StreamKey("slow", info.incarnation))  # never read while the run goes
        assert (await client.post("/api/sessions/slow/messages", json={"text": "go"})).status_code == 202
        for _ in range(500):
            if not app.state.toolwire.runs.running("slow"):
                break
            await asyncio.sleep(0.01)
        assert not app.state.toolwire.runs.running("slow")
        items = [item async for item in subscription]
        assert len(items) == 51 and items[-1].event is None  # 50 buffered, then the reset marker
        body = (await client.get("/api/sessions/slow/messages")).json()
        assert body["messages"][-1]["parts"][0]["text"] == "y" * 2000


async def test_http_client_sees_index_page() -> None:
    app = create_app(Agent(ScriptedModel([])), store=MemoryStore())
    async with live_server(app) as server, httpx.AsyncClient(base_url=server.url) as client:
        response = await client.get("/")
        assert response.status_code == 200 and "<" in response.text
