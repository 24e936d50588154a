"""pydantic-ai: FunctionModel answering with `calls` tool calls per step, then text; no session store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

NAME = "pydantic-ai"
STORES = ("none",)  # pydantic-ai keeps history in memory; it has no session store of its own


async def run(calls: int, steps: int, store: str, tmp: Path) -> int:
    executed = 0
    step = 0

    def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        nonlocal step
        step += 1
        if step > steps:
            return ModelResponse(parts=[TextPart(content="done")])
        return ModelResponse(
            parts=[ToolCallPart(tool_name="noop", args={"i": i}, tool_call_id=f"c{step}_{i}") for i in range(calls)]
        )

    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    async def noop(i: int) -> str:
        """Does nothing."""
        nonlocal executed
        executed += 1
        return "ok"

    await agent.run("go", usage_limits=UsageLimits(request_limit=None, tool_calls_limit=None))
    return executed
