"""A run held at a usage limit (``UsageLimits(pause=True)``, issue 26 item 5) is answered through any door that
answers approvals: each shows the hold as an approval of ``toolwire:usage_limit`` (its args: which limit, what
it allows, what going on would make it), and approving goes on from the stored history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from tests.server.test_any_door import Door, _settled, post_ag_ui, send_a2a
from tests.server.test_mcp_server import TOKENS, http_session
from toolwire import Agent, TextPart, ToolCallPart, UsageLimits
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore, Store
from toolwire.store.records import USAGE_LIMIT_TOOL

from .conftest import LiveServer, live_server, parse_sse


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def _respond(request: ModelRequest) -> Sequence[Part]:
    """Three lookups, then the answer; the limit (two requests a run) holds the run before the third."""
    n = sum(1 for m in request.messages if m.role == "assistant")
    if n < 3:
        return [ToolCallPart(tool_call_id=f"c{n}", tool_name="lookup", args={"key": f"k{n}"})]
    return [TextPart(text="looked up three")]


async def _held(server: LiveServer, session_id: str) -> str:
    [pending] = await server.app.state.toolwire.agent.pending(session_id, user_id="alice")
    assert pending.tool_name == USAGE_LIMIT_TOOL and pending.args["limit"] == "requests"
    return pending.tool_call_id


async def start_native(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    response = await http.post(f"/api/sessions/{session_id}/messages", json={"text": "look up three"})
    assert response.status_code == 202, response.text


async def start_ai_sdk(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    user = {"id": f"u-{session_id}", "role": "user", "parts": [{"type": "text", "text": "look up three"}]}
    response = await http.post("/api/chat", json={"id": session_id, "messages": [user]})
    assert response.status_code == 200, response.text
    chunks = [f["data"] for f in parse_sse(response.text) if isinstance(f.get("data"), dict)]
    held = await _held(server, session_id)
    part = next(c for c in chunks if c.get("toolCallId") == held and c["type"] == "tool-input-available")
    assert part["dynamic"] is True and part["toolName"] == USAGE_LIMIT_TOOL and part["input"]["allowed"] == 2
    assert {"type": "tool-approval-request", "approvalId": held, "toolCallId": held} in chunks


async def answer_native(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    held = await _held(server, session_id)
    response = await http.post(f"/api/sessions/{session_id}/messages", json={"approvals": {held: True}})
    assert response.status_code == 202, response.text


async def answer_ai_sdk(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    held = await _held(server, session_id)
    store: Store = await server.app.state.toolwire.store()
    stored = await store.raw_messages(session_id)
    user = {"id": stored[0].id, "role": "user", "parts": [{"type": "text", "text": stored[0].text}]}
    [row] = [r for r in await store.tool_calls(session_id) if r.tool_call_id == held]
    part = {
        "type": "dynamic-tool",
        "toolName": USAGE_LIMIT_TOOL,
        "toolCallId": held,
        "input": row.args,
        "state": "approval-responded",
        "approval": {"id": held, "approved": True},
    }
    assistant = {"id": stored[1].id, "role": "assistant", "parts": [part]}
    response = await http.post("/api/chat", json={"id": session_id, "messages": [user, assistant]})
    assert response.status_code == 200, response.text


async def answer_ag_ui(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    held = await _held(server, session_id)
    response = await post_ag_ui(
        http, session_id, resume=[{"interruptId": held, "status": "resolved", "payload": {"approved": True}}]
    )
    assert response.status_code == 200, response.text


async def answer_a2a(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    held = await _held(server, session_id)
    response = await send_a2a(
        server, http, session_id, {"kind": "data", "data": {"approvals": {held: True}}}, answering=True
    )
    assert response.json()["result"]["status"]["state"] == "completed", response.text


async def answer_mcp(server: LiveServer, http: httpx.AsyncClient, session_id: str, _: str) -> None:
    held = await _held(server, session_id)
    async with http_session(server, "tok-alice") as session:
        result = await session.call_tool("support", {"session_id": session_id, "approvals": {held: True}})
    assert result.structured_content is not None and result.structured_content["status"] == "completed"


PAIRS: list[tuple[str, Door, Door]] = [
    ("native-to-native", start_native, answer_native),
    ("ai-sdk-to-ai-sdk", start_ai_sdk, answer_ai_sdk),
    ("native-to-ag-ui", start_native, answer_ag_ui),
    ("ai-sdk-to-a2a", start_ai_sdk, answer_a2a),
    ("native-to-mcp", start_native, answer_mcp),
]


async def test_a_run_held_at_a_limit_is_extended_through_any_door() -> None:
    agent: Agent[Any] = Agent(
        ScriptedModel(_respond),
        tools=[lookup],
        name="support",
        usage_limits=UsageLimits(requests=2, pause=True),
    )
    app = create_app(agent, store=MemoryStore(), tokens=TOKENS)
    async with live_server(app) as server, server.client("tok-alice") as http:
        store: Store = await app.state.toolwire.store()
        for name, start, answer in PAIRS:
            session_id = f"limit-{name}"
            await start(server, http, session_id, "")
            await _settled(server, session_id, answered=False)
            await answer(server, http, session_id, "")
            await _settled(server, session_id, answered=True)
            messages = await store.raw_messages(session_id)
            assert messages[-1].text == "looked up three", name
            rows = [(r.tool_name, r.status) for r in await store.tool_calls(session_id)]
            assert rows == [
                ("lookup", "ok"),
                ("lookup", "ok"),
                (USAGE_LIMIT_TOOL, "ok"),
                ("lookup", "ok"),
            ], name
