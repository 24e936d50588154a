"""Bedrock ConverseStream events -> canonical stream parts.

Event order (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html):
``messageStart``, then per block ``contentBlockStart`` (tool blocks only: text and reasoning blocks
begin with their first delta), ``contentBlockDelta``*, ``contentBlockStop``, then ``messageStop`` with
the stop reason and ``metadata`` with usage *after* it, so the finish is emitted when the stream ends
(:meth:`BedrockEventParser.end`). A non-streaming Converse response is first turned into the same events
(:func:`events_from_response`) so both paths share one parser. An event is its payload with the event
type under ``type``.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolwire.models._blocks import FINISH_REASONS, OpenBlocks, block_finish
from toolwire.models._builder import compact_json
from toolwire.models._http import Json, protocol_error
from toolwire.models.base import FinishReason, ModelStreamPart

PROVIDER = "bedrock"

_FINISH_REASONS: dict[str, FinishReason] = {
    **FINISH_REASONS,
    "guardrail_intervened": "content-filter",
    "content_filtered": "content-filter",
}


def events_from_response(response: Json) -> Iterator[Json]:
    """The events a ConverseStream of this (non-streamed) Converse response would have carried."""
    message = (response.get("output") or {}).get("message") or {}
    yield {"type": "messageStart", "role": message.get("role", "assistant")}
    for index, block in enumerate(message.get("content") or []):
        yield from _block_events(block, index)
        yield {"type": "contentBlockStop", "contentBlockIndex": index}
    yield {"type": "messageStop", **_picked(response, "stopReason", "additionalModelResponseFields")}
    yield {"type": "metadata", **_picked(response, "usage", "metrics", "trace")}


def _picked(response: Json, *keys: str) -> Json:
    return {key: response[key] for key in keys if key in response}


def _block_events(block: Json, index: int) -> Iterator[Json]:
    def delta(value: Json) -> Json:
        return {"type": "contentBlockDelta", "contentBlockIndex": index, "delta": value}

    if "toolUse" in block:
        tool = block["toolUse"]
        start = {"toolUse": {"toolUseId": tool.get("toolUseId"), "name": tool.get("name")}}
        yield {"type": "contentBlockStart", "contentBlockIndex": index, "start": start}
        yield delta({"toolUse": {"input": compact_json(tool.get("input") or {})}})
    elif block.get("text"):
        yield delta({"text": block["text"]})
    elif "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        pieces = dict(reasoning.get("reasoningText") or {})
        if "redactedContent" in reasoning:
            pieces["redactedContent"] = reasoning["redactedContent"]
        for key in ("text", "signature", "redactedContent"):
            if pieces.get(key):
                yield delta({"reasoningContent": {key: pieces[key]}})


class BedrockEventParser:
    """Turns decoded ConverseStream events into stream parts; the finish comes from :meth:`end`."""

    done = False
    """Never set: usage arrives after ``messageStop``, so the whole stream is read."""

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._blocks = OpenBlocks()
        self._stop: Json | None = None
        self._metadata: Json = {}

    def feed(self, event: Json) -> list[ModelStreamPart]:
        index = int(event.get("contentBlockIndex", 0))
        match event.get("type"):
            case "contentBlockStart":
                return self._block_start(index, event.get("start") or {})
            case "contentBlockDelta":
                return self._block_delta(index, event.get("delta") or {})
            case "contentBlockStop":
                return self._blocks.stop(index)
            case "messageStop":
                self._stop = event
            case "metadata":
                self._metadata = event
        return []  # messageStart, and event types added after this adapter was written

    def end(self) -> list[ModelStreamPart]:
        """Close what is still open and emit the finish, or report that no ``messageStop`` arrived."""
        if self._stop is None:
            return [
                protocol_error("the response ended before messageStop", provider=PROVIDER, model=self._model)
            ]
        extra: Json = {k: self._metadata[k] for k in ("metrics", "trace") if k in self._metadata}
        if self._stop.get("additionalModelResponseFields"):
            extra["additionalModelResponseFields"] = self._stop["additionalModelResponseFields"]
        finish = block_finish(
            self._stop.get("stopReason"),
            _FINISH_REASONS,
            self._metadata.get("usage") or {},
            ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"),
            provider=PROVIDER,
            metadata=extra,
        )
        return [*self._blocks.stop_all(), finish]

    def _block_start(self, index: int, start: Json) -> list[ModelStreamPart]:
        tool = start.get("toolUse")
        if not isinstance(tool, dict):
            return []
        return self._blocks.open_tool(index, str(tool.get("toolUseId", "")), str(tool.get("name", "")))

    def _block_delta(self, index: int, delta: Json) -> list[ModelStreamPart]:
        # Text and reasoning blocks have no contentBlockStart: the first delta opens them.
        if "text" in delta:
            return [*self._blocks.open_text(index, "text"), *self._blocks.text(index, delta["text"])]
        if "reasoningContent" in delta:
            reasoning = delta["reasoningContent"]
            parts = self._blocks.open_text(index, "reasoning")
            # Redacted bytes travel base64-encoded; the string is kept exactly as received and sent back.
            self._blocks.sign(
                index,
                signature=reasoning.get("signature") or None,
                redacted=reasoning.get("redactedContent") or None,
            )
            return [*parts, *self._blocks.text(index, reasoning.get("text") or "")]
        # citations and the empty first fragment of a tool call carry nothing
        return self._blocks.args(index, (delta.get("toolUse") or {}).get("input") or "")


__all__ = ["BedrockEventParser", "events_from_response"]
