"""Provider faults over real sockets: retry where nothing was emitted, a clean aborted step otherwise,
a typed error to the caller, and a stored history with no half-written assistant message."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.fault_server import (
    Behaviour,
    FaultServer,
    finish_frames,
    text_frames,
    tool_frames,
)
from toolwire import Agent, open_store
from toolwire.errors import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderProtocolError,
    StepAborted,
)
from toolwire.events import ErrorEvent, InteractionEnd
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.store import Store

CALLS: list[dict[str, Any]] = []


def lookup(order_id: str) -> dict[str, str]:
    """Look up an order."""
    CALLS.append({"order_id": order_id})
    return {"order_id": order_id, "status": "shipped"}


GOOD = Behaviour(frames=text_frames("All good.") + finish_frames("stop"))


async def make_agent(base_url: str, tmp_path: Path, *, read_timeout: float = 5.0) -> tuple[Agent[Any], Store]:
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'faults.db'}")
    client = httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=read_timeout))
    model = OpenAIChatModel("fault-model", api_key="test", base_url=base_url, http_client=client)
    return Agent(model, tools=[lookup], store=store, retries=2, retry_delay=0.01), store


async def run_collect(
    agent: Agent[Any], prompt: str, session_id: str
) -> tuple[list[Any], BaseException | None]:
    events: list[Any] = []
    try:
        async for event in agent.stream(prompt, session_id=session_id):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


async def assert_clean_history(store: Store, session_id: str, roles: list[str]) -> None:
    assert [m.role for m in await store.raw_messages(session_id)] == roles
    assert [r.status for r in await store.tool_calls(session_id)] == []  # no pending call left behind
    history = await store.load_history(session_id)
    assert [m.role for m in history] == roles


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


# -- before any output: retried -------------------------------------------------------------------


async def test_connection_refused_is_retried_then_a_typed_error(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent, store = await make_agent(f"http://127.0.0.1:{port}/v1", tmp_path)
    events, error = await run_collect(agent, "hi", "s")
    assert isinstance(error, ProviderConnectionError) and error.retryable
    assert isinstance(events[-1], InteractionEnd) and events[-1].status == "error"
    await assert_clean_history(store, "s", ["user"])
    await store.close()


async def test_server_closing_without_an_answer_is_retried(tmp_path: Path) -> None:
    async with FaultServer([Behaviour(refuse=True), GOOD]) as server:
        agent, store = await make_agent(server.base_url, tmp_path)
        events, error = await run_collect(agent, "hi", "s")
        assert error is None and len(server.requests) == 2
        assert events[-1].output == "All good."
        await store.close()


async def test_429_with_retry_after_is_honoured(tmp_path: Path) -> None:
    limited = Behaviour(
        status=429,
        headers={"retry-after": "0.3"},
        body=b'{"error": {"message": "slow down", "code": "rate_limit_exceeded"}}',
    )
    async with FaultServer([limited, GOOD]) as server:
        agent, store = await make_agent(server.base_url, tmp_path)
        started = time.monotonic()
        result = await agent.run("hi", session_id="s")
        assert time.monotonic() - started >= 0.3  # waited as told, not the 10 ms base delay
        assert result.output == "All good." and len(server.requests) == 2
        await assert_clean_history(store, "s", ["user", "assistant"])
        await store.close()


async def test_500_three_times_gives_a_typed_http_error(tmp_path: Path) -> None:
    broken = Behaviour(status=500, body=b'{"error": {"message": "boom", "type": "server_error"}}')
    async with FaultServer([broken]) as server:
        agent, store = await make_agent(server.base_url, tmp_path)
        events, error = await run_collect(agent, "hi", "s")
        assert isinstance(error, ProviderHTTPError)
        assert (error.status, error.code, error.message, error.retryable) == (
            500,
            "server_error",
            "boom",
            True,
        )
        assert len(server.requests) == 3  # first try + 2 retries
        assert any(isinstance(e, ErrorEvent) and e.error_type == "ProviderHTTPError" for e in events)
        await assert_clean_history(store, "s", ["user"])
        await store.close()


async def test_stall_before_any_output_times_out_and_is_retried(tmp_path: Path) -> None:
    stalled = Behaviour(frames=text_frames("never"), stall_after=0)
    async with FaultServer([stalled, GOOD]) as server:
        agent, store = await make_agent(server.base_url, tmp_path, read_timeout=0.3)
        result = await agent.run("hi", session_id="s")
        assert result.output == "All good." and len(server.requests) == 2
        await store.close()


# -- after partial output: a clean aborted step ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "behaviour"),
    [
        (
            "cut inside a text delta",
            Behaviour(frames=text_frames("Half a sentence here."), cut_after=3, cut_inside=True),
        ),
        (
            "cut inside the tool arguments",
            Behaviour(
                frames=tool_frames("call_1", "lookup", json.dumps({"order_id": "A-1"})),
                cut_after=3,
                cut_inside=True,
            ),
        ),
        (
            "cut after the tool call, before finish",
            Behaviour(
                frames=tool_frames("call_1", "lookup", json.dumps({"order_id": "A-1"}))
                + finish_frames("tool_calls"),
                cut_after=len(tool_frames("call_1", "lookup", json.dumps({"order_id": "A-1"}))),
            ),
        ),
        ("stall mid-stream", Behaviour(frames=text_frames("Some text then nothing"), stall_after=3)),
    ],
)
async def test_partial_output_then_failure_aborts_the_step_and_stores_nothing_of_it(
    name: str, behaviour: Behaviour, tmp_path: Path
) -> None:
    async with FaultServer([behaviour, GOOD]) as server:
        agent, store = await make_agent(server.base_url, tmp_path, read_timeout=0.3)
        events, error = await run_collect(agent, "where is A-1?", "s")
        assert isinstance(error, StepAborted), name
        assert isinstance(error.__cause__, ProviderConnectionError | ProviderProtocolError)
        assert len(server.requests) == 1, "output was already streamed: no silent retry"
        assert [e.type for e in events][-2:] == ["error", "interaction-end"]
        assert CALLS == [], "a tool must not run from a half-received step"
        await assert_clean_history(store, "s", ["user"])
        # and the session is usable afterwards: the next turn goes through
        result = await agent.run("try again", session_id="s")
        assert result.output == "All good."
        assert [m["role"] for m in server.requests[1]["messages"]] == ["user", "user"]
        await store.close()


async def test_error_event_inside_a_200_stream_is_a_typed_error(tmp_path: Path) -> None:
    error_frame = 'event: error\ndata: {"error": {"message": "tool call validation failed", "type": "invalid_request_error", "code": "tool_use_failed"}}\n\n'
    failing = Behaviour(frames=[error_frame])
    async with FaultServer([failing]) as server:
        agent, store = await make_agent(server.base_url, tmp_path)
        _events, error = await run_collect(agent, "hi", "s")
        assert isinstance(error, ProviderProtocolError) and error.code == "tool_use_failed"
        assert len(server.requests) == 1  # not retryable: the provider said the request itself failed
        await assert_clean_history(store, "s", ["user"])
        await store.close()


async def test_tool_call_round_trip_works_over_the_same_server(tmp_path: Path) -> None:
    """Control: with no fault, the tool runs and the follow-up carries call and result."""
    args = json.dumps({"order_id": "A-1"})
    script = [
        Behaviour(frames=tool_frames("call_1", "lookup", args) + finish_frames("tool_calls")),
        GOOD,
    ]
    async with FaultServer(script) as server:
        agent, store = await make_agent(server.base_url, tmp_path)
        result = await agent.run("where is A-1?", session_id="s")
        assert result.output == "All good." and CALLS == [{"order_id": "A-1"}]
        roles = [m["role"] for m in server.requests[1]["messages"]]
        assert roles == ["user", "assistant", "tool"]
        assert [m.role for m in await store.load_history("s")] == ["user", "assistant", "tool", "assistant"]
        await store.close()
