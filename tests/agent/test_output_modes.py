"""What each adapter is sent for structured output, and what comes back: closed schemas for strict modes,
non-object outputs wrapped, the Gemini mode per model family, plain-text ``str`` outputs.

Request bodies are checked against the official SDKs' request types (``tests/models/sdk_types.py``); the
providers' answers are written in their published response formats and served by an ``httpx.MockTransport``
(the network edge).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import toolwire
from tests.models.sdk_types import check_anthropic, check_gemini, check_openai_chat, check_openai_responses
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Message, Usage
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.anthropic._request import build_body as anthropic_body
from toolwire.models.base import ModelRequest
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel
from toolwire.models.scripted import ScriptedModel


class Place(BaseModel):
    name: str
    population: int | None = None


class Forecast(BaseModel):
    city: str
    note: str = "none"
    """Optional and not nullable: strict mode sends it required and nullable; null means the default."""
    tags: list[str] = []
    place: Place | None = None


def lookup(city: str) -> str:
    """Look a city up."""
    return city


class _Provider:
    """Answers every request with the next canned body (in the provider's published format), keeping
    the request bodies sent."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    def client(self) -> httpx.AsyncClient:
        def handle(request: httpx.Request) -> httpx.Response:
            self.sent.append(json.loads(request.content))
            return httpx.Response(200, json=self.answers.pop(0))

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


def _chat_answer(content: str, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _gemini_answer(part: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3, "totalTokenCount": 8},
        "modelVersion": "gemini-2.5-flash",
    }


def _objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``schema``."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(_objects(item))
    return found


# -- OpenAI strict mode -------------------------------------------------------------------------


async def test_openai_chat_gets_a_closed_strict_schema_and_nulls_mean_defaults() -> None:
    provider = _Provider(
        _chat_answer('{"city": "Oslo", "note": null, "tags": ["cold"], "place": null}'),
    )
    model = OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=provider.client())
    result = await Agent(model, output_type=Forecast).run("weather?")
    assert result.output == Forecast(city="Oslo", tags=["cold"])  # note: null -> its default
    (body,) = provider.sent
    check_openai_chat(body)
    fmt = body["response_format"]["json_schema"]
    assert fmt["strict"] is True
    schema = fmt["schema"]
    objects = _objects(schema)
    assert len(objects) == 2  # Forecast and Place
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    assert schema["properties"]["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"}


def test_openai_responses_gets_the_same_closed_strict_schema() -> None:
    request = ModelRequest(messages=[Message.user("x")], output_schema=Forecast.model_json_schema())
    body, warnings = OpenAIResponsesModel("gpt-5", api_key="k").build_body(request)
    check_openai_responses(body)
    fmt = body["text"]["format"]
    assert fmt["strict"] is True and not warnings
    for obj in _objects(fmt["schema"]):
        assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])


def test_a_schema_that_cannot_be_closed_falls_back_visibly() -> None:
    class Scores(BaseModel):
        by_name: dict[str, int]

    request = ModelRequest(messages=[Message.user("x")], output_schema=Scores.model_json_schema())
    body, warnings = OpenAIResponsesModel("gpt-5", api_key="k").build_body(request)
    check_openai_responses(body)
    assert body["text"]["format"]["strict"] is False
    assert warnings == [
        "strict structured output is off: by_name has free-form keys (additionalProperties) and cannot be closed"
    ]


# -- Anthropic native output --------------------------------------------------------------------


def test_anthropic_output_config_closes_every_object() -> None:
    request = ModelRequest(messages=[Message.user("x")], output_schema=Forecast.model_json_schema())
    body, warnings = anthropic_body(request, AnthropicModel("claude-sonnet-4-5", api_key="k"))
    check_anthropic(body)
    schema = body["output_config"]["format"]["schema"]
    objects = _objects(schema)
    assert len(objects) == 2 and all(obj["additionalProperties"] is False for obj in objects)
    assert schema["required"] == ["city"]  # optional stays optional on Anthropic
    assert not warnings


# -- non-object outputs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (list[int], {"result": [1, 2, 3]}, [1, 2, 3]),
        (int | str, {"result": "seven"}, "seven"),
        (list[Place], {"result": [{"name": "Oslo", "population": None}]}, [Place(name="Oslo")]),
    ],
)
async def test_non_object_outputs_are_wrapped_in_an_object_and_unwrapped(
    output_type: Any, answer: dict[str, Any], expected: Any
) -> None:
    provider = _Provider(_chat_answer(json.dumps(answer)))
    model = OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=provider.client())
    result = await Agent(model, output_type=output_type).run("go")
    assert result.output == expected
    (body,) = provider.sent
    check_openai_chat(body)
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "object" and schema["required"] == ["result"]
    assert schema["additionalProperties"] is False
    assert "$defs" not in schema["properties"]["result"]  # definitions live at the root the refs name
    assert body["response_format"]["json_schema"]["strict"] is True


async def test_output_type_str_accepts_plain_text() -> None:
    model = ScriptedModel([[TextPart("Oslo is cold today.")]])
    result = await Agent(model, output_type=str).run("weather?")
    assert result.output == "Oslo is cold today."
    request = model.requests[0].request
    assert request.output_schema is None and [t.name for t in request.tools] == []
    assert len(model.requests) == 1


# -- Gemini: the mode per model family ----------------------------------------------------------


async def test_gemini_2_with_tools_asks_through_the_final_result_tool() -> None:
    provider = _Provider(
        _gemini_answer({"functionCall": {"name": "final_result", "args": {"city": "Oslo"}}}),
    )
    model = GeminiModel("gemini-2.5-flash", api_key="k", stream=False, http_client=provider.client())
    result = await Agent(model, tools=[lookup], output_type=Forecast).run("weather?")
    assert result.output == Forecast(city="Oslo")
    (body,) = provider.sent
    check_gemini(body)
    assert "responseMimeType" not in body.get("generationConfig", {})  # Gemini 2.x answers 400 to both
    names = [f["name"] for t in body["tools"] for f in t.get("functionDeclarations", [])]
    assert names == ["lookup", "final_result"]


async def test_gemini_2_without_tools_and_gemini_3_with_tools_use_native_output() -> None:
    for name, tools in (("gemini-2.5-flash", []), ("gemini-3-flash-preview", [lookup])):
        provider = _Provider(_gemini_answer({"text": '{"city": "Oslo"}'}))
        model = GeminiModel(name, api_key="k", stream=False, http_client=provider.client())
        result = await Agent(model, tools=tools, output_type=Forecast).run("weather?")
        assert result.output == Forecast(city="Oslo")
        (body,) = provider.sent
        check_gemini(body)
        assert body["generationConfig"]["responseMimeType"] == "application/json", name
        assert body["generationConfig"]["responseJsonSchema"]["required"] == ["city"]


# -- NoObjectGenerated --------------------------------------------------------------------------


async def test_no_object_generated_lists_each_error_with_usage_and_finish_reason() -> None:
    provider = _Provider(
        _chat_answer('{"city": 3, "tags": "x"}'),
        _chat_answer('{"city": 4, "tags": "y"}', finish="length"),
    )
    model = OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=provider.client())
    with pytest.raises(toolwire.NoObjectGenerated) as info:
        await Agent(model, output_type=Forecast, output_retries=1).run("weather?")
    error = info.value
    assert error.errors == ["city: Input should be a valid string", "tags: Input should be a valid list"]
    assert error.usage == Usage(input_tokens=22, output_tokens=14, requests=2)
    assert error.finish_reason == "length"
    assert error.raw_output == '{"city": 4, "tags": "y"}'


async def test_tool_mode_errors_are_listed_separately_too() -> None:
    model = ScriptedModel([[ToolCallPart("final_result", tool_call_id="f", args={"city": 1, "tags": 2})]])
    with pytest.raises(toolwire.NoObjectGenerated) as info:
        await Agent(model, output_type=Forecast, output_mode="tool", output_retries=0).run("go")
    assert len(info.value.errors) == 2 and info.value.finish_reason == "tool-calls"


class Stop(BaseModel):
    name: str
    note: str = "-"


class Trip(BaseModel):
    stop: Stop | None = None
    stops: list[Stop] = []


async def test_nulls_of_optional_properties_are_dropped_inside_nested_and_nullable_objects() -> None:
    answer = {"stop": {"name": "Oslo", "note": None}, "stops": [{"name": "Bergen", "note": None}]}
    provider = _Provider(_chat_answer(json.dumps(answer)))
    model = OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=provider.client())
    result = await Agent(model, output_type=Trip).run("trip?")
    assert result.output == Trip(stop=Stop(name="Oslo"), stops=[Stop(name="Bergen")])
    check_openai_chat(provider.sent[0])
