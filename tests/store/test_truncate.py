"""``Store.truncate_history``: what ``regenerate-message`` and edits drop (SQLite, PostgreSQL, memory)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.store.conftest import Target
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore, Store


def _chat(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "user" and last.text == "delegate":
        return [ToolCallPart(tool_call_id="call_1", tool_name="helper", args={"task": "help"})]
    return [TextPart(text=f"re: {next(m.text for m in reversed(request.messages) if m.role == 'user')}")]


async def _check(store: Store) -> None:
    helper = Agent(ScriptedModel([[TextPart(text="helped")]]), name="helper")
    agent = Agent(ScriptedModel(_chat), tools=[helper.as_tool("helper", "Helps.")], store=store)
    await agent.run("hello", session_id="c1", user_id="u")
    kept = await store.raw_messages("c1")
    await agent.run("delegate", session_id="c1", user_id="u")
    (sub,) = [s.id for s in await store.list_sessions(user_session_id="c1") if s.id != "c1"]
    assert await store.raw_messages(sub)
    cut = (await store.raw_messages("c1"))[len(kept)]
    assert cut.role == "user" and cut.text == "delegate"

    assert not await store.truncate_history("c1", "no-such-message")
    assert await store.truncate_history("c1", cut.id)

    assert await store.raw_messages("c1") == kept
    assert await store.tool_calls("c1") == []
    assert await store.get_session(sub) is None and await store.raw_messages(sub) == []
    assert await store.load_history("c1") == kept
    # the conversation goes on from there
    result = await agent.run("again", session_id="c1", user_id="u")
    assert result.output == "re: again"
    assert [m.text for m in await store.raw_messages("c1") if m.role == "user"] == ["hello", "again"]


async def test_truncate_history_sql(target: Target) -> None:
    store = await target.open()
    try:
        await _check(store)
    finally:
        await store.close()


async def test_truncate_history_memory() -> None:
    await _check(MemoryStore())
