"""MCP resources and prompts against a real MCP server (the SDK's, over stdio and streamable HTTP): the
server object's own methods, and ``resources_as_tool=True`` driven through the real Agent loop."""

from __future__ import annotations

import base64
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools.mcp import RESOURCE_TOOL, MCPServerHTTP, MCPServerStdio, MCPToolError

SERVER = Path(__file__).parent / "_mcp_server.py"
LOGO = b"\x89PNG\r\n\x1a\nnot-really-a-png"


@pytest.fixture(params=["stdio", "http"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[MCPServerStdio | MCPServerHTTP]:
    source: MCPServerStdio | MCPServerHTTP
    if request.param == "stdio":
        source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"], timeout=10, resources_as_tool=True)
    else:
        source = MCPServerHTTP(request.getfixturevalue("http_url"), timeout=10, resources_as_tool=True)
    yield source
    await source.aclose()


async def test_list_and_read_resources(server: MCPServerStdio | MCPServerHTTP) -> None:
    listed = {r.uri: r for r in await server.list_resources()}
    assert set(listed) == {"notes://readme", "images://logo"}
    assert listed["notes://readme"].title == "Read me"
    assert listed["notes://readme"].description == "How to use this server"
    assert listed["images://logo"].mime_type == "image/png"

    [text] = await server.read_resource("notes://readme")
    assert (text.text, text.blob) == ("Use add to add two integers.", None)
    [image] = await server.read_resource("images://logo")
    assert image.mime_type == "image/png" and image.text is None
    assert base64.b64decode(image.blob or "") == LOGO
    [templated] = await server.read_resource("notes://by-name/groceries")  # from a resource template
    assert templated.text == "the note called groceries"


async def test_an_unknown_resource_is_an_error_and_keeps_the_connection(
    server: MCPServerStdio | MCPServerHTTP,
) -> None:
    with pytest.raises(MCPToolError, match="refused resources/read nope://x"):
        await server.read_resource("nope://x")
    assert server.restarts == 0  # a refusal is an answer: the server is healthy
    assert len(await server.read_resource("notes://readme")) == 1
    assert server.restarts == 0


async def test_list_and_get_prompts(server: MCPServerStdio | MCPServerHTTP) -> None:
    [review] = await server.list_prompts()
    assert (review.name, review.title, review.description) == (
        "review",
        "Code review",
        "Review a piece of code",
    )
    assert [(a.name, a.required) for a in review.arguments] == [("code", True), ("language", False)]

    filled = await server.get_prompt("review", {"code": "x = 1", "language": "rust"})
    assert [m.role for m in filled.messages] == ["user", "assistant"]
    assert filled.messages[0].text == "Review this rust code:\nx = 1"
    assert filled.messages[1].text == "I will look for bugs first."

    with pytest.raises(MCPToolError, match="code"):
        await server.get_prompt("review", {})


async def test_resources_as_one_tool_through_the_loop(server: MCPServerStdio | MCPServerHTTP) -> None:
    tools = {t.name: t for t in await server.list_tools()}
    resource_tool = tools[RESOURCE_TOOL]
    assert "notes://readme: Read me (How to use this server)" in resource_tool.description
    assert "images://logo" in resource_tool.description
    assert resource_tool.parameters["required"] == ["uri"]

    calls = [
        ToolCallPart(tool_call_id="r1", tool_name=RESOURCE_TOOL, args={"uri": "notes://readme"}),
        ToolCallPart(tool_call_id="r2", tool_name=RESOURCE_TOOL, args={"uri": "images://logo"}),
        ToolCallPart(tool_call_id="r3", tool_name=RESOURCE_TOOL, args={"uri": "nope://x"}),
        ToolCallPart(tool_call_id="r4", tool_name=RESOURCE_TOOL, args={}),  # invalid: never reaches it
    ]
    agent = Agent(ScriptedModel([calls, [TextPart(text="done")]]), tools=[server], store=MemoryStore())
    result = await agent.run("read", session_id="s")
    by_id = {e.call.tool_call_id: e for e in result.tool_executions}
    assert by_id["r1"].result.output == "Use add to add two integers."
    [blob] = by_id["r2"].result.output
    assert blob["type"] == "resource" and blob["mimeType"] == "image/png"
    assert base64.b64decode(blob["blob"]) == LOGO
    assert by_id["r3"].is_error and "Unknown resource: nope://x" in by_id["r3"].result.output
    assert by_id["r4"].is_error and "invalid arguments" in by_id["r4"].result.output


async def test_without_the_option_there_is_no_resource_tool() -> None:
    source = MCPServerStdio(sys.executable, [str(SERVER), "stdio"])
    try:
        assert RESOURCE_TOOL not in {t.name for t in await source.list_tools()}
    finally:
        await source.aclose()
