"""Completions of parallel tool calls share transactions (group commit) and each is durable on return."""

from __future__ import annotations

import asyncio

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore


async def test_parallel_completions_are_batched_and_all_stored(store: SQLStore) -> None:
    writes: list[str] = []
    original = store._write

    async def counting(what: str, op, **options):  # type: ignore[no-untyped-def]
        writes.append(what)
        return await original(what, op, **options)

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


async def test_a_completion_returns_only_after_its_row_is_stored(store: SQLStore) -> None:
    calls = [ToolCallPart(tool_call_id="only", tool_name="one", args={})]

    def one() -> str:
        """One call."""
        return "stored"

    seen: list[str] = []
    original = store.complete_tool_call

    async def check_after(session_id: str, tool_call_id: str, **kwargs):  # type: ignore[no-untyped-def]
        await original(session_id, tool_call_id, **kwargs)
        seen.extend(r.status for r in await store.tool_calls(session_id) if r.tool_call_id == tool_call_id)

    store.complete_tool_call = check_after  # type: ignore[method-assign]
    await Agent(ScriptedModel([calls, [TextPart(text="ok")]]), tools=[one], store=store).run(
        "go", session_id="d"
    )
    assert seen == ["ok"]
