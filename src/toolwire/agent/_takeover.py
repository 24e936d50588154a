"""What a run that takes over a dead replica's run (``takeover=Takeover(...)``) reads from the repaired history:
which calls its predecessor left unfinished, and whether the predecessor had already answered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolwire.events import ToolCallStatus
from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.store._locks import run_of
from toolwire.store.base import Store
from toolwire.store.records import AWAITING, CallKey
from toolwire.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class Takeover:
    """What a run continuing a dead replica's run knows of it (``Agent.stream(takeover=...)``; the server's
    lease watcher makes one)."""

    dead_run_owner: str | None = None
    """The dead run's lease owner, which names its interaction: a turn whose interaction stored nothing
    died before storing its prompt (:func:`prompt_lost`)."""
    unpublished: bool = False
    """The dead run numbered events no client received (the store's last seq is past the event log's: it
    died between a step's write and the publication of what that write counted). Its last step's finished
    calls are then announced again, so no client keeps a call that never completes."""


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
    had finished but died before releasing the session), ``""`` for an empty history; ``None`` when the
    model has more to do."""
    if not history:
        return ""  # it died before storing its prompt: nothing to continue
    last = history[-1]
    if last.role != "assistant" or last.tool_calls:
        return None
    return last.text


TAKEOVER_RUN = "takeover~"
"""How a takeover run's lease owner starts its run name (before its interaction id)."""


async def prompt_lost(store: Store, session_id: str, dead_run_owner: str | None) -> bool:
    """Whether the dead run was a turn that stored nothing: no step of its interaction (named by its
    lease owner) is stored. Asked when the history ends with an answer: that answer is then the previous
    turn's, and the dead turn's prompt is gone. A dead takeover (or an unknown owner) proves nothing: the
    turn it continued had stored its prompt."""
    if dead_run_owner is None:
        return False
    interaction_id = run_of(dead_run_owner)
    if interaction_id.startswith(TAKEOVER_RUN):
        return False
    return all(step.interaction_id != interaction_id for step in await store.steps(session_id))


@dataclass(frozen=True, slots=True)
class RunAgain:
    """The interrupted calls of the last step whose tools are idempotent: run again by the takeover."""

    calls: list[ToolCallPart]
    message_id: str
    """The assistant message that made them."""
    results_at: int
    """Index in the history of that step's (repaired) tool message."""

    async def step_of(self, store: Store, session_id: str) -> int:
        """The step number the calls were recorded with."""
        for row in await store.tool_calls(session_id):
            if row.message_id == self.message_id:
                return row.step
        return 0


def last_step_calls(
    history: list[Message], calls: Sequence[ToolCallPart], registry: ToolRegistry
) -> RunAgain:
    """Which of ``calls`` to run again: those of the history's last assistant message (its results are
    the repaired tool message right after it) whose tool is declared ``idempotent``."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role != "assistant":
            continue
        own = {c.tool_call_id for c in message.tool_calls}
        if index + 1 >= len(history) or history[index + 1].role != "tool":
            break
        again = [
            c
            for c in calls
            if c.tool_call_id in own and (t := registry.get(c.tool_name)) is not None and t.idempotent
        ]
        return RunAgain(again, message.id, index + 1)
    return RunAgain([], "", -1)


def finished_calls(
    history: Sequence[Message], statuses: dict[CallKey, ToolCallStatus], interrupted: Sequence[CallKey]
) -> list[tuple[str, ToolCallPart, ToolResultPart, ToolCallStatus]]:
    """The calls of the history's last step with calls that ended before the run died (not interrupted
    now, not waiting for a person): (their assistant message id, the call, its result as the model reads
    it, its stored status)."""
    skip = set(interrupted)
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role != "assistant" or not message.tool_calls:
            continue
        results = {
            r.tool_call_id: r for m in history[index + 1 :] if m.role == "tool" for r in m.tool_results
        }
        out = []
        for call in message.tool_calls:
            key = (message.id, call.tool_call_id)
            status = statuses.get(key)
            result = results.get(call.tool_call_id)
            if key in skip or status is None or status in AWAITING or result is None:
                continue
            out.append((message.id, call, result, status))
        return out
    return []
