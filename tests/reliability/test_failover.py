"""Failover across wire families, faults injected at the byte level over real sockets.

Each of the five wire families is the primary in turn, the next family its fallback. The primary's first
request fails at one point (connect, headers, first byte, an HTTP 529 / 503, mid text, mid tool arguments,
after a complete tool call, before the finish); the fallback answers the step (the conformance scenario:
reasoning, text, two tool calls), the tools run exactly once, and the next step is the primary's again.
The stored history is then sent by every adapter (the two of the run and the other three), each request
checked against the official SDK's request type.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_conformance import MODELS
from tests.conformance.wire import Fault, WireServer
from tests.models import sdk_types
from tests.reliability.fault_server import Behaviour, FaultServer, finish_frames, text_frames
from toolwire import Agent, TextPart, open_store
from toolwire.errors import ProviderHTTPError
from toolwire.events import AgentEvent, FailoverEvent, StepFinish, TextDeltaEvent, ToolInputStartEvent
from toolwire.models import Breaker, collect, rate_limit
from toolwire.models._limits import breaker_for
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import Model, ModelRequest, ToolDefinition
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel

FAMILIES = ["openai-chat", "openai-responses", "anthropic", "gemini", "bedrock"]
PROVIDER_KEY = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "bedrock": "bedrock",
}
FINISH = {
    "openai-chat": b'"finish_reason": "tool_calls"',
    "openai-responses": b"response.completed",
    "anthropic": b"message_delta",
    "gemini": b'"finishReason"',
    "bedrock": b"messageStop",
}
"""The bytes of each family's frame that finishes the response."""

POINTS: dict[str, Callable[[str], Fault | None]] = {
    "connect": lambda family: None,  # the primary's port has nobody listening
    "headers": lambda family: Fault(cut_headers=True),
    "first-byte": lambda family: Fault(cut_before=b""),
    "overloaded-529": lambda family: Fault(status=529),
    "unavailable-503": lambda family: Fault(status=503),
    "mid-text": lambda family: Fault(cut_before=b"look both ", inside=True),
    "mid-tool-arguments": lambda family: Fault(cut_before=b"Par", inside=True),
    "after-a-tool-call": lambda family: Fault(cut_before=b"get_time"),
    "before-finish": lambda family: Fault(cut_before=FINISH[family]),
}
STREAMED = {"mid-text", "mid-tool-arguments", "after-a-tool-call", "before-finish"}
"""Points at which the primary had already streamed output (then dropped)."""

RUNS: list[str] = []


async def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city."""
    RUNS.append(f"get_weather:{city}")
    return {"city": city, "temp_c": 21}


async def get_time(city: str) -> dict[str, Any]:
    """Local time in a city."""
    RUNS.append(f"get_time:{city}")
    return {"city": city, "time": "14:00"}


def dead_base() -> str:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def check_body(
    family: str, body: dict[str, Any], *, tools: tuple[str, ...] = ("get_weather", "get_time")
) -> None:
    match family:
        case "openai-chat":
            sdk_types.check_openai_chat(body)
        case "openai-responses":
            sdk_types.check_openai_responses(body)
        case "anthropic":
            sdk_types.check_anthropic(body)
        case "gemini":
            sdk_types.check_gemini(body)
        case "bedrock":
            sdk_types.check_bedrock(body, model_id="conf-model", stream=True)
    text = json.dumps(body)
    assert all(name in text for name in tools), family
    assert "temp_c" in text, f"{family}: tool results missing"
    if "get_time" in tools:
        assert "14:00" in text, f"{family}: tool results missing"


async def sent_by_every_adapter(
    messages: list[Any], tools: tuple[str, ...] = ("get_weather", "get_time")
) -> None:
    """The stored history, as each of the five adapters sends it: a valid request of its SDK type."""
    definitions = [ToolDefinition(name=name) for name in tools]
    async with WireServer() as server:
        for family in FAMILIES:
            model = MODELS[family](server.base)
            await collect(model, ModelRequest(messages=messages, tools=definitions))
            await model.aclose()
            check_body(family, server.requests[family][0], tools=tools)


@pytest.fixture(autouse=True)
def _reset_runs() -> None:
    RUNS.clear()


@pytest.mark.parametrize("point", sorted(POINTS))
@pytest.mark.parametrize("primary_family", FAMILIES)
async def test_a_step_failing_at_any_point_is_answered_by_another_wire_family(
    primary_family: str, point: str, tmp_path: Path
) -> None:
    fallback_family = FAMILIES[(FAMILIES.index(primary_family) + 1) % len(FAMILIES)]
    fault = POINTS[point](primary_family)
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'failover.db'}")
    async with WireServer({primary_family: {0: fault}} if fault else None) as server:
        primary_base = dead_base() if point == "connect" else server.base
        primary: Model = MODELS[primary_family](primary_base)
        fallback = MODELS[fallback_family](server.base)
        model = FallbackModel(primary, fallback, breaker=None)
        agent = Agent(model, tools=[get_weather, get_time], store=store, retries=0)
        run = agent.stream("Weather and time in Paris?")
        events: list[AgentEvent] = [e async for e in run]
        await agent.aclose()

    assert run.result is not None and run.result.status == "completed", events[-3:]
    assert run.result.output == "Paris: 21°C, 14:00."
    assert sorted(RUNS) == ["get_time:Paris", "get_weather:Paris"]  # each tool ran exactly once

    down = point == "connect"  # the primary stays down: the second step fails over too
    failovers = [e for e in events if isinstance(e, FailoverEvent)]
    assert len(failovers) == (2 if down else 1), failovers
    failover = failovers[0]
    assert (failover.step, failover.from_model, failover.to_model) == (1, "conf-model", "conf-model")
    assert failover.from_provider == PROVIDER_KEY[primary_family]
    assert failover.to_provider == PROVIDER_KEY[fallback_family]
    assert failover.dropped_output is (point in STREAMED)
    before = events[: events.index(failover)]
    if point in STREAMED:  # the primary's partial step was streamed live, then dropped
        assert any(isinstance(e, TextDeltaEvent | ToolInputStartEvent) for e in before)
    answered_by = [PROVIDER_KEY[fallback_family], PROVIDER_KEY[fallback_family if down else primary_family]]
    assert [f.provider for f in events if isinstance(f, StepFinish)] == answered_by

    # Nothing of the failed attempt stored; each step records the model that answered it.
    raw = await store.raw_messages(run.session_id)
    assert [m.role for m in raw] == ["user", "assistant", "tool", "assistant"]
    assert [m.provider for m in raw if m.role == "assistant"] == answered_by
    assert [r.status for r in await store.tool_calls(run.session_id)] == ["ok", "ok"]
    if not down:  # the primary's second request carried the fallback's step, valid on the primary's wire
        check_body(primary_family, server.requests[primary_family][-1])
    await sent_by_every_adapter(await store.load_history(run.session_id))
    await store.close()


@pytest.mark.parametrize("listed", [False, True])
async def test_a_non_retryable_error_fails_over_only_when_listed(listed: bool, tmp_path: Path) -> None:
    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'failover.db'}")
    async with WireServer({"anthropic": {0: Fault(status=400)}}) as server:
        model = FallbackModel(
            MODELS["anthropic"](server.base),
            MODELS["openai-chat"](server.base),
            failover_on=[400] if listed else (),
            breaker=None,
        )
        agent = Agent(model, tools=[get_weather, get_time], store=store, retries=0)
        run = agent.stream("Weather and time in Paris?")
        events: list[AgentEvent] = []
        with contextlib.suppress(ProviderHTTPError):
            async for event in run:
                events.append(event)
        await agent.aclose()
    assert run.result is not None
    if listed:
        assert run.result.status == "completed" and len(server.requests["openai-chat"]) == 1
        assert [e.status for e in events if isinstance(e, FailoverEvent)] == [400]
    else:
        assert run.result.status == "error" and "openai-chat" not in server.requests
        assert not any(isinstance(e, FailoverEvent) for e in events)
        assert [m.role for m in await store.raw_messages(run.session_id)] == ["user"]
    await store.close()


# -- per-model health shared by every run of the process -------------------------------------------------

GOOD = Behaviour(frames=text_frames("All good.") + finish_frames("stop"))
BROKEN = Behaviour(status=503, body=b'{"error": {"message": "down", "type": "server_error"}}')


def chat_model(base_url: str) -> OpenAIChatModel:
    return OpenAIChatModel("fault-model", api_key="test", base_url=base_url)


async def test_a_failing_model_is_skipped_by_every_run_while_its_breaker_cools_down() -> None:
    policy = Breaker(failures=2, window=60.0, cooldown=0.3)
    async with FaultServer([BROKEN, BROKEN, GOOD]) as primary, FaultServer([GOOD]) as fallback:

        async def run_once() -> list[AgentEvent]:  # a new agent and new model objects, as a new session's
            model = FallbackModel(chat_model(primary.base_url), chat_model(fallback.base_url), breaker=policy)
            agent = Agent(model, retries=0)
            events = [e async for e in agent.stream("hi")]
            await agent.aclose()
            return events

        for expected in (1, 2):  # two runs fail over: the second failure opens the breaker
            events = await run_once()
            assert any(isinstance(e, FailoverEvent) for e in events)
            assert (len(primary.requests), len(fallback.requests)) == (expected, expected)
        events = await run_once()  # the primary is cooling down: not asked at all
        assert not any(isinstance(e, FailoverEvent) for e in events)
        assert (len(primary.requests), len(fallback.requests)) == (2, 3)
        breaker = breaker_for(chat_model(primary.base_url), policy)
        deadline = time.monotonic() + 10
        while not breaker.available():
            assert time.monotonic() < deadline, "the cooldown never ended"
            await asyncio.sleep(0.02)
        events = await run_once()  # cooled down: asked again, answers, the breaker closes
        assert (len(primary.requests), len(fallback.requests)) == (3, 3)
        assert events[-1].status == "completed"  # type: ignore[union-attr]


async def test_a_rate_limit_is_shared_by_every_run_of_the_process() -> None:
    async with FaultServer([GOOD]) as server:
        rate_limit(chat_model(server.base_url), requests_per_minute=2, period=0.4)

        async def run_once() -> None:
            agent = Agent(chat_model(server.base_url), retries=0)  # its own model object, same identity
            await agent.run("hi")
            await agent.aclose()

        async with asyncio.TaskGroup() as runs:
            for _ in range(5):
                runs.create_task(run_once())
    arrivals = sorted(server.arrivals)
    assert len(arrivals) == 5
    # At most 2 requests in any 0.4 s: the third starts only once the first left the window.
    assert all(later - earlier >= 0.35 for earlier, later in zip(arrivals, arrivals[2:], strict=False))


async def test_a_token_rate_limit_holds_requests_back_once_the_window_is_full() -> None:
    async with FaultServer([GOOD]) as server:  # each answer reports 8 tokens
        rate_limit(chat_model(server.base_url), tokens_per_minute=8, period=0.3)
        agent = Agent(chat_model(server.base_url), retries=0)
        for _ in range(3):
            await agent.run("hi")
        await agent.aclose()
    gaps = [b - a for a, b in zip(server.arrivals, server.arrivals[1:], strict=False)]
    assert len(gaps) == 2 and all(gap >= 0.25 for gap in gaps), gaps


# -- a request too long for the model asked --------------------------------------------------------------

TOO_LONG = {
    "openai": b'{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, your '
    b'messages resulted in 9000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}',
    "anthropic": b'{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: '
    b'250000 tokens > 200000 maximum"}}',
}


@pytest.mark.parametrize("wording", sorted(TOO_LONG))
async def test_a_context_length_error_goes_to_the_larger_window_model(wording: str) -> None:
    too_long = Behaviour(status=400, body=TOO_LONG[wording])
    async with (
        FaultServer([too_long]) as primary_server,
        FaultServer([GOOD]) as same_window,
        FaultServer([GOOD]) as larger,
    ):
        primary: Model = (
            AnthropicModel("claude-small", api_key="k", base_url=primary_server.base_url.removesuffix("/v1"))
            if wording == "anthropic"
            else chat_model(primary_server.base_url)
        )
        model = FallbackModel(
            primary,
            chat_model(same_window.base_url),
            larger_context=chat_model(larger.base_url),
            breaker=None,
        )
        agent = Agent(model, retries=0)
        events = [e async for e in agent.stream("a very long prompt")]
        await agent.aclose()
    assert events[-1].status == "completed"  # type: ignore[union-attr]
    assert (len(same_window.requests), len(larger.requests)) == (0, 1)  # not the other fallback
    (failover,) = [e for e in events if isinstance(e, FailoverEvent)]
    assert failover.status == 400 and failover.to_model == "fault-model"


async def test_without_a_larger_window_model_a_context_length_error_ends_the_step() -> None:
    async with (
        FaultServer([Behaviour(status=400, body=TOO_LONG["openai"])]) as primary,
        FaultServer([GOOD]) as other,
    ):
        model = FallbackModel(chat_model(primary.base_url), chat_model(other.base_url), breaker=None)
        agent = Agent(model, retries=0)
        with pytest.raises(ProviderHTTPError) as raised:
            await agent.run("a very long prompt")
        await agent.aclose()
    assert raised.value.code == "context_length_exceeded" and other.requests == []


async def test_a_fallback_without_function_calling_is_driven_by_react() -> None:
    """A model without function calling (``supports_tools=False``, as the embedded model) as the fallback of
    a tool-calling primary: its steps get the ReAct driver, so its JSON decision becomes the answer."""
    decision = '{"action": "final_answer", "answer": "It is settled."}'
    react_model = ScriptedModel([[TextPart(text=decision)], [TextPart(text=decision)]])
    react_model.supports_tools = False
    async with FaultServer([BROKEN]) as primary:
        agent = Agent(FallbackModel(chat_model(primary.base_url), react_model, breaker=None), retries=0)
        assert [(await agent.run("is it settled?")).output for _ in range(2)] == ["It is settled."] * 2
        await agent.aclose()
