"""A question an MCP tool asks (issue 29 item 4: elicitation as a durable pause), answered through any door:
a live server whose agent calls the test MCP server's ``book`` (the SDK's server over stdio, which asks
"When, and for how many, at PLACE?"). Each door shows the question in its own terms and takes the answer
like a client tool's output; the stored history is the same whichever doors were used."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from mcp.types import ElicitResult

from tests.server.test_any_door import Door, _content, _settled, post_ag_ui, send_a2a
from tests.server.test_mcp_server import TOKENS, http_session
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore, Store
from toolwire.tools.mcp import MCPServerStdio

from .conftest import LiveServer, live_server, parse_sse

MCP_SERVER = Path(__file__).parents[1] / "tools" / "_mcp_server.py"
QUESTION = "When, and for how many, at {place}?"


def _respond(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "tool":
        [result] = last.tool_results
        output = result.output["result"] if isinstance(result.output, dict) else result.output
        return [TextPart(text=f"answered: {output}")]
    place = (last.text or "").removeprefix("book ")
    return [ToolCallPart(tool_call_id="call_b", tool_name="book", args={"place": place})]


def _answer(place: str) -> dict[str, Any]:
    return {"date": f"{place}-day", "seats": len(place)}


# -- starting a turn whose tool asks, and seeing the question through that door --------------------------


async def start_native(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    response = await http.post(f"/api/sessions/{session_id}/messages", json={"text": f"book {place}"})
    assert response.status_code == 202, response.text
    await _settled(server, session_id, answered=False)
    shown = await http.get(f"/api/sessions/{session_id}/messages")
    [pending] = shown.json()["awaiting"]
    assert pending["kind"] == "input" and pending["question"]["message"] == QUESTION.format(place=place)


async def start_ai_sdk(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    user = {"id": f"u-{session_id}", "role": "user", "parts": [{"type": "text", "text": f"book {place}"}]}
    response = await http.post("/api/chat", json={"id": session_id, "messages": [user]})
    assert response.status_code == 200, response.text
    chunks = [f["data"] for f in parse_sse(response.text) if isinstance(f.get("data"), dict)]
    [asked] = [c for c in chunks if c["type"] == "data-tool-question"]
    assert asked["data"]["toolCallId"] == "call_b"
    assert asked["data"]["question"]["message"] == QUESTION.format(place=place)


async def start_ag_ui(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    response = await post_ag_ui(http, session_id, prompt=f"book {place}")
    assert response.status_code == 200, response.text
    [finished] = [f["data"] for f in parse_sse(response.text) if f["data"]["type"] == "RUN_FINISHED"]
    [interrupt] = finished["outcome"]["interrupts"]
    assert (interrupt["id"], interrupt["reason"]) == ("call_b", "input")
    assert interrupt["message"] == QUESTION.format(place=place)
    assert set(interrupt["responseSchema"]["properties"]) == {"date", "seats"}


async def start_a2a(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    response = await send_a2a(
        server, http, session_id, {"kind": "text", "text": f"book {place}"}, answering=False
    )
    status = response.json()["result"]["status"]
    assert status["state"] == "input-required", response.text
    [awaiting] = status["message"]["parts"][1]["data"]["awaiting"]
    assert awaiting["question"]["message"] == QUESTION.format(place=place)


async def start_mcp(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    async with http_session(server, "tok-alice") as session:  # a host without elicitation
        result = await session.call_tool("support", {"prompt": f"book {place}", "session_id": session_id})
    assert result.structured_content is not None and result.structured_content["status"] == "paused"
    [awaiting] = result.structured_content["awaiting"]
    assert awaiting["question"]["message"] == QUESTION.format(place=place)


# -- answering it through another door -----------------------------------------------------------------


async def answer_native(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    response = await http.post(
        f"/api/sessions/{session_id}/messages", json={"tool_outputs": {"call_b": _answer(place)}}
    )
    assert response.status_code == 202, response.text


async def answer_ai_sdk(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    stored = await (await server.app.state.toolwire.store()).raw_messages(session_id)
    user = {"id": stored[0].id, "role": "user", "parts": [{"type": "text", "text": stored[0].text}]}
    part = {
        "type": "tool-book",
        "toolCallId": "call_b",
        "input": {"place": place},
        "state": "output-available",
        "output": _answer(place),
    }
    assistant = {"id": stored[1].id, "role": "assistant", "parts": [part]}
    response = await http.post("/api/chat", json={"id": session_id, "messages": [user, assistant]})
    assert response.status_code == 200, response.text


async def answer_ag_ui(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    response = await post_ag_ui(
        http, session_id, resume=[{"interruptId": "call_b", "status": "resolved", "payload": _answer(place)}]
    )
    assert response.status_code == 200, response.text
    [finished] = [f["data"] for f in parse_sse(response.text) if f["data"]["type"] == "RUN_FINISHED"]
    assert finished["outcome"] == {"type": "success"}


async def answer_a2a(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    response = await send_a2a(
        server,
        http,
        session_id,
        {"kind": "data", "data": {"tool_outputs": {"call_b": _answer(place)}}},
        answering=True,
    )
    assert response.json()["result"]["status"]["state"] == "completed", response.text


async def answer_mcp(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    async with http_session(server, "tok-alice") as session:
        result = await session.call_tool(
            "support", {"session_id": session_id, "tool_outputs": {"call_b": _answer(place)}}
        )
    assert result.structured_content is not None and result.structured_content["status"] == "completed"


async def ask_the_mcp_host(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    """A host with elicitation is asked the tool's own question, form and all, and the turn completes in
    one call."""
    asked: list[Any] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content=_answer(place))

    async with http_session(server, "tok-alice", elicit=elicit) as session:
        result = await session.call_tool("support", {"prompt": f"book {place}", "session_id": session_id})
    assert result.structured_content is not None and result.structured_content["status"] == "completed"
    [params] = asked
    assert params.message == QUESTION.format(place=place)
    assert set(params.requested_schema["properties"]) == {"date", "seats"}


async def nothing(server: LiveServer, http: httpx.AsyncClient, session_id: str, place: str) -> None:
    """The door that started the turn answered it too."""


PAIRS: list[tuple[str, Door, Door]] = [
    ("native-to-ai-sdk", start_native, answer_ai_sdk),
    ("ai-sdk-to-ag-ui", start_ai_sdk, answer_ag_ui),
    ("ag-ui-to-a2a", start_ag_ui, answer_a2a),
    ("a2a-to-mcp", start_a2a, answer_mcp),
    ("mcp-to-native", start_mcp, answer_native),
    ("mcp-host-with-elicitation", ask_the_mcp_host, nothing),
]


async def test_a_tools_question_is_shown_and_answered_through_any_door() -> None:
    source = MCPServerStdio(sys.executable, [str(MCP_SERVER), "stdio"], timeout=20)
    agent = Agent(ScriptedModel(_respond), tools=[source], name="support")
    app = create_app(agent, store=MemoryStore(), tokens=TOKENS)
    histories: dict[str, list[tuple[str, str]]] = {}
    try:
        async with live_server(app) as server, server.client("tok-alice") as http:
            store: Store = await app.state.toolwire.store()
            for name, start, answer in PAIRS:
                session_id, place = f"asked-{name}", name.split("-")[0].capitalize()
                await start(server, http, session_id, place)
                await answer(server, http, session_id, place)
                await _settled(server, session_id, answered=True)
                calls = await store.tool_calls(session_id)
                assert [(c.tool_name, c.status) for c in calls] == [("book", "ok")], name
                histories[name] = [(m.role, _content(m)) for m in await store.raw_messages(session_id)]
                info = await store.get_session(session_id)
                assert info is not None and info.user_id == "alice", name
    finally:
        await source.aclose()
    for name, _, _ in PAIRS:
        place = name.split("-")[0].capitalize()
        booked = f"booked {place} on {place}-day for {len(place)}"
        assert histories[name] == [
            ("user", f"book {place}"),
            ("assistant", f"book {json.dumps({'place': place})}"),
            ("tool", str({"result": booked})),
            ("assistant", f"answered: {booked}"),
        ], name
