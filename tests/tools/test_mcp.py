"""MCP tool sources against a real MCP server (stdio subprocess and streamable HTTP on loopback),
driven through the real Agent loop, executor and store."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools._mcp_process import free_port
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools import MCPServerHTTP, MCPServerStdio, Toolset

SERVER = Path(__file__).parent / "_mcp_server.py"


def stdio_server(**kwargs: Any) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, [str(SERVER), "stdio"], **kwargs)


@pytest.fixture(params=["stdio", "http"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[MCPServerStdio | MCPServerHTTP]:
    source: MCPServerStdio | MCPServerHTTP
    if request.param == "stdio":
        source = stdio_server(timeout=5)
    else:
        source = MCPServerHTTP(request.getfixturevalue("http_url"), timeout=5)
    yield source
    await source.aclose()


def plain(output: Any) -> str:
    """A scalar tool output as text: servers send it as text or as structured ``{"result": value}``."""
    if isinstance(output, dict) and set(output) == {"result"}:
        output = output["result"]
    return str(output)


def calls(*specs: tuple[str, str, dict[str, Any]]) -> list[ToolCallPart]:
    return [ToolCallPart(tool_call_id=cid, tool_name=name, args=args) for cid, name, args in specs]


async def run_calls(
    source: Any, *specs: tuple[str, str, dict[str, Any]], **agent_kwargs: Any
) -> dict[str, Any]:
    """One step with these calls through the real loop; returns results by call id."""
    model = ScriptedModel([calls(*specs), [TextPart(text="done")]])
    store = MemoryStore()
    agent = Agent(model, tools=[source], store=store, **agent_kwargs)
    result = await agent.run("go", session_id="s")
    return {e.call.tool_call_id: e for e in result.tool_executions}


async def test_tools_keep_their_schema_and_title(server: MCPServerStdio | MCPServerHTTP) -> None:
    tools = {t.name: t for t in await server.list_tools()}
    assert {"add", "echo", "fail", "die", "slow", "count"} <= set(tools)
    add = tools["add"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert set(add.parameters["required"]) == {"a", "b"}
    assert add.title == "Add two integers"
    assert add.description == "Add a and b."


async def test_an_mcp_tool_title_reaches_the_events_and_the_stored_call(
    server: MCPServerStdio | MCPServerHTTP,
) -> None:
    """The provider names no title; the MCP server's ``title`` for ``add`` is what clients and the store see."""
    model = ScriptedModel([calls(("c1", "add", {"a": 1, "b": 2})), [TextPart(text="3")]])
    store = MemoryStore()
    agent = Agent(model, tools=[server], store=store)
    events = [e async for e in agent.stream("add", session_id="s")]
    titles = {e.type: getattr(e, "title", None) for e in events if e.type.startswith("tool-input-")}
    assert titles == {
        "tool-input-start": "Add two integers",
        "tool-input-delta": None,
        "tool-input-available": "Add two integers",
    }
    stored = [c for m in await store.load_history("s") for c in m.tool_calls]
    assert [c.title for c in stored] == ["Add two integers"]


async def test_calls_results_errors_and_validation(server: MCPServerStdio | MCPServerHTTP) -> None:
    before = await run_calls(server, ("c0", "count", {}))
    counted = int(plain(before["c0"].result.output))
    results = await run_calls(
        server,
        ("c1", "add", {"a": 2, "b": 40}),
        ("c2", "echo", {"text": "héllo"}),
        ("c3", "fail", {"reason": "nope"}),
        ("c4", "add", {"a": "two", "b": 1}),  # schema-invalid: rejected before the call
    )
    # calls of one step run concurrently: count in a later step, once the others are done
    results.update(await run_calls(server, ("c5", "count", {})))
    assert plain(results["c1"].result.output) == "42"
    assert plain(results["c2"].result.output) == "héllo"
    assert results["c3"].is_error and "refused: nope" in results["c3"].result.output
    assert results["c4"].is_error and "invalid arguments for add" in results["c4"].result.output
    assert "a:" in results["c4"].result.output
    after_count = int(plain(results["c5"].result.output))
    # c1, c2, c3 and c5 reached the server; c4 never did
    assert after_count == counted + 4


async def test_timeout_is_an_error_result_then_the_server_is_used_again(
    server: MCPServerStdio | MCPServerHTTP,
) -> None:
    server.timeout = 0.5
    results = await run_calls(server, ("c1", "slow", {"seconds": 5}))
    assert results["c1"].is_error and "did not answer slow within 0.5s" in results["c1"].result.output
    server.timeout = 5
    again = await run_calls(server, ("c2", "add", {"a": 1, "b": 1}))
    assert not again["c2"].is_error


async def test_stdio_server_dying_mid_call_gives_an_error_result_and_restarts() -> None:
    source = stdio_server(timeout=10)
    try:
        first_pid = (await run_calls(source, ("p1", "pid", {})))["p1"].result.output
        started = time.monotonic()
        died = await run_calls(source, ("d1", "die", {}))
        assert time.monotonic() - started < 9, "a dead server must not hang the call until the timeout"
        assert died["d1"].is_error and "mcp:" in died["d1"].result.output
        after = await run_calls(source, ("p2", "pid", {}), ("a1", "add", {"a": 3, "b": 4}))
        assert not after["a1"].is_error
        assert after["p2"].result.output != first_pid  # a new process
        assert source.restarts == 1
    finally:
        await source.aclose()


async def test_aclose_leaves_no_server_process() -> None:
    source = stdio_server()
    pid = int(plain((await run_calls(source, ("p", "pid", {})))["p"].result.output))
    os.kill(pid, 0)  # alive
    await source.aclose()
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the MCP server process outlived aclose()")
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("mcp:")] == []


async def test_priority_prefix_and_listing(caplog: pytest.LogCaptureFixture) -> None:
    def echo(text: str) -> str:
        """The function tool wins over the MCP tool of the same name."""
        return f"function:{text}"

    plain = stdio_server()
    prefixed = stdio_server(prefix="m_", name="second")
    try:
        agent = Agent(ScriptedModel([]), tools=[plain, echo, prefixed, Toolset([], name="empty")])
        with caplog.at_level(logging.WARNING, logger="toolwire.tools"):
            tools = {t.name: t for t in await agent.list_tools()}
            await agent.list_tools()
        assert tools["echo"].source == "function"
        assert tools["add"].source.startswith("mcp:")
        assert tools["m_add"].source == "mcp:second"
        warnings = [r for r in caplog.records if "'echo'" in r.getMessage()]
        assert len(warnings) == 1  # once, not per listing
        results = await run_calls(prefixed, ("c1", "m_add", {"a": 1, "b": 2}))
        assert not results["c1"].is_error
        filtered = await Agent(
            ScriptedModel([calls(("x", "add", {"a": 1, "b": 1})), [TextPart(text="ok")]]), tools=[plain]
        ).run("go", exclude_tools=["add"])
        assert filtered.tool_executions[0].is_error  # excluded for this run: the model cannot use it
    finally:
        await plain.aclose()
        await prefixed.aclose()


async def test_unreachable_http_server_is_an_error_not_a_hang() -> None:
    source = MCPServerHTTP(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=5)
    agent = Agent(ScriptedModel([[TextPart(text="x")]]), tools=[source])
    started = time.monotonic()
    with pytest.raises(Exception, match="cannot connect to mcp:"):
        await agent.run("go")
    assert time.monotonic() - started < 10
    await source.aclose()
