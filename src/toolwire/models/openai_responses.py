"""OpenAI Responses API adapter (``POST {base_url}/responses``), streaming and non-streaming.

Output items map to canonical parts, and their metadata goes in ``provider_metadata["openai"]``:

- ``function_call`` -> a tool call whose ``tool_call_id`` is the item's ``call_id``; the item id
  (``fc_...``) is kept as ``item_id``. Argument deltas stream as they come; the final arguments are the
  ``.done`` value.
- ``reasoning`` -> one ReasoningPart per summary part (text = summary text), each with ``item_id``; the
  last one also carries ``encrypted_content`` from ``output_item.done`` (the value in ``.added`` can differ
  and is not the one to send back). Parts with the same ``item_id`` are merged back into one item.
- ``message`` -> one TextPart per ``output_text`` content part, with ``item_id``, ``phase`` (gpt-5.5
  ``commentary`` / ``final_answer``) and non-empty ``annotations``.
- provider-executed items (``web_search_call``, ``file_search_call``, ...) -> a tool call with
  ``provider_executed=True`` plus its ToolResult; nothing runs on the client.

``store=False`` (the default) keeps nothing on OpenAI's side, so the continuation cannot point at stored
items. Then: ``include: ["reasoning.encrypted_content"]`` is requested and reasoning items go back with
their id and encrypted content (dropped when there is none: the server could not resolve them); message
and function-call items go back without their ids (the recordings, made with the server default
``store=true``, send them); provider-executed items are left out (the server cannot resolve them and the
model's own message already carries what it learned). With ``store=True`` every item goes back with its id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

import httpx

from toolwire.errors import UnsupportedContentError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ProviderMetadata,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolwire.models._http import make_client, open_stream
from toolwire.models._metadata import OPENAI_RESPONSES
from toolwire.models._openai_common import (
    PROVIDER,
    Json,
    as_dict,
    compact_json,
    error_event,
    file_data_url,
    finish_reason,
    joined_text,
    meta,
    openai_meta,
    parse_json,
    protocol_error,
    request_headers,
    resolve_api_key,
    resolve_base_url,
    strict_compatible,
    usage_from,
)
from toolwire.models._sse import iter_sse
from toolwire.models.base import (
    Finish,
    Model,
    ModelRequest,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolArgsAccumulator,
    ToolDefinition,
    ToolInputDelta,
    ToolInputStart,
    ToolResult,
)

PROVIDER_EXECUTED_ITEMS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
"""Output items of tools OpenAI runs itself."""

ROUND_TRIP_METADATA = OPENAI_RESPONSES
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""


class OpenAIResponsesModel(Model):
    """A model behind the OpenAI Responses API.

    ``reasoning`` is sent as the request's ``reasoning`` object (e.g. ``{"effort": "low", "summary":
    "detailed"}``); ``builtin_tools`` are OpenAI tools appended verbatim to ``tools`` (e.g.
    ``{"type": "web_search"}``). See the module docstring for what ``store`` changes. As for
    :class:`OpenAIChatModel`, ``OPENAI_API_KEY`` is only sent to OpenAI's own hosts (another server takes
    ``api_key=`` or ``OPENAI_COMPATIBLE_API_KEY``), and a missing key fails when the model is built.
    """

    provider = PROVIDER
    supports_native_output = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        store: bool = False,
        include_encrypted_reasoning: bool = True,
        reasoning: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model_name = model
        self.base_url = resolve_base_url(base_url)
        self.api_key = resolve_api_key(api_key, self.base_url)
        self.stream_enabled = stream
        self.store = store
        self.include_encrypted_reasoning = include_encrypted_reasoning
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.builtin_tools = [dict(t) for t in builtin_tools]
        self.extra_headers = dict(headers or {})
        self._client, self._owns_client = make_client(http_client)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        body, warnings = self.build_body(request)
        parser = _ResponsesParser(model=self.model_name)
        async with open_stream(
            self._client,
            "POST",
            f"{self.base_url}/responses",
            provider=self.provider,
            model=self.model_name,
            json_body=body,
            headers=request_headers(
                self.api_key, self.base_url, self.extra_headers, stream=self.stream_enabled
            ),
        ) as response:
            yield StreamStart(warnings=tuple(warnings))
            content_type = response.headers.get("content-type", "")
            if not self.stream_enabled or content_type.startswith("application/json"):
                events = self._whole(response)
            else:
                events = self._events(response)
            async for event in events:
                if isinstance(event, dict):
                    for part in parser.feed(event):
                        yield part
                else:
                    yield event
                if parser.finished or not isinstance(event, dict):
                    return
        yield protocol_error(
            "the stream ended before response.completed", model=self.model_name, retryable=True
        )

    def build_body(self, request: ModelRequest) -> tuple[Json, list[str]]:
        """The request body for ``request`` and warnings about settings the wire cannot honour."""
        warnings: list[str] = []
        body: Json = {"model": self.model_name, "input": to_wire_input(request.messages, store=self.store)}
        if request.instructions:
            body["instructions"] = request.instructions
        tools = [_to_wire_tool(t) for t in request.tools] + self.builtin_tools
        if tools:
            body["tools"] = tools
            body["tool_choice"] = _to_wire_tool_choice(request.tool_choice)
        elif request.tool_choice not in ("auto", "none"):
            warnings.append(f"tool_choice {request.tool_choice!r} ignored: the request has no tools")
        body["store"] = self.store
        if self.include_encrypted_reasoning and not self.store:
            body["include"] = ["reasoning.encrypted_content"]
        if self.reasoning is not None:
            body["reasoning"] = self.reasoning
        settings = request.settings
        for key, value in (
            ("max_output_tokens", settings.max_tokens),
            ("temperature", settings.temperature),
            ("top_p", settings.top_p),
        ):
            if value is not None:
                body[key] = value
        if settings.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
        if settings.stop:
            warnings.append("stop sequences are not supported by the Responses API")
        if settings.seed is not None:
            warnings.append("seed is not supported by the Responses API")
        if request.output_schema is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": request.output_schema_name,
                    "schema": request.output_schema,
                    "strict": strict_compatible(request.output_schema),
                }
            }
        body["stream"] = self.stream_enabled
        body.update(settings.extra)
        return body, warnings

    async def _events(self, response: httpx.Response) -> AsyncIterator[Json | ModelStreamPart]:
        async for sse in iter_sse(response):
            event = parse_json(sse.data)
            if not isinstance(event, dict):
                yield protocol_error(f"invalid JSON event: {sse.data[:200]!r}", model=self.model_name)
                return
            event.setdefault("type", sse.event)
            yield event

    async def _whole(self, response: httpx.Response) -> AsyncIterator[Json | ModelStreamPart]:
        content = await response.aread()
        body = parse_json(content)
        if not isinstance(body, dict):
            yield protocol_error(f"invalid JSON response: {content[:200]!r}", model=self.model_name)
            return
        if "output" not in body:
            yield error_event(body, model=self.model_name)
            return
        # The whole response replayed as the events a stream would have ended each item with.
        yield {"type": "response.created", "response": body}
        for item in body.get("output") or []:
            yield {"type": "response.output_item.done", "item": item}
        status = body.get("status")
        yield {"type": "response.failed" if status == "failed" else "response.completed", "response": body}


# ---------------------------------------------------------------------------------------------
# Request translation


def to_wire_input(messages: Sequence[Message], *, store: bool) -> list[Json]:
    """Canonical history to Responses ``input`` items."""
    out: list[Json] = []
    for message in messages:
        match message.role:
            case "system":
                out.append({"role": "system", "content": joined_text(message.parts)})
            case "user":
                out.extend(_tool_outputs(message.parts))
                content = [p for p in message.parts if not isinstance(p, ToolResultPart)]
                if content:
                    out.append({"role": "user", "content": _user_content(content)})
            case "assistant":
                out.extend(_AssistantItems(message.parts, store=store).build())
            case "tool":
                out.extend(_tool_outputs(message.parts))
            case _:
                assert_never(message.role)
    return out


def _user_content(parts: Sequence[Part]) -> str | list[Json]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    out: list[Json] = []
    for part in parts:
        match part:
            case TextPart():
                out.append({"type": "input_text", "text": part.text})
            case FilePart() if part.media_type.startswith("image/"):
                out.append({"type": "input_image", "image_url": file_data_url(part)})
            case FilePart() if part.data is not None:
                name = part.filename or "file"
                out.append({"type": "input_file", "filename": name, "file_data": file_data_url(part)})
            case FilePart():
                out.append({"type": "input_file", "file_url": file_data_url(part)})
            case _:
                raise UnsupportedContentError(f"a {part.type} part cannot be sent in a user message")
    return out


def _tool_outputs(parts: Sequence[Part]) -> list[Json]:
    # The Responses wire has no error flag for function output: an error travels as its text.
    return [
        {"type": "function_call_output", "call_id": p.tool_call_id, "output": p.output_text()}
        for p in parts
        if isinstance(p, ToolResultPart) and not p.provider_executed
    ]


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
            own = _round_trip(part.provider_metadata)
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
        if part.text:
            item["summary"].append({"type": "summary_text", "text": part.text})
        if own.get("encrypted_content"):
            item["encrypted_content"] = own["encrypted_content"]

    def _text(self, part: TextPart, own: dict[str, Any]) -> None:
        item_id = own.get("item_id")
        if not item_id or not self.store:
            # Without a stored item to point at, the text goes back as a plain assistant message.
            content: Json = {"type": "output_text", "text": part.text}
            key = ("message-plain", item_id or "")
            if self._key == key:
                self.items[-1]["content"].append(content)
                return
            item: Json = {"role": "assistant", "content": [content]}
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
        else:
            item = {**output, **item}  # the item's type and id are ours, whatever the output holds
        self._push(item)


def _round_trip(metadata: ProviderMetadata) -> dict[str, Any]:
    """What history remembers of a part, each value checked for the place it goes in an item: ids, phase and
    encrypted content are non-empty strings, an item type is one of ours, annotations a list of objects.
    Anything else is dropped, so history (possibly sent by a client) cannot choose an item's type."""
    own = openai_meta(metadata, ROUND_TRIP_METADATA)
    checked: dict[str, Any] = {
        k: v for k, v in own.items() if k != "annotations" and isinstance(v, str) and v
    }
    if checked.get("item_type") not in PROVIDER_EXECUTED_ITEMS:
        checked.pop("item_type", None)
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
    wire: Json = {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if tool.strict is not None:
        wire["strict"] = tool.strict
    return wire


def _to_wire_tool_choice(choice: str) -> str | Json:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice}


# ---------------------------------------------------------------------------------------------
# Response parsing


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
    open: dict[int, str] = field(default_factory=dict)
    """Open text/summary parts: content or summary index -> stream part id."""
    streamed: set[int] = field(default_factory=set)
    """Indexes whose text arrived as deltas (the rest is taken from the done item)."""
    ended: set[int] = field(default_factory=set)


class _ResponsesParser:
    """Turns Responses events into stream parts. Items are keyed by item id, never by arrival order."""

    def __init__(self, *, model: str) -> None:
        self.model = model
        self.finished = False
        self._items: dict[str, _Item] = {}
        self._has_calls = False
        self._handlers: dict[str, Callable[[Json], list[ModelStreamPart]]] = {
            "response.created": self._created,
            "response.output_item.added": lambda e: self._added(as_dict(e.get("item"))),
            "response.output_item.done": lambda e: self._done(as_dict(e.get("item"))),
            "response.content_part.added": self._content_part_added,
            "response.output_text.delta": self._text_delta,
            "response.content_part.done": self._content_part_done,
            "response.reasoning_summary_part.added": self._summary_part_added,
            "response.reasoning_summary_text.delta": self._summary_delta,
            "response.function_call_arguments.delta": self._arguments_delta,
            "response.function_call_arguments.done": self._arguments_done,
            "response.completed": self._completed,
            "response.incomplete": self._completed,
            "response.failed": self._failed,
            "error": self._error,
        }

    def feed(self, event: Json) -> list[ModelStreamPart]:
        handler = self._handlers.get(str(event.get("type")))
        return handler(event) if handler is not None else []

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
                id=state.call_id, tool_name=state.name, provider_metadata=meta(item_id=item_id)
            )
            return [start, *self._arguments(state, item.get("arguments"))]
        if item_type == "reasoning":
            return self._open_summary(state, 0)
        if item_type == "message":
            state.phase = item.get("phase") if isinstance(item.get("phase"), str) else None
            return []
        if item_type in PROVIDER_EXECUTED_ITEMS:
            state.name = item_type.removesuffix("_call")
            metadata = meta(item_id=item_id, item_type=item_type)
            return [
                ToolInputStart(
                    id=item_id, tool_name=state.name, provider_metadata=metadata, provider_executed=True
                )
            ]
        return []

    def _arguments(self, state: _Item, fragment: Any) -> list[ModelStreamPart]:
        if not isinstance(fragment, str) or not fragment:
            return []
        state.acc.add(fragment)
        return [ToolInputDelta(id=state.call_id, delta=fragment)]

    def _arguments_delta(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        return self._arguments(state, event.get("delta")) if state is not None else []

    def _arguments_done(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        if state is not None and isinstance(event.get("arguments"), str):
            state.done_args = event["arguments"]
        return []

    # -- messages

    def _open_text(self, state: _Item, index: int) -> list[ModelStreamPart]:
        if index in state.open or index in state.ended:
            return []
        part_id = state.open[index] = f"{state.id}:{index}"
        return [TextStart(id=part_id, provider_metadata=meta(item_id=state.id, phase=state.phase))]

    def _content_part_added(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        if state is None or as_dict(event.get("part")).get("type") != "output_text":
            return []
        return self._open_text(state, int(event.get("content_index") or 0))

    def _text_delta(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        delta = event.get("delta")
        if state is None or not isinstance(delta, str):
            return []
        index = int(event.get("content_index") or 0)
        out = self._open_text(state, index)
        state.streamed.add(index)
        return [*out, TextDelta(id=state.open[index], delta=delta)] if index in state.open else out

    def _content_part_done(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        part = as_dict(event.get("part"))
        if state is None or part.get("type") != "output_text":
            return []
        return self._end_text(state, int(event.get("content_index") or 0), part)

    def _end_text(self, state: _Item, index: int, part: Json) -> list[ModelStreamPart]:
        out = self._open_text(state, index)
        part_id = state.open.pop(index, None)
        if part_id is None:
            return out
        text = part.get("text")
        if index not in state.streamed and isinstance(text, str) and text:
            out.append(TextDelta(id=part_id, delta=text))
        state.ended.add(index)
        annotations = part.get("annotations") or None
        out.append(TextEnd(id=part_id, provider_metadata=meta(annotations=annotations)))
        return out

    # -- reasoning

    def _open_summary(self, state: _Item, index: int) -> list[ModelStreamPart]:
        if index in state.open:
            return []
        out = self._close_summaries(state)
        part_id = state.open[index] = f"{state.id}:{index}"
        out.append(ReasoningStart(id=part_id, provider_metadata=meta(item_id=state.id)))
        return out

    def _close_summaries(self, state: _Item, encrypted: Any = None) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        for index in sorted(state.open):
            last = index == max(state.open)
            metadata = meta(item_id=state.id, encrypted_content=encrypted if last else None)
            out.append(ReasoningEnd(id=state.open[index], provider_metadata=metadata))
        state.open.clear()
        return out

    def _summary_part_added(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        return self._open_summary(state, int(event.get("summary_index") or 0)) if state is not None else []

    def _summary_delta(self, event: Json) -> list[ModelStreamPart]:
        state = self._items.get(str(event.get("item_id")))
        delta = event.get("delta")
        if state is None or not isinstance(delta, str):
            return []
        index = int(event.get("summary_index") or 0)
        out = self._open_summary(state, index)
        state.streamed.add(index)
        return [*out, ReasoningDelta(id=state.open[index], delta=delta)]

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
                    if as_dict(part).get("type") == "output_text":
                        out += self._end_text(state, index, as_dict(part))
            case kind if kind in PROVIDER_EXECUTED_ITEMS:
                out += self._end_provider_call(state, item)
            case _:
                pass
        return out

    def _end_call(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        final = item.get("arguments") if isinstance(item.get("arguments"), str) else state.done_args
        out: list[ModelStreamPart] = []
        if final is not None and final != state.acc.text():
            # The done value is authoritative (it equals the joined deltas in every recording).
            if not state.acc.text():
                out.append(ToolInputDelta(id=state.call_id, delta=final))
            state.acc = ToolArgsAccumulator()
            state.acc.add(final)
        out.append(
            state.acc.end(id=state.call_id, tool_name=state.name, provider_metadata=meta(item_id=state.id))
        )
        return out

    def _end_reasoning(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        for index, summary in enumerate(item.get("summary") or []):
            text = as_dict(summary).get("text")
            if index not in state.streamed and isinstance(text, str) and text:
                out += self._open_summary(state, index)
                out.append(ReasoningDelta(id=state.open[index], delta=text))
        if not state.open:
            out += self._open_summary(state, 0)
        return out + self._close_summaries(state, item.get("encrypted_content"))

    def _end_provider_call(self, state: _Item, item: Json) -> list[ModelStreamPart]:
        args, output = _split_provider_item(item)
        acc = ToolArgsAccumulator()
        args_json = compact_json(args)
        acc.add(args_json)
        metadata = meta(item_id=state.id, item_type=state.type)
        return [
            ToolInputDelta(id=state.id, delta=args_json),
            acc.end(id=state.id, tool_name=state.name, provider_metadata=metadata, provider_executed=True),
            ToolResult(
                tool_call_id=state.id, tool_name=state.name, output=output, provider_metadata=metadata
            ),
        ]

    # -- end of response

    def _completed(self, event: Json) -> list[ModelStreamPart]:
        self.finished = True
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
        self.finished = True
        response = as_dict(event.get("response"))
        return [
            error_event(
                {"error": as_dict(response.get("error")) or {"message": "response failed"}}, model=self.model
            )
        ]

    def _error(self, event: Json) -> list[ModelStreamPart]:
        self.finished = True
        return [error_event(event, model=self.model)]


def _split_provider_item(item: Json) -> tuple[dict[str, Any], Any]:
    """(input, output) of a provider-executed item: the query is the call, what came back is the result."""
    if item.get("type") == "web_search_call":
        action = dict(as_dict(item.get("action")))
        output: Json = {"status": item.get("status")}
        if "sources" in action:
            output["sources"] = action.pop("sources")
        return action, output
    return {}, {k: v for k, v in item.items() if k not in ("id", "type")}


__all__ = ["PROVIDER_EXECUTED_ITEMS", "OpenAIResponsesModel", "to_wire_input"]
