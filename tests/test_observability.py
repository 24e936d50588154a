"""The event bus, usage over every step, and cost."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.events import AgentEvent, ToolCallActive, ToolCallComplete
from toolwire.messages import Usage
from toolwire.models.scripted import ScriptedModel
from toolwire.pricing import estimate_cost, total_cost


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def fails() -> None:
    """Fail."""
    raise ValueError("nope")


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            [ToolCallPart(tool_call_id="c1", tool_name="add", args={"a": 1, "b": 2})],
            [ToolCallPart(tool_call_id="c2", tool_name="fails", args={})],
            [TextPart(text="done")],
        ],
        usage_per_turn=Usage(input_tokens=100, output_tokens=10, requests=1),
    )


async def test_tool_start_and_end_carry_name_args_result_duration_and_session() -> None:
    agent = Agent(script(), tools=[add, fails])
    starts: list[ToolCallActive] = []
    ends: list[ToolCallComplete] = []
    agent.on("tool:start", starts.append)  # type: ignore[arg-type]

    async def on_end(event: AgentEvent) -> None:  # async subscribers are awaited
        assert isinstance(event, ToolCallComplete)
        ends.append(event)

    agent.on("tool:end", on_end)
    result = await agent.run("go")
    assert [(e.tool_name, e.args) for e in starts] == [("add", {"a": 1, "b": 2}), ("fails", {})]
    assert [(e.tool_name, e.output, e.is_error) for e in ends] == [
        ("add", 3, False),
        ("fails", "fails failed: ValueError: nope", True),
    ]
    assert all(e.duration >= 0 and e.session_id == result.session_id for e in ends)


async def test_a_failing_subscriber_is_logged_and_never_breaks_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent(script(), tools=[add, fails])

    def broken(event: AgentEvent) -> None:
        raise RuntimeError("subscriber bug")

    seen: list[str] = []
    agent.on("*", broken)
    off = agent.on("*", lambda e: seen.append(e.type))  # type: ignore[func-returns-value]
    with caplog.at_level(logging.ERROR):
        result = await agent.run("go")
    assert result.output == "done"
    assert "subscriber bug" in caplog.text
    assert seen[0] == "interaction-start" and seen[-1] == "interaction-end"
    off()
    seen.clear()
    agent.model = ScriptedModel([[TextPart(text="again")]])
    await agent.run("again")
    assert seen == []  # unsubscribed


def test_no_subscriber_means_no_wrapping() -> None:
    agent = Agent(ScriptedModel([]))

    async def gen() -> Any:
        yield None

    events = gen()
    assert agent.publish(events) is events


async def test_usage_is_summed_over_every_step_including_tool_steps() -> None:
    result = await Agent(script(), tools=[add, fails]).run("go")
    assert result.steps == 3
    assert result.usage == Usage(input_tokens=300, output_tokens=30, requests=3)  # not just the last step
    assert result.step_usage == [Usage(input_tokens=100, output_tokens=10, requests=1)] * 3


def test_cost_from_the_price_table() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    gpt4o = estimate_cost("openai", "gpt-4o-2024-08-06", usage)
    assert gpt4o is not None and gpt4o > Decimal(1)  # dollars per million tokens, not per token
    assert estimate_cost("local", "smollm2", usage) == Decimal(0)
    assert estimate_cost("openai", "no-such-model-xyz", usage) is None
    assert estimate_cost("scripted", "scripted", usage) is None
    assert total_cost([("openai", "gpt-4o-2024-08-06", usage), ("local", "x", usage)]) == gpt4o
    assert (
        total_cost([("openai", "gpt-4o-2024-08-06", usage), ("openai", "no-such-model-xyz", usage)]) is None
    )


async def test_run_result_cost_is_unknown_for_unpriced_models() -> None:
    result = await Agent(script(), tools=[add, fails]).run("go")
    assert result.step_models == [("scripted", "scripted")] * 3
    assert result.cost is None
