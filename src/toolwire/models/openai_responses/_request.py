"""Canonical request -> Responses API request body. Assistant messages are rebuilt into output items
(:class:`_AssistantItems`); see the package docstring for what ``store`` changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, assert_never

from toolwire.errors import UnsupportedContentError
from toolwire.messages import FilePart, Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.models._cache import prompt_cache_key
from toolwire.models._http import Json
from toolwire.models._metadata import OPENAI_RESPONSES, OPENAI_RESPONSES_FROM_MODEL
from toolwire.models._openai_shared import (
    OpenAIHistory,
    as_dict,
    file_data_url,
    json_schema_format,
    openai_meta,
)
from toolwire.models._providers import OPENAI
from toolwire.models._settings import SettingNames, sampling_fields
from toolwire.models._tool_output import Media, blocks, content_items
from toolwire.models.base import ModelRequest, ToolDefinition

if TYPE_CHECKING:  # the model holds the options; it imports this module at run time
    from toolwire.models.openai_responses import OpenAIResponsesModel

PROVIDER_EXECUTED_ITEMS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
"""Output items of tools OpenAI runs itself."""

MODELLED_ITEMS = PROVIDER_EXECUTED_ITEMS | {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "item_reference",
}
"""Item types toolwire reads or builds itself (or must never replay as received): any other output item is
kept whole as a provider-executed call and sent back as it came (``unknown_item_type`` metadata)."""

ROUND_TRIP_METADATA = OPENAI_RESPONSES
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""

_SETTINGS = SettingNames(max_tokens="max_output_tokens", top_p="top_p")
_OUTPUT_FILES = frozenset({"application/pdf"})
"""Files (besides images) a function output may carry as ``input_file``."""


def build_body(request: ModelRequest, model: OpenAIResponsesModel) -> tuple[Json, list[str]]:
    """The request body for ``request`` and warnings about settings the wire cannot honour."""
    settings = request.settings
    fields, warnings = sampling_fields(settings, _SETTINGS, wire="the Responses API")
    store = model.store
    body: Json = {"model": model.model_name, "input": to_wire_input(request.messages, store=store), **fields}
    if request.instructions:
        body["instructions"] = request.instructions
    tools = [_to_wire_tool(t) for t in request.tools] + model.builtin_tools
    if tools:
        body["tools"] = tools
    choice = request.tool_choice
    model.set_tool_choice(
        body, choice, _to_wire_tool_choice(choice), has_tools=bool(tools), warnings=warnings
    )
    if settings.parallel_tool_calls is not None and tools:
        body["parallel_tool_calls"] = settings.parallel_tool_calls
    body["store"] = store
    if model.include_encrypted_reasoning and not store:
        body["include"] = ["reasoning.encrypted_content"]
    if model.reasoning is not None:
        body["reasoning"] = model.reasoning
    if request.output_schema is not None:
        body["text"] = {"format": {"type": "json_schema", **json_schema_format(request, warnings)}}
    if model.base_url == OPENAI.default_base_url and (key := prompt_cache_key(request)) is not None:
        body["prompt_cache_key"] = key
    body["stream"] = model.stream_enabled
    body.update(settings.extra)
    return body, warnings


def to_wire_input(messages: Sequence[Message], *, store: bool) -> list[Json]:
    """Canonical history to Responses ``input`` items."""
    return _History(store=store).items(messages)


class _History(OpenAIHistory):
    text_type = "input_text"

    def __init__(self, *, store: bool) -> None:
        self.store = store

    def assistant(self, message: Message) -> list[Json]:
        return _AssistantItems(message.parts, store=self.store).build()

    def tool_results(self, parts: Sequence[Part]) -> list[Json]:
        return _tool_outputs(parts)

    def file(self, part: FilePart) -> Json:
        if part.media_type.startswith("image/"):
            return {"type": "input_image", "image_url": file_data_url(part)}
        if part.data is not None:
            return {
                "type": "input_file",
                "filename": part.filename or "file",
                "file_data": file_data_url(part),
            }
        return {"type": "input_file", "file_url": file_data_url(part)}


def _tool_outputs(parts: Sequence[Part]) -> list[Json]:
    # The Responses wire has no error flag for function output: an error travels as its text.
    return [
        {"type": "function_call_output", "call_id": p.tool_call_id, "output": _output(p)}
        for p in parts
        if isinstance(p, ToolResultPart) and not p.provider_executed
    ]


def _output(part: ToolResultPart) -> str | list[Json]:
    """The output text, or for an MCP tool's media the output items the API takes (input_image for images,
    input_file for PDFs and text files, a text stand-in for the rest)."""
    items = content_items(part.output)
    if items is None:
        return part.output_text()
    return blocks(items, "the Responses API", lambda text: {"type": "input_text", "text": text}, _output_file)


def _output_file(media: Media) -> Json:
    if not media.media_type.startswith("image/") and media.media_type not in _OUTPUT_FILES:
        raise UnsupportedContentError(f"no {media.media_type} in a function output")
    return _History(store=False).file(media.file())


class _AssistantItems:
    """Rebuilds output items from one assistant message, merging parts that came from the same item."""

    def __init__(self, parts: Sequence[Part], *, store: bool) -> None:
        self.parts = parts
        self.store = store
        self.items: list[Json] = []
        self._key: tuple[str, str] | None = None
        self._results = {
            p.tool_call_id: p for p in parts if isinstance(p, ToolResultPart) and p.provider_executed
        }

    def build(self) -> list[Json]:
        for part in self.parts:
            own = _round_trip(part)
            match part:
                case ReasoningPart() if own.get("item_id"):
                    self._reasoning(part, own)
                case ReasoningPart():
                    pass  # another provider's reasoning means nothing to OpenAI
                case TextPart() if part.text:
                    self._text(part, own)
                case TextPart():
                    pass
                case ToolCallPart(provider_executed=False):
                    self._push(_function_call(part, own, store=self.store))
                case ToolCallPart():
                    self._provider_call(part, own)
                case ToolResultPart(provider_executed=True):
                    pass  # replayed with its call
                case ToolResultPart():
                    self._push(*_tool_outputs([part]))
                case FilePart():
                    raise UnsupportedContentError("the Responses API cannot replay an assistant file")
                case _:
                    assert_never(part)
        return [item for item in self.items if _keep(item, store=self.store)]

    def _push(self, *items: Json, key: tuple[str, str] | None = None) -> None:
        self.items.extend(items)
        self._key = key

    def _reasoning(self, part: ReasoningPart, own: dict[str, Any]) -> None:
        key = ("reasoning", own["item_id"])
        if self._key != key:
            self._push({"type": "reasoning", "id": own["item_id"], "summary": []}, key=key)
        item = self.items[-1]
        if part.text and own.get("content_type") == "reasoning_text":
            # The model's reasoning itself (Open Responses servers), not a summary of it.
            item.setdefault("content", []).append({"type": "reasoning_text", "text": part.text})
        elif part.text:
            item["summary"].append({"type": "summary_text", "text": part.text})
        if own.get("encrypted_content"):
            item["encrypted_content"] = own["encrypted_content"]

    def _text(self, part: TextPart, own: dict[str, Any]) -> None:
        item_id = own.get("item_id")
        if not item_id or not self.store:
            # Without a stored item to point at, the text goes back as an input message with the
            # assistant role (``EasyInputMessage``), whose content is a string: the list form takes only
            # input content types, and an output message item needs the id we do not send.
            key = ("message-plain", item_id or "")
            if self._key == key:
                self.items[-1]["content"] += part.text
                return
            item: Json = {"type": "message", "role": "assistant", "content": part.text}
            if own.get("phase"):
                item["phase"] = own["phase"]
            self._push(item, key=key)
            return
        key = ("message", item_id)
        if self._key != key:
            item = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "completed",
                "content": [],
            }
            if own.get("phase"):
                item["phase"] = own["phase"]
            self._push(item, key=key)
        self.items[-1]["content"].append(
            {"type": "output_text", "text": part.text, "annotations": own.get("annotations") or []}
        )

    def _provider_call(self, call: ToolCallPart, own: dict[str, Any]) -> None:
        item_type, item_id = own.get("item_type"), own.get("item_id")
        if not (item_type and item_id and self.store):
            self._key = None
            return
        result = self._results.get(call.tool_call_id)
        output = as_dict(result.output) if result is not None else {}
        item: Json = {"type": item_type, "id": item_id}
        if item_type == "web_search_call":
            item.update(status=output.get("status", "completed"), action=call.args)
        elif item_type == "mcp_call":
            item.update(
                server_label=own.get("server_label", ""), name=call.tool_name, arguments=call.wire_args_json()
            )
            if result is not None and result.is_error:
                item["error"] = result.output  # as received: an error object ({type, code, message})
            elif result is not None:
                item["output"] = result.output_text()
        else:
            item = {**output, **item}  # the item's type and id are ours, whatever the output holds
        self._push(item)


def _round_trip(part: Part) -> dict[str, Any]:
    """What history remembers of a part, each value checked for the place it goes in an item: ids, phase,
    server label and encrypted content are non-empty strings, an item type is one of ours, a content type is
    ``reasoning_text``, annotations a list of objects.
    Anything else is dropped, so history (possibly sent by a client) cannot choose an item's type."""
    own = openai_meta(part.provider_metadata, ROUND_TRIP_METADATA)
    checked: dict[str, Any] = {
        k: v for k, v in own.items() if k != "annotations" and isinstance(v, str) and v
    }
    if checked.get("item_type") not in PROVIDER_EXECUTED_ITEMS:
        checked.pop("item_type", None)
    # An item the parser did not model, from history the model produced (clients cannot send this key).
    unknown = openai_meta(part.provider_metadata, OPENAI_RESPONSES_FROM_MODEL).get("unknown_item_type")
    if isinstance(unknown, str) and unknown and unknown not in MODELLED_ITEMS:
        checked["item_type"] = unknown
    if checked.get("content_type") != "reasoning_text":
        checked.pop("content_type", None)
    annotations = own.get("annotations")
    if isinstance(annotations, list) and all(isinstance(a, dict) for a in annotations):
        checked["annotations"] = annotations
    return checked


def _function_call(call: ToolCallPart, own: dict[str, Any], *, store: bool) -> Json:
    item: Json = {
        "type": "function_call",
        "call_id": call.tool_call_id,
        "name": call.tool_name,
        "arguments": call.wire_args_json(),
    }
    if store and own.get("item_id"):
        item["id"] = own["item_id"]
    return item


def _keep(item: Json, *, store: bool) -> bool:
    # Without storage a reasoning item is only usable through its encrypted content.
    return store or item.get("type") != "reasoning" or bool(item.get("encrypted_content"))


def _to_wire_tool(tool: ToolDefinition) -> Json:
    # ``strict`` is always sent: left out, the Responses API takes it as true (unlike Chat Completions,
    # where it defaults to false) and rejects any schema with an optional property. ``None`` means not
    # strict on both wires.
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": bool(tool.strict),
    }


def _to_wire_tool_choice(choice: str) -> str | Json:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice}


__all__ = ["MODELLED_ITEMS", "PROVIDER_EXECUTED_ITEMS", "ROUND_TRIP_METADATA", "build_body", "to_wire_input"]
