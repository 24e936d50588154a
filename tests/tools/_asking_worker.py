"""One process of a conversation whose MCP tool asks a question (used by test_mcp_asking.py).

usage: python _asking_worker.py STORE_URL SESSION_ID

Starts the test MCP server over stdio, runs a turn whose ``trip`` call asks its first question, prints the
run's status and pending calls as one JSON line, then waits to be killed (SIGKILL: the MCP call is still
open, nothing is closed by this process).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from toolwire import Agent, TextPart, ToolCallPart, open_store
from toolwire.models.scripted import ScriptedModel
from toolwire.tools.mcp import MCPServerStdio

SERVER = Path(__file__).with_name("_mcp_server.py")


async def main(url: str, session_id: str) -> None:
    call = ToolCallPart(tool_call_id="t1", tool_name="trip", args={"city": "Lisbon"})
    source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"], timeout=10)
    agent = Agent(ScriptedModel([[call], [TextPart("planned")]]), tools=[source], store=await open_store(url))
    result = await agent.run("plan a trip", session_id=session_id)
    print(json.dumps({"status": result.status, "pending": [p.to_dict() for p in result.pending]}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
