"""Driver hooks do what their docs say: ``compile_messages`` decides what a step sends, an overridden
``stream_step`` runs, and each step's compiled request and answer are inspectable on the result."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from toolwire import Agent, NativeToolDriver, TextPart, ToolCallPart
from toolwire.agent.drivers import StepState
from toolwire.messages import Message
from toolwire.models.base import Model, ModelRequest, ModelStreamPart, TextDelta
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class LastTurnOnly(NativeToolDriver):
    """Sends only the current user turn and what followed it (a windowing message compiler)."""

    def __init__(self) -> None:
        self.states: list[StepState] = []

    def compile_messages(self, state: StepState) -> Sequence[Message]:
        self.states.append(state)
        last_user = max(i for i, m in enumerate(state.history) if m.role == "user")
        return state.history[last_user:]


async def test_the_message_compiler_decides_what_each_step_sends_and_the_store_keeps_everything() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="add", args={"a": 1, "b": 2})
    model = ScriptedModel([[TextPart(text="Hi.")], [call], [TextPart(text="3")]])
    driver = LastTurnOnly()
    store = MemoryStore()
    agent = Agent(model, tools=[add], driver=driver, store=store, instructions="Be brief.")
    await agent.run("hello", session_id="s")
    result = await agent.run("1+2?", session_id="s")

    sent = [[(m.role, m.text) for m in r.messages] for r in model.requests]
    assert sent[1] == [("user", "1+2?")]  # the first turn is left out
    assert [m.role for m in model.requests[2].messages] == ["user", "assistant", "tool"]
    assert [(s.step, s.session_id, len(s.history), s.instructions) for s in driver.states[1:]] == [
        (1, "s", 3, "Be brief."),
        (2, "s", 5, "Be brief."),
    ]
    assert [t.name for t in driver.states[1].tools] == ["add"]
    assert len(await store.load_history("s")) == 6  # the store keeps the whole conversation

    details = result.step_details
    assert [d.step for d in details] == [1, 2]
    assert [list(d.request.messages) for d in details] == [list(r.messages) for r in model.requests[1:]]
    assert details[0].response.tool_calls[0].tool_call_id == "c1" and details[0].finish_reason == "tool-calls"
    assert details[1].response.text == "3" and details[1].usage == result.step_usage[1]
    stored_ids = [m.id for m in await store.load_history("s") if m.role == "assistant"]
    assert [d.response.id for d in details] == stored_ids[1:]


class Shouting(NativeToolDriver):
    """Overrides only ``stream_step``: the loop must use it."""

    async def stream_step(self, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        async for part in super().stream_step(model, request):
            yield TextDelta(id=part.id, delta=part.delta.upper()) if isinstance(part, TextDelta) else part


async def test_an_overridden_stream_step_of_a_native_driver_runs() -> None:
    agent = Agent(ScriptedModel([[TextPart(text="quiet")]]), driver=Shouting())
    result = await agent.run("speak")
    assert result.output == "QUIET"
