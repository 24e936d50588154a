"""Canonical request -> Bedrock Converse request body
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).

No ``provider_metadata`` is read (``ROUND_TRIP_METADATA`` is empty). Reasoning signatures, which live on
ReasoningPart, are sent back only when the assistant message came from Bedrock (or from an unknown
producer). Binary content travels as base64 strings, which is how the JSON wire carries Converse ``bytes``
fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.errors import UnsupportedContentError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from toolwire.models._metadata import BEDROCK
from toolwire.models.base import ModelRequest, ToolDefinition

PROVIDER = "bedrock"
ROUND_TRIP_METADATA = BEDROCK
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""

_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_DOCUMENT_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9\-()\[\] ]+")
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}


def build_body(
    request: ModelRequest,
    *,
    max_tokens: int | None,
    additional_fields: Mapping[str, Any],
) -> tuple[dict[str, Any], list[str]]:
    """The JSON body for ``converse`` / ``converse-stream`` and the warnings about ignored settings."""
    settings = request.settings
    warnings: list[str] = []
    system, messages = to_wire_messages(request.messages)
    if request.instructions:
        system.insert(0, {"text": request.instructions})
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    inference: dict[str, Any] = {}
    if settings.max_tokens or max_tokens:
        inference["maxTokens"] = settings.max_tokens or max_tokens
    if settings.temperature is not None:
        inference["temperature"] = settings.temperature
    if settings.top_p is not None:
        inference["topP"] = settings.top_p
    if settings.stop:
        inference["stopSequences"] = list(settings.stop)
    if inference:
        body["inferenceConfig"] = inference
    tool_config = _to_wire_tool_config(request, messages, warnings)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    if additional_fields:
        body["additionalModelRequestFields"] = dict(additional_fields)
    if request.output_schema is not None:
        body["outputConfig"] = {
            "textFormat": {
                "type": "json_schema",
                # Converse wants the schema as a JSON string, not an object.
                "structure": {
                    "jsonSchema": {
                        "schema": json.dumps(request.output_schema),
                        "name": request.output_schema_name,
                    }
                },
            }
        }
    if settings.seed is not None:
        warnings.append("seed is not supported by Bedrock Converse and was ignored")
    if settings.parallel_tool_calls is not None:
        warnings.append("parallel_tool_calls is not supported by Bedrock Converse and was ignored")
    body.update(settings.extra)
    return body, warnings


def _to_wire_tool_config(
    request: ModelRequest, messages: list[dict[str, Any]], warnings: list[str]
) -> dict[str, Any] | None:
    if not request.tools:
        return None
    has_tool_blocks = any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
    choice = request.tool_choice
    if choice == "none":
        # Converse has no "none" choice. Without tools the model cannot call one, but a history holding
        # toolUse/toolResult blocks is rejected unless toolConfig is present.
        if not has_tool_blocks:
            return None
        warnings.append("tool_choice 'none' is not supported by Bedrock Converse; tools stay available")
    config: dict[str, Any] = {"tools": [_to_wire_tool(t) for t in request.tools]}
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice not in ("auto", "none"):
        config["toolChoice"] = {"tool": {"name": choice}}
    return config  # "auto" is the default and is left out


def _to_wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": tool.name, "inputSchema": {"json": tool.parameters}}
    if tool.description:  # Converse rejects an empty description
        spec["description"] = tool.description
    if tool.strict:
        spec["strict"] = True
    return {"toolSpec": spec}


def wire_tool_id(tool_call_id: str) -> str:
    """Converse ids must match ``^[a-zA-Z0-9_-]+$``; ids minted by other providers are made to fit."""
    return _ID_UNSAFE.sub("_", tool_call_id) or "tooluse_empty"


# ---------------------------------------------------------------------------------------------
# History


def to_wire_messages(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split history into system blocks and alternating user/assistant wire messages."""
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    for message in messages:
        match message.role:
            case "system":
                system.extend({"text": p.text} for p in message.parts if isinstance(p, TextPart) and p.text)
                continue
            case "assistant":
                role, content = "assistant", _to_wire_assistant(message)
            case "user" | "tool":
                role, content = "user", _to_wire_user(message.parts)
        if not content:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(content)  # Converse requires alternating roles
        else:
            wire.append({"role": role, "content": content})
    return system, wire


def _to_wire_assistant(message: Message) -> list[dict[str, Any]]:
    own = message.provider in (None, PROVIDER)
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        match part:
            case TextPart():
                if part.text:
                    blocks.append({"text": part.text})
            case ReasoningPart():
                if own:
                    blocks.extend(_to_wire_reasoning(part))
            case ToolCallPart():
                # Calls another provider executed itself cannot be replayed here; neither can their results.
                if not part.provider_executed:
                    blocks.append(_to_wire_tool_call(part))
            case ToolResultPart():
                pass
            case FilePart():
                raise UnsupportedContentError("Bedrock assistant messages cannot contain files")
    return blocks


def _to_wire_reasoning(part: ReasoningPart) -> list[dict[str, Any]]:
    if part.redacted_data is not None:
        return [{"reasoningContent": {"redactedContent": part.redacted_data}}]
    if not part.text and not part.signature:
        return []
    reasoning: dict[str, Any] = {"text": part.text}
    if part.signature:
        reasoning["signature"] = part.signature
    return [{"reasoningContent": {"reasoningText": reasoning}}]


def _to_wire_tool_call(part: ToolCallPart) -> dict[str, Any]:
    try:
        args = json.loads(part.wire_args_json())
    except ValueError:
        args = part.args
    return {"toolUse": {"toolUseId": wire_tool_id(part.tool_call_id), "name": part.tool_name, "input": args}}


def _to_wire_user(parts: Sequence[Part]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case TextPart():
                if part.text:
                    blocks.append({"text": part.text})
            case FilePart():
                blocks.append(_to_wire_file(part))
            case ToolResultPart():
                if not part.provider_executed:
                    blocks.append(_to_wire_tool_result(part))
            case ReasoningPart() | ToolCallPart():
                raise UnsupportedContentError(f"a {part.type} part cannot be sent in a user turn")
    return blocks


def _to_wire_tool_result(part: ToolResultPart) -> dict[str, Any]:
    content = {"json": part.output} if isinstance(part.output, dict) else {"text": part.output_text()}
    return {
        "toolResult": {
            "toolUseId": wire_tool_id(part.tool_call_id),
            "content": [content],
            "status": "error" if part.is_error else "success",
        }
    }


def _to_wire_file(part: FilePart) -> dict[str, Any]:
    source = _to_wire_source(part)
    image_format = _IMAGE_FORMATS.get(part.media_type)
    if image_format is not None:
        return {"image": {"format": image_format, "source": source}}
    document_format = _DOCUMENT_FORMATS.get(part.media_type)
    if document_format is not None:
        name = _DOCUMENT_NAME_UNSAFE.sub("-", part.filename or "document").strip() or "document"
        return {"document": {"format": document_format, "name": name, "source": source}}
    raise UnsupportedContentError(f"Bedrock Converse does not accept {part.media_type} files")


def _to_wire_source(part: FilePart) -> dict[str, Any]:
    if part.data is not None:
        return {"bytes": part.data}
    if part.url is not None and part.url.startswith("s3://"):
        return {"s3Location": {"uri": part.url}}
    raise UnsupportedContentError("Bedrock Converse takes files as inline data or s3:// URLs only")
