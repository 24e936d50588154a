"""Bedrock Converse / ConverseStream adapter, replayed against recorded real traffic.

Each recording is replayed turn by turn as the agent loop drives a model (see test_anthropic.py for the
scheme). The recorded event-stream bodies are decoded here with botocore's own parser, independently of
the adapter, to get the provider's values.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer

from tests.cassettes import Interaction, load
from tests.models.eventstream import frame
from tests.models.sdk_types import check_bedrock
from toolwire.errors import ConfigError, ProviderHTTPError, ProviderProtocolError
from toolwire.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.models._builder import MessageBuilder, collect
from toolwire.models.base import (
    Finish,
    ModelRequest,
    ModelSettings,
    ModelStreamPart,
    StreamError,
    StreamPartAdapter,
    StreamStart,
    ToolDefinition,
    ToolInputDelta,
)
from toolwire.models.bedrock import BedrockModel

FIXTURES: list[str] = [
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_model_iter_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_model_thinking_part_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_model_thinking_part_redacted_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_bedrock/test_bedrock_anthropic_tool_with_thinking.yaml",
    "pydantic-ai/tests/models/bedrock/cassettes/test_strict_tool_calls/test_bedrock_mixed_strict_tool_run.yaml",
    "openllmetry/packages/opentelemetry-instrumentation-bedrock/tests/traces/cassettes/test_anthropic/test_anthropic_converse_stream_with_tool_use.yaml",
]
ITER_STREAM = FIXTURES[0]
THINKING_STREAM = FIXTURES[1]
TOOL_FRAGMENTS = FIXTURES[5]

CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "bedrock"
UPDATE_GOLDEN = os.environ.get("TOOLWIRE_UPDATE_GOLDEN") == "1"


# ---------------------------------------------------------------------------------------------
# Reading the recordings (independently of the adapter)


def _frames(body: bytes) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    buffer = EventStreamBuffer()
    buffer.add_data(body)
    return [(dict(m.headers), json.loads(m.payload)) for m in buffer]


def _is_stream(rec: Interaction) -> bool:
    return rec.uri.endswith("/converse-stream")


def _recorded_response(rec: Interaction) -> tuple[dict[str, Any], dict[int, list[str]]]:
    """The Converse response a recording describes, and each tool block's input fragments."""
    if not _is_stream(rec):
        return json.loads(rec.body), {}
    blocks: dict[int, dict[str, Any]] = {}
    fragments: dict[int, list[str]] = {}
    response: dict[str, Any] = {}
    for headers, payload in _frames(rec.body):
        kind, index = headers[":event-type"], int(payload.get("contentBlockIndex", -1))
        if kind == "contentBlockStart":
            blocks[index] = {"toolUse": {**payload["start"]["toolUse"]}}
        elif kind == "contentBlockDelta":
            delta = payload["delta"]
            if "text" in delta:
                blocks.setdefault(index, {"text": ""})["text"] += delta["text"]
            elif "toolUse" in delta:
                fragments.setdefault(index, []).append(delta["toolUse"]["input"])
            else:
                reasoning = blocks.setdefault(index, {"reasoningContent": {}})["reasoningContent"]
                for key, value in delta["reasoningContent"].items():
                    if key == "redactedContent":
                        reasoning["redactedContent"] = value
                    else:
                        text = reasoning.setdefault("reasoningText", {"text": ""})
                        text[key] = text.get(key, "") + value
        elif kind == "messageStop":
            response["stopReason"] = payload["stopReason"]
        elif kind == "metadata":
            response["usage"] = payload["usage"]
    for index, pieces in fragments.items():
        blocks[index]["toolUse"]["input"] = json.loads("".join(pieces) or "{}")
    response["output"] = {"message": {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}}
    return response, fragments


def _expected_part(block: dict[str, Any]) -> dict[str, Any]:
    if "text" in block:
        return {"text": block["text"]}
    if "toolUse" in block:
        tool = block["toolUse"]
        return {"call": tool["toolUseId"], "name": tool["name"], "args": tool["input"]}
    reasoning = block["reasoningContent"]
    if "redactedContent" in reasoning:
        return {"redacted": reasoning["redactedContent"]}
    return {
        "reasoning": reasoning["reasoningText"]["text"],
        "signature": reasoning["reasoningText"]["signature"],
    }


def _actual_part(part: Any) -> dict[str, Any]:
    match part:
        case TextPart():
            return {"text": part.text}
        case ReasoningPart() if part.redacted_data is not None:
            return {"redacted": part.redacted_data}
        case ReasoningPart():
            return {"reasoning": part.text, "signature": part.signature}
        case ToolCallPart():
            assert not part.provider_executed and json.loads(part.args_json) == part.args
            return {"call": part.tool_call_id, "name": part.tool_name, "args": part.args}
    raise AssertionError(f"unexpected part {part!r}")


# ---------------------------------------------------------------------------------------------
# Building requests the way the agent loop would


def _first_turn(rec: Interaction) -> tuple[dict[str, Any], ModelRequest]:
    body = rec.request_json
    (first,) = body["messages"]
    inference = body.get("inferenceConfig", {})
    tools = [
        ToolDefinition(
            name=spec["name"],
            description=spec.get("description", ""),
            parameters=spec["inputSchema"]["json"],
            strict=spec.get("strict"),
        )
        for spec in (t["toolSpec"] for t in body.get("toolConfig", {}).get("tools", []))
    ]
    kwargs: dict[str, Any] = {
        "stream": _is_stream(rec),
        "additional_model_request_fields": body.get("additionalModelRequestFields"),
    }
    request = ModelRequest(
        messages=[Message.user("".join(b["text"] for b in first["content"]))],
        tools=tools,
        instructions="\n".join(b["text"] for b in body.get("system", [])) or None,
        settings=ModelSettings(
            max_tokens=inference.get("maxTokens"),
            temperature=inference.get("temperature"),
            top_p=inference.get("topP"),
        ),
    )
    return kwargs, request


def _next_turn(recorded_body: dict[str, Any], calls: dict[str, str]) -> Message:
    last = recorded_body["messages"][-1]
    assert last["role"] == "user"
    results = [b["toolResult"] for b in last["content"]]
    return Message(
        role="tool",
        parts=tuple(
            ToolResultPart(
                tool_call_id=r["toolUseId"],
                tool_name=calls[r["toolUseId"]],
                output=r["content"][0].get("text", r["content"][0].get("json")),
                is_error=r["status"] == "error",
            )
            for r in results
        ),
    )


def _normalize_recorded(body: dict[str, Any]) -> dict[str, Any]:
    """pydantic-ai sends empty containers and the default toolChoice; we leave those out (same meaning)."""
    body = copy.deepcopy(body)
    for key in ("system", "inferenceConfig"):
        if body.get(key) in ([], {}):
            del body[key]
    if body.get("toolConfig", {}).get("toolChoice") == {"auto": {}}:
        del body["toolConfig"]["toolChoice"]
    return body


def _model(rec: Interaction, client: httpx.AsyncClient, **kwargs: Any) -> BedrockModel:
    model_id = rec.uri.split("/model/")[1].rsplit("/", 1)[0].replace("%3A", ":")
    return BedrockModel(model_id, region="us-east-1", credentials=CREDENTIALS, http_client=client, **kwargs)


async def _run(model: BedrockModel, request: ModelRequest) -> list[ModelStreamPart]:
    return [part async for part in model.stream(request)]


# ---------------------------------------------------------------------------------------------
# The replay test: every recording, every turn


@pytest.mark.parametrize("path", FIXTURES)
async def test_replay_every_turn(path: str) -> None:
    """Requests are compared whole, after :func:`_normalize_recorded` (the only deviations)."""
    cassette = load(path)
    kwargs, request = _first_turn(cassette.interactions[0])
    model = _model(cassette.interactions[0], cassette.client(), **kwargs)
    history = list(request.messages)
    calls: dict[str, str] = {}
    for turn, rec in enumerate(cassette.interactions):
        if turn:
            history.append(_next_turn(rec.request_json, calls))
        parts = await _run(model, dataclasses.replace(request, messages=list(history)))

        sent = cassette.sent[turn]
        assert str(sent.url) == rec.uri  # model id percent-encoded exactly as the AWS SDK does
        assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/us-east-1/bedrock/aws4_request" in sent.headers["authorization"]
        assert cassette.sent_json(turn) == _normalize_recorded(rec.request_json)
        check_bedrock(cassette.sent_json(turn), model_id=model.model_name, stream=model.stream_enabled)

        expected, fragments = _recorded_response(rec)
        builder = MessageBuilder(provider="bedrock")
        for part in parts:
            builder.add(part)
        assert builder.error is None
        message = builder.message()
        content = expected["output"]["message"]["content"]
        assert [_actual_part(p) for p in message.parts] == [_expected_part(b) for b in content]
        assert isinstance(parts[0], StreamStart)
        finish = parts[-1]
        assert isinstance(finish, Finish)
        assert finish.raw_reason == expected["stopReason"]
        usage = expected["usage"]
        assert (finish.usage.input_tokens, finish.usage.output_tokens) == (
            usage["inputTokens"]
            + usage.get("cacheReadInputTokens", 0)
            + usage.get("cacheWriteInputTokens", 0),
            usage["outputTokens"],
        )
        assert finish.reason == {"end_turn": "stop", "tool_use": "tool-calls"}[expected["stopReason"]]
        for index, block in enumerate(content):
            if "toolUse" in block:  # fragments passed on as received (empty ones carry nothing)
                tool_id = block["toolUse"]["toolUseId"]
                deltas = [
                    p.delta for p in parts if isinstance(p, ToolInputDelta) and p.tool_call_id == tool_id
                ]
                if fragments:
                    assert deltas == [f for f in fragments[index] if f]
                else:
                    assert json.loads("".join(deltas)) == block["toolUse"]["input"]

        history.append(message)
        calls.update({c.tool_call_id: c.tool_name for c in message.tool_calls})
    assert len(cassette.sent) == len(cassette.interactions)


async def test_thinking_stream_golden() -> None:
    """Reasoning text deltas, one signature at the end, then text; Finish only after ``metadata``."""
    cassette = load(THINKING_STREAM)
    kwargs, request = _first_turn(cassette.interactions[0])
    parts = await _run(_model(cassette.interactions[0], cassette.client(), **kwargs), request)
    actual = [StreamPartAdapter.dump_python(p, mode="json") for p in parts]
    golden = GOLDEN / "thinking_stream.json"
    if UPDATE_GOLDEN:
        golden.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    assert actual == json.loads(golden.read_text())


# ---------------------------------------------------------------------------------------------
# The event stream arrives in arbitrary chunks


def _chunked_client(body: bytes, size: int, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    class _Chunks(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for start in range(0, len(body), size):
                yield body[start : start + size]

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers=headers or {"content-type": "application/vnd.amazon.eventstream"},
            stream=_Chunks(),
        )

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("size", [1, 7, 64, 1 << 20])
async def test_frames_split_across_chunks(size: int) -> None:
    rec = load(TOOL_FRAGMENTS).interactions[0]
    whole = await _run(
        _model(rec, load(TOOL_FRAGMENTS).client()), ModelRequest(messages=[Message.user("hi")])
    )
    chunked = await _run(
        _model(rec, _chunked_client(rec.body, size)), ModelRequest(messages=[Message.user("hi")])
    )
    assert chunked[2:] == whole[2:]  # the recorded response also carries an x-amzn-requestid
    assert [p.delta for p in chunked if isinstance(p, ToolInputDelta)] == [
        '{"locati',
        'on": "Bar',
        "ce",
        'lona"}',
    ]


def _recorded_frames(path: str, count: int) -> bytes:
    body = load(path).interactions[0].body
    out, offset = b"", 0
    for _ in range(count):
        (length,) = struct.unpack(">I", body[offset : offset + 4])
        out += body[offset : offset + length]
        offset += length
    return out


async def test_exception_frame_becomes_stream_error() -> None:
    exception = frame(
        {
            ":message-type": "exception",
            ":exception-type": "throttlingException",
            ":content-type": "application/json",
        },
        b'{"message":"Too many tokens, please wait before trying again."}',
    )
    body = _recorded_frames(TOOL_FRAGMENTS, 5) + exception
    rec = load(TOOL_FRAGMENTS).interactions[0]
    parts = await _run(_model(rec, _chunked_client(body, 50)), ModelRequest(messages=[Message.user("hi")]))
    error = parts[-1]
    assert isinstance(error, StreamError) and isinstance(error.error, ProviderProtocolError)
    assert (error.error.code, error.error.retryable) == ("throttlingException", True)
    assert error.error.message == "Too many tokens, please wait before trying again."
    assert not any(isinstance(p, Finish) for p in parts)


async def test_validation_exception_frame_is_not_retryable() -> None:
    exception = frame(
        {":message-type": "exception", ":exception-type": "validationException"}, b'{"message":"bad input"}'
    )
    rec = load(TOOL_FRAGMENTS).interactions[0]
    parts = await _run(
        _model(rec, _chunked_client(exception, 9)), ModelRequest(messages=[Message.user("hi")])
    )
    assert isinstance(parts[-1], StreamError) and parts[-1].error.retryable is False


async def test_corrupt_frame_and_cut_stream_are_errors() -> None:
    rec = load(TOOL_FRAGMENTS).interactions[0]
    corrupt = bytearray(rec.body)
    corrupt[200] ^= 0xFF  # inside the second frame: its CRC no longer matches
    parts = await _run(
        _model(rec, _chunked_client(bytes(corrupt), 64)), ModelRequest(messages=[Message.user("hi")])
    )
    assert isinstance(parts[-1], StreamError) and "corrupt" in parts[-1].error.message
    cut = _recorded_frames(TOOL_FRAGMENTS, 10)
    parts = await _run(_model(rec, _chunked_client(cut, 64)), ModelRequest(messages=[Message.user("hi")]))
    assert isinstance(parts[-1], StreamError) and "messageStop" in parts[-1].error.message


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (429, True), (503, True)])
async def test_http_error_is_typed(status: int, retryable: bool) -> None:
    # The restJson error shape Bedrock answers with: the type in a header, the message in the body.
    body = {"message": "The provided model identifier is invalid."}
    transport = httpx.MockTransport(
        lambda _: httpx.Response(
            status, json=body, headers={"x-amzn-errortype": "ValidationException:http://x"}
        )
    )
    rec = load(ITER_STREAM).interactions[0]
    model = _model(rec, httpx.AsyncClient(transport=transport))
    with pytest.raises(ProviderHTTPError) as info:
        await collect(model, ModelRequest(messages=[Message.user("hi")]))
    error = info.value
    assert (error.status, error.message, error.retryable, error.body) == (
        status,
        body["message"],
        retryable,
        body,
    )


# ---------------------------------------------------------------------------------------------
# Requests


async def test_other_providers_metadata_and_signatures_are_not_sent() -> None:
    cassette = load(FIXTURES[3])
    foreign: dict[str, dict[str, Any]] = {
        "anthropic": {"caller": {"type": "direct"}},
        "google": {"thoughtSignature": "g"},
    }
    history = [
        Message.user("hi"),
        Message(
            role="assistant",
            provider="anthropic",  # an Anthropic signature is no use to Bedrock
            parts=(
                ReasoningPart(text="anthropic thoughts", signature="anthropic-sig"),
                ReasoningPart(redacted_data="opaque"),
                ToolCallPart(tool_call_id="srvtoolu_1", tool_name="web_search", provider_executed=True),
                ToolResultPart(
                    tool_call_id="srvtoolu_1", tool_name="web_search", output={}, provider_executed=True
                ),
                ToolCallPart(tool_call_id="call.1", tool_name="f", args={"a": 1}, provider_metadata=foreign),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(tool_call_id="call.1", tool_name="f", output={"ok": False}, is_error=True),
            ),
        ),
        Message(role="assistant", provider="bedrock", parts=(ReasoningPart(text="mine", signature="sig"),)),
        Message.user("next"),
    ]
    model = _model(cassette.interactions[0], cassette.client(), stream=False)
    await collect(model, ModelRequest(messages=history, tools=[ToolDefinition(name="f")]))
    assert cassette.sent_json(0)["messages"] == [
        {"role": "user", "content": [{"text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "call_1", "name": "f", "input": {"a": 1}}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "call_1",
                        "content": [{"json": {"ok": False}}],
                        "status": "error",
                    }
                }
            ],
        },
        {
            "role": "assistant",
            "content": [{"reasoningContent": {"reasoningText": {"text": "mine", "signature": "sig"}}}],
        },
        {"role": "user", "content": [{"text": "next"}]},
    ]


@pytest.mark.parametrize(
    ("choice", "history_has_tools", "tool_config", "warning"),
    [
        (
            "auto",
            False,
            {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]},
            None,
        ),
        ("required", False, {"toolChoice": {"any": {}}}, None),
        ("f", False, {"toolChoice": {"tool": {"name": "f"}}}, None),
        ("none", False, None, None),
        (
            "none",
            True,
            {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]},
            "tool_choice 'none' is not supported by Bedrock Converse; tools stay available",
        ),
    ],
)
async def test_tool_choice(
    choice: str, history_has_tools: bool, tool_config: dict[str, Any] | None, warning: str | None
) -> None:
    cassette = load(FIXTURES[3])
    history = [Message.user("hi")]
    if history_has_tools:
        history += [
            Message(role="assistant", parts=(ToolCallPart(tool_call_id="t1", tool_name="f"),)),
            Message(role="tool", parts=(ToolResultPart(tool_call_id="t1", tool_name="f", output="x"),)),
        ]
    request = ModelRequest(
        messages=history,
        tools=[ToolDefinition(name="f", parameters={"type": "object"})],
        tool_choice=choice,
        instructions="be brief",
        settings=ModelSettings(seed=3, stop=("END",)),
        output_schema={"type": "object"},
        output_schema_name="answer",
    )
    model = _model(cassette.interactions[0], cassette.client(), stream=False, max_tokens=100)
    response = await collect(model, request)
    sent = cassette.sent_json(0)
    if tool_config is None:
        assert "toolConfig" not in sent
    else:
        assert tool_config.items() <= sent["toolConfig"].items()
    expected_warnings = ["seed is not supported by Bedrock Converse and was ignored"]
    if warning:
        expected_warnings.insert(0, warning)
    assert sorted(response.warnings) == sorted(expected_warnings)
    assert sent["system"] == [{"text": "be brief"}]
    assert sent["inferenceConfig"] == {"maxTokens": 100, "stopSequences": ["END"]}
    assert sent["outputConfig"] == {
        "textFormat": {
            "type": "json_schema",
            "structure": {"jsonSchema": {"schema": '{"type": "object"}', "name": "answer"}},
        }
    }


async def test_session_token_is_signed() -> None:
    cassette = load(FIXTURES[3])
    model = BedrockModel(
        "anthropic.claude-3-7-sonnet-20250219-v1:0",
        region="eu-west-1",
        credentials=Credentials("AKIDEXAMPLE", "secret", "session-token"),
        http_client=cassette.client(),
        stream=False,
    )
    await collect(model, ModelRequest(messages=[Message.user("hi")]))
    sent = cassette.sent[0]
    assert str(sent.url) == (
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse"
    )
    assert sent.headers["x-amz-security-token"] == "session-token"
    assert "x-amz-security-token" in sent.headers["authorization"]  # among the signed headers
    assert "/eu-west-1/bedrock/aws4_request" in sent.headers["authorization"]


async def test_api_key_uses_bearer_auth() -> None:
    cassette = load(FIXTURES[3])
    model = BedrockModel(
        "m", region="us-east-1", api_key="bedrock-key", http_client=cassette.client(), stream=False
    )
    await collect(model, ModelRequest(messages=[Message.user("hi")]))
    assert cassette.sent[0].headers["authorization"] == "Bearer bedrock-key"


async def test_missing_credentials_fail_when_the_model_is_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    cassette = load(FIXTURES[3])
    with pytest.raises(ConfigError):
        BedrockModel("m", region="us-east-1", http_client=cassette.client())
    assert cassette.sent == []


def _split_frames(body: bytes) -> list[bytes]:
    frames, offset = [], 0
    while offset < len(body):
        (length,) = struct.unpack(">I", body[offset : offset + 4])
        frames.append(body[offset : offset + length])
        offset += length
    return frames


async def test_blocks_are_keyed_by_index_when_interleaved() -> None:
    """The recorded frames reordered so the tool block starts before the text block stops."""
    rec = load(TOOL_FRAGMENTS).interactions[0]
    frames = _split_frames(rec.body)
    kinds = [dict(_frames(f)[0][0])[":event-type"] for f in frames]
    text_stop = kinds.index("contentBlockStop")
    tool_frames = frames[text_stop + 1 : text_stop + 7]  # contentBlockStart, 5 deltas
    reordered = frames[:3] + tool_frames + frames[3 : text_stop + 1] + frames[text_stop + 7 :]
    parts = await _run(
        _model(rec, _chunked_client(b"".join(reordered), 33)), ModelRequest(messages=[Message.user("hi")])
    )
    builder = MessageBuilder()
    for part in parts:
        builder.add(part)
    message = builder.message()
    assert message.text == "Okay, let me check the weather for Barcelona using the available tool:"
    assert [(c.tool_call_id, c.args) for c in message.tool_calls] == [
        ("tooluse_yypYDr71TwCwByoyao4-Vg", {"location": "Barcelona"})
    ]
