"""Anthropic Messages events -> canonical stream parts.

Streaming responses are parsed event by event. A non-streaming response is first turned into the
same events (:func:`events_from_message`: each block arrives whole in ``content_block_start``), so both
paths share one parser (https://docs.anthropic.com/en/docs/build-with-claude/streaming).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import ProviderProtocolError
from toolwire.messages import ProviderMetadata, Usage
from toolwire.models.base import (
    Finish,
    FinishReason,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamError,
    TextDelta,
    TextEnd,
    TextStart,
    ToolArgsAccumulator,
    ToolInputDelta,
    ToolInputStart,
    ToolResult,
)

PROVIDER = "anthropic"

_FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
    # pause_turn: a long server-tool turn was paused; the caller resends the conversation to continue.
    "pause_turn": "other",
}
# Error types Anthropic documents as transient (https://docs.anthropic.com/en/api/errors).
_RETRYABLE_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
_TOOL_CALL_FIELDS = ("type", "id", "name", "input")


@dataclass(slots=True)
class _Block:
    kind: str
    """``text`` | ``reasoning`` | ``tool``."""
    id: str
    tool_name: str = ""
    metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    args: ToolArgsAccumulator = field(default_factory=ToolArgsAccumulator)
    signature: str | None = None
    redacted: str | None = None


def events_from_message(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The events a stream of this (non-streamed) message would have carried, each block whole."""
    yield {"type": "message_start", "message": {k: v for k, v in message.items() if k != "content"}}
    for index, block in enumerate(message.get("content") or []):
        yield {"type": "content_block_start", "index": index, "content_block": block}
        yield {"type": "content_block_stop", "index": index}
    delta = {k: message.get(k) for k in ("stop_reason", "stop_sequence", "container") if k in message}
    yield {"type": "message_delta", "delta": delta, "usage": message.get("usage") or {}}
    yield {"type": "message_stop"}


class AnthropicEventParser:
    """Turns decoded Messages events into stream parts; ``done`` is set by ``message_stop`` or ``error``."""

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._blocks: dict[int, _Block] = {}
        self._server_tool_names: dict[str, str] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._finish_metadata: dict[str, Any] = {}
        self.done = False

    def feed(self, event: dict[str, Any]) -> list[ModelStreamPart]:
        match event.get("type"):
            case "message_start":
                return self._message_start(event.get("message") or {})
            case "content_block_start":
                return self._block_start(int(event["index"]), event.get("content_block") or {})
            case "content_block_delta":
                return self._block_delta(int(event["index"]), event.get("delta") or {})
            case "content_block_stop":
                return self._block_stop(int(event["index"]))
            case "message_delta":
                self._message_delta(event)
                return []
            case "message_stop":
                self.done = True
                return [self._finish()]
            case "error":
                self.done = True
                return [self.error_part(event.get("error") or {}, event)]
            case _:
                return []  # ping, and event types added after this adapter was written

    def error_part(self, error: dict[str, Any], body: Any) -> StreamError:
        code = error.get("type")
        return StreamError(
            error=ProviderProtocolError(
                str(error.get("message") or code or "stream error"),
                provider=PROVIDER,
                model=self._model,
                code=code,
                retryable=code in _RETRYABLE_ERRORS,
                body=body,
            )
        )

    # -- message level -----------------------------------------------------------------------

    def _message_start(self, message: dict[str, Any]) -> list[ModelStreamPart]:
        self._usage.update(message.get("usage") or {})
        return [ResponseMetadata(response_id=message.get("id"), model=message.get("model"))]

    def _message_delta(self, event: dict[str, Any]) -> None:
        delta = event.get("delta") or {}
        self._stop_reason = delta.get("stop_reason") or self._stop_reason
        for key in ("stop_sequence", "container"):
            if delta.get(key) is not None:
                self._finish_metadata[key] = delta[key]
        # message_delta usage is cumulative; fields it leaves out keep their message_start value.
        self._usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})

    def _finish(self) -> Finish:
        raw = self._stop_reason
        return Finish(
            reason=_FINISH_REASONS.get(raw or "", "other"),
            raw_reason=raw,
            usage=usage_from_wire(self._usage),
            provider_metadata={PROVIDER: dict(self._finish_metadata)} if self._finish_metadata else {},
        )

    # -- content blocks ----------------------------------------------------------------------

    def _block_start(self, index: int, block: dict[str, Any]) -> list[ModelStreamPart]:
        kind = str(block.get("type", ""))
        if kind == "text":
            self._blocks[index] = _Block("text", str(index))
            parts: list[ModelStreamPart] = [TextStart(id=str(index))]
            if block.get("text"):  # whole block (non-streamed response)
                parts.append(TextDelta(id=str(index), delta=block["text"]))
            return parts
        if kind in ("thinking", "redacted_thinking"):
            return self._reasoning_start(index, block)
        if kind == "tool_use" or kind.endswith("_tool_use"):
            return self._tool_start(index, block)
        if "tool_use_id" in block:  # web_search_tool_result, bash_code_execution_tool_result, ...
            return [self._server_result(block)]
        return []  # an unknown block type: nothing we could replay faithfully

    def _reasoning_start(self, index: int, block: dict[str, Any]) -> list[ModelStreamPart]:
        state = _Block("reasoning", str(index))
        if block["type"] == "redacted_thinking":
            state.redacted = str(block.get("data", ""))
        state.signature = block.get("signature") or None
        self._blocks[index] = state
        parts: list[ModelStreamPart] = [ReasoningStart(id=state.id)]
        if block.get("thinking"):
            parts.append(ReasoningDelta(id=state.id, delta=block["thinking"]))
        return parts

    def _tool_start(self, index: int, block: dict[str, Any]) -> list[ModelStreamPart]:
        executed = block["type"] != "tool_use"
        # Keep every field we do not model (``caller``, an MCP ``server_name``...) to echo it back;
        # a server tool also keeps its block type.
        extra = {k: v for k, v in block.items() if k not in _TOOL_CALL_FIELDS}
        if executed:
            extra["type"] = block["type"]
        state = _Block(
            "tool",
            str(block.get("id", "")),
            tool_name=str(block.get("name", "")),
            metadata={PROVIDER: extra} if extra else {},
            provider_executed=executed,
        )
        self._blocks[index] = state
        if executed:
            self._server_tool_names[state.id] = state.tool_name
        parts: list[ModelStreamPart] = [
            ToolInputStart(
                id=state.id,
                tool_name=state.tool_name,
                provider_metadata=state.metadata,
                provider_executed=executed,
            )
        ]
        if block.get("input"):  # whole input (non-streamed response); streams start with {}
            fragment = json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))
            state.args.add(fragment)
            parts.append(ToolInputDelta(id=state.id, delta=fragment))
        return parts

    def _server_result(self, block: dict[str, Any]) -> ToolResult:
        tool_use_id = str(block["tool_use_id"])
        kind = str(block.get("type", ""))
        content = block.get("content")
        failed = bool(block.get("is_error")) or (
            isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        )
        name = self._server_tool_names.get(tool_use_id) or kind.removesuffix("_tool_result")
        # The whole block minus its id is kept so the next request can replay it verbatim.
        stored = {k: v for k, v in block.items() if k != "tool_use_id"}
        return ToolResult(
            tool_call_id=tool_use_id,
            tool_name=name,
            output=content,
            is_error=failed,
            provider_metadata={PROVIDER: stored},
        )

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[ModelStreamPart]:
        state = self._blocks.get(index)
        if state is None:
            return []
        match delta.get("type"):
            case "text_delta" if delta.get("text"):
                return [TextDelta(id=state.id, delta=delta["text"])]
            case "thinking_delta" if delta.get("thinking"):
                return [ReasoningDelta(id=state.id, delta=delta["thinking"])]
            case "signature_delta":
                state.signature = delta.get("signature") or state.signature
            case "input_json_delta" if delta.get("partial_json"):
                # The first fragment is usually "" and carries nothing; a call without arguments sends
                # only that one, which ToolArgsAccumulator turns into {}.
                state.args.add(delta["partial_json"])
                return [ToolInputDelta(id=state.id, delta=delta["partial_json"])]
        return []  # citations_delta and empty fragments

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
                return [
                    state.args.end(
                        id=state.id,
                        tool_name=state.tool_name,
                        provider_metadata=state.metadata,
                        provider_executed=state.provider_executed,
                    )
                ]


def usage_from_wire(usage: dict[str, Any]) -> Usage:
    """Anthropic's ``input_tokens`` leaves out cached tokens; ours counts every prompt token (as OpenAI's)."""
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=int(usage.get("output_tokens") or 0),
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        requests=1,
    )
