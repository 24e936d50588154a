"""Chat Completions chunks (or a whole completion, read as one chunk) -> canonical stream parts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toolwire.messages import ProviderMetadata, Usage, new_id
from toolwire.models._builder import (
    TextKind,
    ToolArgsAccumulator,
    compact_json,
    text_delta,
    text_end,
    text_start,
)
from toolwire.models._catalog import UsageQuirk
from toolwire.models._delta_shortcut import DeltaShortcut
from toolwire.models._http import DONE, Json, protocol_error
from toolwire.models._openai_shared import (
    PROVIDER,
    as_dict,
    as_int,
    error_event,
    finish_reason,
    meta,
    usage_from,
)
from toolwire.models._providers import url_host
from toolwire.models.base import Finish, ModelStreamPart, ResponseMetadata, ToolInputDelta, ToolInputStart
from toolwire.models.openai_chat._request import REASONING_FIELDS

USAGE_QUIRKS: Mapping[str, UsageQuirk] = MappingProxyType(
    {
        # xAI: "reasoning token consumption will be counted separately from completion_tokens, but will be
        # counted in the total_tokens" (docs.x.ai, consumption and rate limits).
        "api.x.ai": "reasoning-outside-completion",
        # Gemini's OpenAI endpoint: the recorded completion (tests/recordings, test_compatible_api_with_tool_
        # calls_without_id.yaml) reports prompt 35 + completion 12 with total 109 and no reasoning count;
        # Gemini counts thoughts apart from candidates (thoughtsTokenCount) and bills them as output.
        "generativelanguage.googleapis.com": "thoughts-only-in-total",
    }
)
"""Base URL host -> its usage quirk. Checked and left out, as they count like OpenAI: DeepSeek and Groq
(prompt + completion = total in the recordings, reasoning inside completion), Mistral (the recorded
Magistral stream's thinking is inside completion_tokens), Ollama and llama.cpp (no reasoning count)."""


def usage_quirk(base_url: str) -> UsageQuirk | None:
    return USAGE_QUIRKS.get(url_host(base_url))


def chat_usage(usage: Json, quirk: UsageQuirk | None) -> Usage:
    """A Chat Completions usage object; ``output_tokens`` includes the reasoning, whatever the server."""
    base = usage_from(
        usage,
        input_key="prompt_tokens",
        output_key="completion_tokens",
        input_details="prompt_tokens_details",
        output_details="completion_tokens_details",
    )
    match quirk:
        case "reasoning-outside-completion":
            return dataclasses.replace(base, output_tokens=base.output_tokens + base.reasoning_tokens)
        case "thoughts-only-in-total":
            hidden = as_int(usage.get("total_tokens")) - base.input_tokens - base.output_tokens
            if hidden > 0:
                return dataclasses.replace(
                    base,
                    output_tokens=base.output_tokens + hidden,
                    reasoning_tokens=base.reasoning_tokens or hidden,
                )
    return base


# The keys a chunk carrying only the next fragment of a started call may have (see _next_fragment).
_CHUNK_KEYS = frozenset(
    {
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
        "choices",
        "usage",
        "obfuscation",
    }
)
_DELTA_KEYS = frozenset({"tool_calls", "role", "content", "refusal"})
_CALL_KEYS = frozenset({"index", "function", "type"})
_FUNCTION_KEYS = frozenset({"arguments", "name"})


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


class ChatParser:
    """Turns chunks into stream parts; ``done`` is set by ``[DONE]`` or an error."""

    def __init__(
        self, *, model: str, reasoning_field: str | None, usage_quirk: UsageQuirk | None = None
    ) -> None:
        self.model = model
        self._usage_quirk = usage_quirk
        fields = (reasoning_field, *REASONING_FIELDS) if reasoning_field else REASONING_FIELDS
        self._fields: tuple[str, ...] = tuple(dict.fromkeys(fields))
        self.response_id: str | None = None
        self._metadata_sent = False
        self._blocks = 0
        self._open: dict[TextKind, str] = {}
        """The text or reasoning part being streamed (one at a time) -> its id."""
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._message_extra: Any = None
        self.raw_finish: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self._shortcut = DeltaShortcut(b'"arguments":"')
        self.feed_data = self._shortcut.read
        """An event's data read without decoding when it is the last bare fragment's bytes around another
        fragment (a DataParser of ``_http``; a bound method, not a method: one call per fragment fewer)."""

    def feed(self, chunk: Json) -> list[ModelStreamPart]:
        self._shortcut.general()
        fragment = self._next_fragment(chunk)
        if fragment is not None:
            call, text = fragment
            self._shortcut.learn(call.acc, call.id, text)
            call.acc.add(text)
            return [ToolInputDelta(tool_call_id=call.id, delta=text)]
        if chunk.get("type") == DONE:
            self.done = True
            return self._finish()
        if chunk.get("type") == "error" or ("error" in chunk and not chunk.get("choices")):
            # An ``event: error`` frame (Groq), or how OpenAI reports a late failure.
            self.done = True
            return [error_event(chunk, model=self.model)]
        out: list[ModelStreamPart] = []
        if not self._metadata_sent and (chunk.get("id") or chunk.get("model")):
            # The first chunk that says: Azure opens with a content-filter chunk whose id and model are "".
            self._metadata_sent = True
            self.response_id = chunk.get("id") or None
            out.append(ResponseMetadata(response_id=self.response_id, model=chunk.get("model") or None))
        usage = chunk.get("usage") or as_dict(chunk.get("x_groq")).get("usage")
        if isinstance(usage, dict):
            self.usage = chat_usage(usage, self._usage_quirk)
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

    def _next_fragment(self, chunk: Json) -> tuple[_Call, str] | None:
        """The fast path of a long tool call (a 1 MB argument streams ~16,000 chunks): a chunk that only
        carries the next arguments fragment of the call being streamed, with nothing else the general
        path would act on (no usage, finish, text, id, name or extra). ``None``: take the general path."""
        if not self._metadata_sent or self._open or chunk.get("usage") or not _CHUNK_KEYS.issuperset(chunk):
            return None
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason") or choice.get("index", 0) != 0:
            return None
        delta = choice.get("delta")
        if type(delta) is not dict or delta.get("content") or not _DELTA_KEYS.issuperset(delta):
            return None
        calls = delta.get("tool_calls")
        if type(calls) is not list or len(calls) != 1:
            return None
        entry = calls[0]
        if type(entry) is not dict or not _CALL_KEYS.issuperset(entry):
            return None
        function = entry.get("function")
        if type(function) is not dict or function.get("name") or not _FUNCTION_KEYS.issuperset(function):
            return None
        arguments = function.get("arguments")
        index = entry.get("index", 0)
        call = self._by_index.get(index) if type(index) is int else None
        if type(arguments) is not str or not arguments or call is None or not call.started or call.closed:
            return None
        return call, arguments

    def end(self) -> list[ModelStreamPart]:
        """The body ended without ``[DONE]``: complete if a finish_reason came, else cut off."""
        if self.raw_finish is None:
            return [
                protocol_error("the stream ended early", provider=PROVIDER, model=self.model, retryable=True)
            ]
        return self._finish()

    def _finish(self) -> list[ModelStreamPart]:
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
                out += self._text_delta("reasoning", value, meta(reasoning_field=name))
                break  # some servers repeat the same text under both names
        content = delta.get("content")
        if isinstance(content, str) and content:
            out += self._text_delta("text", content)
        elif isinstance(content, list):  # Mistral's content chunks (Magistral: thinking, then text)
            for chunk in content:
                out += self._content_chunk(as_dict(chunk))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                out += self._call_delta(position, as_dict(call))
        return out

    def _content_chunk(self, chunk: Json) -> list[ModelStreamPart]:
        """``{"type": "text", "text"}`` or ``{"type": "thinking", "thinking": [{"type": "text", "text"}]}``."""
        match chunk.get("type"):
            case "text":
                text = chunk.get("text")
                return self._text_delta("text", text) if isinstance(text, str) and text else []
            case "thinking":
                thinking = chunk.get("thinking")
                pieces = thinking if isinstance(thinking, list) else []
                text = "".join(str(p.get("text") or "") for p in pieces if isinstance(p, dict))
                # No reasoning_field: Mistral takes no reasoning back, so none is sent.
                return self._text_delta("reasoning", text) if text else []
            case _:
                return []

    def _next_id(self, kind: TextKind) -> str:
        self._blocks += 1
        return f"{kind}-{self._blocks}"

    def _text_delta(
        self, kind: TextKind, text: str, metadata: ProviderMetadata | None = None
    ) -> list[ModelStreamPart]:
        """Text or reasoning; one ends where the other starts."""
        out = self._close("reasoning" if kind == "text" else "text")
        part_id = self._open.get(kind)
        if part_id is None:
            part_id = self._open[kind] = self._next_id(kind)
            out.append(text_start(kind, part_id, metadata))
        out.append(text_delta(kind, part_id, text))
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
        out = self._close("reasoning") + self._close("text")
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
            out.append(ToolInputStart(tool_call_id=call.id, tool_name=call.name, provider_metadata=metadata))
        out += [ToolInputDelta(tool_call_id=call.id, delta=f) for f in call.pending]
        call.pending.clear()
        return out

    def _close(self, kind: TextKind, extra: Any = None) -> list[ModelStreamPart]:
        part_id = self._open.pop(kind, None)
        if part_id is None:
            return []
        return [text_end(kind, part_id, meta(message_extra_content=extra))]

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
        if "text" in self._open:
            out += self._close("text", extra)
            extra = None
        out += self._close("reasoning", extra)
        return out


__all__ = ["USAGE_QUIRKS", "ChatParser", "UsageQuirk", "chat_usage", "usage_quirk"]
