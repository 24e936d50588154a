"""openai-agents: a Model subclass answering with function calls, then text; SQLiteSession for the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent, ModelResponse, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse as _ModelResponse  # noqa: F401 - same class, explicit origin
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

NAME = "openai-agents"
STORES = ("none", "sqlite")
set_tracing_disabled(True)


class ScriptModel(Model):
    def __init__(self, calls: int, steps: int) -> None:
        self.calls = calls
        self.steps = steps
        self.step = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.step += 1
        if self.step > self.steps:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            output: list[Any] = [
                ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[text])
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=f"c{self.step}_{i}", name="noop", arguments=f'{{"i": {i}}}'
                )
                for i in range(self.calls)
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def run(calls: int, steps: int, store: str, tmp: Path) -> int:
    executed = 0

    @function_tool
    async def noop(i: int) -> str:
        """Does nothing."""
        nonlocal executed
        executed += 1
        return "ok"

    agent = Agent(name="bench", model=ScriptModel(calls, steps), tools=[noop])
    session = SQLiteSession("bench", str(tmp / "agents.db")) if store == "sqlite" else None
    await Runner.run(agent, "go", max_turns=steps + 2, session=session)
    return executed
