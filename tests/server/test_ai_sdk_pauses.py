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
from toolwire.server.ui_messages import ui_messages_to_history
from toolwire.server.ui_stream import LATEST, ClientFeatures, UIStreamEncoder
from toolwire.store import MemoryStore

from .conftest import live_server, parse_sse

NODE_DIR = Path(__file__).parent / "node"
SIGNATURE = {"google": {"thoughtSignature": "Q2lJQmNoZWNrc3VtLWhpdGw="}}
VERSIONS = {"ai6": None, "ai6strict": "6.0.230", "ai5": "5.0.200"}


def _script(
    name: str,
    args: dict[str, Any],
    *,
    call_id: str = "call_7",
    texts: tuple[str, str] = ("Let me do that.", "All done."),
    metadata: dict[str, Any] = SIGNATURE,
) -> list[list[Any]]:
    """A Gemini-signed call after a text, then a final text."""
    return [
        [
            TextPart(text=texts[0]),
            ToolCallPart(tool_call_id=call_id, tool_name=name, args=args, provider_metadata=metadata),
        ],
        [TextPart(text=texts[1])],
    ]


async def _drive(
    package: str, scenario: str, model: ScriptedModel, agent: Agent[Any] | None = None
) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    assert (NODE_DIR / "node_modules" / package).is_dir(), "run scripts/setup_node.sh"
    app = create_app(agent or Agent(model, tools=[refund, browser_time_zone]), store=MemoryStore())
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


# -- a sub-agent's waiting call, answered from useChat ---------------------------------------------------

PARENT_SIGNATURE = {"google": {"thoughtSignature": "cGFyZW50LXNpZ25hdHVyZQ=="}}


def _sub_agent_setup(name: str, args: dict[str, Any]) -> tuple[Agent[Any], ScriptedModel, ScriptedModel]:
    """A chat agent whose ``helper`` sub-agent makes the call that waits (both calls Gemini-signed)."""
    helper_model = ScriptedModel(_script(name, args))
    helper = Agent(helper_model, name="helper", tools=[refund, browser_time_zone])
    chat_model = ScriptedModel(
        _script(
            "helper",
            {"task": "do it"},
            call_id="call_1",
            texts=("Asking the helper.", "The helper is done."),
            metadata=PARENT_SIGNATURE,
        )
    )
    agent = Agent(chat_model, tools=[helper.as_tool("helper", "A helper agent.")])
    return agent, chat_model, helper_model


def _sub_part(message: dict[str, Any]) -> dict[str, Any]:
    parts = [p for p in message["parts"] if p["type"] == "dynamic-tool"]
    assert len(parts) == 1, message["parts"]
    return dict(parts[0])


def _chat_continued(chat_model: ScriptedModel, helper_output: str) -> None:
    """The chat model's second request carries its own call (signature and all) and the helper's answer."""
    assert len(chat_model.requests) == 2
    first, second = chat_model.requests
    assert second.messages[: len(first.messages)] == first.messages
    assistant, results = second.messages[len(first.messages) :]
    (call,) = assistant.tool_calls
    assert (call.tool_call_id, call.tool_name, call.provider_metadata) == (
        "call_1",
        "helper",
        PARENT_SIGNATURE,
    )
    (result,) = results.parts
    assert isinstance(result, ToolResultPart)
    assert (result.tool_call_id, result.output, result.is_error) == ("call_1", helper_output, False)


def _one_assistant_message(seen: dict[str, Any], sub_state: str) -> dict[str, Any]:
    """The whole exchange is one assistant message: the caller's call (answered by the helper), the
    sub-agent's call in a step of its own, then the final text."""
    assert [m["role"] for m in seen["messages"]] == ["user", "assistant"]
    final = seen["messages"][-1]
    (helper_part,) = [p for p in final["parts"] if p["type"] == "tool-helper"]
    assert helper_part["state"] == "output-available" and helper_part["output"] == "All done."
    assert helper_part["callProviderMetadata"] == PARENT_SIGNATURE
    sub = _sub_part(final)
    assert sub["state"] == sub_state
    assert _text(final) == "Asking the helper.The helper is done."
    return sub


@pytest.mark.parametrize("package", ["ai6", "ai6strict"])
@pytest.mark.parametrize("scenario", ["approve", "deny"])
async def test_a_sub_agents_approval_with_the_real_client(package: str, scenario: str) -> None:
    agent, chat_model, helper_model = _sub_agent_setup("refund", {"order": "A1"})
    seen = await _drive(package, scenario, chat_model, agent)

    paused = seen["paused"][-1]
    (helper_part,) = [p for p in paused["parts"] if p["type"] == "tool-helper"]
    assert helper_part["state"] == "input-available"  # waits for its sub-agent
    sub = _sub_part(paused)
    session, _, call_id = sub["toolCallId"].partition("/")
    assert session.startswith(f"{seen['chatId']}.sub_") and call_id == "call_7"
    assert (sub["toolName"], sub["input"], sub["state"]) == ("refund", {"order": "A1"}, "approval-requested")
    # its own step, so lastAssistantMessageIsCompleteWithApprovalResponses judges it alone
    types = [p["type"] for p in paused["parts"]]
    assert types.index("tool-helper") < max(i for i, t in enumerate(types) if t == "step-start")
    assert types.index("dynamic-tool") > max(i for i, t in enumerate(types) if t == "step-start")

    _, second = seen["requests"]
    assert second["messages"][-1]["role"] == "assistant"
    assert _sub_part(second["messages"][-1])["state"] == "approval-responded"

    if scenario == "approve":
        sub = _one_assistant_message(seen, "output-available")
        assert sub["output"] == "refunded A1"
        _continuation_request(helper_model, "refunded A1", is_error=False)
    else:
        _one_assistant_message(seen, "output-denied")
        _continuation_request(helper_model, "Tool call denied by the user: too large", is_error=True)
    _chat_continued(chat_model, "All done.")


@pytest.mark.parametrize("package", ["ai6", "ai6strict", "ai5"])
async def test_a_sub_agents_client_tool_with_the_real_client(package: str) -> None:
    agent, chat_model, helper_model = _sub_agent_setup("browser_time_zone", {})
    seen = await _drive(package, "output", chat_model, agent)

    assert seen["toolCalls"] == ["helper", "browser_time_zone"]
    sub = _one_assistant_message(seen, "output-available")
    assert sub["output"] == {"timeZone": "Europe/Paris"}
    _continuation_request(helper_model, {"timeZone": "Europe/Paris"}, is_error=False)
    _chat_continued(chat_model, "All done.")


async def test_sub_agent_answers_reach_only_calls_the_tree_awaits() -> None:
    """A re-submission naming a sub-session call that does not wait (a guessed or another chat's session)
    answers nothing: 409, nothing runs."""
    agent, chat_model, helper_model = _sub_agent_setup("refund", {"order": "A1"})
    app = create_app(agent, store=MemoryStore())
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Refund A1"}]}
    async with live_server(app) as server, server.client() as client:
        first = _chat_chunks((await client.post("/api/chat", json={"id": "c1", "messages": [user]})).text)
        (request,) = [c for c in first if c["type"] == "tool-approval-request"]
        surfaced = request["toolCallId"]
        assert surfaced.startswith("c1.sub_") and surfaced.endswith("/call_7")

        def answer(call_id: str) -> dict[str, Any]:
            part = {
                "type": "dynamic-tool",
                "toolName": "refund",
                "toolCallId": call_id,
                "input": {"order": "A1"},
                "state": "approval-responded",
                "approval": {"id": call_id, "approved": True},
            }
            return {"id": "a1", "role": "assistant", "parts": [part]}

        for wrong in ("c1.sub_0000000000000000/call_7", "call_7", surfaced.replace("call_7", "call_8")):
            refused = await client.post("/api/chat", json={"id": "c1", "messages": [user, answer(wrong)]})
            assert refused.status_code == 409, (wrong, refused.text)
        assert len(helper_model.requests) == 1
        resumed = _chat_chunks(
            (await client.post("/api/chat", json={"id": "c1", "messages": [user, answer(surfaced)]})).text
        )
        assert {
            "type": "tool-output-available",
            "toolCallId": surfaced,
            "output": "refunded A1",
            "dynamic": True,
        } in resumed
        assert resumed[-1]["type"] == "finish"
        assert len(helper_model.requests) == len(chat_model.requests) == 2


def test_an_imported_conversation_leaves_surfaced_sub_agent_calls_to_their_session() -> None:
    """A client's copy of a sub-agent's surfaced call is not the chat's own call: importing the
    conversation keeps the caller's call and drops the surfaced one (it is no call of this session)."""
    sub = {
        "type": "dynamic-tool",
        "toolName": "refund",
        "toolCallId": "c1.sub_0123456789abcdef/call_7",
        "input": {"order": "A1"},
        "state": "output-available",
        "output": "refunded A1",
    }
    helper = {
        "type": "tool-helper",
        "toolCallId": "call_1",
        "input": {"task": "do it"},
        "state": "output-available",
        "output": "All done.",
    }
    message = {"id": "a1", "role": "assistant", "parts": [helper, {"type": "step-start"}, sub]}
    history = ui_messages_to_history([message], session_id="c1")
    assert [c.tool_call_id for m in history for c in m.tool_calls] == ["call_1"]
    assert [r.tool_call_id for m in history for r in m.tool_results] == ["call_1"]
