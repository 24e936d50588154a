"""OpenAI Chat Completions adapter (``POST {base_url}/chat/completions``), streaming and non-streaming.

One wire serves OpenAI and every OpenAI-compatible server (vLLM, Ollama, llama.cpp server, Groq, DeepSeek,
OpenRouter, Gemini's OpenAI endpoint, ...) through ``base_url``. Their differences, as seen in recorded
traffic, are handled here:

- tool-call deltas are keyed by ``index``; Groq sends a whole call in one delta; a call with an empty id
  (Gemini's endpoint) gets a deterministic id built from the response id and the call's position;
- reasoning arrives as ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (Ollama, Groq, OpenRouter);
  the field name is remembered in ``provider_metadata["openai"]["reasoning_field"]`` and the text goes back
  in that field of the assistant message (DeepSeek requires it on tool-call turns). The name written is
  always one of ``REASONING_FIELDS`` (or the configured ``reasoning_field``): history only selects among
  them, so it can never name another field such as ``role``;
- Gemini's ``extra_content`` (``{"google": {"thought_signature": ...}}``) is kept on the ToolCallPart
  (``extra_content`` for a per-call value, ``message_extra_content`` for a message-level one) and sent back
  in the same place, reduced to that signature (and its ``thought`` flag);
- usage comes from ``usage`` or Groq's ``x_groq.usage``; ``obfuscation`` padding is ignored;
- an ``event: error`` frame inside a 200 stream (Groq ``tool_use_failed``) becomes a :class:`StreamError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

import httpx

from toolwire.errors import UnsupportedContentError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    new_id,
)
from toolwire.models._http import make_client, open_stream
from toolwire.models._metadata import OPENAI_CHAT
from toolwire.models._openai_common import (
    DEFAULT_BASE_URL,
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
)

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where compatible servers put reasoning text, in lookup order."""

ROUND_TRIP_METADATA = OPENAI_CHAT
"""What the request builder reads back from history (declared in ``toolwire.models._metadata``)."""


class OpenAIChatModel(Model):
    """A model behind the Chat Completions wire (OpenAI or any compatible server).

    Without ``api_key``, the key is ``OPENAI_API_KEY`` for OpenAI's own hosts (https ``api.openai.com``) and
    ``OPENAI_COMPATIBLE_API_KEY`` for any other server, so an OpenAI key never reaches a third party; a
    loopback server may run without one, ``api_key=""`` says a server takes none, and any other missing
    key is a :class:`~toolwire.errors.ConfigError` here, when the model is built.
    ``reasoning_field`` forces the assistant-message field reasoning is sent back in; with it set, assistant
    tool-call messages always carry it (an empty string when there was no reasoning), as DeepSeek's
    thinking mode requires. ``include_usage=False`` drops ``stream_options`` for servers that reject it.
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
        reasoning_field: str | None = None,
        include_usage: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model_name = model
        self.base_url = resolve_base_url(base_url)
        self.api_key = resolve_api_key(api_key, self.base_url)
        self.stream_enabled = stream
        self.reasoning_field = reasoning_field
        self.include_usage = include_usage
        self.extra_headers = dict(headers or {})
        self._client, self._owns_client = make_client(http_client)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        body, warnings = self.build_body(request)
        parser = _ChatParser(model=self.model_name, reasoning_field=self.reasoning_field)
        async with open_stream(
            self._client,
            "POST",
            f"{self.base_url}/chat/completions",
            provider=self.provider,
            model=self.model_name,
            json_body=body,
            headers=request_headers(
                self.api_key, self.base_url, self.extra_headers, stream=self.stream_enabled
            ),
        ) as response:
            yield StreamStart(warnings=tuple(warnings))
            content_type = response.headers.get("content-type", "")
            # A server may answer a streaming request with one JSON body (errors, or no streaming support).
            if not self.stream_enabled or content_type.startswith("application/json"):
                parts = self._whole(response, parser)
            else:
                parts = self._events(response, parser)
            async for part in parts:
                yield part

    def build_body(self, request: ModelRequest) -> tuple[Json, list[str]]:
        """The request body for ``request`` and warnings about settings the wire cannot honour."""
        warnings: list[str] = []
        body: Json = {"model": self.model_name, "messages": to_wire_messages(request, self.reasoning_field)}
        if request.tools:
            body["tools"] = [_to_wire_tool(t) for t in request.tools]
            body["tool_choice"] = _to_wire_tool_choice(request.tool_choice)
        elif request.tool_choice not in ("auto", "none"):
            warnings.append(f"tool_choice {request.tool_choice!r} ignored: the request has no tools")
        settings = request.settings
        if settings.max_tokens is not None:
            # OpenAI deprecated max_tokens (reasoning models reject it); compatible servers know max_tokens.
            key = "max_completion_tokens" if self.base_url == DEFAULT_BASE_URL else "max_tokens"
            body[key] = settings.max_tokens
        for key, value in (("temperature", settings.temperature), ("top_p", settings.top_p)):
            if value is not None:
                body[key] = value
        if settings.stop:
            body["stop"] = list(settings.stop)
        if settings.seed is not None:
            body["seed"] = settings.seed
        if settings.parallel_tool_calls is not None and request.tools:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output_schema_name,
                    "schema": request.output_schema,
                    "strict": strict_compatible(request.output_schema),
                },
            }
        body["stream"] = self.stream_enabled
        if self.stream_enabled and self.include_usage:
            body["stream_options"] = {"include_usage": True}
        body.update(settings.extra)
        return body, warnings

    async def _events(self, response: httpx.Response, parser: _ChatParser) -> AsyncIterator[ModelStreamPart]:
        async for sse in iter_sse(response):
            data = sse.data.strip()
            if sse.event == "error":
                yield error_event(parse_json(data) or data, model=self.model_name)
                return
            if data == "[DONE]":
                break
            chunk = parse_json(data)
            if not isinstance(chunk, dict):
                yield protocol_error(f"invalid JSON chunk: {data[:200]!r}", model=self.model_name)
                return
            if "error" in chunk and not chunk.get("choices"):  # OpenAI reports late failures this way
                yield error_event(chunk, model=self.model_name)
                return
            for part in parser.feed(chunk):
                yield part
        else:
            if parser.raw_finish is None:  # cut off: neither [DONE] nor a finish_reason
                yield protocol_error("the stream ended early", model=self.model_name, retryable=True)
                return
        for part in parser.end():
            yield part

    async def _whole(self, response: httpx.Response, parser: _ChatParser) -> AsyncIterator[ModelStreamPart]:
        content = await response.aread()
        body = parse_json(content)
        if not isinstance(body, dict):
            yield protocol_error(f"invalid JSON response: {content[:200]!r}", model=self.model_name)
            return
        if "error" in body and not body.get("choices"):
            yield error_event(body, model=self.model_name)
            return
        # A non-streaming completion is one chunk whose ``message`` is the whole delta.
        for part in parser.feed(body):
            yield part
        for part in parser.end():
            yield part


# ---------------------------------------------------------------------------------------------
# Request translation


def to_wire_messages(request: ModelRequest, reasoning_field: str | None = None) -> list[Json]:
    """Canonical history to Chat Completions ``messages`` (instructions become a leading system message)."""
    out: list[Json] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        match message.role:
            case "system":
                out.append({"role": "system", "content": joined_text(message.parts)})
            case "user":
                out.extend(_user_messages(message))
            case "assistant":
                wire = _assistant_message(message, reasoning_field)
                if wire is not None:
                    out.append(wire)
            case "tool":
                out.extend(_tool_messages(message.parts))
            case _:
                assert_never(message.role)
    return out


def _user_messages(message: Message) -> list[Json]:
    # Results that ended up in a user message still go first, as tool messages answering the calls.
    out = _tool_messages(message.parts)
    content = [p for p in message.parts if not isinstance(p, ToolResultPart)]
    if content:
        out.append({"role": "user", "content": _user_content(content)})
    return out


def _user_content(parts: Sequence[Part]) -> str | list[Json]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    out: list[Json] = []
    for part in parts:
        match part:
            case TextPart():
                out.append({"type": "text", "text": part.text})
            case FilePart():
                out.append(_file_content(part))
            case _:
                raise UnsupportedContentError(f"a {part.type} part cannot be sent in a user message")
    return out


def _file_content(part: FilePart) -> Json:
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


def _assistant_message(message: Message, reasoning_field: str | None) -> Json | None:
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
    wire: Json = {"role": "assistant"}
    text = joined_text(message.parts)
    if text or not calls:
        wire["content"] = text
    reasoning_key = reasoning_field or remembered
    if reasoning_key and (reasoning or (reasoning_field and calls)):
        wire[reasoning_key] = "".join(p.text for p in reasoning)
    if calls:
        wire["tool_calls"] = [_to_wire_tool_call(c) for c in calls]
    if message_extra:
        wire["extra_content"] = message_extra
    if wire == {"role": "assistant", "content": ""}:
        return None  # nothing of this message can be expressed on this wire
    return wire


def _to_wire_tool_call(call: ToolCallPart) -> Json:
    wire: Json = {
        "id": call.tool_call_id,
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


def _tool_messages(parts: Sequence[Part]) -> list[Json]:
    # Chat has no error flag for tool results: an error travels as its text.
    return [
        {"role": "tool", "tool_call_id": p.tool_call_id, "content": p.output_text()}
        for p in parts
        if isinstance(p, ToolResultPart) and not p.provider_executed
    ]


def _to_wire_tool(tool: ToolDefinition) -> Json:
    function: Json = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def _to_wire_tool_choice(choice: str) -> str | Json:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


# ---------------------------------------------------------------------------------------------
# Response parsing


@dataclass(slots=True)
class _Call:
    """One tool call being streamed."""

    id: str
    name: str = ""
    extra: Any = None
    started: bool = False
    closed: bool = False
    acc: ToolArgsAccumulator = field(default_factory=ToolArgsAccumulator)
    pending: list[str] = field(default_factory=list)
    """Fragments that arrived before the name (the start part needs it)."""


class _ChatParser:
    """Turns chunks (or a whole completion, treated as one chunk) into stream parts."""

    def __init__(self, *, model: str, reasoning_field: str | None) -> None:
        self.model = model
        fields = (reasoning_field, *REASONING_FIELDS) if reasoning_field else REASONING_FIELDS
        self._fields: tuple[str, ...] = tuple(dict.fromkeys(fields))
        self.response_id: str | None = None
        self._metadata_sent = False
        self._blocks = 0
        self._text: str | None = None
        self._reasoning: str | None = None
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._message_extra: Any = None
        self.raw_finish: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Json) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        if not self._metadata_sent:
            self._metadata_sent = True
            self.response_id = chunk.get("id") or None
            out.append(ResponseMetadata(response_id=self.response_id, model=chunk.get("model")))
        usage = chunk.get("usage") or as_dict(chunk.get("x_groq")).get("usage")
        if isinstance(usage, dict):
            self.usage = usage_from(
                usage,
                input_key="prompt_tokens",
                output_key="completion_tokens",
                input_details="prompt_tokens_details",
                output_details="completion_tokens_details",
            )
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices:
            # n > 1 is not supported: choice 0 is the answer.
            choice = next((as_dict(c) for c in choices if as_dict(c).get("index", 0) == 0), {})
            out += self._delta(as_dict(choice.get("delta") or choice.get("message")))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.raw_finish = reason
                out += self._close_all()
        return out

    def end(self) -> list[ModelStreamPart]:
        out = self._close_all()
        out.append(
            Finish(
                reason=finish_reason(self.raw_finish, has_tool_calls=bool(self._calls)),
                raw_reason=self.raw_finish,
                usage=self.usage or Usage(requests=1),
            )
        )
        return out

    def _delta(self, delta: Json) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        if isinstance(delta.get("extra_content"), dict):
            self._message_extra = delta["extra_content"]
        for name in self._fields:
            value = delta.get(name)
            if isinstance(value, str) and value:
                out += self._reasoning_delta(name, value)
                break  # some servers repeat the same text under both names
        content = delta.get("content")
        if isinstance(content, str) and content:
            out += self._text_delta(content)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                out += self._call_delta(position, as_dict(call))
        return out

    def _next_id(self, kind: str) -> str:
        self._blocks += 1
        return f"{kind}-{self._blocks}"

    def _reasoning_delta(self, name: str, text: str) -> list[ModelStreamPart]:
        out = self._close_text()
        if self._reasoning is None:
            self._reasoning = self._next_id("reasoning")
            out.append(ReasoningStart(id=self._reasoning, provider_metadata=meta(reasoning_field=name)))
        out.append(ReasoningDelta(id=self._reasoning, delta=text))
        return out

    def _text_delta(self, text: str) -> list[ModelStreamPart]:
        out = self._close_reasoning()
        if self._text is None:
            self._text = self._next_id("text")
            out.append(TextStart(id=self._text))
        out.append(TextDelta(id=self._text, delta=text))
        return out

    def _call_delta(self, position: int, delta: Json) -> list[ModelStreamPart]:
        index = delta.get("index")
        index = index if isinstance(index, int) else position
        function = as_dict(delta.get("function"))
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        call_id = delta.get("id") if isinstance(delta.get("id"), str) else ""
        call = self._by_index.get(index)
        # A new id, or a name without an id, on an index already in use means a new call: some servers
        # (Gemini's endpoint among them) reuse index 0 for every parallel call.
        if (
            call is None
            or call.closed
            or (call_id and call_id != call.id)
            or (name and call.name and not call_id)
        ):
            call = _Call(id=call_id or self._generated_id())
            self._calls.append(call)
            self._by_index[index] = call
        # Text and reasoning before a call are complete once it starts (a message-level extra_content
        # then rides on the first call, see _close_all), so they close here, in stream order.
        out = self._close_reasoning() + self._close_text()
        call.name = call.name or name or ""
        if isinstance(delta.get("extra_content"), dict):
            call.extra = delta["extra_content"]
        arguments = function.get("arguments")
        fragment = arguments if isinstance(arguments, str) else ""
        if isinstance(arguments, dict):  # a few servers send an object instead of JSON text
            fragment = compact_json(arguments)
        if fragment:
            call.acc.add(fragment)
            call.pending.append(fragment)
        if call.name:
            out += self._start(call)
        return out

    def _generated_id(self) -> str:
        # Deterministic when the response has an id, so replays of a recording agree.
        if self.response_id:
            return f"call_{self.response_id}_{len(self._calls)}"
        return new_id("call_")

    def _start(self, call: _Call) -> list[ModelStreamPart]:
        out: list[ModelStreamPart] = []
        if not call.started:
            call.started = True
            metadata = meta(extra_content=call.extra)
            out.append(ToolInputStart(id=call.id, tool_name=call.name, provider_metadata=metadata))
        out += [ToolInputDelta(id=call.id, delta=f) for f in call.pending]
        call.pending.clear()
        return out

    def _close_reasoning(self, extra: Any = None) -> list[ModelStreamPart]:
        if self._reasoning is None:
            return []
        part = ReasoningEnd(id=self._reasoning, provider_metadata=meta(message_extra_content=extra))
        self._reasoning = None
        return [part]

    def _close_text(self, extra: Any = None) -> list[ModelStreamPart]:
        if self._text is None:
            return []
        part = TextEnd(id=self._text, provider_metadata=meta(message_extra_content=extra))
        self._text = None
        return [part]

    def _close_all(self) -> list[ModelStreamPart]:
        # A message-level extra_content (Gemini's signature) rides on the first call, else on the text.
        extra, self._message_extra = self._message_extra, None
        open_calls = [c for c in self._calls if not c.closed]
        out: list[ModelStreamPart] = []
        for position, call in enumerate(open_calls):
            out += self._start(call)
            call.closed = True
            out.append(
                call.acc.end(
                    id=call.id,
                    tool_name=call.name,
                    provider_metadata=meta(
                        extra_content=call.extra, message_extra_content=extra if position == 0 else None
                    ),
                )
            )
        if open_calls:
            extra = None
        if self._text is not None:
            out += self._close_text(extra)
            extra = None
        out += self._close_reasoning(extra)
        return out


__all__ = ["REASONING_FIELDS", "OpenAIChatModel", "to_wire_messages"]
