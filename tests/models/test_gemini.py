"""Gemini API / Vertex AI adapter, replayed against real recorded traffic (``tests/recordings``).

Every recording is checked two ways:

1. the stream parts carry the provider's own values, read straight from the recorded response in this file
   (``_read_recorded``): call names, ids, arguments, signatures (exact strings), texts, usage, finish reason.
   The part *structure* (which parts, signed or not) and the arguments of Vertex streamed calls (for which
   no final value is ever sent) come from hand-written goldens in ``tests/golden/gemini``.
2. where the next request was recorded, the conversation is rebuilt the way the agent loop does it and the
   request toolwire sends is compared with the recorded one (``_conversation``).
"""

from __future__ import annotations

import base64
import copy
import functools
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cassettes import Cassette, Interaction, load
from tests.models.sdk_types import check_gemini
from toolwire.errors import ConfigError, ProviderHTTPError, ProviderProtocolError
from toolwire.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, Usage
from toolwire.models._builder import MessageBuilder, collect
from toolwire.models.base import (
    Finish,
    ModelRequest,
    ModelSettings,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    StreamStart,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from toolwire.models.gemini import GeminiModel
from toolwire.models.gemini._args import JsonArrayReader, StreamedArgs, parse_json_path

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "gemini"
PLACEHOLDER = base64.b64encode(b"context_engineering_is_the_way_to_go").decode()

FIXTURES: list[str] = [
    "pydantic-ai/tests/models/cassettes/test_google/test_google_streaming_tool_call_thought_signature.yaml",
    "pydantic-ai/tests/models/google/cassettes/test_structured_output/test_native_output_with_function_tools_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_instructions_only_with_tool_calls.yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_model_iter_stream.yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_thinking_with_tool_calls_from_other_model.yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_model_thinking_part_iter.yaml",
    "pydantic-ai/tests/models/cassettes/test_google/test_google_vertex_tool_combination_omits_include_server_side_tool_invocations.yaml",
    "llm-gemini/tests/cassettes/test_gemini/test_tools_with_gemini_3_thought_signatures.yaml",
    "llm-gemini/tests/cassettes/test_gemini/test_tools.yaml",
    "vercel-ai/packages/google/src/__fixtures__/google-tool-call-gemini3.chunks.txt",
    "vercel-ai/packages/google/src/__fixtures__/google-stream-tool-call-arguments.chunks.txt",
    "vercel-ai/packages/google/src/__fixtures__/google-stream-no-args-tool-call.chunks.txt",
    "vercel-ai/packages/google/src/__fixtures__/google-vertex-stream-tool-call-arguments-nested.1.chunks.txt",
    "vercel-ai/packages/google/src/__fixtures__/google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt",
]


def _fixture(name: str) -> str:
    (path,) = (p for p in FIXTURES if Path(p).name.startswith(name + "."))
    return path


CROSS_PROVIDER = _fixture("test_thinking_with_tool_calls_from_other_model")


# ---------------------------------------------------------------------------------------------------------
# Reading recordings (independently of the adapter)


def _golden(path: str) -> dict[str, Any]:
    stem = Path(path).name.removesuffix(".yaml").removesuffix(".chunks.txt")
    data: dict[str, Any] = json.loads((GOLDEN / f"{stem}.json").read_text())
    return data


def _recorded_chunks(rec: Interaction) -> list[dict[str, Any]]:
    text = rec.body.decode()
    if "event-stream" in rec.headers.get("content-type", ""):
        return [json.loads(line[len("data:") :]) for line in text.splitlines() if line.startswith("data:")]
    value = json.loads(text)  # the whole body at once: the adapter's incremental reader is not used here
    return value if isinstance(value, list) else [value]


@dataclass
class _Recorded:
    calls: list[dict[str, Any]] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    finish: str | None = None
    response_id: str | None = None
    model_version: str | None = None


def _read_recorded(chunks: list[dict[str, Any]]) -> _Recorded:
    out = _Recorded(response_id=chunks[0].get("responseId"), model_version=chunks[0].get("modelVersion"))
    for chunk in chunks:
        out.usage = chunk.get("usageMetadata", out.usage)
        candidate = chunk["candidates"][0]
        out.finish = candidate.get("finishReason", out.finish)
        for part in candidate.get("content", {}).get("parts", []):
            if "thoughtSignature" in part:
                out.signatures.append(part["thoughtSignature"])
            call = part.get("functionCall")
            if call and call.get("name"):
                whole = not call.get("willContinue")
                out.calls.append(
                    {
                        "name": call["name"],
                        "id": call.get("id"),
                        "args": call.get("args", {}) if whole else None,
                        "signature": part.get("thoughtSignature"),
                    }
                )
            elif part.get("thought"):
                out.reasoning += part.get("text", "")
            elif "text" in part:
                out.text += part["text"]
    return out


def _signature(part: Any) -> str | None:
    value: str | None = part.provider_metadata.get("google", {}).get("thoughtSignature")
    return value


def _check_response(
    parts: list[ModelStreamPart], message: Message, recorded: _Recorded, golden: dict[str, Any]
) -> None:
    """The canonical output of one response against the recording (values) and the golden (structure)."""
    assert isinstance(parts[0], StreamStart)
    meta = [p for p in parts if isinstance(p, ResponseMetadata)]
    assert [(m.response_id, m.model) for m in meta] == [(recorded.response_id, recorded.model_version)]
    finishes = [p for p in parts if isinstance(p, Finish)]
    assert len(finishes) == 1 and parts[-1] is finishes[0]
    finish = finishes[0]
    assert (finish.reason, finish.raw_reason) == (golden["finish"], recorded.finish)
    thoughts = recorded.usage.get("thoughtsTokenCount", 0)
    assert finish.usage == Usage(
        input_tokens=recorded.usage.get("promptTokenCount", 0)
        + recorded.usage.get("toolUsePromptTokenCount", 0),
        output_tokens=recorded.usage.get("candidatesTokenCount", 0) + thoughts,
        reasoning_tokens=thoughts,
        cache_read_tokens=recorded.usage.get("cachedContentTokenCount", 0),
        requests=1,
    )

    # structure: part kinds, order, which part carries a signature
    shape = []
    for part in message.parts:
        item: dict[str, Any] = {"type": part.type, "signed": _signature(part) is not None}
        if isinstance(part, ToolCallPart):
            item["name"] = part.tool_name
        if isinstance(part, TextPart) and part.text == "":
            item["empty"] = True
        shape.append(item)
    expected_shape = [{k: v for k, v in p.items() if k != "args"} for p in golden["parts"]]
    assert shape == expected_shape

    # values: signatures exactly as received and on the same part, texts, calls
    assert [s for p in message.parts if (s := _signature(p))] == recorded.signatures
    assert message.text == recorded.text
    assert "".join(p.text for p in message.parts if isinstance(p, ReasoningPart)) == recorded.reasoning
    calls = message.tool_calls
    golden_calls = [p for p in golden["parts"] if p["type"] == "tool-call"]
    assert len(calls) == len(recorded.calls) == len(golden_calls)
    for call, rec, gold in zip(calls, recorded.calls, golden_calls, strict=True):
        assert call.tool_name == rec["name"]
        assert call.args == (rec["args"] if rec["args"] is not None else gold["args"])
        assert json.loads(call.args_json) == call.args
        assert _signature(call) == rec["signature"]
        if rec["id"]:
            assert call.tool_call_id == rec["id"]  # the server's id is kept
        else:
            assert call.tool_call_id.startswith(f"call_{recorded.response_id}_")  # stable, derived
        starts = [p for p in parts if isinstance(p, ToolInputStart) and p.tool_call_id == call.tool_call_id]
        deltas = [
            p.delta for p in parts if isinstance(p, ToolInputDelta) and p.tool_call_id == call.tool_call_id
        ]
        ends = [p for p in parts if isinstance(p, ToolInputEnd) and p.tool_call_id == call.tool_call_id]
        assert len(starts) == len(ends) == 1 and ends[0].args_error is None
        assert starts[0].provider_metadata == ends[0].provider_metadata == call.provider_metadata
        assert "".join(deltas) == call.args_json  # the deltas concatenate to the final JSON text
        if rec["args"] is not None:
            assert len(deltas) == 1  # a whole functionCall is one delta
    assert len({c.tool_call_id for c in calls}) == len(calls)


# ---------------------------------------------------------------------------------------------------------
# Requests: what toolwire sends vs what was recorded


def _sig_bytes(signature: str) -> str:
    # The API returns standard base64; google-genai (pydantic-ai) re-encodes the same bytes as URL-safe
    # base64 (`-`/`_`) when it sends them back. Both are the same signature, so compare the decoded bytes.
    # toolwire itself sends the string exactly as received (checked in _check_response / the replay tests).
    padded = signature.replace("-", "+").replace("_", "/") + "=" * (-len(signature) % 4)
    return base64.b64decode(padded).hex()


_SNAKE = {"function_call": "functionCall", "function_response": "functionResponse"}


def _conversation(body: dict[str, Any], *, strip_ids: bool = False) -> dict[str, Any]:
    """The request fields that carry the conversation, normalised for comparison:

    * proto JSON key spellings (llm-gemini sends snake_case ``function_call``) -> camelCase;
    * signatures -> their bytes (see ``_sig_bytes``);
    * call ids renamed by order of first appearance: pydantic-ai and llm-gemini send ids they generated
      themselves, toolwire sends its own; what matters is that a call and its response carry the same id,
      and that server-assigned ids are echoed (checked separately, exactly).
    """
    contents = copy.deepcopy(body["contents"])
    ids: dict[str, str] = {}
    for content in contents:
        for index, part in enumerate(content["parts"]):
            part = content["parts"][index] = {_SNAKE.get(k, k): v for k, v in part.items()}
            if "thoughtSignature" in part:
                part["thoughtSignature"] = _sig_bytes(part["thoughtSignature"])
            for key in ("functionCall", "functionResponse"):
                if key in part and "id" in part[key]:
                    if strip_ids:
                        del part[key]["id"]
                    else:
                        part[key]["id"] = ids.setdefault(part[key]["id"], f"id{len(ids)}")
    declarations = [
        {
            "name": d["name"],
            "description": d.get("description") or "",
            "schema": d.get("parametersJsonSchema", d.get("parameters_json_schema", d.get("parameters"))),
        }
        for tool in body.get("tools", [])
        for d in tool.get("functionDeclarations", [])
    ]
    generation = body.get("generationConfig", {})
    return {
        "contents": contents,
        "system": [p["text"] for p in body.get("systemInstruction", {}).get("parts", [])],
        "toolConfig": body.get("toolConfig", {"functionCallingConfig": {"mode": "AUTO"}}),
        "declarations": declarations,
        "output": (generation.get("responseMimeType"), generation.get("responseJsonSchema")),
    }


def _has_ids(body: dict[str, Any]) -> bool:
    return any(
        "id" in part.get(key, {})
        for content in body["contents"]
        for part in content["parts"]
        for key in ("functionCall", "function_call", "functionResponse", "function_response")
    )


def _request_from_recording(body: dict[str, Any], history: Sequence[Message]) -> ModelRequest:
    """The ModelRequest an application would make to produce the recorded request."""
    tools = [
        ToolDefinition(
            name=d["name"],
            description=d.get("description") or "",
            parameters=d.get("parametersJsonSchema", d.get("parameters_json_schema", d.get("parameters"))),
        )
        for tool in body.get("tools", [])
        for d in tool.get("functionDeclarations", [])
    ]
    config = body.get("toolConfig", {}).get("functionCallingConfig", {})
    tool_choice = "auto"
    if config.get("mode") == "ANY":
        allowed = config.get("allowedFunctionNames", [])
        tool_choice = allowed[0] if len(allowed) == 1 else "required"
    elif config.get("mode") == "NONE":
        tool_choice = "none"
    system = body.get("systemInstruction", {}).get("parts", [])
    return ModelRequest(
        messages=list(history),
        tools=tools,
        tool_choice=tool_choice,
        instructions="\n".join(p["text"] for p in system) or None,
        output_schema=body.get("generationConfig", {}).get("responseJsonSchema"),
    )


def _model_for(rec: Interaction, client: httpx.AsyncClient) -> GeminiModel:
    """The adapter configured the way the recorded URL says (endpoint, streaming, encoding, Vertex)."""
    url = urlparse(rec.uri)
    model = url.path.rsplit("/", 1)[-1].split(":")[0]
    stream = url.path.endswith(":streamGenerateContent")
    sse = "alt=sse" in url.query
    if "aiplatform" in url.netloc:
        segments = url.path.split("/")
        project = segments[segments.index("projects") + 1]
        location = segments[segments.index("locations") + 1]
        return GeminiModel(
            model,
            vertex=True,
            project=project,
            location=location,
            access_token="test-token",
            http_client=client,
            stream=stream,
            sse=sse,
        )
    return GeminiModel(model, api_key="test-key", http_client=client, stream=stream, sse=sse)


def _tool_results(response: Message, next_body: dict[str, Any]) -> Message:
    """The tool message the loop would append, with outputs taken from the recorded functionResponses."""
    responses = [
        p.get("functionResponse", p.get("function_response"))
        for p in next_body["contents"][-1]["parts"]
        if "functionResponse" in p or "function_response" in p
    ]
    calls = response.tool_calls
    assert [r["name"] for r in responses] == [c.tool_name for c in calls]
    return Message(
        role="tool",
        parts=tuple(
            ToolResultPart(tool_call_id=c.tool_call_id, tool_name=c.tool_name, output=r["response"])
            for c, r in zip(calls, responses, strict=True)
        ),
    )


async def _run(model: GeminiModel, request: ModelRequest) -> tuple[list[ModelStreamPart], Message]:
    parts = [p async for p in model.stream(request)]
    errors = [p for p in parts if isinstance(p, StreamError)]
    assert not errors, errors[0].error
    return parts, _message_from(parts)


def _message_from(parts: list[ModelStreamPart]) -> Message:
    """The assistant message exactly as collect() and the agent loop build it."""
    builder = MessageBuilder(provider="google")
    for part in parts:
        builder.add(part)
    return builder.message()


# ---------------------------------------------------------------------------------------------------------
# 1 + 2: every recording


def _first_history(path: str, cassette: Cassette) -> tuple[list[Message], list[Interaction]]:
    """The history before the first Gemini request, and the Gemini interactions."""
    if path != CROSS_PROVIDER:
        first = cassette.interactions[0].request_json["contents"][0]
        return [Message.user("".join(p["text"] for p in first["parts"]))], cassette.interactions
    return _openai_history(cassette), cassette.interactions[2:]


def _openai_history(cassette: Cassette) -> list[Message]:
    """The canonical history an OpenAI Responses adapter produced, built by hand from the recorded response:
    reasoning (encrypted) and a function call, both with metadata under "openai" only."""
    openai = json.loads(cassette.interactions[0].body)
    reasoning, call = openai["output"]
    user_text = cassette.interactions[0].request_json["input"][0]["content"]
    assistant = Message(
        role="assistant",
        provider="openai",
        model=openai["model"],
        parts=(
            ReasoningPart(
                text="",
                provider_metadata={
                    "openai": {"itemId": reasoning["id"], "encryptedContent": reasoning["encrypted_content"]}
                },
            ),
            ToolCallPart(
                tool_call_id=call["call_id"],
                tool_name=call["name"],
                args=json.loads(call["arguments"]),
                args_json=call["arguments"],
                provider_metadata={"openai": {"itemId": call["id"]}},
            ),
        ),
    )
    # The OpenAI tool output was "Mexico"; pydantic-ai wrapped it as {"return_value": ...} for Gemini, so the
    # canonical output used here is that object (taken from the recorded Gemini request).
    gemini_body = cassette.interactions[2].request_json
    result = gemini_body["contents"][2]["parts"][0]["functionResponse"]["response"]
    tool = Message(
        role="tool",
        parts=(ToolResultPart(tool_call_id=call["call_id"], tool_name=call["name"], output=result),),
    )
    return [Message.user(user_text), assistant, tool]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: Path(p).name)
async def test_recording(path: str) -> None:
    golden = _golden(path)
    cassette = load(path)
    if path.endswith(".chunks.txt"):  # response only: no request was recorded
        model = GeminiModel("gemini-3-flash-preview", api_key="k", http_client=cassette.client())
        parts, message = await _run(model, ModelRequest(messages=[Message.user("hi")]))
        recorded = _read_recorded(_recorded_chunks(cassette.interactions[0]))
        _check_response(parts, message, recorded, golden["responses"][0])
        return

    history, interactions = _first_history(path, cassette)
    cassette = Cassette(cassette.path, interactions)  # replay only the Gemini interactions, in order
    model = _model_for(interactions[0], cassette.client())
    assert len(golden["responses"]) == len(interactions)
    for index, rec in enumerate(interactions):
        request = _request_from_recording(rec.request_json, history)
        parts, message = await _run(model, request)
        _check_response(parts, message, _read_recorded(_recorded_chunks(rec)), golden["responses"][index])

        sent = cassette.sent[index]
        assert str(sent.url) == rec.uri
        if "aiplatform" in rec.uri:
            assert sent.headers["authorization"] == "Bearer test-token"
        else:
            assert sent.headers["x-goog-api-key"] == "test-key"
        check_gemini(cassette.sent_json(index))
        _assert_same_conversation(path, cassette.sent_json(index), rec.request_json)

        history = [*history, message]
        if index + 1 < len(interactions):
            history.append(_tool_results(message, interactions[index + 1].request_json))


def _assert_same_conversation(path: str, ours: dict[str, Any], recorded: dict[str, Any]) -> None:
    """Deliberate differences, by library that made the recording:

    * all: sampling/safety/modality fields (``generationConfig.responseModalities``, ``safetySettings``,
      ``thinkingConfig``) are not conversation; tool schemas are compared by value, not by key spelling
      (toolwire always sends ``parametersJsonSchema``); an absent ``toolConfig`` equals mode AUTO.
    * Vertex recording: pydantic-ai adds a ``googleSearch`` built-in tool, which toolwire has no canonical
      definition for; only function declarations are compared.
    * llm-gemini: (a) it puts an empty ``{"text": ""}`` part (its own empty response text) before the
      function call of the replayed model turn: removed from the recorded side; (b) it drops ``thought``
      summary parts, which toolwire replays (as pydantic-ai and the AI SDK do; the API accepts both):
      removed from our side; (c) its older recording sends no call ids while toolwire always sends them:
      ids are left out of that one comparison.
    """
    ours, recorded = copy.deepcopy(ours), copy.deepcopy(recorded)
    if path.startswith("llm-gemini/"):
        for content in recorded["contents"]:
            if content["role"] == "model":
                content["parts"] = [p for p in content["parts"] if p != {"text": ""}]
        for content in ours["contents"]:
            content["parts"] = [p for p in content["parts"] if not p.get("thought")]
    strip = not _has_ids(recorded)
    assert _conversation(ours, strip_ids=strip) == _conversation(recorded, strip_ids=strip)


# ---------------------------------------------------------------------------------------------------------
# Specific behaviours, on the recordings


async def test_cross_provider_history_gets_placeholder_and_no_foreign_metadata() -> None:
    cassette = load(CROSS_PROVIDER)
    history = _openai_history(cassette)
    gemini = Cassette(cassette.path, cassette.interactions[2:])
    model = _model_for(gemini.interactions[0], gemini.client())
    response = await collect(model, _request_from_recording(gemini.interactions[0].request_json, history))
    sent = gemini.sent_json(0)
    recorded = gemini.interactions[0].request_json
    assert sent["contents"] == recorded["contents"]  # exactly, ids and placeholder included
    assert sent["contents"][1]["parts"][0]["thoughtSignature"] == PLACEHOLDER
    raw = gemini.sent[0].content.decode()
    for foreign in ("rs_", "fc_0c71", "gAAAA", "encrypted", "itemId", "openai"):
        assert foreign not in raw
    assert response.finish_reason == "tool-calls"
    assert response.tool_calls[0].tool_name == "final_result"


async def test_signatures_are_sent_back_exactly_as_received() -> None:
    """The API's standard base64 goes back as-is (not re-encoded) on the part it came on."""
    path = FIXTURES[0]
    cassette = load(path)
    model = _model_for(cassette.interactions[0], cassette.client())
    first = await collect(model, _request_from_recording(cassette.interactions[0].request_json, []))
    user = Message.user("What is the capital of the user country? Call the tool")
    call = first.tool_calls[0]
    result = Message(
        role="tool",
        parts=(ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, output="Mexico"),),
    )
    await collect(model, ModelRequest(messages=[user, first.message, result]))
    model_turn = cassette.sent_json(1)["contents"][1]
    received = _read_recorded(_recorded_chunks(cassette.interactions[0])).signatures[0]
    assert "+" in received or "/" in received  # standard alphabet: a re-encoding would show
    assert model_turn["parts"] == [
        {
            "functionCall": {"name": "get_country", "args": {}, "id": call.tool_call_id},
            "thoughtSignature": received,
        }
    ]
    # a non-object output is wrapped, and the response carries the call's id
    assert cassette.sent_json(1)["contents"][2]["parts"] == [
        {
            "functionResponse": {
                "name": "get_country",
                "id": call.tool_call_id,
                "response": {"result": "Mexico"},
            }
        }
    ]


async def test_trailing_empty_signed_text_part_round_trips() -> None:
    cassette = load(_fixture("test_native_output_with_function_tools_stream"))
    final = Cassette(cassette.path, [cassette.interactions[1], cassette.interactions[1]])
    model = _model_for(final.interactions[0], final.client())
    response = await collect(model, ModelRequest(messages=[Message.user("q")]))
    recorded = _read_recorded(_recorded_chunks(cassette.interactions[1]))
    await collect(model, ModelRequest(messages=[Message.user("q"), response.message, Message.user("again")]))
    assert final.sent_json(1)["contents"][1] == {
        "role": "model",
        "parts": [{"text": recorded.text}, {"text": "", "thoughtSignature": recorded.signatures[0]}],
    }


async def test_thought_parts_replay_with_thought_flag() -> None:
    """Gemini reasoning goes back as ``thought: true`` parts, its signature on the part that carried it."""
    cassette = load(_fixture("google-stream-no-args-tool-call"))
    replay = Cassette(cassette.path, [cassette.interactions[0], cassette.interactions[0]])
    model = GeminiModel(
        "gemini-3-flash-preview", vertex=True, project="p", access_token="t", http_client=replay.client()
    )
    response = await collect(model, ModelRequest(messages=[Message.user("go")]))
    calls = response.tool_calls
    results = Message(
        role="tool",
        parts=tuple(
            ToolResultPart(tool_call_id=c.tool_call_id, tool_name=c.tool_name, output={"ok": 1})
            for c in calls
        ),
    )
    await collect(model, ModelRequest(messages=[Message.user("go"), response.message, results]))
    chunks = _recorded_chunks(cassette.interactions[0])
    thought = chunks[0]["candidates"][0]["content"]["parts"][0]
    signature = chunks[1]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    sent = replay.sent_json(1)
    assert replay.sent[1].url.host == "aiplatform.googleapis.com"
    assert sent["contents"][1]["parts"] == [
        {"text": thought["text"], "thought": True},
        {
            "functionCall": {"name": "read_theme", "args": {}, "id": calls[0].tool_call_id},
            "thoughtSignature": signature,
        },
        *(
            {"functionCall": {"name": "read_screen", "args": {"id": x}, "id": c.tool_call_id}}
            for x, c in zip("ABC", calls[1:], strict=True)
        ),
    ]
    assert [p["functionResponse"]["id"] for p in sent["contents"][2]["parts"]] == [
        c.tool_call_id for c in calls
    ]


async def test_non_stream_and_stream_give_the_same_parts() -> None:
    """The same GenerateContentResponse through :generateContent, SSE and the JSON array stream."""
    rec = load(_fixture("test_google_instructions_only_with_tool_calls"))
    body = rec.interactions[0].body
    variants = [
        (False, True, {"content-type": "application/json"}, body),
        (True, True, {"content-type": "text/event-stream"}, b"data: " + body + b"\r\n\r\n"),
        (True, False, {"content-type": "application/json"}, b"[" + body + b"\n]"),
    ]
    outputs = []
    for stream, sse, headers, content in variants:
        cassette = Cassette(Path("x"), [Interaction("POST", "", None, 200, headers, content)])
        model = GeminiModel(
            "gemini-3-flash-preview", api_key="k", http_client=cassette.client(), stream=stream, sse=sse
        )
        parts = [p async for p in model.stream(ModelRequest(messages=[Message.user("")]))]
        outputs.append(parts)
    assert outputs[0] == outputs[1] == outputs[2]


async def test_json_array_stream_is_parsed_incrementally() -> None:
    """Parts of the first array element are yielded before the rest of the body has been received."""
    cassette = load(_fixture("test_tools"))
    body = cassette.interactions[0].body
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]  # cut everywhere, inside strings and escapes
    sent = 0

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            nonlocal sent
            for piece in pieces:
                sent += 1
                yield piece

    urls = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=Body())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = GeminiModel("gemini-2.5-flash", api_key="k", http_client=client, sse=False)
    seen_at = None
    async for part in model.stream(ModelRequest(messages=[Message.user("x")])):
        if part.type == "reasoning-delta" and seen_at is None:
            seen_at = sent
    second_element_piece = body.index(b"}\n,\r\n{") // 7 + 1  # pieces sent once the 2nd element begins
    assert seen_at is not None and seen_at <= second_element_piece < len(pieces)
    assert urls == [cassette.interactions[0].uri]  # the JSON-array endpoint, without alt=sse


# ---------------------------------------------------------------------------------------------------------
# Errors


def _error_client(name: str) -> httpx.AsyncClient:
    spec = json.loads((GOLDEN / name).read_text())
    headers = spec.get("headers", {"content-type": "application/json"})
    content = json.dumps(spec["body"]).encode()
    return httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(spec["status"], headers=headers, content=content)
        )
    )


async def test_http_400_is_a_typed_error_with_google_status() -> None:
    model = GeminiModel("gemini-3-pro-preview", api_key="k", http_client=_error_client("error_http_400.json"))
    with pytest.raises(ProviderHTTPError) as info:
        await collect(model, ModelRequest(messages=[Message.user("x")]))
    error = info.value
    assert (error.status, error.code, error.retryable) == (400, "INVALID_ARGUMENT", False)
    assert error.message.startswith("Function call is missing a thought_signature")
    assert error.provider == "google" and error.model == "gemini-3-pro-preview"


async def test_http_429_in_array_form_is_retryable() -> None:
    model = GeminiModel(
        "gemini-3-pro-preview", api_key="k", http_client=_error_client("error_http_429.json"), sse=False
    )
    with pytest.raises(ProviderHTTPError) as info:
        await collect(model, ModelRequest(messages=[Message.user("x")]))
    error = info.value
    assert (error.status, error.code, error.retryable, error.retry_after) == (
        429,
        "RESOURCE_EXHAUSTED",
        True,
        7.0,
    )
    assert error.message == "Resource has been exhausted (e.g. check quota)."


async def test_error_inside_a_200_stream_becomes_stream_error() -> None:
    spec = json.loads((GOLDEN / "error_in_stream.json").read_text())
    content = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in spec["chunks"]).encode()
    cassette = Cassette(
        Path("x"), [Interaction("POST", "", None, 200, {"content-type": "text/event-stream"}, content)]
    )
    model = GeminiModel("gemini-3-flash-preview", api_key="k", http_client=cassette.client())
    parts = [p async for p in model.stream(ModelRequest(messages=[Message.user("x")]))]
    assert [p.type for p in parts] == [
        "stream-start",
        "response-metadata",
        "text-start",
        "text-delta",
        "text-end",
        "error",
    ]
    assert isinstance(parts[-1], StreamError)
    error = parts[-1].error
    assert isinstance(error, ProviderProtocolError)
    assert (error.code, error.status, error.retryable) == ("UNAVAILABLE", 503, True)
    assert error.message == "The model is overloaded. Please try again later."


async def test_stream_without_finish_reason_is_a_retryable_error() -> None:
    body = load(FIXTURES[0]).interactions[0].body
    first_frame = body.split(b"\r\n\r\n")[0] + b"\r\n\r\n"  # the second frame (with finishReason) is cut off
    cassette = Cassette(
        Path("x"), [Interaction("POST", "", None, 200, {"content-type": "text/event-stream"}, first_frame)]
    )
    model = GeminiModel("gemini-3-pro-preview", api_key="k", http_client=cassette.client())
    parts = [p async for p in model.stream(ModelRequest(messages=[Message.user("x")]))]
    assert isinstance(parts[-1], StreamError) and parts[-1].error.retryable
    assert any(p.type == "tool-input-end" for p in parts)  # what did arrive is still delivered


async def test_missing_credentials_fail_when_the_model_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_ACCESS_TOKEN", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError):
        GeminiModel("gemini-3-flash-preview")
    monkeypatch.setenv("GOOGLE_API_KEY", "from-env")
    assert GeminiModel("m")._endpoint()[1] == {"x-goog-api-key": "from-env"}
    monkeypatch.setenv("GOOGLE_ACCESS_TOKEN", "tok")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    url, headers = GeminiModel("m", vertex=True, location="europe-west4")._endpoint()
    assert headers == {"authorization": "Bearer tok"}
    assert url == (
        "https://europe-west4-aiplatform.googleapis.com/v1beta1/projects/proj/locations/europe-west4"
        "/publishers/google/models/m:streamGenerateContent?alt=sse"
    )


# ---------------------------------------------------------------------------------------------------------
# Request building


def _call(call_id: str, metadata: dict[str, Any], name: str = "f") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"a": 1}, provider_metadata=metadata)


async def _sent_body(request: ModelRequest, **kwargs: Any) -> tuple[dict[str, Any], list[ModelStreamPart]]:
    body = load(FIXTURES[3]).interactions[2].body  # any complete response will do
    cassette = Cassette(
        Path("x"), [Interaction("POST", "", None, 200, {"content-type": "text/event-stream"}, body)]
    )
    model = GeminiModel("gemini-3-flash-preview", api_key="k", http_client=cassette.client(), **kwargs)
    parts = [p async for p in model.stream(request)]
    return cassette.sent_json(0), parts


async def test_only_google_metadata_is_sent() -> None:
    sig = "c2lnbmF0dXJl"
    assistant = Message(
        role="assistant",
        provider="google",
        parts=(
            ReasoningPart(
                text="thinking", signature="anthropic-sig", provider_metadata={"anthropic": {"x": 1}}
            ),
            TextPart(text="hello", provider_metadata={"openai": {"itemId": "msg_1"}}),
            _call("c1", {"google": {"thoughtSignature": sig}, "openai": {"itemId": "fc_1"}}),
            _call("c2", {"bedrock": {"y": 2}}),
        ),
    )
    results = Message(
        role="tool",
        parts=(
            ToolResultPart(tool_call_id="c1", tool_name="f", output=[1, 2]),
            ToolResultPart(tool_call_id="c2", tool_name="f", output="boom", is_error=True),
        ),
    )
    body, _ = await _sent_body(ModelRequest(messages=[Message.user("u"), assistant, results]))
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"text": "thinking", "thought": True},
                {"text": "hello"},
                {"functionCall": {"name": "f", "args": {"a": 1}, "id": "c1"}, "thoughtSignature": sig},
                {"functionCall": {"name": "f", "args": {"a": 1}, "id": "c2"}},  # Gemini's own unsigned call
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "f", "id": "c1", "response": {"result": [1, 2]}}},
                {"functionResponse": {"name": "f", "id": "c2", "response": {"error": "boom"}}},
            ],
        },
    ]


async def test_placeholder_only_on_first_foreign_call_of_the_current_turn() -> None:
    def step(*ids: str) -> Message:
        return Message(
            role="assistant", provider="anthropic", parts=tuple(_call(i, {"anthropic": {}}) for i in ids)
        )

    def results(*ids: str) -> Message:
        return Message(
            role="tool", parts=tuple(ToolResultPart(tool_call_id=i, tool_name="f", output={}) for i in ids)
        )

    history = [
        Message.user("old turn"),
        step("a"),
        results("a"),
        Message.user("current turn"),
        step("b", "c"),
        results("b", "c"),
        step("d"),
        results("d"),
    ]
    body, _ = await _sent_body(ModelRequest(messages=history))
    signed = [
        (part["functionCall"]["id"], part.get("thoughtSignature"))
        for content in body["contents"]
        for part in content["parts"]
        if "functionCall" in part
    ]
    assert signed == [("a", None), ("b", PLACEHOLDER), ("c", None), ("d", PLACEHOLDER)]


async def test_tools_tool_choice_instructions_and_settings() -> None:
    tools = [
        ToolDefinition(
            name="get",
            description="Get it.",
            parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        ),
        ToolDefinition(name="put"),
    ]
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    request = ModelRequest(
        messages=[Message.system("from history"), Message.user("u")],
        tools=tools,
        tool_choice="put",
        instructions="be brief",
        output_schema=schema,
        settings=ModelSettings(
            max_tokens=50,
            temperature=0.2,
            top_p=0.9,
            stop=("END",),
            seed=3,
            parallel_tool_calls=False,
            extra={"generationConfig": {"thinkingConfig": {"includeThoughts": True}}, "labels": {"a": "b"}},
        ),
    )
    body, parts = await _sent_body(
        request, vertex=True, project="p", access_token="t", stream_function_call_arguments=True
    )
    assert body["systemInstruction"] == {
        "role": "user",
        "parts": [{"text": "be brief"}, {"text": "from history"}],
    }
    assert body["contents"] == [{"role": "user", "parts": [{"text": "u"}]}]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "get", "description": "Get it.", "parametersJsonSchema": tools[0].parameters},
                {"name": "put", "parametersJsonSchema": {"type": "object", "properties": {}}},
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {
            "mode": "ANY",
            "allowedFunctionNames": ["put"],
            "streamFunctionCallArguments": True,
        }
    }
    assert body["generationConfig"] == {
        "maxOutputTokens": 50,
        "temperature": 0.2,
        "topP": 0.9,
        "stopSequences": ["END"],
        "seed": 3,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
        "thinkingConfig": {"includeThoughts": True},
    }
    assert body["labels"] == {"a": "b"}
    assert isinstance(parts[0], StreamStart)
    assert parts[0].warnings == ("parallel_tool_calls is not supported by Gemini and was ignored",)

    for choice, config in [
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY", "allowedFunctionNames": ["get", "put"]}),
    ]:
        body, _ = await _sent_body(
            ModelRequest(messages=[Message.user("u")], tools=tools, tool_choice=choice)
        )
        assert body["toolConfig"] == {"functionCallingConfig": config}
    body, parts = await _sent_body(
        ModelRequest(messages=[Message.user("u")], tools=tools), stream_function_call_arguments=True
    )
    assert "toolConfig" not in body  # Gemini API: not requested, and said so
    assert isinstance(parts[0], StreamStart)
    assert parts[0].warnings == (
        "stream_function_call_arguments is a Vertex AI feature and was not requested",
    )


async def test_unrepresentable_content_raises() -> None:
    from toolwire.errors import UnsupportedContentError

    bad = Message(role="user", parts=(_call("x", {}),))
    with pytest.raises(UnsupportedContentError):
        await _sent_body(ModelRequest(messages=[bad]))


# ---------------------------------------------------------------------------------------------------------
# The text helpers, directly


@functools.cache
def _array_bodies() -> list[bytes]:
    return [
        rec.body
        for name in ("test_tools", "test_tools_with_gemini_3_thought_signatures")
        for rec in load(_fixture(name)).interactions
    ]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_json_array_reader_splits_anywhere(data: st.DataObject) -> None:
    body = data.draw(st.sampled_from(_array_bodies())).decode()
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=60)))
    reader = JsonArrayReader()
    elements: list[Any] = []
    for start, end in itertools.pairwise([0, *cuts, len(body)]):
        elements.extend(reader.feed(body[start:end]))
    assert elements == json.loads(body) and not reader.incomplete


def test_json_array_reader_handles_braces_and_escapes_inside_strings() -> None:
    text = '[{"a": "}{\\"[,]"}\n,\r\n{"b": {"c": "\\u007d"}}\n]'
    for size in range(1, 6):
        reader = JsonArrayReader()
        out = [e for i in range(0, len(text), size) for e in reader.feed(text[i : i + size])]
        assert out == json.loads(text)


def test_json_paths() -> None:
    assert parse_json_path("$.recipe.ingredients[3].name") == ["recipe", "ingredients", 3, "name"]
    assert parse_json_path("$['odd.key'][0][\"q\"]") == ["odd.key", 0, "q"]
    assert parse_json_path("recipe") is None


def test_streamed_args_out_of_order_still_give_the_object() -> None:
    """Paths that go back into a closed container cannot extend the text: the object is still exact."""
    args = StreamedArgs()
    deltas = [
        args.add(["b", "c"], 1, is_string=False, will_continue=False),
        args.add(["a"], "x", is_string=True, will_continue=True),
        args.add(["a"], "y", is_string=True, will_continue=False),
        args.add(["b", "d"], None, is_string=False, will_continue=False),  # back into the closed "b"
        args.add(["e", 1], True, is_string=False, will_continue=False),  # and an array gap
    ]
    deltas.append(args.close())
    value, text = args.result()
    assert value == {"b": {"c": 1, "d": None}, "a": "xy", "e": [None, True]}
    assert json.loads(text) == value and not args.text_intact
    assert "".join(deltas) == '{"b":{"c":1},"a":"xy"'  # the text stops where the order broke


def test_streamed_args_in_order_text_is_the_json() -> None:
    args = StreamedArgs()
    deltas = [
        args.add(["s"], 'a"', is_string=True, will_continue=True),
        args.add(["s"], "é\n", is_string=True, will_continue=True),
        args.add(["s"], "", is_string=True, will_continue=False),
        args.add(["n", 0, "k"], 2.5, is_string=False, will_continue=False),
        args.add(["n", 1, "k"], False, is_string=False, will_continue=False),
        args.close(),
    ]
    value, text = args.result()
    assert value == {"s": 'a"é\n', "n": [{"k": 2.5}, {"k": False}]}
    assert "".join(deltas) == text and json.loads(text) == value and args.text_intact


# ---------------------------------------------------------------------------------------------------------
# Hand-written response shapes that no recording covers


def _json_cassette(name: str) -> Cassette:
    body = json.dumps(json.loads((GOLDEN / name).read_text())["body"]).encode()
    interaction = Interaction("POST", "", None, 200, {"content-type": "application/json"}, body)
    return Cassette(Path(name), [interaction, interaction])


async def test_blocked_prompt_finishes_with_content_filter() -> None:
    cassette = _json_cassette("prompt_blocked.json")
    model = GeminiModel("gemini-3-flash-preview", api_key="k", http_client=cassette.client(), stream=False)
    response = await collect(model, ModelRequest(messages=[Message.user("x")]))
    assert (response.finish_reason, response.raw_finish_reason) == ("content-filter", "PROHIBITED_CONTENT")
    assert response.message.parts == () and response.usage == Usage(input_tokens=12, requests=1)


async def test_code_execution_is_provider_executed_and_replayed() -> None:
    cassette = _json_cassette("code_execution_response.json")
    model = GeminiModel("gemini-3-flash-preview", api_key="k", http_client=cassette.client(), stream=False)
    response = await collect(model, ModelRequest(messages=[Message.user("x")]))
    call, result, text = response.message.parts
    assert isinstance(text, TextPart) and text.text == "2**10 is 1024."
    assert isinstance(call, ToolCallPart) and call.provider_executed
    assert call.args == {"language": "PYTHON", "code": "print(2**10)"}
    assert isinstance(result, ToolResultPart) and result.provider_executed and not result.is_error
    assert result.tool_call_id == call.tool_call_id
    assert response.finish_reason == "stop"  # nothing for the client to run
    assert response.usage.cache_read_tokens == 8
    await collect(model, ModelRequest(messages=[Message.user("x"), response.message, Message.user("y")]))
    assert cassette.sent_json(1)["contents"][1]["parts"] == [
        {
            "executableCode": {"language": "PYTHON", "code": "print(2**10)"},
            "thoughtSignature": "c2lnLWNvZGU=",
        },
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1024\n"}},
        {"text": "2**10 is 1024."},
    ]


async def test_tool_use_prompt_tokens_count_as_input() -> None:
    """``toolUsePromptTokenCount`` (a built-in tool's results placed in the prompt) is billed as input and
    is outside ``promptTokenCount``: input plus output must be ``totalTokenCount``, and the cost follows.
    The numbers are the documented response of vercel/ai's "should preserve complete raw usage metadata"
    (``packages/google/src/google-language-model.test.ts``): 12 + 65 + 71 + 89 = 237."""
    usage_metadata = {
        "promptTokenCount": 12,
        "cachedContentTokenCount": 4,
        "candidatesTokenCount": 71,
        "toolUsePromptTokenCount": 65,
        "thoughtsTokenCount": 89,
        "totalTokenCount": 237,
    }
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}],
        "usageMetadata": usage_metadata,
        "modelVersion": "gemini-2.5-flash",
    }
    interaction = Interaction(
        "POST", "", None, 200, {"content-type": "application/json"}, json.dumps(body).encode()
    )
    cassette = Cassette(Path("usage"), [interaction])
    model = GeminiModel("gemini-2.5-flash", api_key="k", http_client=cassette.client(), stream=False)
    response = await collect(model, ModelRequest(messages=[Message.user("x")]))
    assert response.usage == Usage(
        input_tokens=77, output_tokens=160, reasoning_tokens=89, cache_read_tokens=4, requests=1
    )
    assert response.usage.total_tokens == usage_metadata["totalTokenCount"]
