"""One conversation, any door (issue 29 item 5): a run started through one protocol and paused for an
approval is answered through another, all on one live server, and the stored history is the same
whichever doors were used: the user's prompt, the call, its result, the answer, all of one owner."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from tests.server.mcp_agents import build
from tests.server.test_mcp_server import TOKENS, http_session
from toolwire.server import create_app
from toolwire.store import MemoryStore, Store

from .conftest import LiveServer, live_server, parse_sse

Door = Callable[[LiveServer, httpx.AsyncClient, str, str], Awaitable[None]]


async def _settled(server: LiveServer, session_id: str, *, answered: bool) -> None:
    """Wait (with a deadline) until the session's run ended: paused, or answered with the last message."""
    toolwire = server.app.state.toolwire
    store: Store = await toolwire.store()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not toolwire.runs.running(session_id) and not await store.run_in_progress(session_id):
            messages = await store.raw_messages(session_id)
            calls = await store.tool_calls(session_id)
            done = bool(messages) and messages[-1].role == "assistant" and bool(messages[-1].text)
            waiting = any(c.awaiting is not None for c in calls)
            if (answered and done) or (not answered and waiting):
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"session {session_id} did not settle")


async def post_ag_ui(
    http: httpx.AsyncClient, session_id: str, *, prompt: str | None = None, resume: list[Any] | None = None
) -> httpx.Response:
    """``POST /api/ag-ui``: a run of the thread with ``prompt`` as the user's new message (``runId`` r1), or
    one answering its interrupts with ``resume`` (r2)."""
    body: dict[str, Any]
    if prompt is not None:
        body = {
            "threadId": session_id,
            "runId": "r1",
            "messages": [{"id": "m1", "role": "user", "content": prompt}],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
    else:
        body = {"threadId": session_id, "runId": "r2", "messages": [], "resume": resume or []}
    return await http.post("/api/ag-ui", json=body)


async def send_a2a(
    server: LiveServer, http: httpx.AsyncClient, session_id: str, part: dict[str, Any], *, answering: bool
) -> httpx.Response:
    """A2A ``message/send`` of one part in the conversation's context (``answering``: to its turn's task,
    named by the turn's first stored message)."""
    message = {"role": "user", "messageId": "m2" if answering else "m1", "contextId": session_id}
    if answering:
        stored = await (await server.app.state.toolwire.store()).raw_messages(session_id)
        message["taskId"] = f"{session_id}/{stored[0].id}"
    message["parts"] = [part]
    rpc = {
        "jsonrpc": "2.0",
        "id": 2 if answering else 1,
        "method": "message/send",
        "params": {"message": message},
    }
    return await http.post("/a2a", json=rpc)


# -- starting a turn that pauses ---------------------------------------------------------------------


async def start_ai_sdk(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    user = {"id": f"u-{session_id}", "role": "user", "parts": [{"type": "text", "text": f"refund {order}"}]}
    response = await http.post("/api/chat", json={"id": session_id, "messages": [user]})
    assert response.status_code == 200, response.text
    chunks = [f["data"] for f in parse_sse(response.text) if isinstance(f.get("data"), dict)]
    assert {"type": "tool-approval-request", "approvalId": "call_r", "toolCallId": "call_r"} in chunks


async def start_native(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    response = await http.post(f"/api/sessions/{session_id}/messages", json={"text": f"refund {order}"})
    assert response.status_code == 202, response.text


async def start_ag_ui(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    response = await post_ag_ui(http, session_id, prompt=f"refund {order}")
    assert response.status_code == 200, response.text
    finished = [f["data"] for f in parse_sse(response.text) if f["data"]["type"] == "RUN_FINISHED"]
    assert finished[0]["outcome"]["type"] == "interrupt"


async def start_a2a(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    response = await send_a2a(
        server, http, session_id, {"kind": "text", "text": f"refund {order}"}, answering=False
    )
    assert response.json()["result"]["status"]["state"] == "input-required", response.text


async def start_mcp(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    async with http_session(server, "tok-alice") as session:  # a host without elicitation
        result = await session.call_tool("support", {"prompt": f"refund {order}", "session_id": session_id})
    assert result.structured_content is not None and result.structured_content["status"] == "paused"


# -- answering it through another door ---------------------------------------------------------------


async def answer_native(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    response = await http.post(f"/api/sessions/{session_id}/messages", json={"approvals": {"call_r": True}})
    assert response.status_code == 202, response.text


async def answer_ai_sdk(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    # What useChat holds after loading the conversation: the stored ids, the call approved.
    stored = await (await server.app.state.toolwire.store()).raw_messages(session_id)
    user = {"id": stored[0].id, "role": "user", "parts": [{"type": "text", "text": stored[0].text}]}
    part = {
        "type": "tool-refund",
        "toolCallId": "call_r",
        "input": {"order": order},
        "state": "approval-responded",
        "approval": {"id": "call_r", "approved": True},
    }
    assistant = {"id": stored[1].id, "role": "assistant", "parts": [part]}
    response = await http.post("/api/chat", json={"id": session_id, "messages": [user, assistant]})
    assert response.status_code == 200, response.text


async def answer_a2a(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    response = await send_a2a(
        server, http, session_id, {"kind": "data", "data": {"approvals": {"call_r": True}}}, answering=True
    )
    assert response.json()["result"]["status"]["state"] == "completed", response.text


async def answer_ag_ui(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    response = await post_ag_ui(
        http,
        session_id,
        resume=[{"interruptId": "call_r", "status": "resolved", "payload": {"approved": True}}],
    )
    assert response.status_code == 200, response.text
    finished = [f["data"] for f in parse_sse(response.text) if f["data"]["type"] == "RUN_FINISHED"]
    assert finished[0]["outcome"] == {"type": "success"}


async def answer_mcp(server: LiveServer, http: httpx.AsyncClient, session_id: str, order: str) -> None:
    async with http_session(server, "tok-alice") as session:
        result = await session.call_tool("support", {"session_id": session_id, "approvals": {"call_r": True}})
    assert result.structured_content is not None and result.structured_content["status"] == "completed"


PAIRS: list[tuple[str, Door, Door]] = [
    ("ai-sdk-to-native", start_ai_sdk, answer_native),
    ("native-to-a2a", start_native, answer_a2a),
    ("ag-ui-to-mcp", start_ag_ui, answer_mcp),
    ("mcp-to-native", start_mcp, answer_native),
    ("a2a-to-ag-ui", start_a2a, answer_ag_ui),
    ("native-to-ai-sdk", start_native, answer_ai_sdk),
    ("mcp-to-a2a", start_mcp, answer_a2a),
]


async def test_a_paused_run_started_through_one_door_is_answered_through_another() -> None:
    app = create_app(build(), store=MemoryStore(), tokens=TOKENS)
    histories: dict[str, list[tuple[str, str]]] = {}
    async with (
        live_server(app) as server,
        server.client("tok-alice") as http,
    ):
        store: Store = await app.state.toolwire.store()
        for number, (name, start, answer) in enumerate(PAIRS):
            session_id, order = f"door-{name}", f"A{number}"
            await start(server, http, session_id, order)
            await _settled(server, session_id, answered=False)
            await answer(server, http, session_id, order)
            await _settled(server, session_id, answered=True)
            info = await store.get_session(session_id)
            assert info is not None and info.user_id == "alice", name
            calls = await store.tool_calls(session_id)
            assert [(c.tool_name, c.status, c.args) for c in calls] == [("refund", "ok", {"order": order})], (
                name
            )
            histories[name] = [(m.role, _content(m)) for m in await store.raw_messages(session_id)]
    for number, (name, _, _) in enumerate(PAIRS):
        order = f"A{number}"
        assert histories[name] == [
            ("user", f"refund {order}"),
            ("assistant", f"refund {json.dumps({'order': order})}"),
            ("tool", f"refunded {order}"),
            ("assistant", f"answered: refunded {order}"),
        ], name


def _content(message: Any) -> str:
    if message.role == "assistant" and message.tool_calls:
        return " ".join(f"{c.tool_name} {json.dumps(c.args)}" for c in message.tool_calls)
    if message.role == "tool":
        return " ".join(str(r.output) for r in message.tool_results)
    return str(message.text)
