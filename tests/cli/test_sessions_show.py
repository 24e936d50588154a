"""``toolwire sessions show`` tells the story the page tells (issue 31): one ``Transcript.from_history`` of
the same history, so a sub-agent's messages sit under its name, a failed turn's error after that turn, and
the calls a paused run waits for are listed as waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.helpers import sqlite_url, toolwire
from tests.reliability.wire_checks import capturing_client
from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.errors import ProviderHTTPError
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel
from toolwire.store import open_store


@tool(requires_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refunds an order."""
    return f"refunded {amount} on {order_id}"


async def _conversation(url: str) -> None:
    store = await open_store(url)
    try:
        archivist = Agent(ScriptedModel([[TextPart(text="Two memos from March.")]]), name="archivist")
        search = ToolCallPart(tool_call_id="call_1", tool_name="search_archive", args={"task": "Q3 memos"})
        pay = ToolCallPart(tool_call_id="call_2", tool_name="refund", args={"order_id": "A1", "amount": 40.0})
        model = ScriptedModel(
            [[search], [TextPart(text="Found them.")], [TextPart(text="Hello again.")], [pay]]
        )
        main = Agent(model, tools=[archivist.as_tool("search_archive", "Searches"), refund], store=store)
        await main.run("Find the Q3 memos", session_id="s")
        ollama = OpenAIChatModel("llama3", preset="ollama", http_client=capturing_client([]))
        with pytest.raises(ProviderHTTPError):
            await Agent(ollama, retries=0, store=store).run("Summarise them", session_id="s")
        await main.run("Hello", session_id="s")
        await main.run("Refund A1", session_id="s")  # pauses: the refund waits for approval
    finally:
        await store.close()


def test_show_tells_the_pages_story(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "t.db")
    asyncio.run(_conversation(url))
    shown = toolwire("sessions", "show", "s", "--store", url)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    # the sub-agent's task and answer, under its own name, inside the turn that asked for them
    task = lines.index("  task for sub-agent archivist: Q3 memos")
    assert lines[task + 1] == "  sub-agent archivist: Two memos from March.", lines
    assert lines.index("user: Find the Q3 memos") < task < lines.index("assistant: Found them."), lines
    # the failed turn keeps its error, naming the provider as configured, before the next turn
    error = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    assert lines[error].startswith("error: the answer failed (model ollama:llama3): "), lines
    assert lines.index("user: Summarise them") < error < lines.index("user: Hello"), lines
    # the paused turn's call, waiting for a person
    assert "  ⏸ refund awaiting approval" in lines, lines
