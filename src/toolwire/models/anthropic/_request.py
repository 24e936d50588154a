"""Canonical request -> Anthropic Messages request body (https://docs.anthropic.com/en/api/messages).

Only the keys of ``provider_metadata["anthropic"]`` declared in ``ROUND_TRIP_METADATA`` are read, each
checked before it fills a known field: a text block's ``citations``, a tool call's ``caller`` and MCP
``server_name``, a server tool block's type and result. Signed / redacted thinking is sent back only when the
assistant message came from Anthropic (or from an unknown producer), never a signature minted elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from toolwire.errors import UnsupportedContentError
from toolwire.messages import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.models._blocks import BlockHistory, tool_input
from toolwire.models._cache import anthropic_breakpoints, bedrock_caches
from toolwire.models._http import Json
from toolwire.models._metadata import ANTHROPIC, read_back
from toolwire.models._settings import SettingNames, sampling_fields
from toolwire.models._strict_schema import close_schema
from toolwire.models._tool_output import blocks, content_items
from toolwire.models.base import ModelRequest, ToolDefinition


class Options(Protocol):
    """What the request takes from the model: the Messages API, Vertex AI and Bedrock models alike."""

    @property
    def model_name(self) -> str: ...
    @property
    def stream_enabled(self) -> bool: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def thinking(self) -> dict[str, Any] | None: ...
    @property
    def builtin_tools(self) -> list[dict[str, Any]]: ...


PROVIDER = "anthropic"
ROUND_TRIP_METADATA = ANTHROPIC
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""

# Content block types a tool_result may carry; a tool output shaped as a list of these is sent as-is
# (e.g. ``[{"type": "text", "text": ...}]``), anything else is sent as text.
_RESULT_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result", "tool_reference"})
# Block types of server tool calls and results (server_tool_use, mcp_tool_use; web_search_tool_result, ...):
# the only types history may choose, so it cannot turn a replayed block into text or anything else.
_SERVER_CALL = re.compile(r"[a-z][a-z0-9_]*_tool_use")
_SERVER_RESULT = re.compile(r"[a-z][a-z0-9_]*_tool_result")
_SETTINGS = SettingNames(max_tokens="max_tokens", top_p="top_p", stop="stop_sequences")
_LOCATION = frozenset({"type", "cited_text", "document_index", "document_title"})
# The fields of each citation a request may carry (the SDK's ``TextCitationParam`` union).
_CITATION_FIELDS: dict[str, frozenset[str]] = {
    "char_location": _LOCATION | {"start_char_index", "end_char_index"},
    "page_location": _LOCATION | {"start_page_number", "end_page_number"},
    "content_block_location": _LOCATION | {"start_block_index", "end_block_index"},
    "web_search_result_location": frozenset({"type", "cited_text", "encrypted_index", "title", "url"}),
    "search_result_location": frozenset(
        {
            "type",
            "cited_text",
            "search_result_index",
            "source",
            "title",
            "start_block_index",
            "end_block_index",
        }
    ),
}


def build_body(request: ModelRequest, model: Options) -> tuple[Json, list[str]]:
    """The JSON body for ``POST /v1/messages`` and the warnings about settings it could not honour."""
    settings = request.settings
    history = _History()
    system, messages = history.turns(request)
    fields, warnings = sampling_fields(
        settings, _SETTINGS, wire="Anthropic", default_max_tokens=model.max_tokens
    )
    _drop_rejected_sampling(model.model_name, fields, warnings)
    body: Json = {"model": model.model_name, "messages": messages, "stream": model.stream_enabled, **fields}
    container = _continued_container(request.messages)
    if container is not None:
        body["container"] = container
    if system:
        body["system"] = "\n\n".join(system)
    tools = [_to_wire_tool(t) for t in request.tools] + [dict(t) for t in model.builtin_tools]
    if tools:
        body["tools"] = tools
        body["tool_choice"] = _to_wire_tool_choice(request.tool_choice, settings.parallel_tool_calls)
    if model.thinking is not None:
        body["thinking"] = dict(model.thinking)
    if request.output_schema is not None:
        # Anthropic takes closed objects only; optional properties stay optional.
        closed = close_schema(request.output_schema, require_all=False)
        warnings.extend(f"output schema not fully closed: {problem}" for problem in closed.problems)
        body["output_config"] = {"format": {"type": "json_schema", "schema": closed.schema}}
    body.update(settings.extra)
    # Claude on Bedrock's InvokeModel takes breakpoints on the models Bedrock caches for only.
    if settings.cache_breakpoints and (
        "anthropic." not in model.model_name or bedrock_caches(model.model_name)
    ):
        anthropic_breakpoints(body, history.marks)
    return body, warnings


# Claude model ids as every platform spells them: ``claude-opus-4-7``, ``claude-sonnet-4-5-20250929``,
# ``anthropic.claude-opus-4-1-20250805-v1:0`` (Bedrock), ``claude-sonnet-4-5@20250929`` (Vertex AI).
_CLAUDE_VERSION = re.compile(r"claude-(?:opus|sonnet|haiku|fable)-(\d+)(?:-(\d{1,2})(?!\d))?")


def _drop_rejected_sampling(model_name: str, fields: Json, warnings: list[str]) -> None:
    """Leave out the sampling fields a Claude model answers with HTTP 400, with a warning.

    Opus 4.7 and every Claude 5 model removed ``temperature`` / ``top_p`` / ``top_k`` ("`temperature` is
    deprecated for this model"); the other Claude 4 models take one of ``temperature`` and ``top_p``, not both
    ("temperature and top_p cannot both be specified for this model"). Older and unknown models get what was
    asked: toolwire sends these fields only when the settings ask for them.
    """
    match = _CLAUDE_VERSION.search(model_name)
    if match is None:
        return
    major, minor = int(match[1]), int(match[2] or 0)
    if major >= 5 or (major == 4 and minor >= 7):
        rejected = [name for name in ("temperature", "top_p", "top_k") if name in fields]
    elif major == 4 and "temperature" in fields and "top_p" in fields:
        rejected = ["top_p"]
    else:
        return
    for name in rejected:
        del fields[name]
        warnings.append(f"{name} is not accepted by {model_name} and was left out")


def _continued_container(messages: Sequence[Message]) -> str | None:
    """The code execution container of the call this request answers: the last assistant message's, if its
    calls came from one (programmatic tool calling; the API wants it named again). An older container is not
    sent: it may have expired, and a request without one simply gets a new container."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    for part in last.parts if last is not None else ():
        if isinstance(part, ToolCallPart):
            container = read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER).get("container")
            if isinstance(container, dict) and isinstance(container.get("id"), str):
                return str(container["id"])
    return None


def _to_wire_tool(tool: ToolDefinition) -> Json:
    wire: Json = {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
    if tool.strict:
        wire["strict"] = True
    return wire


def _to_wire_tool_choice(choice: str, parallel: bool | None) -> Json:
    match choice:
        case "auto":
            wire: Json = {"type": "auto"}
        case "required":
            wire = {"type": "any"}
        case "none":
            return {"type": "none"}
        case name:
            wire = {"type": "tool", "name": name}
    if parallel is False:
        wire["disable_parallel_tool_use"] = True
    return wire


class _History(BlockHistory):
    provider = PROVIDER
    label = "Anthropic"
    empty_tool_id = "toolu_empty"

    def text(self, text: str) -> Json:
        return {"type": "text", "text": text}

    def assistant_text(self, part: TextPart) -> Json:
        block = self.text(part.text)
        citations = _citations(
            read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER).get("citations")
        )
        if citations:
            block["citations"] = citations
        return block

    def reasoning(self, part: ReasoningPart) -> Json | None:
        if part.redacted_data is not None:
            return {"type": "redacted_thinking", "data": part.redacted_data}
        if part.signature:
            return {"type": "thinking", "thinking": part.text, "signature": part.signature}
        return None  # unsigned thinking cannot be sent back; the API would reject it

    def tool_use(self, part: ToolCallPart, *, own: bool) -> Json | None:
        if part.provider_executed and not own:
            return None  # another provider's server-side calls mean nothing to Anthropic
        # History (possibly sent by a client) only fills known fields, each checked: the API wants ``caller``
        # and an MCP call's ``server_name`` echoed back, and a server tool keeps its ``*_tool_use`` block type.
        stored = read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER)
        block_type = "tool_use"
        if part.provider_executed:
            kind = stored.get("type")
            block_type = kind if isinstance(kind, str) and _SERVER_CALL.fullmatch(kind) else "server_tool_use"
        block: Json = {
            "type": block_type,
            "id": self.tool_id(part.tool_call_id),
            "name": part.tool_name,
            "input": tool_input(part),
        }
        caller = _caller(stored.get("caller"))
        if caller is not None:
            block["caller"] = caller
        if part.provider_executed and isinstance(stored.get("server_name"), str):
            block["server_name"] = stored["server_name"]
        return block

    def server_result(self, part: ToolResultPart) -> Json | None:
        """A provider-executed result, replayed from the block we received (``None`` if not ours): its
        type, content and error flag, nothing else."""
        stored = read_back(part.provider_metadata, ROUND_TRIP_METADATA, PROVIDER)
        kind = stored.get("type")
        if not isinstance(kind, str) or not _SERVER_RESULT.fullmatch(kind):
            return None
        block: Json = {"type": kind, "tool_use_id": part.tool_call_id}
        block["content"] = stored.get("content", part.output)
        if isinstance(stored.get("is_error"), bool):
            block["is_error"] = stored["is_error"]
        return block

    def tool_result(self, part: ToolResultPart) -> Json:
        output = part.output
        content: Any
        items = content_items(output)
        if items is not None:  # an MCP tool's images, documents and resources: Anthropic's own blocks
            content = blocks(items, self.label, self.text, lambda media: self.file(media.file()))
        elif isinstance(output, str) or (
            isinstance(output, list)
            and output
            and all(isinstance(b, dict) and b.get("type") in _RESULT_BLOCK_TYPES for b in output)
        ):
            content = output
        else:
            content = part.output_text()
        return {
            "type": "tool_result",
            "tool_use_id": self.tool_id(part.tool_call_id),
            "content": content,
            "is_error": part.is_error,
        }

    def file(self, part: FilePart) -> Json:
        if part.media_type.startswith("image/"):
            kind = "image"
        elif part.media_type == "application/pdf":
            kind = "document"
        else:
            raise UnsupportedContentError(f"Anthropic does not accept {part.media_type} files")
        if part.data is not None:
            source: Json = {"type": "base64", "media_type": part.media_type, "data": part.data}
        elif part.url is not None:
            source = {"type": "url", "url": part.url}
        else:
            raise UnsupportedContentError("a file part needs data or url")
        block: Json = {"type": kind, "source": source}
        if kind == "document" and part.filename:
            block["title"] = part.filename
        return block


def _citations(value: Any) -> list[Json]:
    """The citations of a text block, each reduced to the fields its request type takes (a response adds
    some, ``file_id`` among them, that a request may not carry); one of another type is dropped."""
    if not isinstance(value, list):
        return []
    out = []
    for citation in value:
        fields = _CITATION_FIELDS.get(str(citation.get("type"))) if isinstance(citation, dict) else None
        if fields is not None:
            out.append({k: v for k, v in citation.items() if k in fields})
    return out


def _caller(value: Any) -> dict[str, str] | None:
    """``{"type": "direct"}`` or ``{"type": "code_execution_...", "tool_id": ...}``; nothing else."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return None
    return {k: v for k, v in value.items() if k in ("type", "tool_id") and isinstance(v, str)}


__all__ = ["ROUND_TRIP_METADATA", "Options", "build_body"]
