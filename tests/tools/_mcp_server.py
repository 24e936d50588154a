"""A real MCP server for the tests: `python _mcp_server.py stdio` or `python _mcp_server.py http PORT`.

Tools: add, echo, fail (isError), die (the process exits mid-call), slow, count (how many calls reached
this process, so a test can prove a rejected call never arrived).
``grow`` adds a tool ``shiny`` and announces it (``notifications/tools/list_changed``).
``summarize`` asks the client's model (``sampling/createMessage``) and returns its answer, or the error.
``book`` asks the user (``elicitation/create``) for a date and a seat count, and tells what it got.
Resources: a text note, a binary logo and a template of notes by name. Prompts: ``review`` (arguments
``code`` and an optional ``language``) answering with a user and an assistant message.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Literal

from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel

try:  # mcp 2.x
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[no-redef]
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

server = _Server("toolwire-test")
calls = {"n": 0}


@server.tool(title="Add two integers")
def add(a: int, b: int) -> int:
    """Add a and b."""
    calls["n"] += 1
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    calls["n"] += 1
    return text


@server.tool()
def fail(reason: str = "boom") -> str:
    """Always fails."""
    calls["n"] += 1
    raise ToolError(f"refused: {reason}")  # the SDK reports its own ToolError's text as an isError result


@server.tool()
def die() -> str:
    """Kills this server process in the middle of the call."""
    os._exit(3)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    calls["n"] += 1
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def count() -> int:
    """Calls that reached this process (including this one)."""
    calls["n"] += 1
    return calls["n"]


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool shiny to this server and tells the client its tools changed."""

    def shiny(word: str) -> str:
        """Polishes a word."""
        return f"*{word}*"

    server.add_tool(shiny)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model for a summary of the text."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    try:
        result = await ctx.session.create_message(
            messages=[message],
            max_tokens=64,
            system_prompt="Answer in five words.",
            stop_sequences=["STOP"],
            related_request_id=ctx.request_id,
        )
    except Exception as exc:  # the client refused: show the tool's caller what it said
        return f"sampling error: {exc}"
    content = result.content
    return f"{getattr(result, 'model', '?')} said: {getattr(content, 'text', content)}"


class Booking(BaseModel):
    date: str
    seats: int


@server.tool()
async def book(place: str, ctx: Context) -> str:
    """Books a table, asking the user for the details."""
    calls["n"] += 1
    try:
        answer = await ctx.elicit(f"When, and for how many, at {place}?", schema=Booking)
    except Exception as exc:  # the client cannot ask: say so
        return f"elicitation error: {exc}"
    if answer.action == "accept" and answer.data is not None:
        return f"booked {place} on {answer.data.date} for {answer.data.seats}"
    return f"not booked: {answer.action}"


class Dates(BaseModel):
    start: str
    nights: int


class Seat(BaseModel):
    seat: Literal["window", "aisle"]


@server.tool()
async def trip(city: str, ctx: Context) -> str:
    """Plans a trip, asking two questions in turn."""
    calls["n"] += 1
    dates = await ctx.elicit(f"Which dates for {city}?", schema=Dates)
    if dates.action != "accept" or dates.data is None:
        return f"no trip: {dates.action}"
    seat = await ctx.elicit("Window or aisle?", schema=Seat)
    if seat.action != "accept" or seat.data is None:
        return f"no seat: {seat.action}"
    return f"{city} from {dates.data.start} for {dates.data.nights} nights, {seat.data.seat} seat"


@server.resource("notes://readme", name="readme", title="Read me", description="How to use this server")
def readme() -> str:
    return "Use add to add two integers."


@server.resource("images://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG\r\n\x1a\nnot-really-a-png"


@server.resource("notes://by-name/{name}", name="note")
def note(name: str) -> str:
    return f"the note called {name}"


@server.prompt(title="Code review", description="Review a piece of code")
def review(code: str, language: str = "python") -> list[dict[str, object]]:
    return [
        {"role": "user", "content": {"type": "text", "text": f"Review this {language} code:\n{code}"}},
        {"role": "assistant", "content": {"type": "text", "text": "I will look for bugs first."}},
    ]


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
