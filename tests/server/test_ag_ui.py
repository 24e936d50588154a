"""``POST /api/ag-ui`` driven by the official AG-UI client (``@ag-ui/client``'s ``HttpAgent`` from npm, run by
``tests/server/node/ag_ui_client.mjs``) against a real server on loopback: the client checks every event
against the protocol's schemas and ordering rules, so a malformed stream fails the run."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.fault_server import Behaviour, FaultServer, text_frames, tool_frames
from tests.server.protocol_agents import build
from toolwire import Agent, TextPart
from toolwire.events import InteractionEnd, ReasoningDeltaEvent, ReasoningStartEvent, StepStart
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.server._ag_ui_encoder import AGUIEncoder
from toolwire.store import MemoryStore

from .conftest import LiveServer, live_server

NODE_DIR = Path(__file__).parent / "node"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


async def _client(
    server: LiveServer, scenario: str, thread: str, token: str | None = None, **env: str
) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    assert (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir(), "run scripts/setup_node.sh"
    args = [node, "ag_ui_client.mjs", server.url, scenario, thread, *([token] if token else [])]
    process = await asyncio.create_subprocess_exec(
        *args,
        cwd=NODE_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-3000:]
    seen: dict[str, Any] = json.loads(stdout)
    return seen


def _ok(seen: dict[str, Any]) -> dict[str, Any]:
    assert seen["error"] is None, seen["error"]
    assert all(run["runError"] is None for run in seen["runs"]), seen["runs"]
    return seen


async def test_a_text_turn_streams_ag_ui_events_and_is_stored() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server:
        seen = _ok(await _client(server, "text", "thread-text"))
        stored = await (await app.state.toolwire.store()).raw_messages("thread-text")
    (run,) = seen["runs"]
    events = run["events"]
    assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED"
    for kind in ("STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
        assert kind in events
    assert events.index("MESSAGES_SNAPSHOT") < events.index("RUN_FINISHED")
    assert run["outcome"] == "success" and run["result"] == "Hi! How can I help?"
    # the snapshot hands the client the stored conversation, ids included
    assert [(m["role"], m["content"]) for m in seen["messages"]] == [
        ("user", "hello there"),
        ("assistant", "Hi! How can I help?"),
    ]
    assert [m["id"] for m in seen["messages"]] == [m.id for m in stored]


async def test_a_tool_turn_streams_the_call_its_arguments_and_result() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server:
        seen = _ok(await _client(server, "tool", "thread-tool"))
    events = seen["runs"][0]["events"]
    order = [
        events.index(k) for k in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT")
    ]
    assert order == sorted(order)
    assert events.count("STEP_STARTED") == 2 == events.count("STEP_FINISHED")
    call = next(m for m in seen["messages"] if m["toolCalls"])["toolCalls"][0]
    assert call["name"] == "lookup" and json.loads(call["arguments"]) == {"txn": "T9"}
    result = next(m for m in seen["messages"] if m["role"] == "tool")
    assert json.loads(result["content"]) == {"txn": "T9", "status": "settled"}
    assert [m["role"] for m in seen["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert seen["messages"][-1]["content"].startswith("answered: ")


async def test_a_front_end_tool_pauses_the_run_and_its_tool_message_answers_it() -> None:
    agent = build()
    app = create_app(agent, store=MemoryStore())
    async with live_server(app) as server:
        seen = _ok(await _client(server, "frontend", "thread-fe"))
        calls = await (await app.state.toolwire.store()).tool_calls("thread-fe")
    first, second = seen["runs"]
    assert first["outcome"] == "success" and first["pendingToolCallIds"] == ["call_c"]
    assert "TOOL_CALL_RESULT" not in first["events"]
    # the model was told about the client's tool, with the client's schema
    model = agent.model
    assert isinstance(model, ScriptedModel)
    tools = {t.name: t for t in model.requests[0].request.tools}
    assert tools["pick_color"].parameters["required"] == ["hint"]
    assert second["outcome"] == "success"
    assert second["result"] == "answered: {'color': 'teal'}"
    assert [(c.tool_call_id, c.output) for c in calls] == [("call_c", {"color": "teal"})]
    # the agent itself never learned the client's tool: another thread's run does not offer it
    assert "pick_color" not in {t.name for t in agent.tools}


async def test_a_call_awaiting_approval_is_an_interrupt_that_resume_answers() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server:
        seen = _ok(await _client(server, "approve", "thread-approve"))
    first, second = seen["runs"]
    assert first["outcome"] == "interrupt"
    (interrupt,) = first["interrupts"]
    assert interrupt["id"] == interrupt["toolCallId"] == "call_r" and interrupt["reason"] == "tool_call"
    assert first["events"].index("MESSAGES_SNAPSHOT") < first["events"].index("RUN_FINISHED")
    assert "TOOL_CALL_RESULT" in second["events"] and second["outcome"] == "success"
    assert second["result"] == "answered: refunded A7"


async def test_another_users_thread_is_not_found_and_untouched() -> None:
    app = create_app(build(), store=MemoryStore(), tokens=TOKENS)
    async with live_server(app) as server:
        _ok(
            await _client(server, "turn", "alice-thread", "tok-alice", AGUI_PROMPT="secret alice-ledger-7731")
        )
        seen = await _client(server, "turn", "alice-thread", "tok-bob", AGUI_PROMPT="hello")
        stored = await (await app.state.toolwire.store()).raw_messages("alice-thread")
    assert seen["error"]["status"] == 404
    assert seen["error"]["payload"]["error"]["type"] == "not_found"
    assert "alice-ledger-7731" not in json.dumps(seen)
    assert [m.text for m in stored] == ["secret alice-ledger-7731", "alice-ledger-7731"]


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (b"{not json", 400, "bad_request"),
        ({"runId": "r", "messages": []}, 400, "bad_request"),
        ({"threadId": "bad thread", "runId": "r", "messages": []}, 400, "bad_request"),
        ({"threadId": "t", "runId": "r", "messages": "hi"}, 400, "bad_request"),
        ({"threadId": "t", "runId": "r", "messages": []}, 400, "bad_request"),
        (
            {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": ""}]},
            400,
            "bad_request",
        ),
        (
            {
                "threadId": "t",
                "runId": "r",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "lookup"}],
            },
            400,
            "bad_request",
        ),
        (
            {
                "threadId": "t",
                "runId": "r",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "x", "parameters": {"type": 12}}],
            },
            400,
            "bad_request",
        ),
        (
            {"threadId": "t", "runId": "r", "messages": [{"role": "user", "content": "x" * 200_001}]},
            413,
            "too_large",
        ),
        (
            {
                "threadId": "t",
                "runId": "r",
                "messages": [{"role": "tool", "toolCallId": "nope", "content": "1"}],
            },
            404,
            "not_found",
        ),
    ],
)
async def test_bad_inputs_are_typed_4xx_errors(body: Any, status: int, kind: str) -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server, server.client() as client:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = await client.post(
            "/api/ag-ui", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == kind


async def test_the_official_client_gets_a_typed_400_for_a_bad_thread_id_and_a_foreign_origin_403() -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server, server.client() as client:
        seen = await _client(server, "text", "not a session id")
        foreign = await client.post(
            "/api/ag-ui",
            json={"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]},
            headers={"origin": "https://evil.example"},
        )
    assert seen["error"]["status"] == 400
    assert seen["error"]["payload"]["error"]["type"] == "bad_request"
    assert foreign.status_code == 403


async def test_a_failover_mid_answer_keeps_the_ag_ui_stream_valid() -> None:
    """The primary's stream is cut after its text and a call started (real socket); the fallback answers.
    The official client accepts every event; the failover is a ``CUSTOM`` event; the snapshot (the stored
    conversation) has only the fallback's answer."""
    cut = Behaviour(
        frames=text_frames("Looking it up.") + tool_frames("call_cut", "lookup", '{"txn": "T9"}'),
        cut_after=7,  # the text streamed, the call started, its arguments cut
    )
    async with FaultServer([cut, cut]) as faulty:
        primary = OpenAIChatModel("fault-model", api_key="k", base_url=faulty.base_url)
        fallback = ScriptedModel([[TextPart(text="All settled.")]])
        agent = Agent(FallbackModel(primary, fallback, breaker=None), retries=0)
        app = create_app(agent, store=MemoryStore())
        async with live_server(app) as server:
            seen = _ok(await _client(server, "turn", "thread-failover", AGUI_PROMPT="lookup T9"))
    (run,) = seen["runs"]
    assert "CUSTOM" in run["events"] and run["outcome"] == "success", run["events"]
    assert [(m["role"], m["content"]) for m in seen["messages"]] == [
        ("user", "lookup T9"),
        ("assistant", "All settled."),
    ]


def test_a_run_that_ends_mid_reasoning_ends_its_reasoning_message_first() -> None:
    """AG-UI wants every started message ended before the run's end: a run cancelled (or failed) while the
    model was still reasoning ends that reasoning message, then finishes."""
    encoder = AGUIEncoder(thread_id="t", run_id="r")
    events = [
        StepStart(session_id="t", step=1, provider="scripted", model="scripted"),
        ReasoningStartEvent(session_id="t", id="rs1"),
        ReasoningDeltaEvent(session_id="t", id="rs1", delta="thinking"),
    ]
    sent = [e["type"] for event in events for e in encoder.encode(event)]
    end = InteractionEnd(session_id="t", status="cancelled")
    sent += [e["type"] for e in encoder.finish(end, None)]
    assert sent[-4:] == ["REASONING_MESSAGE_END", "REASONING_END", "STEP_FINISHED", "RUN_FINISHED"], sent


async def test_a_tool_error_for_a_call_the_thread_does_not_await_is_a_409_like_a_tool_message() -> None:
    """Answers to nothing the thread awaits are refused as such (409 ``not_awaited``), whether they come as a
    tool message or as a front-end tool's error, and nothing runs."""
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server, server.client() as client:
        first = {
            "threadId": "t-err",
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        }
        assert (await client.post("/api/ag-ui", json=first)).status_code == 200
        stored = len(await (await app.state.toolwire.store()).raw_messages("t-err"))
        for answer in ({"content": "1"}, {"content": "", "error": "the browser tool failed"}):
            body = {
                "threadId": "t-err",
                "runId": "r2",
                "messages": [{"id": "x", "role": "tool", "toolCallId": "nope", **answer}],
            }
            response = await client.post("/api/ag-ui", json=body)
            assert (response.status_code, response.json()["error"]["type"]) == (409, "not_awaited"), answer
        assert len(await (await app.state.toolwire.store()).raw_messages("t-err")) == stored
