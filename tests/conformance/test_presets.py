"""The conformance scenario (``test_conformance``) through provider presets, over real HTTP on 127.0.0.1: a
preset changes the URL, the key and the quirks, never the events, the stored rows or what the follow-up
carries. Mistral's follow-up also shows its tool-call ids mapped to 9 letters and digits, the same for each
call and its result, while the stored history keeps the server's ids."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conformance.test_conformance import (
    GOLDEN,
    followup_carries_everything,
    get_time,
    get_weather,
    normalise,
    stored_shape,
)
from tests.conformance.wire import WireServer
from toolwire import Agent, open_store
from toolwire.models._catalog import PRESETS
from toolwire.models.base import Model
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel


def chat(preset: str) -> Callable[[str], Model]:
    # An explicit key: a preset's own variable never goes to 127.0.0.1 (api_key="" for self-hosted ones).
    key = "" if PRESETS[preset].self_hosted else "k"
    return lambda base: OpenAIChatModel("conf-model", preset=preset, base_url=f"{base}/v1", api_key=key)


MODELS: dict[str, tuple[str, Callable[[str], Model]]] = {
    name: ("openai-chat", chat(name)) for name in PRESETS
} | {
    "lmstudio-responses": (
        "openai-responses",
        lambda base: OpenAIResponsesModel("conf-model", preset="lmstudio", base_url=f"{base}/v1"),
    )
}


@pytest.mark.parametrize("name", sorted(MODELS))
async def test_the_scenario_through_each_preset(name: str, tmp_path: Path) -> None:
    wire, build = MODELS[name]
    db = tmp_path / "presets.db"
    async with WireServer() as server:
        store = await open_store(f"sqlite+aiosqlite:///{db}")
        agent = Agent(build(server.base), tools=[get_weather, get_time], store=store)
        run = agent.stream("Weather and time in Paris?")
        events = [e async for e in run]
        session_id = run.session_id
        await agent.aclose()
        await store.close()
        assert normalise(events) == GOLDEN["first_turn"], name

        fresh_store = await open_store(f"sqlite+aiosqlite:///{db}")
        follow = Agent(build(server.base), tools=[get_weather, get_time], store=fresh_store)
        result = await follow.run("What was the temperature?", session_id=session_id)
        assert result.output == "It was 21°C."
        stored = await fresh_store.raw_messages(session_id)
        assert stored_shape(stored) == GOLDEN["stored_messages"], name
        await follow.aclose()
        await fresh_store.close()

    assert len(server.requests[wire]) == 3
    followup = server.requests[wire][2]
    followup_carries_everything(wire, followup)
    if name == "mistral":
        assistant = next(m for m in followup["messages"] if m.get("tool_calls"))
        assert all(re.fullmatch(r"[A-Za-z0-9]{9}", c["id"]) for c in assistant["tool_calls"])
        assert "call_get_weather" not in str(followup)
        assert "call_get_weather" in str(stored)  # history keeps the server's own ids
    if name == "deepseek":
        assistant = next(m for m in followup["messages"] if m.get("tool_calls"))
        assert "reasoning_content" in assistant
