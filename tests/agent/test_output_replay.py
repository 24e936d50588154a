"""Structured output through real adapters, replaying recorded provider traffic."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tests.cassettes import load
from toolwire import Agent
from toolwire.events import OutputAvailable, OutputPartial
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel


class CityLocation(BaseModel):
    city: str
    country: str


def get_user_country() -> str:
    """Get the user's country."""
    return "Mexico"


def _without_empty_content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in m.items() if not (k == "content" and v == "" and m.get("tool_calls"))}
        for m in messages
    ]


async def test_openai_final_result_tool_mode_replayed() -> None:
    cassette = load("pydantic-ai/tests/models/cassettes/test_openai/test_openai_tool_output.yaml")
    model = OpenAIChatModel("gpt-4o", api_key="test", stream=False, http_client=cassette.client())
    agent = Agent(model, tools=[get_user_country], output_type=CityLocation, output_mode="tool")
    result = await agent.run("What is the largest city in the user country?")
    assert result.output == CityLocation(city="Mexico City", country="Mexico")
    for index, recorded in enumerate(i.request_json for i in cassette.interactions):
        sent = cassette.sent_json(index)
        # the conversation and the tool choice are what the provider recorded; tool descriptions are ours
        # (an assistant message with tool calls always carries content "": some servers require it)
        assert _without_empty_content(sent["messages"]) == recorded["messages"]
        assert sent["tool_choice"] == recorded["tool_choice"] == "required"
        final_tool = next(t for t in sent["tools"] if t["function"]["name"] == "final_result")
        recorded_tool = next(t for t in recorded["tools"] if t["function"]["name"] == "final_result")
        assert final_tool["function"]["parameters"]["properties"].keys() == {"city", "country"}
        assert (
            final_tool["function"]["parameters"]["required"]
            == recorded_tool["function"]["parameters"]["required"]
        )
    assert [x.call.tool_name for x in result.tool_executions] == ["get_user_country"]


async def test_gemini_native_output_with_tools_streamed_replayed() -> None:
    cassette = load(
        "pydantic-ai/tests/models/google/cassettes/test_structured_output/test_native_output_with_function_tools_stream.yaml"
    )
    model = GeminiModel("gemini-3-flash-preview", api_key="test", http_client=cassette.client())
    agent = Agent(model, tools=[get_user_country], output_type=CityLocation)  # auto: native on Gemini
    events = [e async for e in agent.stream("What is the largest city in the user country?")]
    first, second = cassette.sent_json(0), cassette.sent_json(1)
    for sent, recorded in (
        (first, cassette.interactions[0].request_json),
        (second, cassette.interactions[1].request_json),
    ):
        config, recorded_config = sent["generationConfig"], recorded["generationConfig"]
        assert config["responseMimeType"] == recorded_config["responseMimeType"] == "application/json"
        assert config["responseJsonSchema"]["required"] == recorded_config["responseJsonSchema"]["required"]
    # the signature came back on the function call part of the continuation
    assert second["contents"][1]["parts"][0]["thoughtSignature"]
    partials = [e.partial for e in events if isinstance(e, OutputPartial)]
    assert partials[0] == {"city": "Mexico"} and partials[-1] == {"city": "Mexico City", "country": "Mexico"}
    (available,) = [e for e in events if isinstance(e, OutputAvailable)]
    assert available.output == {"city": "Mexico City", "country": "Mexico"}
