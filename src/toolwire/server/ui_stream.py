"""Agent events -> Vercel AI SDK UI message stream (protocol v1) chunks, per client version.

The AI SDK client validates every chunk against a schema that, in ``ai@5`` and in ``ai@6`` up to
6.0.230, rejects unknown fields. Fields appeared over time, so the encoder takes the client's version
and emits only what that version accepts:

=====================================  ============================================
field                                  accepted from
=====================================  ============================================
``providerMetadata`` on tool-input-available   every version (5.0.0)
``finishReason`` on finish             5.0.92 (5.x), 6.0.0
``title`` on tool-input-start/-available       6.0.0
``providerMetadata`` on tool-input-start       6.0.39
``tool-approval-request``, ``tool-output-denied`` chunks  6.0.0
=====================================  ============================================

(Read from the published ``uiMessageChunkSchema`` of ai 5.0.0, 5.0.91, 5.0.92, 6.0.0, 6.0.38, 6.0.39,
6.0.230 and 6.0.324.)

Only events of the chat's own session become chunks, with one exception: a call a sub-agent leaves waiting
for the user. The client cannot tell sessions apart, so such a call is surfaced as a ``dynamic-tool`` part
whose ``toolCallId`` is ``"{sub_session_id}/{tool_call_id}"`` (:func:`sub_call_id`; the server splits it
back on the answer), in a step of its own (a ``start-step`` first), so that ``useChat``'s
``lastAssistantMessageIsComplete...`` helpers judge it alone, not beside the caller's call that waits for
the sub-agent (that part stays ``input-available`` until the sub-agent is done). Its outcome is streamed
when the answered call completes. The other events of sub-agents stay on the native event stream.
A call waiting for approval is announced with a ``tool-approval-request`` whose ``approvalId`` is the call
id (so any replica maps the answer back); a client tool's call just stays ``input-available`` for the
client's ``onToolCall``. Tool progress goes out as a transient
``data-tool-progress`` chunk, which the client hands to ``onData`` without storing it in the message.
A ``failover`` event becomes a ``data-failover`` part kept in the message, after the failed attempt's open
text and reasoning parts are ended and its tool calls are ended as ``tool-output-error`` (dropped, never run).
A tool's system message and media become ``data-system-message`` and ``data-media`` parts kept in the
message; a rename (``session-renamed``) a transient ``data-session-renamed`` chunk (:func:`data_part`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, assert_never

from toolwire.events import (
    AgentEvent,
    CompactionEvent,
    ErrorEvent,
    FailoverEvent,
    InteractionEnd,
    MediaEvent,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    SessionRenamed,
    StepFinish,
    StepStart,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallResolved,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
    ToolProgress,
)
from toolwire.store.records import USAGE_LIMIT_TOOL

UI_STREAM_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}

LATEST = (6, 999, 999)
SUB_CALL_SEPARATOR = "/"
"""Joins a sub-agent's session id and call id in a surfaced call's ``toolCallId`` (neither contains it)."""


def sub_call_id(session_id: str, tool_call_id: str) -> str:
    """The ``toolCallId`` of a sub-agent's waiting call on the chat stream."""
    return f"{session_id}{SUB_CALL_SEPARATOR}{tool_call_id}"


def parse_client_version(version: str | None) -> tuple[int, int, int]:
    """``"5.0.200"`` -> (5, 0, 200); ``"6"`` or ``None`` -> the newest 6.x; anything unparseable is rejected."""
    if version is None or version in ("", "latest"):
        return LATEST
    match = re.fullmatch(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+].*)?\s*", version)
    if match is None:
        raise ValueError(f"not an AI SDK client version: {version!r} (expected e.g. 5.0.200 or 6)")
    major = int(match.group(1))
    if major not in (5, 6):
        raise ValueError(f"AI SDK client version {version!r} is not supported (5.x and 6.x are)")
    minor = int(match.group(2)) if match.group(2) is not None else 999
    patch = int(match.group(3)) if match.group(3) is not None else 999
    return (major, minor, patch)


def turn_message_id(interaction_id: str) -> str:
    """The UI message id of the turn a run with ``interaction_id`` began: the same on every replica, so a
    resumed stream (``GET /api/chat/{id}/stream``) replaces the message the client holds, not adds one."""
    return "msg_" + interaction_id.removeprefix("int_")


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """What one AI SDK client version accepts beyond the 5.0.0 baseline."""

    finish_reason: bool
    tool_title: bool
    start_provider_metadata: bool
    approval: bool
    """``tool-approval-request`` and ``tool-output-denied`` chunks."""

    @classmethod
    def for_version(cls, version: tuple[int, int, int]) -> ClientFeatures:
        return cls(
            finish_reason=version >= (5, 0, 92),
            tool_title=version >= (6, 0, 0),
            start_provider_metadata=version >= (6, 0, 39),
            approval=version >= (6, 0, 0),
        )


@dataclass(slots=True)
class UIStreamEncoder:
    """Turns one chat session's agent events into UI message chunks (dicts), in order."""

    session_id: str
    message_id: str
    """``""``: named after the turn's first run (:func:`turn_message_id`) when its first event comes."""
    features: ClientFeatures = field(default_factory=lambda: ClientFeatures.for_version(LATEST))
    _finish_reason: str = "stop"
    _open_steps: int = 0
    _started: bool = False
    _surfaced: set[tuple[str, str]] = field(default_factory=set)
    """Sub-agent calls this stream showed or saw answered: their outcome is streamed too."""
    _sub_step: bool = False
    """Whether the surfaced calls' own step is open (closed by the chat session's next step event)."""
    _open_parts: dict[str, str] = field(default_factory=dict)
    """Text and reasoning parts started and not ended: id -> ``text`` | ``reasoning``."""
    _step_calls: dict[str, None] = field(default_factory=dict)
    """Calls the current step streamed (in order): a failover drops them."""

    def start(self) -> dict[str, Any]:
        self._started = True
        return {"type": "start", "messageId": self.message_id}

    def encode(self, event: AgentEvent) -> Iterator[dict[str, Any]]:  # noqa: C901 - one flat dispatch
        if event.session_id != self.session_id:
            yield from self._sub_agent(event)  # the hub gives this stream its own session's descendants only
            return
        if isinstance(event, StepStart):
            self._sub_step = False
            self._open_steps += 1
            self._step_calls.clear()
            yield {"type": "start-step"}
        elif isinstance(event, StepFinish):
            self._sub_step = False
            if self._open_steps:
                self._open_steps -= 1
                self._finish_reason = event.finish_reason
                yield {"type": "finish-step"}
        elif isinstance(event, TextStartEvent):
            self._open_parts[event.id] = "text"
            yield {"type": "text-start", "id": event.id}
        elif isinstance(event, TextDeltaEvent):
            yield {"type": "text-delta", "id": event.id, "delta": event.delta}
        elif isinstance(event, TextEndEvent):
            self._open_parts.pop(event.id, None)
            yield {"type": "text-end", "id": event.id}
        elif isinstance(event, ReasoningStartEvent):
            self._open_parts[event.id] = "reasoning"
            yield {"type": "reasoning-start", "id": event.id}
        elif isinstance(event, ReasoningDeltaEvent):
            yield {"type": "reasoning-delta", "id": event.id, "delta": event.delta}
        elif isinstance(event, ReasoningEndEvent):
            self._open_parts.pop(event.id, None)
            yield {"type": "reasoning-end", "id": event.id}
        elif isinstance(event, FailoverEvent):
            yield from self._failover(event)
        elif isinstance(
            event, CompactionEvent
        ):  # older turns summarised: kept in the message, shown as a note
            yield {
                "type": "data-compaction",
                "data": {
                    "summary": event.summary,
                    "model": f"{event.provider}:{event.model}",
                    "firstKeptMessageId": event.first_kept_message_id,
                    "tokensBefore": event.tokens_before,
                    "tokensAfter": event.tokens_after,
                },
            }
        elif isinstance(event, ToolInputStartEvent):
            self._step_calls[event.tool_call_id] = None
            chunk: dict[str, Any] = {
                "type": "tool-input-start",
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
            }
            if event.provider_executed:
                chunk["providerExecuted"] = True
            if event.provider_metadata and self.features.start_provider_metadata:
                chunk["providerMetadata"] = event.provider_metadata
            if event.title and self.features.tool_title:
                chunk["title"] = event.title
            yield chunk
        elif isinstance(event, ToolInputDeltaEvent):
            yield {
                "type": "tool-input-delta",
                "toolCallId": event.tool_call_id,
                "inputTextDelta": event.delta,
            }
        elif isinstance(event, ToolInputAvailableEvent):
            chunk = {
                "type": "tool-input-available",
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
                "input": event.args,
            }
            if event.provider_executed:
                chunk["providerExecuted"] = True
            if event.provider_metadata:
                chunk["providerMetadata"] = event.provider_metadata
            if event.title and self.features.tool_title:
                chunk["title"] = event.title
            yield chunk
        elif isinstance(event, ToolCallComplete):
            yield self._tool_output(event)
        elif isinstance(event, ToolCallAwaiting):
            if event.kind == "approval" and self.features.approval:
                if event.tool_name == USAGE_LIMIT_TOOL:  # no model call made it: its part comes first
                    yield {
                        "type": "tool-input-available",
                        "toolCallId": event.tool_call_id,
                        "toolName": event.tool_name,
                        "input": event.args,
                        "dynamic": True,
                    }
                yield {
                    "type": "tool-approval-request",
                    "approvalId": event.tool_call_id,
                    "toolCallId": event.tool_call_id,
                }
            elif event.kind == "input" and event.question is not None:
                # The call stays input-available; what its tool asks comes as a data part, and the answer
                # goes back as the call's output (``addToolOutput``: the form's fields).
                yield {
                    "type": "data-tool-question",
                    "id": event.tool_call_id,
                    "data": {"toolCallId": event.tool_call_id, "question": event.question},
                }
        elif isinstance(event, ToolProgress):
            yield {
                "type": "data-tool-progress",
                "id": event.tool_call_id,
                "data": {
                    "toolCallId": event.tool_call_id,
                    "fraction": event.fraction,
                    "message": event.message,
                },
                "transient": True,
            }
        elif isinstance(event, SystemMessageEvent | MediaEvent | SessionRenamed):
            yield data_part(event)
        elif isinstance(event, ErrorEvent):
            self._finish_reason = "error"
            yield {"type": "error", "errorText": f"{event.error_type}: {event.message}"}
        elif isinstance(event, InteractionEnd):
            yield from self.finish(event.status)

    def _failover(self, event: FailoverEvent) -> Iterator[dict[str, Any]]:
        """The step moves to another model: the protocol cannot take streamed parts back, so the failed
        attempt's open text ends where it was cut, its calls end as errors (they never run), and a
        ``data-failover`` part (kept in the message) says what happened."""
        for part_id, kind in self._open_parts.items():
            yield {"type": f"{kind}-end", "id": part_id}
        self._open_parts.clear()
        reason = f"dropped: the step failed over to {event.to_provider}:{event.to_model}"
        for call_id in self._step_calls:
            yield {"type": "tool-output-error", "toolCallId": call_id, "errorText": reason}
        self._step_calls.clear()
        yield {
            "type": "data-failover",
            "data": {
                "step": event.step,
                "from": f"{event.from_provider}:{event.from_model}",
                "to": f"{event.to_provider}:{event.to_model}",
                "reason": event.reason,
                "errorType": event.error_type,
                "droppedOutput": event.dropped_output,
            },
        }

    def finish(self, status: str = "completed") -> Iterator[dict[str, Any]]:
        while self._open_steps:  # a run that ended inside a step still closes it for the client
            self._open_steps -= 1
            yield {"type": "finish-step"}
        if status == "cancelled":
            yield {"type": "abort"}
            return
        chunk: dict[str, Any] = {"type": "finish"}
        if self.features.finish_reason:
            chunk["finishReason"] = "error" if status == "error" else self._finish_reason
        yield chunk

    def _sub_agent(self, event: AgentEvent) -> Iterator[dict[str, Any]]:
        """A sub-agent's call waiting for the user (and its outcome) as a ``dynamic-tool`` part."""
        if isinstance(event, ToolCallAwaiting) and event.kind != "subagent":
            key = (event.session_id, event.tool_call_id)
            if key in self._surfaced or (event.kind == "approval" and not self.features.approval):
                return  # announced already; or an approval ai@5 cannot show (its apps use the native API)
            self._surfaced.add(key)
            if not self._sub_step:
                self._sub_step = True
                yield {"type": "start-step"}
            call_id = sub_call_id(*key)
            yield {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": event.tool_name,
                "input": event.args,
                "dynamic": True,
            }
            if event.kind == "approval":
                yield {"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}
        elif isinstance(event, ToolCallResolved):
            self._surfaced.add((event.session_id, event.tool_call_id))  # answered now: the client holds it
        elif isinstance(event, ToolCallComplete) and (key := (event.session_id, event.tool_call_id)) in (
            self._surfaced
        ):
            self._surfaced.discard(key)
            chunk = self._tool_output(event, sub_call_id(*key))
            if chunk["type"] != "tool-output-denied":
                chunk["dynamic"] = True
            yield chunk

    def _tool_output(self, event: ToolCallComplete, call_id: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any]
        call_id = call_id or event.tool_call_id
        if event.status == "denied" and self.features.approval:
            return {"type": "tool-output-denied", "toolCallId": call_id}
        if event.is_error:
            chunk = {
                "type": "tool-output-error",
                "toolCallId": call_id,
                "errorText": _error_text(event),
            }
        else:
            chunk = {
                "type": "tool-output-available",
                "toolCallId": call_id,
                "output": event.output,
            }
        if event.provider_executed:
            chunk["providerExecuted"] = True
        return chunk


def _error_text(event: ToolCallComplete) -> str:
    if isinstance(event.output, str):
        return event.output
    return json.dumps(event.output, ensure_ascii=False, default=str)


DONE_FRAME = b"data: [DONE]\n\n"
"""The UI message stream's last frame."""


def data_part(event: SystemMessageEvent | MediaEvent | SessionRenamed) -> dict[str, Any]:
    """What a running tool says beside its call, as the AI SDK's ``data-*`` parts: a system message and
    media stay in the message (``message.parts``), a rename is transient (the client's ``onData``)."""
    match event:
        case SystemMessageEvent():
            data = {"level": event.level, "text": event.text, "toolCallId": event.tool_call_id}
            return {"type": "data-system-message", "data": data}
        case MediaEvent():
            data = {
                "contentType": event.content_type,
                "url": event.url,
                "data": event.data,
                "toolCallId": event.tool_call_id,
            }
            return {"type": "data-media", "data": data}
        case SessionRenamed():
            data = {"sessionId": event.session_id, "title": event.title}
            return {"type": "data-session-renamed", "data": data, "transient": True}
        case _:
            assert_never(event)
