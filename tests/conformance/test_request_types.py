"""The conformance scenario's requests, every turn of every adapter, checked against the official SDKs'
request types (``tests/models/sdk_types.py``): the first request, the continuation after both tool results,
and the follow-up from a fresh agent that loaded the history from the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.test_conformance import MODELS, get_time, get_weather
from tests.conformance.wire import WireServer
from tests.models import sdk_types
from toolwire import Agent, open_store


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_every_request_fits_the_sdk_request_type(provider: str, tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'conformance.db'}"
    async with WireServer() as server:
        store = await open_store(db)
        agent = Agent(MODELS[provider](server.base), tools=[get_weather, get_time], store=store)
        run = agent.stream("Weather and time in Paris?")
        _ = [e async for e in run]
        await agent.aclose()
        await store.close()

        store = await open_store(db)
        follow = Agent(MODELS[provider](server.base), tools=[get_weather, get_time], store=store)
        await follow.run("What was the temperature?", session_id=run.session_id)
        await follow.aclose()
        await store.close()

    bodies = server.requests[provider]
    assert len(bodies) == 3
    for body in bodies:
        match provider:
            case "openai-chat":
                sdk_types.check_openai_chat(body)
            case "openai-responses":
                sdk_types.check_openai_responses(body)
            case "anthropic":
                sdk_types.check_anthropic(body)
            case "gemini":
                sdk_types.check_gemini(body)
            case "bedrock":
                sdk_types.check_bedrock(body, model_id="conf-model", stream=True)
            case "anthropic-vertex":
                sdk_types.check_anthropic_on_platform(body, version="vertex-2023-10-16", model="conf-model")
            case "anthropic-bedrock":
                sdk_types.check_anthropic_on_platform(body, version="bedrock-2023-05-31", model="conf-model")
            case _:
                raise AssertionError(f"no SDK type check for {provider}")
