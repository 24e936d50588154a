"""Child processes for the process-fault tests.

usage: python _worker.py STORE_URL MODE ARG
MODE "churn": runs turns forever over sessions churn-0..3, each a tool call then an answer (killed by the parent).
MODE "hold": one turn on session ARG whose tool waits until the file ARG + ".go" exists.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from pathlib import Path

from toolwire import Agent, TextPart, ToolCallPart, open_store
from toolwire.models.scripted import ScriptedModel


def record(note: str) -> dict[str, str]:
    """Record a note."""
    return {"saved": note * 20}


async def churn(url: str) -> None:
    store = await open_store(url)
    for n in itertools.count():
        model = ScriptedModel(
            [
                [
                    TextPart(text=f"turn {n}"),
                    ToolCallPart(tool_call_id=f"c{n}a", tool_name="record", args={"note": f"a{n}"}),
                    ToolCallPart(tool_call_id=f"c{n}b", tool_name="record", args={"note": f"b{n}"}),
                ],
                [TextPart(text=f"done {n}")],
            ]
        )
        await Agent(model, tools=[record], store=store).run(f"go {n}", session_id=f"churn-{n % 4}")
        print(n, flush=True)


async def hold(url: str, marker: str) -> None:
    def wait_for_go() -> str:
        """Wait for the go file."""
        Path(marker + ".started").write_text("1")
        deadline = time.monotonic() + 60
        while not Path(marker + ".go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return "released"

    store = await open_store(url)
    model = ScriptedModel(
        [[ToolCallPart(tool_call_id="h1", tool_name="wait_for_go", args={})], [TextPart(text="held")]]
    )
    result = await Agent(model, tools=[wait_for_go], store=store).run("hold", session_id="shared")
    await store.close()
    print(result.output, flush=True)


if __name__ == "__main__":
    url, mode = sys.argv[1], sys.argv[2]
    asyncio.run(churn(url) if mode == "churn" else hold(url, sys.argv[3]))
