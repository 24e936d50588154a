"""Paused runs with the real AI SDK chat client (``ai`` from npm, ``tests/server/node/hitl_client.mjs``).

ai@6 answers a call awaiting approval with ``addToolApprovalResponse`` (the server streamed a
``tool-approval-request``); ai@5 and ai@6 answer a client tool with ``addToolOutput`` from ``onToolCall``.
Either way the client re-submits the conversation ending with the assistant message, and the server
continues that message. The call carries Gemini metadata (a ``thoughtSignature``): the continuation
request the model gets must carry it, with the client's answer as the call's result.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.security.agents import browser_time_zone, refund
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.events import ToolCallAwaiting, ToolCallComplete
from toolwire.messages import ToolResultPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.server.ui_stream import LATEST, ClientFeatures, UIStreamEncoder
from toolwire.store import MemoryStore

from .conftest import live_server, parse_sse

NODE_DIR = Path(__file__).parent / "node"
SIGNATURE = {"google": {"thoughtSignature": "Q2lJQmNoZWNrc3VtLWhpdGw="}}
VERSIONS = {"ai6": None, "ai6strict": "6.0.230", "ai5": "5.0.200"}


def _script(name: str, args: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            TextPart(text="Let me do that."),
            ToolCallPart(tool_call_id="call_7", tool_name=name, args=args, provider_metadata=SIGNATURE),
        ],
        [TextPart(text="All done.")],
    ]


async def _drive(package: str, scenario: str, model: ScriptedModel) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    assert (NODE_DIR / "node_modules" / package).is_dir(), "run scripts/setup_node.sh"
    app = create_app(Agent(model, tools=[refund, browser_time_zone]), store=MemoryStore())
    version = VERSIONS[package]
    async with live_server(app) as server:
        args = [node, "hitl_client.mjs", package, server.url, scenario, *([version] if version else [])]
        process = await asyncio.create_subprocess_exec(
            *args, cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-3000:]
    seen: dict[str, Any] = json.loads(stdout)
    assert seen["error"] is None, seen["error"]
    assert seen["status"] == "ready"
    return seen


def _continuation_request(model: ScriptedModel, output: Any, *, is_error: bool) -> None:
    """The model's second request is the uninterrupted one: the first one's messages, then the call (text,
    signature and all) and the client's answer as its result."""
    assert len(model.requests) == 2
    first, second = model.requests
    assert second.tools == first.tools
    assert second.messages[: len(first.messages)] == first.messages
    assistant, results = second.messages[len(first.messages) :]
    assert assistant.role == "assistant" and assistant.text == "Let me do that."
    (call,) = assistant.tool_calls
    assert call.tool_call_id == "call_7"
    assert call.provider_metadata == SIGNATURE
    assert results.role == "tool"
    (result,) = results.parts
    assert isinstance(result, ToolResultPart)
    assert (result.tool_call_id, result.output, result.is_error) == ("call_7", output, is_error)


def _tool_part(message: dict[str, Any]) -> dict[str, Any]:
    parts = [p for p in message["parts"] if p["type"].startswith("tool-")]
    assert len(parts) == 1, parts
    return dict(parts[0])


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


@pytest.mark.parametrize("package", ["ai6", "ai6strict"])
@pytest.mark.parametrize("scenario", ["approve", "deny"])
async def test_approval_with_the_real_client(package: str, scenario: str) -> None:
    model = ScriptedModel(_script("refund", {"order": "A1"}))
    seen = await _drive(package, scenario, model)

    paused = _tool_part(seen["paused"][-1])
    assert paused["state"] == "approval-requested"
    assert paused["approval"] == {"id": "call_7"}
    assert paused["callProviderMetadata"] == SIGNATURE

    first, second = seen["requests"]
    assert first["messages"][-1]["role"] == "user"
    # the re-submission ends with the assistant message, its call answered
    answered = _tool_part(second["messages"][-1])
    assert second["messages"][-1]["role"] == "assistant"
    assert answered["state"] == "approval-responded"
    assert answered["approval"]["approved"] is (scenario == "approve")

    # one assistant message, continued: the same call, then the answer's outcome and the final text
    assert [m["role"] for m in seen["messages"]] == ["user", "assistant"]
    final = seen["messages"][-1]
    part = _tool_part(final)
    if scenario == "approve":
        assert part["state"] == "output-available" and part["output"] == "refunded A1"
        _continuation_request(model, "refunded A1", is_error=False)
    else:
        assert part["state"] == "output-denied"
        _continuation_request(model, "Tool call denied by the user: too large", is_error=True)
    assert part["callProviderMetadata"] == SIGNATURE
    assert _text(final) == "Let me do that.All done."


@pytest.mark.parametrize("package", ["ai6", "ai6strict", "ai5"])
@pytest.mark.parametrize("scenario", ["output", "output-error"])
async def test_client_tool_with_the_real_client(package: str, scenario: str) -> None:
    model = ScriptedModel(_script("browser_time_zone", {}))
    seen = await _drive(package, scenario, model)

    assert seen["toolCalls"] == ["browser_time_zone"]
    _, second = seen["requests"]
    answered = _tool_part(second["messages"][-1])
    assert second["messages"][-1]["role"] == "assistant"
    assert answered["state"] == ("output-available" if scenario == "output" else "output-error")

    assert [m["role"] for m in seen["messages"]] == ["user", "assistant"]
    final = seen["messages"][-1]
    part = _tool_part(final)
    assert part["callProviderMetadata"] == SIGNATURE
    assert _text(final) == "Let me do that.All done."
    if scenario == "output":
        assert part["output"] == {"timeZone": "Europe/Paris"}
        _continuation_request(model, {"timeZone": "Europe/Paris"}, is_error=False)
    else:
        assert part["errorText"] == "no clock in this client"
        _continuation_request(model, "no clock in this client", is_error=True)


def test_the_encoder_speaks_approvals_only_to_clients_that_know_them() -> None:
    awaiting = ToolCallAwaiting(session_id="s", tool_call_id="call_7", tool_name="refund", kind="approval")
    client_tool = ToolCallAwaiting(session_id="s", tool_call_id="call_8", tool_name="tz", kind="output")
    denied = ToolCallComplete(
        session_id="s", tool_call_id="call_7", tool_name="refund", output="no", is_error=True, status="denied"
    )
    chunks = {}
    for version in ((5, 0, 200), (6, 0, 0), (6, 0, 230), LATEST):
        encoder = UIStreamEncoder("s", "m", ClientFeatures.for_version(version))
        chunks[version] = [c for e in (awaiting, client_tool, denied) for c in encoder.encode(e)]
    assert chunks[(5, 0, 200)] == [{"type": "tool-output-error", "toolCallId": "call_7", "errorText": "no"}]
    for version in ((6, 0, 0), (6, 0, 230), LATEST):
        assert chunks[version] == [
            {"type": "tool-approval-request", "approvalId": "call_7", "toolCallId": "call_7"},
            {"type": "tool-output-denied", "toolCallId": "call_7"},
        ]


def _chat_chunks(raw: str) -> list[dict[str, Any]]:
    return [f["data"] for f in parse_sse(raw) if isinstance(f.get("data"), dict)]


async def test_a_resubmission_answers_only_what_the_store_awaits() -> None:
    """A replayed answer (the call was answered already), or an answer to a call that never waited, is
    refused with 409 and runs nothing; another conversation's id gets 404."""
    model = ScriptedModel(_script("refund", {"order": "A1"}))
    store = MemoryStore()
    app = create_app(Agent(model, tools=[refund, browser_time_zone]), store=store)
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Refund A1"}]}
    call = {"type": "tool-refund", "toolCallId": "call_7", "input": {"order": "A1"}}
    approved = {
        "id": "a1",
        "role": "assistant",
        "parts": [{**call, "state": "approval-responded", "approval": {"id": "call_7", "approved": True}}],
    }
    other = {
        "id": "a1",
        "role": "assistant",
        "parts": [{**call, "toolCallId": "call_9", "state": "output-available", "output": "x"}],
    }
    async with live_server(app) as server, server.client() as client:
        first = await client.post("/api/chat", json={"id": "c1", "messages": [user]})
        assert {"type": "tool-approval-request", "approvalId": "call_7", "toolCallId": "call_7"} in (
            _chat_chunks(first.text)
        )
        refused = await client.post("/api/chat", json={"id": "c1", "messages": [user, other]})
        assert refused.status_code == 409 and refused.json()["error"]["type"] == "not_awaited"
        nobody = await client.post("/api/chat", json={"id": "c2", "messages": [user, approved]})
        assert nobody.status_code == 404
        assert len(model.requests) == 1

        resumed = await client.post("/api/chat", json={"id": "c1", "messages": [user, approved]})
        chunks = _chat_chunks(resumed.text)
        assert chunks[0] == {"type": "start", "messageId": "a1"}  # the same assistant message, continued
        assert {"type": "tool-output-available", "toolCallId": "call_7", "output": "refunded A1"} in chunks
        replay = await client.post("/api/chat", json={"id": "c1", "messages": [user, approved]})
        assert replay.status_code == 409
        assert len(model.requests) == 2
