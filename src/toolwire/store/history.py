"""Invariant 4: a stored history is always valid to send to any provider.

:func:`repair_history` gives every client-executed tool call exactly one result, right after its assistant
message, in call order: the stored result, else the outcome recorded on its tool-call row (cut to the live
truncation rule), else a synthetic *interrupted* error result. A call still awaiting a person (its run
paused) gets the *unanswered* result it would get if the conversation moved on now. Stores apply it in
``load_history``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from toolwire._text import truncate_output
from toolwire.messages import Message, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from toolwire.store.records import CallKey, ToolCallRecord

INTERRUPTED_OUTPUT = (
    "Tool call interrupted: the process stopped before the tool finished, so its outcome is unknown. "
    "Do not assume it succeeded; call it again if it is still needed."
)
CANCELLED_OUTPUT = "Tool call cancelled: the run was stopped before the tool finished."
UNANSWERED_OUTPUT = (
    "Tool call not answered: it was waiting for the user (an approval or a client's result) when the "
    "conversation moved on, so it did not complete. Call it again if it is still needed."
)


def denied_output(reason: str = "") -> str:
    """The result the model reads for a call the user refused to approve."""
    return f"Tool call denied by the user: {reason}" if reason else "Tool call denied by the user."


def repair_history(
    messages: Sequence[Message], records: Mapping[CallKey, ToolCallRecord], *, max_output_chars: int = 0
) -> tuple[list[Message], list[CallKey]]:
    """Give every client-executed tool call exactly one result, right after its assistant message, in call order.

    Missing results come from the tool_calls row when the tool finished (``ok`` / ``error``); a call
    awaiting a person gets :data:`UNANSWERED_OUTPUT`; otherwise the call is *interrupted* and gets a
    synthetic error result. Results whose call is not in the history are dropped. Returns the repaired
    history and the calls newly found interrupted.
    """
    out: list[Message] = []
    interrupted: list[CallKey] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role == "tool":
            continue  # consumed together with its assistant message below; orphans are dropped
        if message.role == "assistant" and not message.parts:
            continue  # an empty answer: stored for its usage, never sent (providers refuse empty turns)
        out.append(message)
        calls = (
            [c for c in message.tool_calls if not c.provider_executed] if message.role == "assistant" else []
        )
        if not calls:
            continue
        found: dict[str, ToolResultPart] = {}
        tool_message: Message | None = None
        while i < len(messages) and messages[i].role == "tool":
            tool_message = tool_message or messages[i]
            for stored in messages[i].tool_results:
                found.setdefault(stored.tool_call_id, stored)
            i += 1
        results: list[ToolResultPart] = []
        for call in calls:
            result: ToolResultPart | None = found.get(call.tool_call_id) or _result_from_record(
                call, records.get((message.id, call.tool_call_id)), max_output_chars
            )
            if result is None:
                interrupted.append((message.id, call.tool_call_id))
                result = ToolResultPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    output=INTERRUPTED_OUTPUT,
                    is_error=True,
                )
            results.append(result)
        if tool_message is not None and [r.tool_call_id for r in tool_message.tool_results] == [
            c.tool_call_id for c in calls
        ]:
            out.append(tool_message)
        elif tool_message is not None:
            out.append(replace(tool_message, parts=tuple(results)))
        else:
            out.append(
                Message(
                    role="tool",
                    parts=tuple(results),
                    id=f"{message.id}:results",
                    session_id=message.session_id,
                    created_at=message.created_at,
                )
            )
    return out, interrupted


def _result_from_record(
    call: ToolCallPart, record: ToolCallRecord | None, max_output_chars: int
) -> ToolResultPart | None:
    if record is None or record.status in ("pending",):
        return None
    if record.status == "interrupted":
        return ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=INTERRUPTED_OUTPUT, is_error=True
        )
    if record.status.startswith("awaiting_"):  # its run is paused: what it gets if nobody answers
        return ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=UNANSWERED_OUTPUT, is_error=True
        )
    return ToolResultPart(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        output=truncate_output(record.output, max_output_chars),
        is_error=record.is_error,
    )
