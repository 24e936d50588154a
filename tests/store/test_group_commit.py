"""Completions of parallel tool calls share transactions (group commit) and each is durable on return."""

from __future__ import annotations

import asyncio

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.events import ToolCallComplete
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore


async def test_parallel_completions_are_batched_and_all_stored(store: SQLStore) -> None:
    writes: list[str] = []
    original = store._write

    async def counting(what: str, op):  # type: ignore[no-untyped-def]
        writes.append(what)
        return await original(what, op)

    store._write = counting  # type: ignore[method-assign]
    release = asyncio.Event()

    async def work(i: int) -> int:
        """Waits for the others, then finishes with them."""
        await release.wait()
        return i * i

    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="work", args={"i": i}) for i in range(8)]
    agent = Agent(ScriptedModel([calls, [TextPart(text="done")]]), tools=[work], store=store)
    run = asyncio.create_task(agent.run("go", session_id="g"))
    await asyncio.sleep(0.2)
    release.set()
    await asyncio.wait_for(run, 30)

    rows = {r.tool_call_id: r for r in await store.tool_calls("g")}
    assert {cid: (r.status, r.output) for cid, r in rows.items()} == {
        f"c{i}": ("ok", i * i) for i in range(8)
    }
    # eight completions, fewer transactions: the ones finishing together share a commit
    assert 1 <= writes.count("complete a tool call") < 8, writes


async def test_a_completion_is_stored_before_it_is_announced(store: SQLStore) -> None:
    release = asyncio.Event()

    async def slow(i: int) -> str:
        """The first call finishes later than the second."""
        if i == 0:
            await release.wait()
        return f"stored {i}"

    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="slow", args={"i": i}) for i in range(2)]
    agent = Agent(ScriptedModel([calls, [TextPart(text="ok")]]), tools=[slow], store=store)
    seen: list[tuple[str, str, object]] = []
    async with agent.stream("go", session_id="d") as run:
        async for event in run:
            if isinstance(event, ToolCallComplete):
                # Whoever hears of a result finds it stored: the first call to finish through its own
                # transaction, the last one through the step's end.
                rows = {r.tool_call_id: r for r in await store.tool_calls("d")}
                seen.append(
                    (event.tool_call_id, rows[event.tool_call_id].status, rows[event.tool_call_id].output)
                )
                release.set()
    assert seen == [("c1", "ok", "stored 1"), ("c0", "ok", "stored 0")]


async def test_a_step_with_one_call_commits_twice(store: SQLStore) -> None:
    writes: list[str] = []
    original = store._write

    async def counting(what: str, op):  # type: ignore[no-untyped-def]
        writes.append(what)
        return await original(what, op)

    def one() -> str:
        """One call."""
        return "stored"

    turns = [[ToolCallPart(tool_call_id=f"c{s}", tool_name="one", args={})] for s in range(3)]
    agent = Agent(ScriptedModel([*turns, [TextPart(text="ok")]]), tools=[one], store=store)
    store._write = counting  # type: ignore[method-assign]
    await agent.run("go", session_id="t")
    # the assistant message with its pending call, then the result with the tool message: 2 per step
    assert [w for w in writes if w in ("begin a step", "complete a tool call", "finish a step")] == [
        "begin a step",
        "finish a step",
    ] * 4 + ["finish a step"], writes  # and the run's end: the seq of its last events
    assert {r.tool_call_id: (r.status, r.output) for r in await store.tool_calls("t")} == {
        f"c{s}": ("ok", "stored") for s in range(3)
    }
