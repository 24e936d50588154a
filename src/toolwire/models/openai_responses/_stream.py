"""Responses API events -> canonical stream parts. A whole (non-streamed) response is first replayed as the
events a stream would have ended each item with (:func:`events_from_response`), so both share one parser.

Beside OpenAI's own events, the parser reads what servers implementing the Open Responses specification
(LM Studio, vLLM, ...) send for reasoning: the model's reasoning text as ``reasoning_text`` content parts of
the reasoning item, streamed by ``response.reasoning_text.delta`` (OpenAI sends summaries instead). Each
becomes a ReasoningPart marked ``content_type: "reasoning_text"``, so it goes back as content, not summary.

An ``mcp_call`` item (a tool of a remote MCP server, run by OpenAI) becomes a provider-executed call named as
the MCP tool is, with its arguments (streamed by ``response.mcp_call_arguments.delta``) and its
``server_label`` in metadata, and a ToolResult holding its ``output``, or its ``error`` as an error result.

An output item of a type toolwire does not model (``tool_search_call`` / ``tool_search_output`` when the API
searches deferred tools, and whatever comes next) is not dropped: it becomes a provider-executed call named
as its type, with the item minus its id and type as the result, and goes back to the Responses API as it
came (``unknown_item_type`` metadata, never accepted from a client; other providers skip it like any other
provider's executed call). The first item of each such type is logged as a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from toolwire.messages import ProviderMetadata, Usage
from toolwire.models._builder import (
    ToolArgsAccumulator,
    text_delta,
    text_end,
    text_start,
    whole_tool_input,
)
from toolwire.models._delta_shortcut import DeltaShortcut
from toolwire.models._http import Json, protocol_error
from toolwire.models._openai_shared import PROVIDER, as_dict, error_event, finish_reason, meta, usage_from
from toolwire.models.base import (
    Finish,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    ToolInputDelta,
    ToolInputStart,
    ToolResult,
)
from toolwire.models.openai_responses._request import MODELLED_ITEMS, PROVIDER_EXECUTED_ITEMS

logger = logging.getLogger("toolwire.models")


def events_from_response(body: Json, *, model: str) -> Iterator[Json | StreamError]:
    """The events ending each item of a whole response, between ``response.created`` and its end."""
    if "output" not in body:
        yield error_event(body, model=model)
        return
    yield {"type": "response.created", "response": body}
    for item in body.get("output") or []:
        yield {"type": "response.output_item.done", "item": item}
    status = body.get("status")
    yield {"type": "response.failed" if status == "failed" else "response.completed", "response": body}


@dataclass(slots=True)
class _Item:
    """An output item being streamed."""

    id: str
    type: str
    call_id: str = ""
    name: str = ""
    phase: str | None = None
    acc: ToolArgsAccumulator = field(default_factory=ToolArgsAccumulator)
    done_args: str | None = None
    open: dict[_Key, str] = field(default_factory=dict)
    """Open text, summary and reasoning-text parts -> stream part id, in the order they opened."""
    streamed: set[_Key] = field(default_factory=set)
    """Parts whose text arrived as deltas (the rest is taken from the done item)."""
    ended: set[_Key] = field(default_factory=set)


_Key: TypeAlias = tuple[Literal["text", "summary", "reasoning_text"], int]
"""A part of an item: a message's ``output_text`` content part, a reasoning item's summary part, or a
reasoning item's ``reasoning_text`` content part, with its index."""


class ResponsesParser:
    """Turns Responses events into stream parts. Items are keyed by item id, never by arrival order."""

    def __init__(self, *, model: str) -> None:
        self.model = model
        self.done = False
        """Set by the response's end (completed, incomplete, failed) or an error."""
        self._items: dict[str, _Item] = {}
        self._has_calls = False
        self._handlers: dict[str, Callable[[Json], list[ModelStreamPart]]] = {
            "response.created": self._created,
            "response.output_item.added": lambda e: self._added(as_dict(e.get("item"))),
            "response.output_item.done": lambda e: self._done(as_dict(e.get("item"))),
            "response.content_part.added": self._content_part_added,
            "response.output_text.delta": lambda e: self._part_delta(e, "text"),
            "response.content_part.done": self._content_part_done,
            "response.reasoning_summary_part.added": self._summary_part_added,
            "response.reasoning_summary_text.delta": lambda e: self._part_delta(e, "summary"),
            "response.reasoning_text.delta": lambda e: self._part_delta(e, "reasoning_text"),
            "response.function_call_arguments.delta": self._arguments_delta,
            "response.function_call_arguments.done": self._arguments_done,
            "response.mcp_call_arguments.delta": self._arguments_delta,
            "response.mcp_call_arguments.done": self._arguments_done,
            "response.completed": self._completed,
            "response.incomplete": self._completed,
            "response.failed": self._failed,
            "error": self._error,
        }
        self._shortcut = DeltaShortcut(b'"delta":"', counter=b'"sequence_number":')
        self.feed_data = self._shortcut.read
        """An event's data read without decoding when it is the last bare fragment's bytes around another
        fragment (a DataParser of ``_http``; a bound method, not a method: one call per fragment fewer)."""

    def feed(self, event: Json) -> list[ModelStreamPart]:
        self._shortcut.general()
        handler = self._handlers.get(str(event.get("type")))
        return handler(event) if handler is not None else []

    def end(self) -> list[ModelStreamPart]:
        message = "the stream ended before response.completed"
        return [protocol_error(message, provider=PROVIDER, model=self.model, retryable=True)]

    def _created(self, event: Json) -> list[ModelStreamPart]:
        response = as_dict(event.get("response"))
        return [ResponseMetadata(response_id=response.get("id"), model=response.get("model"))]

    def _added(self, item: Json) -> list[ModelStreamPart]:
        item_id, item_type = str(item.get("id") or ""), str(item.get("type") or "")
        if not item_id or item_id in self._items:
            return []
        state = self._items[item_id] = _Item(id=item_id, type=item_type)
        if item_type == "function_call":
            self._has_calls = True
            state.call_id = str(item.get("call_id") or item_id)
            state.name = str(item.get("name") or "")
            start = ToolInputStart(
                tool_call_id=state.call_id, tool_name=state.name, provider_metadata=meta(item_id=item_id)
            )
            return [start, *self._arguments(state, item.get("arguments"))]
        if item_type == "message":
            state.phase = item.get("phase") if isinstance(item.get("phase"), str) else None
            return []
        if item_type == "mcp_call":
            # Named as the MCP tool is; its arguments stream like a function call's.
            state.call_id = item_id
            state.name = str(item.get("name") or "mcp")
            metadata = meta(item_id=item_id, item_type=item_type, server_label=_str(item.get("server_label")))
            start = ToolInputStart(
                tool_call_id=item_id, tool_name=state.name, provider_metadata=metadata, provider_executed=True
            )
            return [start, *self._arguments(state, item.get("arguments"))]
        unknown = bool(item_type) and item_type not in MODELLED_ITEMS
        if unknown:
            _warn_unknown(item_type)
        if item_type in PROVIDER_EXECUTED_ITEMS or unknown:
            state.name = item_type.removesuffix("_call") if not unknown else item_type
            metadata = _provider_item_meta(state)
            return [
                ToolInputStart(
                    tool_call_id=item_id,
                    tool_name=state.name,
                    provider_metadata=metadata,
                    provider_executed=True,
                )
            ]
        return []  # reasoning: its parts open with their first event

    def _arguments(self, state: _Item, fragment: Any) -> list[ModelStreamPart]:
        if not isinstance(fragment, str) or not fragment:
            return []
        state.acc.add(fragment)
        return [ToolInputDelta(tool_call_id=state.call_id, delta=fragment)]

    def _arguments_delta(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        if state is None:
            return []
        parts = self._arguments(state, event.get("delta"))
        if parts:  # a bare fragment: the next ones may take the shortcut
            self._shortcut.learn(state.acc, state.call_id, event["delta"])
        return parts

    def _arguments_done(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        if state is not None and isinstance(event.get("arguments"), str):
            state.done_args = event["arguments"]
        return []

    # -- text parts: a message's output text, a reasoning item's summary and reasoning text

    def _open(self, state: _Item, key: _Key) -> list[ModelStreamPart]:
        if key in state.open or key in state.ended:
            return []
        kind, index = key
        if kind == "text":
            part_id = state.open[key] = f"{state.id}:{index}"
            return [text_start("text", part_id, meta(item_id=state.id, phase=state.phase))]
        # One reasoning part at a time: a new summary (or reasoning text) part ends the previous ones.
        out = self._close_reasoning(state)
        part_id = state.open[key] = f"{state.id}:{index}" if kind == "summary" else f"{state.id}:r{index}"
        content_type = "reasoning_text" if kind == "reasoning_text" else None
        out.append(text_start("reasoning", part_id, meta(item_id=state.id, content_type=content_type)))
        return out

    def _content_part_added(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        kind = _content_kind(event.get("part"))
        if state is None or kind is None:
            return []
        return self._open(state, (kind, int(event.get("content_index") or 0)))

    def _summary_part_added(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        return self._open(state, ("summary", int(event.get("summary_index") or 0))) if state else []

    def _part_delta(
        self, event: Json, kind: Literal["text", "summary", "reasoning_text"]
    ) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        delta = event.get("delta")
        if state is None or not isinstance(delta, str):
            return []
        key: _Key = (kind, int(event.get("summary_index" if kind == "summary" else "content_index") or 0))
        out = self._open(state, key)
        state.streamed.add(key)
        if key not in state.open:
            return out
        return [*out, text_delta("text" if kind == "text" else "reasoning", state.open[key], delta)]

    def _content_part_done(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        part = as_dict(event.get("part"))
        if state is None or _content_kind(part) != "text":
            return []  # a reasoning text part ends with its item, like a summary part
        return self._end_text(state, int(event.get("content_index") or 0), part)

    def _end_text(self, state: _Item, index: int, part: Json) -> list[ModelStreamPart]:
        key: _Key = ("text", index)
        out = self._open(state, key)
        part_id = state.open.pop(key, None)
        if part_id is None:
            return out
        text = part.get("text")
        if key not in state.streamed and isinstance(text, str) and text:
            out.append(text_delta("text", part_id, text))
        state.ended.add(key)
        out.append(text_end("text", part_id, meta(annotations=part.get("annotations") or None)))
        return out

    def _close_reasoning(self, state: _Item, encrypted: Any = None) -> list[ModelStreamPart]:
        """End the open reasoning parts; the last one carries the item's encrypted content."""
        keys = [key for key in state.open if key[0] != "text"]
        out: list[ModelStreamPart] = []
        for key in keys:
            content_type = "reasoning_text" if key[0] == "reasoning_text" else None
            last_encrypted = encrypted if key == keys[-1] else None
            metadata = meta(item_id=state.id, content_type=content_type, encrypted_content=last_encrypted)
            out.append(text_end("reasoning", state.open.pop(key), metadata))
            state.ended.add(key)
        return out

    # -- item completion

    def _done(self, item: Json) -> list[ModelStreamPart]:
        item_id = str(item.get("id") or "")
        out = self._added(item) if item_id not in self._items else []
        state = self._items.get(item_id)
        if state is None:
            return out
        match state.type:
            case "function_call":
                out += self._end_call(state, item)
            case "reasoning":
                out += self._end_reasoning(state, item)
            case "message":
                for index, part in enumerate(item.get("content") or []):
                    if _content_kind(part) == "text":
                        out += self._end_text(state, index, as_dict(part))
            case "mcp_call":
                out += self._end_mcp_call(state, item)
            case "reasoning" | "message":
                pass
            case kind if kind in PROVIDER_EXECUTED_ITEMS or kind not in MODELLED_ITEMS:
                out += self._end_provider_call(state, item)
            case _:
                pass
        return out

    def _final_arguments(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        """Make the accumulated arguments the done value (it equals the joined deltas in every recording)."""
        final = item.get("arguments") if isinstance(item.get("arguments"), str) else state.done_args
        out: list[ModelStreamPart] = []
        if final is not None and final != state.acc.text():
            if not state.acc.text():
                out.append(ToolInputDelta(tool_call_id=state.call_id, delta=final))
            state.acc = ToolArgsAccumulator()
            state.acc.add(final)
        return out

    def _end_call(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        out = self._final_arguments(state, item)
        out.append(
            state.acc.end(id=state.call_id, tool_name=state.name, provider_metadata=meta(item_id=state.id))
        )
        return out

    def _end_mcp_call(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        metadata = meta(item_id=state.id, item_type=state.type, server_label=_str(item.get("server_label")))
        out = self._final_arguments(state, item)
        out.append(
            state.acc.end(
                id=state.call_id, tool_name=state.name, provider_metadata=metadata, provider_executed=True
            )
        )
        error = item.get("error")
        out.append(
            ToolResult(
                tool_call_id=state.call_id,
                tool_name=state.name,
                output=error if error is not None else item.get("output"),
                is_error=error is not None,
                provider_metadata=metadata,
            )
        )
        return out

    def _end_reasoning(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        parts: list[tuple[_Key, Any]] = [
            (("summary", index), as_dict(summary).get("text"))
            for index, summary in enumerate(item.get("summary") or [])
        ]
        parts += [
            (("reasoning_text", index), as_dict(content).get("text"))
            for index, content in enumerate(item.get("content") or [])
            if _content_kind(content) == "reasoning_text"
        ]
        for key, text in parts:
            if key not in state.streamed and isinstance(text, str) and text:
                out += self._open(state, key)
                if key in state.open:
                    out.append(text_delta("reasoning", state.open[key], text))
        if not state.open and not state.ended:  # every reasoning item becomes a part (its id, its content)
            out += self._open(state, ("summary", 0))
        return out + self._close_reasoning(state, item.get("encrypted_content"))

    def _end_provider_call(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        args, output = _split_provider_item(item)
        metadata = _provider_item_meta(state)
        inputs = whole_tool_input(
            state.id, state.name, args, provider_metadata=metadata, provider_executed=True
        )
        result = ToolResult(
            tool_call_id=state.id, tool_name=state.name, output=output, provider_metadata=metadata
        )
        return [*inputs, result]

    # -- end of response

    def _completed(self, event: Json) -> list[ModelStreamPart]:
        self.done = True
        response = as_dict(event.get("response"))
        status = response.get("status") if isinstance(response.get("status"), str) else None
        incomplete = as_dict(response.get("incomplete_details")).get("reason")
        raw = incomplete if isinstance(incomplete, str) else status
        usage = as_dict(response.get("usage"))
        return [
            Finish(
                reason=finish_reason(raw, has_tool_calls=self._has_calls),
                raw_reason=raw,
                usage=usage_from(
                    usage,
                    input_key="input_tokens",
                    output_key="output_tokens",
                    input_details="input_tokens_details",
                    output_details="output_tokens_details",
                )
                if usage
                else Usage(requests=1),
            )
        ]

    def _failed(self, event: Json) -> list[ModelStreamPart]:
        self.done = True
        response = as_dict(event.get("response"))
        return [
            error_event(
                {"error": as_dict(response.get("error")) or {"message": "response failed"}}, model=self.model
            )
        ]

    def _error(self, event: Json) -> list[ModelStreamPart]:
        self.done = True
        return [error_event(event, model=self.model)]


def _provider_item_meta(state: _Item) -> ProviderMetadata:
    """An item OpenAI ran, or one toolwire does not model: kept whole, so it goes back as it came."""
    if state.type in PROVIDER_EXECUTED_ITEMS:
        return meta(item_id=state.id, item_type=state.type)
    return meta(item_id=state.id, unknown_item_type=state.type)


_warned: set[str] = set()


def _warn_unknown(item_type: str) -> None:
    # Once per type and process: a new item type is news worth one line, not one per response.
    if item_type not in _warned:
        _warned.add(item_type)
        logger.warning(
            "the Responses API sent an output item of type %r, which toolwire does not model: it is kept as "
            "a provider-executed call and sent back to the Responses API as received",
            item_type,
        )


def _split_provider_item(item: Json) -> tuple[dict[str, Any], Any]:
    """(input, output) of a provider-executed item: the query is the call, what came back is the result."""
    if item.get("type") == "web_search_call":
        action = dict(as_dict(item.get("action")))
        output: Json = {"status": item.get("status")}
        if "sources" in action:
            output["sources"] = action.pop("sources")
        return action, output
    return {}, {k: v for k, v in item.items() if k not in ("id", "type")}


def _content_kind(part: Any) -> Literal["text", "reasoning_text"] | None:
    match as_dict(part).get("type"):
        case "output_text":
            return "text"
        case "reasoning_text":
            return "reasoning_text"
        case _:
            return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


__all__ = ["ResponsesParser", "events_from_response"]
