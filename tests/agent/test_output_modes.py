"""What each adapter is sent for structured output, and what comes back: closed schemas for strict modes,
non-object outputs wrapped, the Gemini mode per model family, plain-text ``str`` outputs, prompted mode
(the schema in the instructions) and where ``auto`` picks it.

Request bodies are checked against the official SDKs' request types (``tests/models/sdk_types.py``); the
providers' answers are written in their published response formats and served by an ``httpx.MockTransport``
(the network edge).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import toolwire
from tests.models.sdk_types import (
    check_anthropic,
    check_bedrock,
    check_gemini,
    check_openai_chat,
    check_openai_responses,
)
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.events import OutputPartial
from toolwire.messages import Message, Usage
from toolwire.models._catalog import get_preset
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.anthropic._request import build_body as anthropic_body
from toolwire.models.base import ModelRequest, ModelStreamPart
from toolwire.models.bedrock._request import build_body as bedrock_body
from toolwire.models.gemini import GeminiModel
from toolwire.models.gemini._request import build_body as gemini_body
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


# -- prompted mode: the schema in the instructions, nothing provider-specific -------------------

PROMPTED = "Answer with one JSON object matching this schema"


async def _prompted_request(output_type: Any = Forecast, answer: str = '{"city": "Oslo"}') -> ModelRequest:
    """The request a prompted run sends (the run's own, recorded by the scripted model)."""
    model = ScriptedModel([[TextPart(answer)]])
    agent = Agent(model, output_type=output_type, output_mode="prompted", instructions="Be brief.")
    await agent.run("weather?")
    return model.requests[0].request


async def test_prompted_mode_sends_the_schema_in_every_wires_system_prompt_and_nothing_else() -> None:
    request = await _prompted_request()
    assert request.output_schema is None and list(request.tools) == []
    assert [m.role for m in request.messages] == ["user"]  # the schema is no stored message
    assert request.instructions is not None and request.instructions.startswith("Be brief.\n\n")
    assert PROMPTED in request.instructions
    assert json.dumps(Forecast.model_json_schema(), ensure_ascii=False) in request.instructions

    chat, _ = OpenAIChatModel("gpt-4o", api_key="k").build_body(request)
    check_openai_chat(chat)
    assert "response_format" not in chat and "tools" not in chat
    assert chat["messages"][0] == {"role": "system", "content": request.instructions}

    responses, _ = OpenAIResponsesModel("gpt-5", api_key="k").build_body(request)
    check_openai_responses(responses)
    assert "format" not in responses.get("text", {}) and "tools" not in responses
    assert responses["instructions"] == request.instructions

    anthropic, _ = anthropic_body(request, AnthropicModel("claude-sonnet-4-5", api_key="k"))
    check_anthropic(anthropic)
    assert "output_config" not in anthropic and "tools" not in anthropic
    system = anthropic["system"]
    assert (system if isinstance(system, str) else system[0]["text"]) == request.instructions

    gemini, _ = gemini_body(request, vertex=False, stream_arguments=False)
    check_gemini(gemini)
    config = gemini.get("generationConfig", {})
    assert "responseMimeType" not in config and "responseJsonSchema" not in config and "tools" not in gemini
    assert gemini["systemInstruction"]["parts"][0]["text"] == request.instructions

    bedrock, _ = bedrock_body(request, max_tokens=256, additional_fields={})
    check_bedrock(bedrock, model_id="anthropic.claude-3-haiku-20240307-v1:0", stream=False)
    assert "outputConfig" not in bedrock and "toolConfig" not in bedrock
    assert bedrock["system"][0] == {"text": request.instructions}


async def test_prompted_mode_wraps_a_non_object_output_as_native_does() -> None:
    request = await _prompted_request(list[int], '{"result": [1, 2]}')
    assert request.instructions is not None
    wrapper = {
        "type": "object",
        "properties": {"result": {"items": {"type": "integer"}, "type": "array"}},
        "required": ["result"],
        "additionalProperties": False,
    }
    assert (
        json.dumps(wrapper) in request.instructions and '(the value goes in "result")' in request.instructions
    )


@pytest.mark.parametrize(
    "answer",
    ['{"city": "Oslo", "tags": ["cold"]}', '```json\n{"city": "Oslo", "tags": ["cold"]}\n```'],
    ids=["bare", "fenced"],
)
async def test_prompted_mode_parses_a_bare_or_fenced_text_answer(answer: str) -> None:
    model = ScriptedModel([[TextPart(answer)]])
    result = await Agent(model, output_type=Forecast, output_mode="prompted").run("weather?")
    assert result.output == Forecast(city="Oslo", tags=["cold"])
    assert len(model.requests) == 1


async def test_prompted_mode_reprompts_an_invalid_answer_then_gives_up() -> None:
    model = ScriptedModel([[TextPart("It is cold in Oslo.")], [TextPart('{"city": "Oslo"}')]])
    result = await Agent(model, output_type=Forecast, output_mode="prompted").run("weather?")
    assert result.output == Forecast(city="Oslo")
    second = model.requests[1].request
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert "not valid JSON" in second.messages[-1].text and PROMPTED in (second.instructions or "")

    broken = ScriptedModel([[TextPart('{"city": 7}')]], repeat_last=True)
    with pytest.raises(toolwire.NoObjectGenerated) as info:
        await Agent(broken, output_type=Forecast, output_mode="prompted", output_retries=1).run("weather?")
    assert info.value.errors == ["city: Input should be a valid string"] and len(broken.requests) == 2


class _Counting(ScriptedModel):
    """Counts the parts it has streamed so far."""

    streamed = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        async for part in super().stream(request):
            self.streamed += 1
            yield part


async def test_prompted_answers_stream_partial_objects_live_even_beside_tools() -> None:
    text = '{"city": "Bergen", "tags": ["rain", "wind"]}'
    model = _Counting([[TextPart(text)]], chunk_size=5)
    agent = Agent(model, tools=[lookup], output_type=Forecast, output_mode="prompted")
    partials, streamed_at_first = [], None
    async for event in agent.stream("weather?"):
        if isinstance(event, OutputPartial):
            partials.append(event.partial)
            streamed_at_first = model.streamed if streamed_at_first is None else streamed_at_first
    assert len(partials) >= 3
    assert partials[-1] == {"city": "Bergen", "note": "none", "tags": ["rain", "wind"], "place": None}
    # live, not held to the end of the step as a possible echo of tool arguments (JSON-looking text is)
    assert streamed_at_first is not None and streamed_at_first < model.streamed // 2
    request = model.requests[0].request
    assert request.json_answer and [t.name for t in request.tools] == ["lookup"]


async def test_a_fenced_answer_streams_partial_objects_too() -> None:
    text = '```json\n{"city": "Bergen", "tags": ["rain", "wind"]}\n```'
    model = ScriptedModel([[TextPart(text)]], chunk_size=2)  # the fence arrives split across deltas
    events = [e async for e in Agent(model, output_type=Forecast, output_mode="prompted").stream("weather?")]
    partials = [e.partial for e in events if isinstance(e, OutputPartial)]
    assert len(partials) >= 3 and all("Bergen".startswith(p.get("city", "")) for p in partials)
    assert partials[-1] == {"city": "Bergen", "note": "none", "tags": ["rain", "wind"], "place": None}


# -- what auto picks ----------------------------------------------------------------------------


def test_auto_picks_prompted_for_a_preset_whose_server_takes_no_json_schema() -> None:
    deepseek = OpenAIChatModel("deepseek-chat", preset="deepseek", api_key="k")
    spec = Agent(deepseek, output_type=Forecast).output_spec
    assert spec is not None and spec.mode == "prompted" and spec.for_tools(True).mode == "tool"
    for model in (OpenAIChatModel("gpt-4o", api_key="k"), OpenAIChatModel("m", preset="groq", api_key="k")):
        native = Agent(model, output_type=Forecast).output_spec
        assert native is not None and native.mode == "native" and native.for_tools(True).mode == "native"
    # a server that would refuse the forced final_result call (no tool_choice "required"): prompted always
    no_required = replace(get_preset("deepseek"), tool_choices=frozenset({"auto", "none"}))
    refused = Agent(OpenAIChatModel("m", preset=no_required, api_key="k"), output_type=Forecast).output_spec
    assert refused is not None and refused.mode == "prompted" and refused.for_tools(True).mode == "prompted"
    for kept in (AnthropicModel("claude-sonnet-4-5", api_key="k"), ScriptedModel([])):
        tool = Agent(kept, output_type=Forecast).output_spec
        assert tool is not None and tool.mode == "tool"


async def test_deepseek_gets_the_schema_in_its_system_message_without_response_format() -> None:
    provider = _Provider(_chat_answer('```json\n{"city": "Oslo"}\n```'))
    model = OpenAIChatModel(
        "deepseek-chat", preset="deepseek", api_key="k", stream=False, http_client=provider.client()
    )
    result = await Agent(model, output_type=Forecast).run("weather?")
    assert result.output == Forecast(city="Oslo")
    (body,) = provider.sent
    check_openai_chat(body)
    assert "response_format" not in body
    assert body["messages"][0]["role"] == "system" and PROMPTED in body["messages"][0]["content"]
