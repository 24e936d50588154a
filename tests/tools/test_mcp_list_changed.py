"""``notifications/tools/list_changed`` from a real MCP server (the SDK's, over stdio and streamable HTTP):
the source lists its tools again, the registry re-resolves, and the agent's next run offers the new tool."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.tools._mcp_process import serve_http
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools import ToolRegistry
from toolwire.tools.mcp import MCPServerHTTP, MCPServerStdio

SERVER = Path(__file__).parent / "_mcp_server.py"


@pytest.fixture(params=["stdio", "http"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[MCPServerStdio | MCPServerHTTP]:
    """A fresh server each test: ``grow`` changes the server for good."""
    if request.param == "stdio":
        source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"], timeout=10)
        yield source
        await source.aclose()
        return
    with serve_http(SERVER) as url:
        http = MCPServerHTTP(url, timeout=10)
        yield http
        await http.aclose()


async def announced(source: MCPServerStdio | MCPServerHTTP) -> None:
    """The notification travels apart from the call's result: wait until it has arrived."""
    async with asyncio.timeout(10):
        while not source.tools_changed:
            await asyncio.sleep(0.01)


async def test_the_source_and_the_registry_list_the_new_tool(server: MCPServerStdio | MCPServerHTTP) -> None:
    registry = ToolRegistry([server])
    await registry.prepare()
    assert "shiny" not in registry.names and "grow" in registry.names
    assert await registry.refresh() is False  # nothing changed: nothing listed again

    assert await server.call("grow", {}) in ("grown", {"result": "grown"})
    await announced(server)
    assert await registry.refresh() is True
    assert "shiny" in registry.names
    assert server.tools_changed is False
    assert await registry.refresh() is False
    assert await server.call("shiny", {"word": "toolwire"}) in ("*toolwire*", {"result": "*toolwire*"})


async def test_the_next_run_offers_and_calls_the_new_tool(server: MCPServerStdio | MCPServerHTTP) -> None:
    model = ScriptedModel(
        [
            [ToolCallPart(tool_call_id="g", tool_name="grow", args={})],
            [TextPart(text="grown")],
            [ToolCallPart(tool_call_id="s", tool_name="shiny", args={"word": "new"})],
            [TextPart(text="done")],
        ]
    )
    agent = Agent(model, tools=[server], store=MemoryStore())
    first = await agent.run("grow", session_id="s")
    assert not first.tool_executions[0].is_error
    assert "shiny" not in {t.name for t in model.requests[0].tools}
    # The run lists the tools again before each step: its second step already offers the new tool when
    # the notification arrived before it (it travels apart from the call's result); else the next run.
    if "shiny" not in {t.name for t in model.requests[1].tools}:
        await announced(server)

    second = await agent.run("use it", session_id="s")
    assert "shiny" in {t.name for t in model.requests[2].tools}
    [call] = second.tool_executions
    assert not call.is_error and call.result.output in ("*new*", {"result": "*new*"})
