"""Bedrock ConverseStream events -> canonical stream parts.

Event order (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html):
``messageStart``, then per block ``contentBlockStart`` (tool blocks only: text and reasoning blocks
begin with their first delta), ``contentBlockDelta``*, ``contentBlockStop``, then ``messageStop`` with
the stop reason and ``metadata`` with usage *after* it, so :meth:`BedrockEventParser.finish` runs when
the stream ends. A non-streaming Converse response is first turned into the same events
(:func:`events_from_response`) so both paths share one parser.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from toolwire.messages import Usage
from toolwire.models.base import (
    Finish,
    FinishReason,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolArgsAccumulator,
    ToolInputDelta,
    ToolInputStart,
)

PROVIDER = "bedrock"

_FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content-filter",
    "content_filtered": "content-filter",
}


@dataclass(slots=True)
class _Block:
    kind: str
    """``text`` | ``reasoning`` | ``tool``."""
    id: str
    tool_name: str = ""
    args: ToolArgsAccumulator = field(default_factory=ToolArgsAccumulator)
    signature: str | None = None
    redacted: str | None = None


Event = tuple[str, dict[str, Any]]
"""``(event type, payload)``."""


def events_from_response(response: dict[str, Any]) -> Iterator[Event]:
    """The events a ConverseStream of this (non-streamed) Converse response would have carried."""
    message = (response.get("output") or {}).get("message") or {}
    yield "messageStart", {"role": message.get("role", "assistant")}
    for index, block in enumerate(message.get("content") or []):
        yield from _block_events(block, index)
        yield "contentBlockStop", {"contentBlockIndex": index}
    stop: dict[str, Any] = {
        k: response[k] for k in ("stopReason", "additionalModelResponseFields") if k in response
    }
    yield "messageStop", stop
    metadata: dict[str, Any] = {k: response[k] for k in ("usage", "metrics", "trace") if k in response}
    yield "metadata", metadata


def _block_events(block: dict[str, Any], index: int) -> Iterator[Event]:
    if "toolUse" in block:
        tool = block["toolUse"]
        start = {"toolUse": {"toolUseId": tool.get("toolUseId"), "name": tool.get("name")}}
        yield "contentBlockStart", {"contentBlockIndex": index, "start": start}
        arguments = json.dumps(tool.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
        yield "contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": arguments}}}
    elif block.get("text"):
        yield "contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": block["text"]}}
    elif "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        pieces = dict(reasoning.get("reasoningText") or {})
        if "redactedContent" in reasoning:
            pieces["redactedContent"] = reasoning["redactedContent"]
        for key in ("text", "signature", "redactedContent"):
            if pieces.get(key):
                delta = {"reasoningContent": {key: pieces[key]}}
                yield "contentBlockDelta", {"contentBlockIndex": index, "delta": delta}


class BedrockEventParser:
    """Turns decoded ConverseStream events into stream parts; call :meth:`finish` when the stream ends."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._stop: dict[str, Any] | None = None
        self._metadata: dict[str, Any] = {}

    def feed(self, event_type: str, payload: dict[str, Any]) -> list[ModelStreamPart]:
        match event_type:
            case "contentBlockStart":
                return self._block_start(int(payload.get("contentBlockIndex", 0)), payload.get("start") or {})
            case "contentBlockDelta":
                return self._block_delta(int(payload.get("contentBlockIndex", 0)), payload.get("delta") or {})
            case "contentBlockStop":
                return self._block_stop(int(payload.get("contentBlockIndex", 0)))
            case "messageStop":
                self._stop = payload
            case "metadata":
                self._metadata = payload
        return []  # messageStart, and event types added after this adapter was written

    def finish(self) -> list[ModelStreamPart] | None:
        """Close what is still open and emit the finish; ``None`` when no ``messageStop`` arrived."""
        if self._stop is None:
            return None
        parts: list[ModelStreamPart] = []
        for index in sorted(self._blocks):
            parts.extend(self._block_stop(index))
        raw = self._stop.get("stopReason")
        extra: dict[str, Any] = {k: self._metadata[k] for k in ("metrics", "trace") if k in self._metadata}
        if self._stop.get("additionalModelResponseFields"):
            extra["additionalModelResponseFields"] = self._stop["additionalModelResponseFields"]
        parts.append(
            Finish(
                reason=_FINISH_REASONS.get(raw or "", "other"),
                raw_reason=raw,
                usage=usage_from_wire(self._metadata.get("usage") or {}),
                provider_metadata={PROVIDER: extra} if extra else {},
            )
        )
        return parts

    def _block_start(self, index: int, start: dict[str, Any]) -> list[ModelStreamPart]:
        tool = start.get("toolUse")
        if not isinstance(tool, dict):
            return []
        state = _Block("tool", str(tool.get("toolUseId", "")), tool_name=str(tool.get("name", "")))
        self._blocks[index] = state
        return [ToolInputStart(id=state.id, tool_name=state.tool_name)]

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[ModelStreamPart]:
        if "text" in delta:
            parts = self._open(index, "text")
            if delta["text"]:
                parts.append(TextDelta(id=str(index), delta=delta["text"]))
            return parts
        if "reasoningContent" in delta:
            return self._reasoning_delta(index, delta["reasoningContent"])
        state = self._blocks.get(index)
        fragment = (delta.get("toolUse") or {}).get("input")
        if state is None or state.kind != "tool" or not fragment:
            return []  # citations and the empty first fragment of a tool call carry nothing
        state.args.add(fragment)
        return [ToolInputDelta(id=state.id, delta=fragment)]

    def _reasoning_delta(self, index: int, reasoning: dict[str, Any]) -> list[ModelStreamPart]:
        parts = self._open(index, "reasoning")
        state = self._blocks[index]
        if reasoning.get("text"):
            parts.append(ReasoningDelta(id=state.id, delta=reasoning["text"]))
        if reasoning.get("signature"):
            state.signature = reasoning["signature"]
        if reasoning.get("redactedContent"):
            # Bytes travel base64-encoded; the string is kept exactly as received and sent back as is.
            state.redacted = (state.redacted or "") + reasoning["redactedContent"]
        return parts

    def _open(self, index: int, kind: str) -> list[ModelStreamPart]:
        """Text and reasoning blocks have no contentBlockStart: the first delta opens them."""
        if index in self._blocks:
            return []
        self._blocks[index] = _Block(kind, str(index))
        return [TextStart(id=str(index)) if kind == "text" else ReasoningStart(id=str(index))]

    def _block_stop(self, index: int) -> list[ModelStreamPart]:
        state = self._blocks.pop(index, None)
        if state is None:
            return []
        match state.kind:
            case "text":
                return [TextEnd(id=state.id)]
            case "reasoning":
                return [ReasoningEnd(id=state.id, signature=state.signature, redacted_data=state.redacted)]
            case _:
                return [state.args.end(id=state.id, tool_name=state.tool_name)]


def usage_from_wire(usage: dict[str, Any]) -> Usage:
    """Converse's ``inputTokens`` excludes cached tokens; ours counts every prompt token, as OpenAI's does."""
    cache_read = int(usage.get("cacheReadInputTokens") or 0)
    cache_write = int(usage.get("cacheWriteInputTokens") or 0)
    return Usage(
        input_tokens=int(usage.get("inputTokens") or 0) + cache_read + cache_write,
        output_tokens=int(usage.get("outputTokens") or 0),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        requests=1,
    )
