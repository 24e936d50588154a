"""Canonical request -> Chat Completions request body (see the package docstring for the server quirks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from toolwire.errors import UnsupportedContentError
from toolwire.messages import FilePart, Message, Part, ReasoningPart, ToolCallPart, ToolResultPart
from toolwire.models._cache import prompt_cache_key
from toolwire.models._http import Json
from toolwire.models._metadata import OPENAI_CHAT
from toolwire.models._openai_shared import (
    OpenAIHistory,
    as_dict,
    file_data_url,
    joined_text,
    json_schema_format,
    openai_meta,
)
from toolwire.models._providers import OPENAI
from toolwire.models._settings import SettingNames, sampling_fields
from toolwire.models._tool_output import Media, Text, blocks, content_items, joined
from toolwire.models.base import ModelRequest, ToolDefinition

if TYPE_CHECKING:  # the model holds the options; it imports this module at run time
    from toolwire.models.openai_chat import OpenAIChatModel

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where compatible servers put reasoning text, in lookup order."""

ROUND_TRIP_METADATA = OPENAI_CHAT
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""


def build_body(request: ModelRequest, model: OpenAIChatModel) -> tuple[Json, list[str]]:
    """The request body for ``request`` and warnings about settings the wire cannot honour."""
    settings = request.settings
    names = SettingNames(max_tokens=model.max_tokens_field, top_p="top_p", stop="stop", seed="seed")
    fields, warnings = sampling_fields(settings, names, wire="Chat Completions")
    messages = to_wire_messages(request, model.reasoning_field, wire_id=model.wire_tool_call_id)
    body: Json = {"model": model.model_name, "messages": messages, **fields}
    if request.tools:
        body["tools"] = [_to_wire_tool(t) for t in request.tools]
    choice = request.tool_choice
    model.set_tool_choice(
        body, choice, _to_wire_tool_choice(choice), has_tools=bool(request.tools), warnings=warnings
    )
    if settings.parallel_tool_calls is not None and request.tools:
        body["parallel_tool_calls"] = settings.parallel_tool_calls
    if request.output_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": json_schema_format(request, warnings),
        }
    if model.base_url == OPENAI.default_base_url and (key := prompt_cache_key(request)) is not None:
        body["prompt_cache_key"] = key
    body["stream"] = model.stream_enabled
    if model.stream_enabled and model.include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(settings.extra)
    return body, warnings


def to_wire_messages(
    request: ModelRequest,
    reasoning_field: str | None = None,
    *,
    wire_id: Callable[[str], str] | None = None,
) -> list[Json]:
    """Canonical history to Chat Completions ``messages`` (instructions become a leading system message).
    ``wire_id`` maps each tool-call id, of a call and of its result alike (Mistral's 9-character ids)."""
    system = [{"role": "system", "content": request.instructions}] if request.instructions else []
    return system + _History(reasoning_field, wire_id or _same).items(request.messages)


def _same(tool_call_id: str) -> str:
    return tool_call_id


class _History(OpenAIHistory):
    text_type = "text"

    def __init__(self, reasoning_field: str | None, wire_id: Callable[[str], str]) -> None:
        self.reasoning_field = reasoning_field
        self.wire_id = wire_id

    def assistant(self, message: Message) -> list[Json]:
        wire = _assistant_message(message, self.reasoning_field, self.wire_id)
        return [] if wire is None else [wire]

    def tool_results(self, parts: Sequence[Part]) -> list[Json]:
        # Chat has no error flag for tool results: an error travels as its text. A tool message is text only:
        # an MCP tool's images and PDFs follow the results in one user message, named in the tool's text.
        messages: list[Json] = []
        attachments: list[Json] = []
        for p in parts:
            if isinstance(p, ToolResultPart) and not p.provider_executed:
                content, files = self._result(p)
                messages.append(
                    {"role": "tool", "tool_call_id": self.wire_id(p.tool_call_id), "content": content}
                )
                attachments += files
        if attachments:
            intro = {"type": "text", "text": "The attachments of the tool results above:"}
            messages.append({"role": "user", "content": [intro, *attachments]})
        return messages

    def _result(self, part: ToolResultPart) -> tuple[str, list[Json]]:
        items = content_items(part.output)
        if items is None:
            return part.output_text(), []
        files: list[Json] = []

        def attach(media: Media) -> Text:
            files.append(self.file(media.file()))
            return Text(f"[{media.media_type} attachment {len(files)}: in the next message]")

        return joined(blocks(items, "Chat Completions", Text, attach)), files

    def file(self, part: FilePart) -> Json:
        media = part.media_type
        if media.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": file_data_url(part)}}
        if media in ("audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3") and part.data is not None:
            audio_format = "wav" if "wav" in media else "mp3"
            return {"type": "input_audio", "input_audio": {"data": part.data, "format": audio_format}}
        if media == "application/pdf" and part.data is not None:
            return {
                "type": "file",
                "file": {"filename": part.filename or "document.pdf", "file_data": file_data_url(part)},
            }
        raise UnsupportedContentError(f"Chat Completions cannot take a {media} file here")


def _assistant_message(
    message: Message, reasoning_field: str | None, wire_id: Callable[[str], str]
) -> Json | None:
    calls: list[ToolCallPart] = []
    reasoning: list[ReasoningPart] = []
    remembered: str | None = None
    message_extra: Json | None = None
    for part in message.parts:
        own = openai_meta(part.provider_metadata, ROUND_TRIP_METADATA)
        message_extra = message_extra or _gemini_extra(own.get("message_extra_content"))
        match part:
            case ToolCallPart(provider_executed=False):
                calls.append(part)
            case ReasoningPart() if name := _known_reasoning_field(own.get("reasoning_field")):
                # Only our own reasoning goes back: another provider's thinking means nothing here.
                reasoning.append(part)
                remembered = remembered or name
            case FilePart():
                raise UnsupportedContentError("Chat Completions cannot replay a file in an assistant message")
            case _:
                pass  # text is joined below; provider-executed calls and results have no Chat form
    # ``content`` even beside tool calls: llama-cpp-python's server renders the message with a template
    # that reads it (HTTP 500 without it) and rejects null; "" is accepted by every server.
    wire: Json = {"role": "assistant", "content": joined_text(message.parts)}
    reasoning_key = reasoning_field or remembered
    if reasoning_key and (reasoning or (reasoning_field and calls)):
        wire[reasoning_key] = "".join(p.text for p in reasoning)
    if calls:
        wire["tool_calls"] = [_to_wire_tool_call(c, wire_id) for c in calls]
    if message_extra:
        wire["extra_content"] = message_extra
    if wire == {"role": "assistant", "content": ""}:
        return None  # nothing of this message can be expressed on this wire
    return wire


def _to_wire_tool_call(call: ToolCallPart, wire_id: Callable[[str], str]) -> Json:
    wire: Json = {
        "id": wire_id(call.tool_call_id),
        "type": "function",
        "function": {"name": call.tool_name, "arguments": call.wire_args_json()},
    }
    extra = _gemini_extra(openai_meta(call.provider_metadata, ROUND_TRIP_METADATA).get("extra_content"))
    if extra:
        wire["extra_content"] = extra
    return wire


def _known_reasoning_field(remembered: Any) -> str | None:
    """The reasoning field history says a message came back in, if it is one this adapter knows.

    The name written to the wire is always our own constant: history (possibly sent by a client) only
    selects among known fields, so it can never name another field of the message (``role``...).
    """
    return next((name for name in REASONING_FIELDS if name == remembered), None)


def _gemini_extra(value: Any) -> Json | None:
    """The only ``extra_content`` sent back: Gemini's ``{"google": {"thought_signature": ..., "thought":
    true}}``, as its OpenAI endpoint sends it.

    Anything else in a remembered value is dropped, so history cannot add fields or options (a cached
    content, a config) to the request.
    """
    google = as_dict(as_dict(value).get("google"))
    signature = google.get("thought_signature")
    if not isinstance(signature, str) or not signature:
        return None
    kept: Json = {"thought": True} if google.get("thought") is True else {}
    kept["thought_signature"] = signature
    return {"google": kept}


def _to_wire_tool(tool: ToolDefinition) -> Json:
    function: Json = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def _to_wire_tool_choice(choice: str) -> str | Json:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


__all__ = ["REASONING_FIELDS", "ROUND_TRIP_METADATA", "build_body", "to_wire_messages"]
