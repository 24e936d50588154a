"""One thread's agent events as AG-UI events (:class:`AGUIEncoder`): text, reasoning, steps, tool calls (held
until their assistant message's id is known), a tool's ``ctx.data`` as state events, and the run's outcome
(interrupts, pending front-end calls). Apart from the endpoint (:mod:`toolwire.server.ag_ui`) because it is
a pure translation: events in, event dicts out, no I/O."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from toolwire.events import (
    AgentEvent,
    CompactionEvent,
    CustomDataEvent,
    ErrorEvent,
    FailoverEvent,
    InteractionEnd,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    StepFinish,
    StepStart,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
)
from toolwire.server._ag_ui_history import result_message_id

STATE_SNAPSHOT_DATA = "ag-ui:state"
"""``ctx.data(STATE_SNAPSHOT_DATA, state)`` in a tool becomes a ``STATE_SNAPSHOT`` event."""
STATE_DELTA_DATA = "ag-ui:state-delta"
"""``ctx.data(STATE_DELTA_DATA, [json patch operations])`` becomes a ``STATE_DELTA`` event."""
_APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


@dataclass(slots=True)
class AGUIEncoder:
    """One thread's agent events -> AG-UI events (dicts), for one AG-UI run."""

    thread_id: str
    run_id: str
    _steps: list[str] = field(default_factory=list)
    _texts: set[str] = field(default_factory=set)
    _reasoning: set[str] = field(default_factory=set)
    """Reasoning messages started and not yet ended (a failover ends them)."""
    _calls: set[str] = field(default_factory=set)
    """Tool calls started (``TOOL_CALL_START`` sent) and not yet ended."""
    _ended_calls: set[str] = field(default_factory=set)
    _held: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Events of calls started before their message id was known (see :meth:`encode`)."""
    _message_id: str | None = None
    """The assistant message of the current step (tool calls name it as their parent)."""
    _interrupts: list[dict[str, Any]] = field(default_factory=list)
    _pending: list[str] = field(default_factory=list)
    _error: str | None = None

    def start(self) -> dict[str, Any]:
        return {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}

    def encode(self, event: AgentEvent) -> Iterator[dict[str, Any]]:  # noqa: C901 - one flat dispatch
        if event.session_id != self.thread_id:
            return  # sub-agents' events stay on the native event stream
        if isinstance(event, StepStart):
            name = f"step {event.step}"
            self._steps.append(name)
            self._message_id = None
            yield {"type": "STEP_STARTED", "stepName": name}
        elif isinstance(event, StepFinish):
            yield from self._close_step()
        elif isinstance(event, TextStartEvent):
            message_id = event.message_id or event.id
            self._message_id = message_id
            self._texts.add(message_id)
            yield {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
        elif isinstance(event, TextDeltaEvent):
            if event.delta:
                yield {
                    "type": "TEXT_MESSAGE_CONTENT",
                    "messageId": event.message_id or event.id,
                    "delta": event.delta,
                }
        elif isinstance(event, TextEndEvent):
            message_id = event.message_id or event.id
            if message_id in self._texts:
                self._texts.discard(message_id)
                yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
        elif isinstance(event, ReasoningStartEvent):
            # Reasoning is its own message in AG-UI (role "reasoning"): its id must differ from the text's.
            self._reasoning.add(event.id)
            yield {"type": "REASONING_START", "messageId": event.id}
            yield {"type": "REASONING_MESSAGE_START", "messageId": event.id, "role": "reasoning"}
        elif isinstance(event, ReasoningDeltaEvent):
            if event.delta:
                yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": event.id, "delta": event.delta}
        elif isinstance(event, ReasoningEndEvent):
            self._reasoning.discard(event.id)
            yield {"type": "REASONING_MESSAGE_END", "messageId": event.id}
            yield {"type": "REASONING_END", "messageId": event.id}
        elif isinstance(event, FailoverEvent):
            yield from self._failover(event)
        elif isinstance(event, CompactionEvent):
            yield {
                "type": "CUSTOM",
                "name": "compaction",
                "value": {
                    "summary": event.summary,
                    "tokensBefore": event.tokens_before,
                    "tokensAfter": event.tokens_after,
                },
            }
        elif isinstance(event, ToolInputStartEvent):
            start = self._call_start(event.tool_call_id, event.tool_name)
            if self._message_id is None:
                # Its assistant message's id comes with the whole call: held until then, so the client
                # files the call under the id the stored conversation (MESSAGES_SNAPSHOT) gives it.
                self._held[event.tool_call_id] = [start]
            else:
                yield start
        elif isinstance(event, ToolInputDeltaEvent):
            if event.delta and (event.tool_call_id in self._calls or event.tool_call_id in self._held):
                args = {"type": "TOOL_CALL_ARGS", "toolCallId": event.tool_call_id, "delta": event.delta}
                if event.tool_call_id in self._held:
                    self._held[event.tool_call_id].append(args)
                else:
                    yield args
        elif isinstance(event, ToolInputAvailableEvent):
            yield from self._call_available(event)
        elif isinstance(event, ToolCallComplete):
            yield {
                "type": "TOOL_CALL_RESULT",
                "messageId": result_message_id(event.tool_call_id),
                "toolCallId": event.tool_call_id,
                "content": _result_text(event),
                "role": "tool",
            }
        elif isinstance(event, ToolCallAwaiting):
            yield from self._awaiting(event)
        elif isinstance(event, CustomDataEvent):
            yield _custom(event)
        elif isinstance(event, ErrorEvent):
            self._error = f"{event.error_type}: {event.message}"

    def finish(self, end: InteractionEnd, snapshot: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
        """Close what is open, then ``snapshot`` (``MESSAGES_SNAPSHOT``: the protocol wants the state to
        resume from before an interrupt) and ``RUN_FINISHED`` with the run's outcome, or ``RUN_ERROR``."""
        yield from self._end_open()  # a call still held is never shown: the run ended before it was whole
        while self._steps:
            yield from self._close_step()
        if snapshot is not None:
            yield snapshot
        if end.status == "error":
            yield {
                "type": "RUN_ERROR",
                "message": end.error or self._error or "the run failed",
                "code": "run_error",
            }
            return
        outcome: dict[str, Any]
        if end.status == "cancelled":
            outcome = {"type": "cancelled"}
        elif self._interrupts:
            outcome = {"type": "interrupt", "interrupts": self._interrupts}
        else:
            outcome = {"type": "success"}
            if self._pending:
                outcome["pendingToolCallIds"] = self._pending
        event: dict[str, Any] = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "outcome": outcome,
        }
        if end.status == "completed" and end.output:
            event["result"] = end.output
        yield event

    def _end_open(self) -> Iterator[dict[str, Any]]:
        """End every text, reasoning and tool call still open (the run ends, or its step fails over): AG-UI
        wants each started message and call ended; a call held back (its message id unknown) was never
        shown and is dropped."""
        for message_id in sorted(self._texts):
            yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
        for message_id in sorted(self._reasoning):
            yield {"type": "REASONING_MESSAGE_END", "messageId": message_id}
            yield {"type": "REASONING_END", "messageId": message_id}
        for call_id in sorted(self._calls - set(self._held)):
            yield {"type": "TOOL_CALL_END", "toolCallId": call_id}
        self._texts.clear()
        self._reasoning.clear()
        self._calls.clear()
        self._held.clear()

    def _failover(self, event: FailoverEvent) -> Iterator[dict[str, Any]]:
        """The step goes to another model: what the failed one opened is ended (the run's closing
        ``MESSAGES_SNAPSHOT``, the stored conversation, does not have it), its held calls are never shown,
        and a ``CUSTOM`` event named ``failover`` says what happened."""
        yield from self._end_open()
        self._message_id = None
        yield {
            "type": "CUSTOM",
            "name": "failover",
            "value": {
                "step": event.step,
                "from": f"{event.from_provider}:{event.from_model}",
                "to": f"{event.to_provider}:{event.to_model}",
                "reason": event.reason,
                "errorType": event.error_type,
                "droppedOutput": event.dropped_output,
            },
        }

    def _close_step(self) -> Iterator[dict[str, Any]]:
        if self._steps:
            yield {"type": "STEP_FINISHED", "stepName": self._steps.pop()}

    def _call_start(self, call_id: str, name: str) -> dict[str, Any]:
        self._calls.add(call_id)
        event: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
        if self._message_id is not None:
            event["parentMessageId"] = self._message_id
        return event

    def _call_available(self, event: ToolInputAvailableEvent) -> Iterator[dict[str, Any]]:
        if event.tool_call_id in self._ended_calls:
            return
        if event.message_id and self._message_id is None:
            self._message_id = event.message_id
        if (held := self._held.pop(event.tool_call_id, None)) is not None:
            if self._message_id is not None:
                held[0]["parentMessageId"] = self._message_id
            yield from held
        elif event.tool_call_id not in self._calls:  # a model that sends the call whole
            yield self._call_start(event.tool_call_id, event.tool_name)
            yield {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": event.tool_call_id,
                "delta": json.dumps(event.args, ensure_ascii=False),
            }
        self._calls.discard(event.tool_call_id)
        self._ended_calls.add(event.tool_call_id)
        yield {"type": "TOOL_CALL_END", "toolCallId": event.tool_call_id}

    def _awaiting(self, event: ToolCallAwaiting) -> Iterator[dict[str, Any]]:
        if event.tool_call_id not in self._ended_calls:  # announced again by a later run: show the call
            yield from self._call_available(
                ToolInputAvailableEvent(
                    session_id=event.session_id,
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    args=event.args,
                    message_id=event.message_id,
                )
            )
        if event.kind == "approval":
            if all(i["id"] != event.tool_call_id for i in self._interrupts):
                self._interrupts.append(
                    {
                        "id": event.tool_call_id,
                        "reason": "tool_call",
                        "toolCallId": event.tool_call_id,
                        "message": f"Approve {event.tool_name}({json.dumps(event.args, ensure_ascii=False)})?",
                        "responseSchema": _APPROVAL_SCHEMA,
                    }
                )
        elif event.kind == "input" and event.question is not None:
            # The tool's question is an interrupt whose response is the form the server asked for.
            if all(i["id"] != event.tool_call_id for i in self._interrupts):
                question = event.question
                self._interrupts.append(
                    {
                        "id": event.tool_call_id,
                        "reason": "input",
                        "toolCallId": event.tool_call_id,
                        "message": question.get("message", ""),
                        "responseSchema": question.get("requested_schema") or {"type": "object"},
                        **({"url": question["url"]} if question.get("url") else {}),
                    }
                )
        elif event.kind == "output" and event.tool_call_id not in self._pending:
            self._pending.append(event.tool_call_id)


def _custom(event: CustomDataEvent) -> dict[str, Any]:
    if event.name == STATE_SNAPSHOT_DATA:
        return {"type": "STATE_SNAPSHOT", "snapshot": event.data}
    if event.name == STATE_DELTA_DATA and isinstance(event.data, list):
        return {"type": "STATE_DELTA", "delta": event.data}
    return {"type": "CUSTOM", "name": event.name, "value": event.data}


def _result_text(event: ToolCallComplete) -> str:
    if event.status == "denied":
        return f"denied: {event.output}" if event.output else "denied"
    if isinstance(event.output, str):
        return event.output
    return json.dumps(event.output, ensure_ascii=False, default=str)
