"""Output items the Responses adapter does not model (``tool_search_call`` / ``tool_search_output``) are kept
and sent back to the Responses API as received, never to another provider, and warned about once.

The items are those of pydantic-ai's recording
``tests/cassettes/test_tool_search/test_openai_native_tool_search_with_deferred_capability.yaml`` (its first
response: the API searched its deferred tools, loaded ``get_weather``, then called it).
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import httpx
import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire.errors import ProviderHTTPError
from toolwire.messages import Message, ToolCallPart, ToolResultPart, messages_from_json, messages_to_json
from toolwire.models._builder import collect
from toolwire.models._metadata import client_metadata_filter
from toolwire.models.base import ModelRequest
from toolwire.models.openai_responses import OpenAIResponsesModel, _stream

SEARCH_CALL = {
    "arguments": {"paths": ["get_weather"]},
    "call_id": None,
    "execution": "server",
    "id": "tsc_04ec12c52e30edac006a70c91aff408197a9571597bcc576ab",
    "status": "completed",
    "type": "tool_search_call",
}
SEARCH_OUTPUT = {
    "call_id": None,
    "execution": "server",
    "id": "tso_04ec12c52e30edac006a70c91b1f388197b4a40fe688ad8f8f",
    "status": "completed",
    "tools": [
        {
            "defer_loading": True,
            "description": "Get the current weather in a city.",
            "name": "get_weather",
            "output_schema": None,
            "parameters": {
                "additionalProperties": False,
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "type": "object",
            },
            "strict": True,
            "type": "function",
        }
    ],
    "type": "tool_search_output",
}
WEATHER_CALL = {
    "arguments": '{"city":"Paris"}',
    "call_id": "call_UAFUsnoVKyFPdGWo0z5zdzAl",
    "id": "fc_04ec12c52e30edac006a70c91d46988197b3f6a95cfa122bef",
    "name": "get_weather",
    "namespace": "get_weather",
    "status": "completed",
    "type": "function_call",
}
RESPONSE = {
    "id": "resp_04ec12c52e30edac006a70c91953c881978dfd2ca585404511",
    "model": "gpt-5.6-sol",
    "object": "response",
    "status": "completed",
    "output": [SEARCH_CALL, SEARCH_OUTPUT, WEATHER_CALL],
    "usage": {
        "input_tokens": 735,
        "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
        "output_tokens": 67,
        "output_tokens_details": {"reasoning_tokens": 49},
        "total_tokens": 802,
    },
}


def _sse(body: dict[str, Any]) -> bytes:
    """The same response as a stream: each item added (in progress; a search with nothing in it yet), then
    done (the function call's arguments come whole with its ``added`` item here)."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {**body, "output": []}}]
    for index, item in enumerate(body["output"]):
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {
                    **(item if item["type"] == "function_call" else {"id": item["id"], "type": item["type"]}),
                    "status": "in_progress",
                },
            }
        )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": body})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _model(*, stream: bool) -> tuple[OpenAIResponsesModel, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(RESPONSE))
        return httpx.Response(200, json=RESPONSE)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    # store=True, as recorded: items go back by id (without it every provider-executed item is left out)
    model = OpenAIResponsesModel("gpt-5.6", api_key="k", http_client=client, stream=stream, store=True)
    return model, sent


@pytest.mark.parametrize("stream", [False, True])
async def test_unknown_items_go_back_to_responses_as_received_and_are_warned_once(
    stream: bool, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stream, "_warned", set(), raising=False)  # warned once per process: start afresh
    model, sent = _model(stream=stream)
    user = Message.user("Find and call the weather tool for Paris")
    with caplog.at_level(logging.WARNING, logger="toolwire.models"):
        first = await collect(model, ModelRequest(messages=[user]))
        again = await collect(model, ModelRequest(messages=[user]))
    assert first.message.parts == again.message.parts
    warned = [r.getMessage() for r in caplog.records if "does not model" in r.getMessage()]
    assert len(warned) == 2 and "'tool_search_call'" in warned[0] and "'tool_search_output'" in warned[1]

    calls = [p for p in first.message.parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_name, c.provider_executed) for c in calls] == [
        ("tool_search_call", True),
        ("tool_search_output", True),
        ("get_weather", False),
    ]
    results = [p for p in first.message.parts if isinstance(p, ToolResultPart)]
    assert [r.tool_call_id for r in results] == [SEARCH_CALL["id"], SEARCH_OUTPUT["id"]]
    assert first.usage.input_tokens == 735

    # The next request: the two items exactly as received, in their place before the function call.
    answer = Message(
        role="tool",
        parts=(
            ToolResultPart(
                tool_call_id=WEATHER_CALL["call_id"],
                tool_name="get_weather",
                output="Weather in Paris: sunny",
            ),
        ),
    )
    history = messages_from_json(messages_to_json([user, first.message, answer]))  # as stored
    await collect(model, ModelRequest(messages=history))
    continuation = sent[-1]["input"]
    assert continuation[1:3] == [SEARCH_CALL, SEARCH_OUTPUT]
    assert [item["type"] for item in continuation[3:]] == ["function_call", "function_call_output"]


async def test_unknown_items_never_reach_another_provider_nor_come_from_a_client() -> None:
    model, _ = _model(stream=False)
    user = Message.user("Find and call the weather tool for Paris")
    first = await collect(model, ModelRequest(messages=[user]))
    answer = Message(
        role="tool",
        parts=(
            ToolResultPart(tool_call_id=WEATHER_CALL["call_id"], tool_name="get_weather", output="sunny"),
        ),
    )
    bodies: list[Any] = []
    for name, build in adapters(bodies).items():
        if name == "openai-responses":
            continue
        with pytest.raises(ProviderHTTPError):
            await collect(build(), ModelRequest(messages=[user, first.message, answer]))
        assert "tool_search" not in json.dumps(bodies[-1]), name
        assert unanswered_calls(name, bodies[-1]) == []

    # A client's history cannot name an item type: the key is not among those a client may send back.
    forged = {"openai": {"item_id": "x", "unknown_item_type": "message", "item_type": "message"}}
    assert client_metadata_filter(copy.deepcopy(forged)) == {
        "openai": {"item_id": "x", "item_type": "message"}
    }
    part = ToolCallPart(
        tool_call_id="x",
        tool_name="t",
        provider_executed=True,
        provider_metadata=client_metadata_filter(forged),
    )

    def responses() -> OpenAIResponsesModel:
        from tests.reliability.wire_checks import capturing_client

        return OpenAIResponsesModel("m", api_key="k", http_client=capturing_client(bodies), store=True)

    with pytest.raises(ProviderHTTPError):
        await collect(
            responses(),
            ModelRequest(
                messages=[
                    user,
                    Message(role="assistant", parts=(part,)),
                    Message.user("next"),
                ]
            ),
        )
    assert all(item.get("type") != "message" or item.get("role") != "system" for item in bodies[-1]["input"])
    assert [item.get("id") for item in bodies[-1]["input"]].count("x") == 0
