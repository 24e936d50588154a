"""What a turn leaves behind, as the store keeps it and the history endpoint returns it (issue 31 items 4
and 6): the error that ended a turn (with the provider as configured) and the sub-agents' names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reliability.wire_checks import adapters, capturing_client, unanswered_calls
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.errors import ProviderHTTPError
from toolwire.events import AgentEvent, ErrorEvent
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore, Store, open_store

from .conftest import live_server


def _ollama(sent: list[Any]) -> OpenAIChatModel:
    """An ``ollama:llama3`` model (the OpenAI wire, the ``ollama`` preset) whose server answers 400."""
    return OpenAIChatModel("llama3", preset="ollama", http_client=capturing_client(sent))


async def _store(kind: str, tmp_path: Path) -> Store:
    return MemoryStore() if kind == "memory" else await open_store(f"sqlite+aiosqlite:///{tmp_path}/t.db")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_failed_turn_keeps_its_error_naming_the_configured_provider(
    kind: str, tmp_path: Path
) -> None:
    store = await _store(kind, tmp_path)
    run = Agent(_ollama([]), retries=0, store=store).stream("Summarise my week", session_id="s")
    events: list[AgentEvent] = []
    with pytest.raises(ProviderHTTPError):
        async for event in run:
            events.append(event)
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert (error.provider, error.model) == ("ollama", "llama3")  # not "openai:llama3"
    assert error.message.startswith("ollama:llama3 ")  # the provider's error names it as configured too
    [stored] = await store.turn_errors("s")
    assert (stored.error_type, stored.message, stored.retryable) == (
        "ProviderHTTPError",
        error.message,
        False,
    )
    assert (stored.provider, stored.model, stored.interaction_id) == ("ollama", "llama3", run.interaction_id)
    # the error is no message: the next turn's request is valid for every provider
    assert [m.role for m in await store.load_history("s")] == ["user"]
    for provider, factory in adapters(sent := []).items():
        with pytest.raises(ProviderHTTPError):
            await Agent(factory(), retries=0, store=store).run("again", session_id="s")
        assert unanswered_calls(provider, sent[-1]) == [], provider
        assert "captured" not in str(sent[-1]), provider  # no earlier error text was sent
    assert len(await store.turn_errors("s")) == 6  # one per failed turn
    # an edit that cuts the turns drops their errors with them
    second = (await store.raw_messages("s"))[1]
    assert await store.truncate_history("s", second.id)
    assert [e.interaction_id for e in await store.turn_errors("s")] == [run.interaction_id]
    assert await store.delete_session("s")
    assert await store.turn_errors("s") == []
    await store.close()


async def test_the_history_endpoint_returns_the_turn_errors_and_the_sub_agents_names() -> None:
    store = MemoryStore()
    researcher = Agent(ScriptedModel([[TextPart(text="T9 is settled.")]]), name="researcher")
    call = ToolCallPart(tool_call_id="call_1", tool_name="research", args={"task": "find T9"})
    main = Agent(
        ScriptedModel([[call], [TextPart(text="Done.")]]),
        tools=[researcher.as_tool("research", "Researches")],
        store=store,
    )
    await main.run("go", session_id="m", user_id="local")  # the server's user in development mode
    with pytest.raises(ProviderHTTPError):
        await Agent(_ollama([]), retries=0, store=store).run("and now?", session_id="m", user_id="local")
    async with live_server(create_app(main, store=store)) as server, server.client() as client:
        body = (await client.get("/api/sessions/m/messages")).json()
    [child] = body["parents"]
    assert body["agents"] == {child: "researcher"}
    [error] = body["errors"]
    assert {k: error[k] for k in ("session_id", "error_type", "provider", "model", "retryable")} == {
        "session_id": "m",
        "error_type": "ProviderHTTPError",
        "provider": "ollama",
        "model": "llama3",
        "retryable": False,
    }
    last_user = [m for m in body["messages"] if m["role"] == "user"][-1]
    assert error["created_at"] >= last_user["created_at"]  # it sits after the turn it ended
