"""A process that runs one turn on session ``c1`` of a SQLite store; started by ``test_lock_liveness.py``
as PID 1 of a fresh PID namespace (``unshare --pid --fork --mount-proc``), as a container entrypoint is.

``python _lock_worker.py DB PHASE MARKER``:

- ``hold``: a turn whose tool writes ``MARKER`` (this process's PID) and then blocks forever, so the
  session lock stays held until the test kills the namespace;
- ``next``: a new turn on ``c1`` (a plain text answer); prints one JSON line: whether the session was
  busy, how long the turn took, its output, this process's PID and the session lock owner it used.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.errors import SessionBusyError
from toolwire.models.scripted import ScriptedModel

SESSION = "c1"


async def hold(store_url: str, marker: Path) -> None:
    async def block_forever() -> str:
        """Blocks until the process is killed."""
        marker.write_text(str(os.getpid()))
        await asyncio.Event().wait()
        return "unreachable"

    call = ToolCallPart(tool_call_id="call_1", tool_name="block_forever", args={})
    agent = Agent(ScriptedModel([[call]]), tools=[block_forever], store=store_url)
    await agent.run("hold the session", session_id=SESSION)


async def next_turn(store_url: str) -> dict[str, object]:
    agent = Agent(ScriptedModel([[TextPart(text="next turn ok")]]), store=store_url)
    started = time.monotonic()
    try:
        result = await agent.run("the next turn", session_id=SESSION)
    except SessionBusyError as exc:
        return {"busy": True, "error": str(exc), "seconds": time.monotonic() - started, "pid": os.getpid()}
    finally:
        store = await agent.get_store()
        await store.close()
    return {"busy": False, "output": result.output, "seconds": time.monotonic() - started, "pid": os.getpid()}


def main() -> int:
    db, phase, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    store_url = f"sqlite+aiosqlite:///{db}"
    if phase == "hold":
        asyncio.run(hold(store_url, marker))
        return 3  # the tool never returns: reaching this is a failure
    report = asyncio.run(next_turn(store_url))
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
