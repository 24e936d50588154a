"""Canonical request -> Gemini ``GenerateContentRequest`` body (Gemini API and Vertex AI share it).

Choices, each checked against the recordings in ``tests/recordings``:

* Tool schemas go in ``parametersJsonSchema`` (plain JSON Schema), not ``parameters`` (an OpenAPI subset
  that rejects many JSON Schema keywords). pydantic-ai sends it on both the Gemini API (spelled
  ``parameters_json_schema``; the API accepts either proto JSON spelling) and Vertex
  (``parametersJsonSchema``).
* Every function call and function response carries an ``id``: the server's when it sent one, else the one
  toolwire generated. The recordings show the API accepting client ids (pydantic-ai, llm-gemini).
* The model turn is replayed part by part with each ``thoughtSignature`` on the part it arrived on, exactly as
  received (standard base64 from the API; a URL-safe re-encoding made by google-genai is accepted too).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, assert_never

from toolwire.errors import UnsupportedContentError
from toolwire.messages import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.models._metadata import GEMINI, read_back
from toolwire.models._settings import SettingNames, sampling_fields
from toolwire.models._tool_output import Media, Text, blocks, content_items, joined
from toolwire.models.base import ModelRequest
from toolwire.models.gemini._stream import CODE_EXECUTION, PROVIDER

ROUND_TRIP_METADATA = GEMINI
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""

_SETTINGS = SettingNames(max_tokens="maxOutputTokens", top_p="topP", stop="stopSequences", seed="seed")

PLACEHOLDER_SIGNATURE = base64.b64encode(b"context_engineering_is_the_way_to_go").decode()
"""The dummy signature Google documents for function calls Gemini did not produce
(https://ai.google.dev/gemini-api/docs/thought-signatures, "FAQs"); the API then skips validation."""


def _signature(part: TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart) -> str | None:
    value = read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER).get("thoughtSignature")
    return value if isinstance(value, str) and value else None


def _with_signature(wire: dict[str, Any], signature: str | None) -> dict[str, Any]:
    if signature:
        wire["thoughtSignature"] = signature
    return wire


def _file(part: FilePart) -> dict[str, Any]:
    if part.data is not None:
        return {"inlineData": {"mimeType": part.media_type, "data": part.data}}
    if part.url is not None:
        return {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}
    raise UnsupportedContentError("a FilePart needs data or url")


def _function_response(part: ToolResultPart) -> dict[str, Any]:
    # `response` must be a JSON object (a protobuf Struct). Google's docs use {"output": ...} / {"error": ...}
    # (https://ai.google.dev/api/caching#FunctionResponse); toolwire wraps non-objects as {"result": ...}.
    output = part.output
    items = content_items(output)
    media: list[dict[str, Any]] = []
    if items is not None:  # an MCP tool's media: inline data parts of the function response (Gemini 3)
        output = joined(blocks(items, "Gemini", Text, lambda item: _response_media(item, media)))
    if part.is_error:
        response: dict[str, Any] = {"error": output}
    elif isinstance(output, dict):
        response = output
    else:
        response = {"result": output}
    function_response: dict[str, Any] = {
        "name": part.tool_name,
        "id": part.tool_call_id,
        "response": response,
    }
    if media:
        function_response["parts"] = media
    return {"functionResponse": function_response}


# What a multimodal function response may carry inline
# (https://ai.google.dev/gemini-api/docs/function-calling#multimodal).
_RESPONSE_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})


def _response_media(media: Media, parts: list[dict[str, Any]]) -> Text:
    if media.media_type not in _RESPONSE_MEDIA:
        raise UnsupportedContentError(f"no {media.media_type} in a function response")
    name = f"attachment-{len(parts) + 1}"
    parts.append({"inlineData": {"mimeType": media.media_type, "data": media.data, "displayName": name}})
    return Text(f"[{media.media_type} attachment {name}]")


def _user_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        match part:
            case TextPart():
                parts.append({"text": part.text})
            case FilePart():
                parts.append(_file(part))
            case ToolResultPart():
                parts.append(_function_response(part))
            case ReasoningPart() | ToolCallPart():
                raise UnsupportedContentError(
                    f"a {part.type} part cannot be sent in a {message.role} message"
                )
            case _:
                assert_never(part)
    return parts


def _tool_results(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart) and not part.provider_executed:
            parts.append(_function_response(part))
        elif isinstance(part, TextPart) and part.text:
            parts.append({"text": part.text})
    return parts


def _model_parts(message: Message, *, current_turn: bool) -> list[dict[str, Any]]:
    """One assistant message -> the parts of one ``role: "model"`` content.

    Metadata is read only under ``"google"``. A message another provider produced has no Gemini signatures:
    on the current turn its first function call gets the documented placeholder (Gemini 3 rejects an unsigned
    first call of a step), and its reasoning is dropped (Gemini cannot verify foreign reasoning; the
    recorded cross-provider request sends none). A Gemini message is replayed exactly as received, unsigned
    calls included (Gemini 2.0 never signs; 2.5 and 3 sign only the first call of a step).
    """
    own = message.provider == PROVIDER or (
        message.provider is None and any(PROVIDER in p.provider_metadata for p in message.parts)
    )
    parts: list[dict[str, Any]] = []
    first_call = True
    for part in message.parts:
        signature = _signature(part)
        match part:
            case TextPart():
                if part.text or signature:  # empty unsigned text carries nothing
                    parts.append(_with_signature({"text": part.text}, signature))
            case ReasoningPart():
                if own and (part.text or signature):
                    parts.append(_with_signature({"text": part.text, "thought": True}, signature))
            case ToolCallPart() if part.provider_executed:
                if part.tool_name == CODE_EXECUTION and own:
                    parts.append(_with_signature({"executableCode": part.args}, signature))
            case ToolCallPart():
                if signature is None and first_call and current_turn and not own:
                    signature = PLACEHOLDER_SIGNATURE
                first_call = False
                call = {"name": part.tool_name, "args": part.args, "id": part.tool_call_id}
                parts.append(_with_signature({"functionCall": call}, signature))
            case ToolResultPart():
                if part.provider_executed and part.tool_name == CODE_EXECUTION and own:
                    parts.append(_with_signature({"codeExecutionResult": part.output}, signature))
            case FilePart():
                parts.append(_with_signature(_file(part), signature))
            case _:
                assert_never(part)
    return parts


def build_contents(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    """``(contents, system texts)``. System messages are lifted into ``systemInstruction``."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    contents: list[dict[str, Any]] = []
    system: list[str] = []
    for index, message in enumerate(messages):
        match message.role:
            case "system":
                system.extend(p.text for p in message.parts if isinstance(p, TextPart))
                continue
            case "user":
                role, parts = "user", _user_parts(message)
            case "tool":
                role, parts = "user", _tool_results(message)
            case "assistant":
                role, parts = "model", _model_parts(message, current_turn=index > last_user)
            case _:
                assert_never(message.role)
        if parts:
            contents.append({"role": role, "parts": parts})
    return contents, system


def _tool_config(request: ModelRequest, stream_arguments: bool) -> dict[str, Any] | None:
    names = [t.name for t in request.tools]
    config: dict[str, Any] = {}
    if names:
        match request.tool_choice:
            case "auto":
                pass  # the API default; sent only when another field needs the config
            case "none":
                config["mode"] = "NONE"
            case "required":
                config = {"mode": "ANY", "allowedFunctionNames": names}
            case name:
                config = {"mode": "ANY", "allowedFunctionNames": [name]}
    if stream_arguments:
        config["streamFunctionCallArguments"] = True
    return {"functionCallingConfig": config} if config else None


def _generation_config(request: ModelRequest) -> tuple[dict[str, Any], list[str]]:
    settings = request.settings
    config, warnings = sampling_fields(settings, _SETTINGS, wire="Gemini")
    if settings.parallel_tool_calls is not None:
        warnings.append("parallel_tool_calls is not supported by Gemini and was ignored")
    if request.output_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = request.output_schema
    return config, warnings


def build_body(
    request: ModelRequest, *, vertex: bool, stream_arguments: bool
) -> tuple[dict[str, Any], list[str]]:
    """The request body and the warnings for settings that could not be honoured."""
    contents, system = build_contents(request.messages)
    body: dict[str, Any] = {"contents": contents}
    warnings: list[str] = []
    if request.instructions:
        system.insert(0, request.instructions)
    if system:
        body["systemInstruction"] = {"role": "user", "parts": [{"text": text} for text in system]}
    if request.tools:
        declarations = []
        for tool in request.tools:
            declaration: dict[str, Any] = {"name": tool.name, "parametersJsonSchema": tool.parameters}
            if tool.description:
                declaration["description"] = tool.description
            declarations.append(declaration)
        body["tools"] = [{"functionDeclarations": declarations}]
    elif request.tool_choice not in ("auto", "none"):
        warnings.append(f"tool_choice {request.tool_choice!r} ignored: the request has no tools")
    if stream_arguments and not vertex:
        warnings.append("stream_function_call_arguments is a Vertex AI feature and was not requested")
        stream_arguments = False
    tool_config = _tool_config(request, stream_arguments and bool(request.tools))
    if tool_config:
        body["toolConfig"] = tool_config
    generation, generation_warnings = _generation_config(request)
    warnings.extend(generation_warnings)
    if generation:
        body["generationConfig"] = generation
    for key, value in request.settings.extra.items():  # provider fields as-is, merged one level deep
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body, warnings
