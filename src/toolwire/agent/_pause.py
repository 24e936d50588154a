"""Human in the loop, pausing: which calls of a step wait for a person, and what a waiting call is.

The public side (:class:`~toolwire.tools.pending.PendingCall`, ``Denied``, ``ToolFailed``, ``Resume``) is
:mod:`toolwire.tools.pending`; answering a paused step is :mod:`toolwire.agent._resume`.

Before a step is stored, :class:`Gate` sorts its calls: a call of a tool marked ``requires_approval`` (or
whose predicate says so for these arguments) is stored ``awaiting_approval``, a call of an ``external`` tool
``awaiting_output``; neither runs. A call whose sub-agent paused ends ``awaiting_subagent`` (its row keeps
the sub-agent's session and pending calls); a call whose tool asked a question (an MCP server's
elicitation) ends ``awaiting_input`` (its row keeps the question and the answers it had). The step (:class:`~toolwire.agent._step.StepRun`) is finished
with a tool message holding the results of the calls that did finish, every waiting call (a
:class:`Waiting`) is announced (``tool-call-awaiting``) and the run ends ``paused``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.errors import ToolArgumentsError
from toolwire.events import AwaitingKind, ToolCallStatus
from toolwire.messages import ToolCallPart, ToolResultPart
from toolwire.store.history import UNANSWERED_OUTPUT
from toolwire.store.records import ToolCallRecord
from toolwire.tools.context import RunContext
from toolwire.tools.function import Tool
from toolwire.tools.outcome import ToolOutcome
from toolwire.tools.pending import (
    AnsweredQuestion,
    PendingCall,
    Question,
    asked_of,
    held_reason,
    sub_agent_of,
)
from toolwire.tools.registry import ToolRegistry

logger = logging.getLogger("toolwire.agent")


class Gate:
    """Decides, before a step is stored, which of its calls wait for a person instead of running."""

    def __init__(self, registry: ToolRegistry, allowed: frozenset[str]) -> None:
        self._registry = registry
        self.names = frozenset(t.name for t in registry if t.gated and t.name in allowed)
        """The tools of this run whose calls may wait (empty: the gate costs nothing)."""

    async def statuses(
        self, calls: Sequence[ToolCallPart], args_errors: Mapping[str, str], ctx: RunContext[Any]
    ) -> dict[str, ToolCallStatus]:
        """``{tool_call_id: awaiting_approval | awaiting_output}`` for the calls that wait. A call that
        cannot run (bad arguments) is not held: it fails at once, nobody is asked about it."""
        held: dict[str, ToolCallStatus] = {}
        for call in calls:
            if call.tool_name not in self.names or call.tool_call_id in args_errors:
                continue
            tool = self._registry.get(call.tool_name)
            if tool is None:
                continue
            try:
                args = tool.validate_args(call.args)
            except ToolArgumentsError:
                continue
            if tool.external:
                held[call.tool_call_id] = "awaiting_output"
            elif await _asks(tool, ctx.for_call(call), args):
                held[call.tool_call_id] = "awaiting_approval"
        return held


async def _asks(tool: Tool, ctx: RunContext[Any], args: dict[str, Any]) -> bool:
    policy = tool.requires_approval
    if isinstance(policy, bool):
        return policy
    try:
        answer = policy(ctx, args)
        if inspect.isawaitable(answer):
            answer = await answer
        return bool(answer)
    except Exception:  # fail closed: a broken policy asks rather than runs
        logger.exception("requires_approval of tool %s failed; asking for approval", tool.name)
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiting:
    """A call the run leaves waiting when it pauses."""

    call: ToolCallPart
    kind: AwaitingKind
    session_id: str
    message_id: str
    sub_session_id: str | None = None
    """For ``kind="subagent"``: the paused sub-agent's session."""
    sub_pending: tuple[PendingCall, ...] = ()
    """For ``kind="subagent"``: what the sub-agent waits for (its own sub-agents' calls included)."""
    question: Question | None = None
    """For ``kind="input"``: what the tool asks."""
    answered: tuple[AnsweredQuestion, ...] = ()
    """For ``kind="input"``: what the call asked before, and the answers it got."""
    reason: str | None = None
    """Why it waits for approval when its tool does not ask (a pausing ``tool_calls`` limit)."""

    @property
    def pending(self) -> list[PendingCall]:
        """What a person answers for this call: the call itself, or its sub-agent's pending calls."""
        if self.kind == "subagent":
            return list(self.sub_pending)
        return [
            PendingCall(
                tool_call_id=self.call.tool_call_id,
                tool_name=self.call.tool_name,
                args=self.call.args,
                kind="approval" if self.kind == "approval" else self.kind,
                session_id=self.session_id,
                message_id=self.message_id,
                question=self.question,
                reason=self.reason,
            )
        ]

    def announced(self, registry: ToolRegistry) -> dict[str, Any]:
        """The fields of its ``tool-call-awaiting`` event (a client tool's with its parameters' schema)."""
        tool = registry.get(self.call.tool_name) if self.kind == "output" else None
        return {
            "parameters": tool.parameters if tool is not None else None,
            "tool_call_id": self.call.tool_call_id,
            "tool_name": self.call.tool_name,
            "args": self.call.args,
            "kind": self.kind,
            "message_id": self.message_id,
            "sub_session_id": self.sub_session_id,
            "question": self.question.to_dict() if self.question is not None else None,
            "reason": self.reason,
        }

    @classmethod
    def held(
        cls,
        call: ToolCallPart,
        status: ToolCallStatus,
        session_id: str,
        message_id: str,
        reason: str | None = None,
    ) -> Waiting:
        kind: AwaitingKind = "output" if status == "awaiting_output" else "approval"
        return cls(call=call, kind=kind, session_id=session_id, message_id=message_id, reason=reason)

    @classmethod
    def from_output(
        cls, call: ToolCallPart, awaiting: AwaitingKind, output: Any, session_id: str, message_id: str
    ) -> Waiting:
        """A waiting call from what its row holds (or the executor's outcome, before it is stored): a paused
        sub-agent's session and pending calls, a tool's question and earlier answers, or why a call that
        would have run waits for approval."""
        if awaiting == "subagent":
            sub_session, pending = sub_agent_of(output)
            return cls(
                call=call,
                kind="subagent",
                session_id=session_id,
                message_id=message_id,
                sub_session_id=sub_session,
                sub_pending=pending,
            )
        if awaiting == "input":
            question, answered = asked_of(output)
            return cls(
                call=call,
                kind="input",
                session_id=session_id,
                message_id=message_id,
                question=question,
                answered=answered,
            )
        reason = held_reason(output) if awaiting == "approval" else None
        return cls(call=call, kind=awaiting, session_id=session_id, message_id=message_id, reason=reason)

    @classmethod
    def stored(cls, row: ToolCallRecord, call: ToolCallPart, session_id: str) -> Waiting:
        """A call a paused run left waiting, read back from its row."""
        assert row.awaiting is not None
        return cls.from_output(call, row.awaiting, row.output, session_id, row.message_id)


def pending_of(waiting: Sequence[Waiting]) -> list[PendingCall]:
    """``RunResult.pending``: every call a person must answer, sub-agents' included, in call order."""
    return [p for w in waiting for p in w.pending]


def unanswered(call: ToolCallPart) -> ToolOutcome:
    """A waiting call closed because the conversation moved on."""
    return settled(call, "unanswered", UNANSWERED_OUTPUT, is_error=True)


def settled(
    call: ToolCallPart, status: ToolCallStatus, output: Any, *, is_error: bool, shown: Any = None
) -> ToolOutcome:
    now = time.time()
    return ToolOutcome(
        call=call,
        result=ToolResultPart(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            output=output if shown is None else shown,
            is_error=is_error,
        ),
        status=status,
        started_at=now,
        finished_at=now,
        full_output=output,
    )
