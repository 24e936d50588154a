"""toolwire: scripted model (whole parts per turn), no-op async tool; store none or SQLite."""

from __future__ import annotations

from pathlib import Path

from toolwire import Agent, TextPart, ToolCallPart, open_store
from toolwire.models.scripted import ScriptedModel

NAME = "toolwire"
STORES = ("none", "sqlite")


async def run(calls: int, steps: int, store: str, tmp: Path) -> int:
    executed = 0

    async def noop(i: int) -> str:
        """Does nothing."""
        nonlocal executed
        executed += 1
        return "ok"

    turns = [
        [ToolCallPart(tool_call_id=f"c{s}_{i}", tool_name="noop", args={"i": i}) for i in range(calls)]
        for s in range(steps)
    ]
    turns.append([TextPart(text="done")])
    model = ScriptedModel(turns, record_requests=False, chunk_size=1 << 20)
    db = await open_store(f"sqlite+aiosqlite:///{tmp / 'toolwire.db'}") if store == "sqlite" else None
    agent = Agent(model, tools=[noop], store=db, max_steps=steps + 1, heartbeat_interval=None)
    try:
        await agent.run("go")
    finally:
        if db is not None:
            await db.close()
    return executed
