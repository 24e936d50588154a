"""A run stopped while the model streams keeps the text it had streamed (issue 31 item 2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, TextPart, Transcript
from toolwire.errors import ProviderHTTPError, ToolwireError
from toolwire.events import TextDeltaEvent
from toolwire.messages import ReasoningPart
from toolwire.models.base import ModelRequest, ModelStreamPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore

ANSWER = "The refund of 40 EUR for order 7 is on its way, and the next part never arrives."


class GatedModel(ScriptedModel):
    """A scripted model whose stream waits at ``gate`` after its first ``before`` parts (a slow model)."""

    def __init__(self, turns: list[list[TextPart | ReasoningPart]], before: int) -> None:
        super().__init__(turns, chunk_size=8)
        self.before = before
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        sent = 0
        async for part in super().stream(request):
            if sent == self.before:
                self.waiting.set()
                await self.gate.wait()
            sent += 1
            yield part


async def _streamed_then_stopped(store: MemoryStore, model: GatedModel) -> str:
    """Run until the model is mid-text, stop the run as the server's Stop does (its task cancelled), and
    return the text the client had seen."""
    agent = Agent(model, store=store)
    seen: list[str] = []
    run = agent.stream("refund order 7", session_id="s")

    async def consume() -> None:
        async for event in run:
            if isinstance(event, TextDeltaEvent):
                seen.append(event.delta)

    task = asyncio.create_task(consume())
    async with asyncio.timeout(10):
        await model.waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert run.result is not None and run.result.status == "cancelled"
    return "".join(seen)


async def test_a_run_stopped_mid_text_keeps_the_streamed_text() -> None:
    store = MemoryStore()
    model = GatedModel([[TextPart(text=ANSWER)]], before=5)  # stream-start, text-start, three deltas
    seen = await _streamed_then_stopped(store, model)
    assert seen == ANSWER[:24]
    stored = await store.raw_messages("s")
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].text == seen
    # the page and Transcript.from_history show the same bubble after a reload
    bubbles = Transcript.from_history(await store.load_history("s"), ended=True).messages
    assert [(b.role, b.text) for b in bubbles] == [("user", "refund order 7"), ("assistant", seen)]


async def test_a_stream_closed_mid_text_keeps_the_text_under_its_live_message_id() -> None:
    store = MemoryStore()
    model = GatedModel([[TextPart(text=ANSWER)]], before=4)
    agent = Agent(model, store=store)
    run = agent.stream("refund order 7", session_id="s")
    ids: list[str] = []
    async for event in run:
        if isinstance(event, TextDeltaEvent):
            ids.append(event.message_id)
            await run.aclose()
            break
    stored = await store.raw_messages("s")
    assert stored[-1].role == "assistant" and stored[-1].id == ids[0]


async def test_a_run_stopped_before_any_text_stores_no_empty_answer() -> None:
    store = MemoryStore()
    model = GatedModel([[ReasoningPart(text="thinking about refunds"), TextPart(text=ANSWER)]], before=4)
    await _streamed_then_stopped(store, model)
    # half a thought (unsigned) and no text: nothing to show or send
    assert [m.role for m in await store.raw_messages("s")] == ["user"]


async def test_the_next_turn_after_a_stopped_text_is_valid_for_every_provider() -> None:
    store = MemoryStore()
    model = GatedModel([[ReasoningPart(text="half a thought"), TextPart(text=ANSWER)]], before=9)
    await _streamed_then_stopped(store, model)
    assert [m.role for m in await store.raw_messages("s")] == ["user", "assistant"]
    for provider, factory in adapters(sent := []).items():
        with pytest.raises(ToolwireError) as raised:
            await Agent(factory(), store=store).run("next", session_id="s")
        assert isinstance(raised.value, ProviderHTTPError), (provider, raised.value)
        assert unanswered_calls(provider, sent[-1]) == [], provider
        assert "half a thought" not in str(sent[-1])  # unsigned reasoning is never sent back
        assert ANSWER[:10] in str(sent[-1]), provider
