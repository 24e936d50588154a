"""Anthropic Messages events -> canonical stream parts.

Streaming responses are parsed event by event. A non-streaming response is first turned into the
same events (:func:`events_from_message`: each block arrives whole in ``content_block_start``), so both
paths share one parser (https://docs.anthropic.com/en/docs/build-with-claude/streaming).

Two things the streaming guide does not show, seen in recorded traffic:

- ``message_start.message.content`` is not always empty: with programmatic tool calling, a tool call made
  from the code execution container arrives as a whole ``tool_use`` block there (with its ``caller``), and
  the message is just ``message_start`` + ``message_stop``, its ``stop_reason`` and ``container`` also in
  ``message_start``. Those blocks are read like blocks that arrived whole in ``content_block_start``.
- A client tool call made while a container is known (programmatic tool calling) keeps that container in its
  ``provider_metadata["anthropic"]["container"]``: the request answering the call names it (a container
  announced only in ``message_delta`` comes after the calls and stays in the finish's metadata).
- ``citations_delta`` adds one citation to a text block; the block's citations end up in its
  ``provider_metadata["anthropic"]["citations"]`` (a non-streamed text block carries them whole), which
  the request builder sends back on that text block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from toolwire.errors import ProviderProtocolError
from toolwire.models._blocks import FINISH_REASONS, OpenBlocks, block_finish
from toolwire.models._builder import compact_json
from toolwire.models._delta_shortcut import DeltaShortcut
from toolwire.models._http import Json, protocol_error
from toolwire.models._window import as_context_length
from toolwire.models.base import (
    Finish,
    FinishReason,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    ToolResult,
)

PROVIDER = "anthropic"

_FINISH_REASONS: dict[str, FinishReason] = {
    **FINISH_REASONS,
    "refusal": "content-filter",
    # pause_turn: a long server-tool turn was paused; the caller resends the conversation to continue.
    "pause_turn": "other",
}
# Error types Anthropic documents as transient (https://docs.anthropic.com/en/api/errors).
_RETRYABLE_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
_TOOL_CALL_FIELDS = ("type", "id", "name", "input")


def events_from_message(message: Json) -> Iterator[Json]:
    """The events a stream of this (non-streamed) message would have carried, each block whole."""
    if message.get("type") == "error":
        yield {"type": "error", "error": message.get("error") or {}}
        return
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
        self._blocks = OpenBlocks()
        self._server_tool_names: dict[str, str] = {}
        self._usage: dict[str, Any] = {}
        self._citations: dict[int, list[Any]] = {}
        """Text block index -> the citations it has received so far."""
        self._stop_reason: str | None = None
        self._finish_metadata: dict[str, Any] = {}
        self.done = False
        self._shortcut = DeltaShortcut(b'"partial_json":"')
        self.feed_data = self._shortcut.read
        """An event's data read without decoding when it is the last bare fragment's bytes around another
        fragment (a DataParser of ``_http``; a bound method, not a method: one call per fragment fewer)."""

    def feed(self, event: Json) -> list[ModelStreamPart]:
        self._shortcut.general()
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
                return [self._error(event.get("error") or {}, event)]
            case _:
                return []  # ping, and event types added after this adapter was written

    def end(self) -> list[ModelStreamPart]:
        return [
            protocol_error("the response ended before message_stop", provider=PROVIDER, model=self._model)
        ]

    def _error(self, error: Json, body: Any) -> StreamError:
        code = error.get("type")
        return StreamError(
            error=as_context_length(
                ProviderProtocolError(
                    str(error.get("message") or code or "stream error"),
                    provider=PROVIDER,
                    model=self._model,
                    code=code,
                    retryable=code in _RETRYABLE_ERRORS,
                    body=body,
                )
            )
        )

    # -- message level -----------------------------------------------------------------------

    def _message_start(self, message: Json) -> list[ModelStreamPart]:
        self._usage.update(message.get("usage") or {})
        self._stop_fields(message)
        out: list[ModelStreamPart] = [
            ResponseMetadata(response_id=message.get("id"), model=message.get("model"))
        ]
        # Blocks that are complete already (programmatic tool calls): each is started and stopped at once,
        # so the indexes of blocks streamed after them are free again.
        for index, block in enumerate(message.get("content") or []):
            if isinstance(block, dict):
                out += self._block_start(index, block)
                out += self._block_stop(index)
        return out

    def _stop_fields(self, fields: Json) -> None:
        """``stop_reason``, ``stop_sequence`` and ``container``: in ``message_delta``, or already in
        ``message_start`` for a message that arrives whole."""
        self._stop_reason = fields.get("stop_reason") or self._stop_reason
        for key in ("stop_sequence", "container"):
            if fields.get(key) is not None:
                self._finish_metadata[key] = fields[key]

    def _message_delta(self, event: Json) -> None:
        self._stop_fields(event.get("delta") or {})
        # message_delta usage is cumulative; fields it leaves out keep their message_start value.
        self._usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})

    def _finish(self) -> Finish:
        return block_finish(
            self._stop_reason,
            _FINISH_REASONS,
            self._usage,
            ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"),
            provider=PROVIDER,
            metadata=self._finish_metadata,
            reasoning_tokens=(self._usage.get("output_tokens_details") or {}).get("thinking_tokens"),
        )

    # -- content blocks ----------------------------------------------------------------------

    def _block_start(self, index: int, block: Json) -> list[ModelStreamPart]:
        kind = str(block.get("type", ""))
        if kind == "text":  # whole text only in a non-streamed response
            self._citations[index] = list(block.get("citations") or [])
            return [
                *self._blocks.open_text(index, "text"),
                *self._blocks.text(index, block.get("text") or ""),
            ]
        if kind in ("thinking", "redacted_thinking"):
            parts = self._blocks.open_text(index, "reasoning")
            redacted = str(block.get("data", "")) if kind == "redacted_thinking" else None
            self._blocks.sign(index, signature=block.get("signature") or None, redacted=redacted)
            return [*parts, *self._blocks.text(index, block.get("thinking") or "")]
        if kind == "tool_use" or kind.endswith("_tool_use"):
            return self._tool_start(index, block)
        if "tool_use_id" in block:  # web_search_tool_result, bash_code_execution_tool_result, ...
            return [self._server_result(block)]
        return []  # an unknown block type: nothing we could replay faithfully

    def _tool_start(self, index: int, block: Json) -> list[ModelStreamPart]:
        executed = block["type"] != "tool_use"
        # Keep every field we do not model (``caller``, an MCP ``server_name``...) to echo it back;
        # a server tool also keeps its block type.
        extra = {k: v for k, v in block.items() if k not in _TOOL_CALL_FIELDS}
        if executed:
            extra["type"] = block["type"]
        elif isinstance(self._finish_metadata.get("container"), dict):
            # A call from the code execution container (known from message_start): the request answering it
            # must name that container, so the call keeps it (history has no per-message metadata).
            extra["container"] = self._finish_metadata["container"]
        call_id, name = str(block.get("id", "")), str(block.get("name", ""))
        if executed:
            self._server_tool_names[call_id] = name
        parts = self._blocks.open_tool(
            index, call_id, name, metadata={PROVIDER: extra} if extra else {}, provider_executed=executed
        )
        # Whole input only in a non-streamed response; streams start with {} and send it as deltas.
        return parts + self._blocks.args(index, compact_json(block["input"]) if block.get("input") else "")

    def _server_result(self, block: Json) -> ToolResult:
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

    def _block_delta(self, index: int, delta: Json) -> list[ModelStreamPart]:
        match delta.get("type"):
            case "text_delta":
                return self._blocks.text(index, delta.get("text") or "")
            case "thinking_delta":
                return self._blocks.text(index, delta.get("thinking") or "")
            case "signature_delta":
                self._blocks.sign(index, signature=delta.get("signature") or None)
            case "input_json_delta":
                # The first fragment is usually "" and carries nothing; a call without arguments sends
                # only that one, which ToolArgsAccumulator turns into {}.
                fragment = delta.get("partial_json") or ""
                parts = self._blocks.args(index, fragment)
                tool_input = self._blocks.tool_input(index)
                if parts and tool_input is not None:  # a bare fragment: the next ones may take the shortcut
                    self._shortcut.learn(*tool_input, fragment)
                return parts
            case "citations_delta" if index in self._citations and delta.get("citation") is not None:
                self._citations[index].append(delta["citation"])
        return []

    def _block_stop(self, index: int) -> list[ModelStreamPart]:
        citations = self._citations.pop(index, None)
        return self._blocks.stop(index, {PROVIDER: {"citations": citations}} if citations else None)


__all__ = ["AnthropicEventParser", "events_from_message"]
