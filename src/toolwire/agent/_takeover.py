"""What a run that takes over a dead replica's run (``takeover=True``) reads from the repaired history:
which calls its predecessor left unfinished, and whether the predecessor had already answered."""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.messages import Message, ToolCallPart
from toolwire.store.records import CallKey


def interrupted_calls(history: Sequence[Message], keys: Sequence[CallKey]) -> list[ToolCallPart]:
    """The calls named by ``keys`` ((assistant message id, call id)), in history order."""
    wanted = set(keys)
    return [
        call
        for message in history
        if message.role == "assistant"
        for call in message.tool_calls
        if (message.id, call.tool_call_id) in wanted
    ]


def final_answer(history: Sequence[Message]) -> str | None:
    """The text of the last message when it is an answer that asks for no tool (the run it continues
    had finished but died before releasing the session); ``None`` when the model has more to do."""
    if not history:
        return None
    last = history[-1]
    if last.role != "assistant" or last.tool_calls:
        return None
    return last.text
