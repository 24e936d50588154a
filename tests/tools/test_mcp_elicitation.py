"""Elicitation (``elicitation/create``) asked by a real MCP server (the SDK's, over stdio and streamable
HTTP) while it serves a tool call, answered by ``elicitation_handler=`` (without one, a run pauses for the
answer: tests/tools/test_mcp_asking.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools.mcp import ElicitationAnswer, ElicitationRequest, MCPServerHTTP, MCPServerStdio

SERVER = Path(__file__).parent / "_mcp_server.py"


async def book_through_the_loop(source: MCPServerStdio | MCPServerHTTP) -> str:
    call = ToolCallPart(tool_call_id="b1", tool_name="book", args={"place": "Chez Toolwire"})
    agent = Agent(ScriptedModel([[call], [TextPart("ok")]]), tools=[source], store=MemoryStore())
    [execution] = (await agent.run("book", session_id="s")).tool_executions
    assert not execution.is_error
    output = execution.result.output
    return str(output["result"] if isinstance(output, dict) else output)


async def test_the_handler_answers_the_servers_question(servers: Any) -> None:
    asked: list[ElicitationRequest] = []

    async def handler(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return ElicitationAnswer(action="accept", content={"date": "2026-12-24", "seats": 4})

    source = servers(elicitation_handler=handler)
    assert await book_through_the_loop(source) == "booked Chez Toolwire on 2026-12-24 for 4"
    [request] = asked
    assert request.message == "When, and for how many, at Chez Toolwire?"
    assert request.mode == "form" and set(request.requested_schema["properties"]) == {"date", "seats"}
    assert request.server == source.source_name
    assert request.context is not None and request.context.tool_call_id == "b1"


async def test_a_mapping_accepts_and_a_decline_is_passed_on(servers: Any) -> None:
    def accept(request: ElicitationRequest) -> dict[str, Any]:  # sync handlers work too
        return {"date": "today", "seats": 2}

    assert await book_through_the_loop(servers(elicitation_handler=accept)) == (
        "booked Chez Toolwire on today for 2"
    )
    decline = servers(elicitation_handler=lambda request: ElicitationAnswer(action="decline"))
    assert await book_through_the_loop(decline) == "not booked: decline"


async def test_a_failing_handler_is_an_error_to_the_server(servers: Any) -> None:
    def broken(request: ElicitationRequest) -> ElicitationAnswer:
        raise RuntimeError("no user here")

    output = await book_through_the_loop(servers(elicitation_handler=broken))
    assert output.startswith("elicitation error:") and "no user here" in output


async def test_without_a_handler_a_question_outside_a_run_is_declined(servers: Any) -> None:
    """No run to ask through (a direct call): the server is told ``decline``. Within a run, the question
    pauses it (tests/tools/test_mcp_asking.py)."""
    output = await servers().call("book", {"place": "Chez Toolwire"})
    text = output["result"] if isinstance(output, dict) else output
    assert text == "not booked: decline"
