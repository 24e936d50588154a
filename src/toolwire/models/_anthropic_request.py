"""Canonical request -> Anthropic Messages request body (https://docs.anthropic.com/en/api/messages).

Only the keys of ``provider_metadata["anthropic"]`` declared in ``ROUND_TRIP_METADATA`` are read, each
checked before it fills a known field. Signed / redacted thinking is sent back only when the
assistant message came from Anthropic (or from an unknown producer), never a signature minted elsewhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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
from toolwire.models._metadata import ANTHROPIC, read_back
from toolwire.models.base import ModelRequest, ToolDefinition

PROVIDER = "anthropic"
ROUND_TRIP_METADATA = ANTHROPIC
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""

# Content block types a tool_result may carry; a tool output shaped as a list of these is sent as-is
# (e.g. ``[{"type": "text", "text": ...}]``), anything else is sent as text.
_RESULT_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result", "tool_reference"})
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
# Block types of server tool calls and results (server_tool_use, mcp_tool_use; web_search_tool_result, ...):
# the only types history may choose, so it cannot turn a replayed block into text or anything else.
_SERVER_CALL = re.compile(r"[a-z][a-z0-9_]*_tool_use")
_SERVER_RESULT = re.compile(r"[a-z][a-z0-9_]*_tool_result")


def build_body(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int,
    stream: bool,
    thinking: dict[str, Any] | None,
    builtin_tools: Sequence[dict[str, Any]],
) -> tuple[dict[str, Any], list[str]]:
    """The JSON body for ``POST /v1/messages`` and the warnings about settings it could not honour."""
    settings = request.settings
    warnings: list[str] = []
    system, messages = to_wire_messages(request.messages)
    if request.instructions:
        system.insert(0, request.instructions)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": settings.max_tokens or max_tokens,
        "messages": messages,
        "stream": stream,
    }
    if system:
        body["system"] = "\n\n".join(system)
    tools = [_to_wire_tool(t) for t in request.tools] + [dict(t) for t in builtin_tools]
    if tools:
        body["tools"] = tools
        body["tool_choice"] = _to_wire_tool_choice(request.tool_choice, settings.parallel_tool_calls)
    if thinking is not None:
        body["thinking"] = dict(thinking)
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.stop:
        body["stop_sequences"] = list(settings.stop)
    if settings.seed is not None:
        warnings.append("seed is not supported by Anthropic and was ignored")
    if request.output_schema is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": request.output_schema}}
    body.update(settings.extra)
    return body, warnings


def _to_wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.parameters,
    }
    if tool.strict:
        wire["strict"] = True
    return wire


def _to_wire_tool_choice(choice: str, parallel: bool | None) -> dict[str, Any]:
    match choice:
        case "auto":
            wire: dict[str, Any] = {"type": "auto"}
        case "required":
            wire = {"type": "any"}
        case "none":
            return {"type": "none"}
        case name:
            wire = {"type": "tool", "name": name}
    if parallel is False:
        wire["disable_parallel_tool_use"] = True
    return wire


def wire_tool_id(tool_call_id: str) -> str:
    """Anthropic ids must match ``^[a-zA-Z0-9_-]+$``; ids minted by other providers are made to fit."""
    return _ID_UNSAFE.sub("_", tool_call_id) or "toolu_empty"


# ---------------------------------------------------------------------------------------------
# History


def to_wire_messages(messages: Sequence[Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """Split history into system texts and alternating user/assistant wire messages."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []
    for message in messages:
        match message.role:
            case "system":
                system.extend(p.text for p in message.parts if isinstance(p, TextPart) and p.text)
                continue
            case "assistant":
                role, content = "assistant", _to_wire_assistant(message)
            case "user" | "tool":
                role, content = "user", _to_wire_user(message.parts, wire)
        if not content:
            continue
        if wire and wire[-1]["role"] == role:
            # Consecutive same-role turns (e.g. tool results followed by a user text) become one turn.
            wire[-1]["content"].extend(content)
        else:
            wire.append({"role": role, "content": content})
    return system, wire


def _to_wire_assistant(message: Message) -> list[dict[str, Any]]:
    # A signature is only valid for the provider that minted it. ``Message.provider`` tells whose it is;
    # ``None`` means a hand-built history, which we trust.
    own = message.provider in (None, PROVIDER)
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        match part:
            case TextPart():
                if part.text:  # the API rejects empty text blocks
                    blocks.append({"type": "text", "text": part.text})
            case ReasoningPart():
                block = _to_wire_reasoning(part) if own else None
                if block is not None:
                    blocks.append(block)
            case ToolCallPart():
                # Another provider's server-side tool calls mean nothing to Anthropic.
                if own or not part.provider_executed:
                    blocks.append(_to_wire_tool_call(part))
            case ToolResultPart():
                result = _to_wire_server_result(part) if part.provider_executed and own else None
                if result is not None:
                    blocks.append(result)
            case FilePart():
                raise UnsupportedContentError("Anthropic assistant messages cannot contain files")
    return blocks


def _to_wire_reasoning(part: ReasoningPart) -> dict[str, Any] | None:
    if part.redacted_data is not None:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None  # unsigned thinking cannot be sent back; the API would reject it


def _to_wire_tool_call(part: ToolCallPart) -> dict[str, Any]:
    # History (possibly sent by a client) only fills known fields, each checked: the API wants ``caller``
    # and an MCP call's ``server_name`` echoed back, and a server tool keeps its ``*_tool_use`` block type.
    own = read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER)
    block_type = "tool_use"
    if part.provider_executed:
        stored = own.get("type")
        block_type = (
            stored if isinstance(stored, str) and _SERVER_CALL.fullmatch(stored) else "server_tool_use"
        )
    try:
        args = json.loads(part.wire_args_json())
    except ValueError:
        args = part.args
    block: dict[str, Any] = {
        "type": block_type,
        "id": wire_tool_id(part.tool_call_id),
        "name": part.tool_name,
        "input": args,
    }
    caller = _caller(own.get("caller"))
    if caller is not None:
        block["caller"] = caller
    if part.provider_executed and isinstance(own.get("server_name"), str):
        block["server_name"] = own["server_name"]
    return block


def _caller(value: Any) -> dict[str, str] | None:
    """``{"type": "direct"}`` or ``{"type": "code_execution_...", "tool_id": ...}``; nothing else."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return None
    return {k: v for k, v in value.items() if k in ("type", "tool_id") and isinstance(v, str)}


def _to_wire_server_result(part: ToolResultPart) -> dict[str, Any] | None:
    """A provider-executed result, replayed from the block we received (``None`` if not ours): its
    ``*_tool_result`` type, content and error flag, nothing else."""
    stored = read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER)
    kind = stored.get("type")
    if not isinstance(kind, str) or not _SERVER_RESULT.fullmatch(kind):
        return None
    block: dict[str, Any] = {"type": kind, "tool_use_id": part.tool_call_id}
    block["content"] = stored.get("content", part.output)
    if isinstance(stored.get("is_error"), bool):
        block["is_error"] = stored["is_error"]
    return block


def _to_wire_user(parts: Sequence[Part], wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case TextPart():
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            case FilePart():
                blocks.append(_to_wire_file(part))
            case ToolResultPart():
                if part.provider_executed:
                    _attach_server_result(part, wire)
                else:
                    blocks.append(_to_wire_tool_result(part))
            case ReasoningPart() | ToolCallPart():
                raise UnsupportedContentError(f"a {part.type} part cannot be sent in a user turn")
    return blocks


def _attach_server_result(part: ToolResultPart, wire: list[dict[str, Any]]) -> None:
    """Provider-executed results belong to the assistant turn; move one there unless it already is."""
    if not wire or wire[-1]["role"] != "assistant":
        return
    content = wire[-1]["content"]
    result = _to_wire_server_result(part)
    if result is not None and not any(b.get("tool_use_id") == part.tool_call_id for b in content):
        content.append(result)


def _to_wire_tool_result(part: ToolResultPart) -> dict[str, Any]:
    output = part.output
    content: Any
    if isinstance(output, str) or (
        isinstance(output, list)
        and output
        and all(isinstance(b, dict) and b.get("type") in _RESULT_BLOCK_TYPES for b in output)
    ):
        content = output
    else:
        content = part.output_text()
    return {
        "type": "tool_result",
        "tool_use_id": wire_tool_id(part.tool_call_id),
        "content": content,
        "is_error": part.is_error,
    }


def _to_wire_file(part: FilePart) -> dict[str, Any]:
    if part.media_type.startswith("image/"):
        kind = "image"
    elif part.media_type == "application/pdf":
        kind = "document"
    else:
        raise UnsupportedContentError(f"Anthropic does not accept {part.media_type} files")
    if part.data is not None:
        source: dict[str, Any] = {"type": "base64", "media_type": part.media_type, "data": part.data}
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    else:
        raise UnsupportedContentError("a file part needs data or url")
    block: dict[str, Any] = {"type": kind, "source": source}
    if kind == "document" and part.filename:
        block["title"] = part.filename
    return block
