"""Claude on Bedrock in the Messages shape (``InvokeModelWithResponseStream`` / ``InvokeModel``).

No recording of this operation exists in the fixtures, so its answers are built from recorded Anthropic
streams put in Bedrock's published framing: every ``data:`` event of a recorded Messages stream becomes one
event-stream ``chunk`` frame whose ``bytes`` is that event's JSON, base64-encoded. The adapter must read the
same parts from it as the Anthropic adapter reads from the original stream, and build the same body minus
``model`` / ``stream`` plus ``anthropic_version``. Requests are checked against botocore's service model (the
operation's URL and input shape) and anthropic's ``MessageCreateParams``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials
from botocore.session import get_session

from tests.cassettes import load, without_cache_marks
from tests.models.canned import CannedServer
from tests.models.eventstream import frame
from tests.models.sdk_types import check_anthropic_on_platform
from toolwire.errors import ProviderProtocolError
from toolwire.messages import Message, ToolResultPart
from toolwire.models import infer_model
from toolwire.models._builder import collect
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import (
    ModelRequest,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    StreamStart,
    ToolDefinition,
)
from toolwire.models.bedrock.invoke import BedrockAnthropicModel

STREAMS = [
    "openllmetry/packages/opentelemetry-instrumentation-anthropic/tests/cassettes/test_messages/test_anthropic_tools_streaming_legacy.yaml",
    "pydantic-ai/tests/models/cassettes/test_anthropic/test_anthropic_model_thinking_part_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_anthropic/test_anthropic_code_execution_tool_stream.yaml",
]
MODEL_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
EVENT = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
TOOLS = [ToolDefinition(name="get_weather", parameters={"type": "object", "properties": {}})]


def _chunk(event: dict[str, Any]) -> bytes:
    data = base64.b64encode(json.dumps(event).encode()).decode()
    return frame(EVENT, json.dumps({"bytes": data}).encode())


def _as_invoke_stream(sse: bytes) -> bytes:
    lines = sse.decode().splitlines()
    return b"".join(_chunk(json.loads(line[5:])) for line in lines if line.startswith("data:"))


def _content(parts: list[ModelStreamPart]) -> list[ModelStreamPart]:
    return [p for p in parts if not isinstance(p, StreamStart | ResponseMetadata)]


def _request() -> ModelRequest:
    return ModelRequest(messages=[Message.user("What is the weather in Paris?")], tools=TOOLS)


def _bedrock(client: httpx.AsyncClient, **kwargs: Any) -> BedrockAnthropicModel:
    return BedrockAnthropicModel(
        MODEL_ID, region="us-east-1", credentials=CREDENTIALS, http_client=client, **kwargs
    )


def _botocore_url(operation: str, body: bytes) -> str:
    """The URL botocore's own serializer builds for this operation (its service model's URI template)."""
    client = get_session().create_client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    captured: list[str] = []

    def stop(request: Any, **_: Any) -> None:
        captured.append(request.url)
        raise _Sent

    client.meta.events.register("before-send.bedrock-runtime.*", stop)
    with pytest.raises(_Sent):
        getattr(client, operation)(modelId=MODEL_ID, body=body, contentType="application/json")
    return captured[0]


class _Sent(Exception):
    pass


@pytest.mark.parametrize("path", STREAMS)
async def test_reads_the_same_parts_as_the_messages_api_and_sends_the_same_body(path: str) -> None:
    recorded = load(path).interactions[0].body
    direct = CannedServer(recorded, "text/event-stream")
    invoke = CannedServer(_as_invoke_stream(recorded), "application/vnd.amazon.eventstream")
    anthropic = AnthropicModel(MODEL_ID, api_key="k", http_client=direct.client())
    bedrock = _bedrock(invoke.client())

    expected = [p async for p in anthropic.stream(_request())]
    parts = [p async for p in bedrock.stream(_request())]
    assert _content(parts) == _content(expected)
    assert not any(isinstance(p, StreamError) for p in parts)

    (sent,) = invoke.requests
    assert str(sent.url) == _botocore_url("invoke_model_with_response_stream", sent.content)
    body = json.loads(sent.content)
    messages_body = json.loads(direct.requests[0].content)
    assert body == {
        **{k: v for k, v in messages_body.items() if k not in ("model", "stream")},
        "anthropic_version": "bedrock-2023-05-31",
    }
    check_anthropic_on_platform(body, version="bedrock-2023-05-31", model=MODEL_ID)
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert sent.headers["x-amz-date"]


async def test_a_tool_round_trip_on_invoke_model() -> None:
    """``stream=False``: ``InvokeModel`` answers with the Messages response itself; the continuation replays
    the call in the Messages shape and betas travel in the body."""
    message = {
        "id": "msg_bdrk_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "tool_use", "id": "toolu_bdrk_01", "name": "get_weather", "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 9},
    }  # fmt: skip
    server = CannedServer(json.dumps(message).encode(), "application/json")
    model = _bedrock(server.client(), stream=False, betas=["token-efficient-tools-2025-02-19"])
    response = await collect(model, _request())
    (call,) = response.tool_calls
    assert (call.tool_call_id, call.args, response.finish_reason) == (
        "toolu_bdrk_01",
        {"city": "Paris"},
        "tool-calls",
    )
    result = ToolResultPart("get_weather", tool_call_id=call.tool_call_id, output="sunny")
    history = [*_request().messages, response.message, Message(role="tool", parts=(result,))]
    await collect(model, ModelRequest(messages=history, tools=TOOLS))
    second = server.requests[1]
    assert str(second.url) == _botocore_url("invoke_model", second.content)
    body = without_cache_marks(json.loads(second.content))
    assert body["anthropic_beta"] == ["token-efficient-tools-2025-02-19"]
    assert body["messages"][1:] == [
        {"role": "assistant", "content": [message["content"][0]]},  # type: ignore[index]
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_bdrk_01", "content": "sunny", "is_error": False}
            ],
        },
    ]
    check_anthropic_on_platform(body, version="bedrock-2023-05-31", model=MODEL_ID)


async def test_an_exception_frame_and_a_bad_chunk_are_stream_errors() -> None:
    start = {"type": "message_start", "message": {"id": "m", "model": MODEL_ID, "content": [], "usage": {}}}
    throttled = frame(
        {
            ":exception-type": "throttlingException",
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        b'{"message":"Too many requests, please wait before trying again."}',
    )
    server = CannedServer(_chunk(start) + throttled, "application/vnd.amazon.eventstream")
    parts = [p async for p in _bedrock(server.client()).stream(_request())]
    error = parts[-1]
    assert isinstance(error, StreamError)
    assert (error.error.code, error.error.retryable) == ("throttlingException", True)

    bad = frame(EVENT, b'{"bytes": "not base64!"}')
    server = CannedServer(_chunk(start) + bad, "application/vnd.amazon.eventstream")
    parts = [p async for p in _bedrock(server.client()).stream(_request())]
    error = parts[-1]
    assert isinstance(error, StreamError) and isinstance(error.error, ProviderProtocolError)
    assert "not base64" in str(error.error)


def test_the_model_string_names_the_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    model = infer_model(f"anthropic-bedrock:{MODEL_ID}")
    assert isinstance(model, BedrockAnthropicModel)
    assert (model.model_name, model.provider) == (MODEL_ID, "anthropic")
