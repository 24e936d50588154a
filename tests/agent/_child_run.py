"""Run one agent turn in a separate process (used by test_recovery.py).

usage: python _child_run.py STORE_URL SESSION_ID MODE MARKER
MODE "hang": the tool writes MARKER then hangs (the parent SIGKILLs us mid tool run).
MODE "turn": one full turn with a tool call carrying provider metadata, then exit normally.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from toolwire import Agent, TextPart, ToolCallPart, open_store
from toolwire.models.scripted import ScriptedModel


async def main(url: str, session_id: str, mode: str, marker: str) -> None:
    def lookup(order_id: str) -> dict[str, str]:
        """Look up an order."""
        if mode == "hang":
            Path(marker).write_text("running")
            time.sleep(120)
        return {"order_id": order_id, "status": "shipped", "carrier": "Nordpost"}

    model = ScriptedModel(
        [
            [
                TextPart(text="Checking."),
                ToolCallPart(
                    tool_call_id="call_42",
                    tool_name="lookup",
                    args={"order_id": "A-1"},
                    provider_metadata={"google": {"thoughtSignature": "c2lnLWZyb20tY2hpbGQ="}},
                ),
            ],
            [TextPart(text="It shipped with Nordpost.")],
        ]
    )
    store = await open_store(url)
    agent = Agent(model, tools=[lookup], store=store)
    result = await agent.run("Where is order A-1?", session_id=session_id)
    await store.close()
    print(result.output)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
