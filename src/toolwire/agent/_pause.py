"""Human in the loop, the loop's side: which calls of a step wait for a person, and applying the answers.

The public side (:class:`~toolwire.agent.pending.PendingCall`, ``Denied``, ``ToolFailed``, ``Resume``) is
:mod:`toolwire.agent.pending`; the run's sequence stays in :mod:`toolwire.agent.loop`, which calls in here.

Pausing. Before a step is stored, :class:`Gate` sorts its calls: a call of a tool marked
``requires_approval`` (or whose predicate says so for these arguments) is stored ``awaiting_approval``, a
call of an ``external`` tool ``awaiting_output``; neither runs. A call whose sub-agent paused ends
``awaiting_subagent`` (its row keeps the sub-agent's session and pending calls). The step is finished
with a tool message holding the results of the calls that did finish, every waiting call is announced
(``tool-call-awaiting``) and the run ends ``paused``.

Resuming. A later run of the session, in any process, reads the awaited rows with the repaired history
(``Store.open_history``); :func:`plan_answers` checks its answers against them before anything is written,
and decides what runs (approved calls, sub-agents to continue), what is settled without running (denials,
client outputs, and with a new prompt every unanswered call) and what still waits. Their results go in
another tool message of the step; ``load_history`` merges a step's tool messages in call order, so the
model is sent exactly what an uninterrupted step would have given it.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire._text import truncate_output
from toolwire.agent.history import UNANSWERED_OUTPUT, denied_output
from toolwire.agent.pending import (
    Approval,
    DecisionKey,
    Denied,
    PendingCall,
    Resume,
    ShownCall,
    ToolFailed,
)
from toolwire.errors import ResumeError, ToolArgumentsError
from toolwire.events import AwaitingKind, Resolution, ToolCallStatus
from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.store.records import ToolCallRecord
from toolwire.tools.context import RunContext
from toolwire.tools.executor import ToolOutcome, jsonable_output
from toolwire.tools.function import Tool
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
                kind="output" if self.kind == "output" else "approval",
                session_id=self.session_id,
                message_id=self.message_id,
            )
        ]

    @classmethod
    def held(cls, call: ToolCallPart, status: ToolCallStatus, session_id: str, message_id: str) -> Waiting:
        kind: AwaitingKind = "output" if status == "awaiting_output" else "approval"
        return cls(call=call, kind=kind, session_id=session_id, message_id=message_id)

    @classmethod
    def subagent(cls, outcome: ToolOutcome, session_id: str, message_id: str) -> Waiting:
        """A call whose sub-agent paused (the executor's ``awaiting_subagent`` outcome)."""
        sub_session, pending = _sub_agent(outcome.full_output)
        return cls(
            call=outcome.call,
            kind="subagent",
            session_id=session_id,
            message_id=message_id,
            sub_session_id=sub_session,
            sub_pending=pending,
        )

    @classmethod
    def stored(cls, row: ToolCallRecord, call: ToolCallPart, session_id: str) -> Waiting:
        """A call a paused run left waiting, read back from its row."""
        if row.awaiting == "subagent":
            sub_session, pending = _sub_agent(row.output)
            return cls(
                call=call,
                kind="subagent",
                session_id=session_id,
                message_id=row.message_id,
                sub_session_id=sub_session,
                sub_pending=pending,
            )
        return cls(
            call=call,
            kind="output" if row.awaiting == "output" else "approval",
            session_id=session_id,
            message_id=row.message_id,
        )


def _sub_agent(output: Any) -> tuple[str, tuple[PendingCall, ...]]:
    """The ``{"session_id", "pending"}`` an ``awaiting_subagent`` row holds."""
    data = output if isinstance(output, Mapping) else {}
    raw = data.get("pending")
    pending = (
        tuple(PendingCall.from_dict(p) for p in raw if isinstance(p, Mapping))
        if isinstance(raw, list)
        else ()
    )
    return str(data.get("session_id", "")), pending


def pending_of(waiting: Sequence[Waiting]) -> list[PendingCall]:
    """``RunResult.pending``: every call a person must answer, sub-agents' included, in call order."""
    return [p for w in waiting for p in w.pending]


def pending_from_rows(rows: Sequence[ToolCallRecord], session_id: str) -> list[PendingCall]:
    """What a session's stored rows wait for (``Agent.pending``), without reading its messages."""
    waiting = [
        Waiting.stored(
            r, ToolCallPart(tool_call_id=r.tool_call_id, tool_name=r.tool_name, args=r.args), session_id
        )
        for r in rows
        if r.awaiting is not None
    ]
    return pending_of(waiting)


# -- resuming ---------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Plan:
    """What a run does with a paused step's awaited calls, given its answers."""

    step: int
    message: Message
    """The paused step's assistant message."""
    results_at: int
    """Where the step's (repaired) results are in the history."""
    calls: list[ToolCallPart]
    """Its calls awaiting an answer, in call order."""
    run: list[ToolCallPart] = field(default_factory=list)
    """Approved calls, and calls whose sub-agent continues with answers."""
    resumes: dict[str, Resume] = field(default_factory=dict)
    """For each sub-agent call in ``run``: the answers it continues with."""
    settled: list[ToolOutcome] = field(default_factory=list)
    """Calls answered without running: denied, given their output, or unanswered (a new prompt)."""
    resolutions: dict[str, tuple[Resolution, str | None]] = field(default_factory=dict)
    """How each answered call was resolved, with the reason given."""
    waiting: list[Waiting] = field(default_factory=list)
    """Calls nobody answered (no new prompt): the run pauses again."""


def plan_answers(
    awaited: Sequence[ToolCallRecord],
    history: Sequence[Message],
    *,
    session_id: str,
    approvals: Mapping[DecisionKey, Approval],
    tool_outputs: Mapping[DecisionKey, Any],
    closing: bool,
    max_output_chars: int,
) -> Plan | None:
    """Check the answers against the awaited calls and plan the step's resolution; nothing is written.

    ``closing``: a new prompt follows, so every call left unanswered is closed (``unanswered``). Raises
    :class:`ResumeError` for an answer to a call that is not awaited (or awaits the other kind of answer,
    or whose id is ambiguous), and for a run with neither answers nor a prompt. ``None``: nothing awaited.
    """
    if not approvals and not tool_outputs and not closing:
        raise ResumeError(
            "nothing to run: give a prompt, or answers for the awaited calls"
            if awaited
            else "a prompt is needed: this session has no tool call awaiting an answer"
        )
    if awaited:  # one paused step per session: a run never leaves one without closing it
        awaited = [r for r in awaited if r.message_id == awaited[-1].message_id]
    answers = _match_answers(awaited, session_id, approvals, tool_outputs)
    if not awaited:
        return None
    message_id = awaited[0].message_id
    at = next((i for i, m in enumerate(history) if m.role == "assistant" and m.id == message_id), None)
    if at is None or at + 1 >= len(history):
        raise ResumeError(f"the paused step (message {message_id}) is missing from the stored history")
    message = history[at]
    rows = {r.tool_call_id: r for r in awaited}
    calls = [c for c in message.tool_calls if not c.provider_executed and c.tool_call_id in rows]
    plan = Plan(step=awaited[0].step, message=message, results_at=at + 1, calls=calls)
    for call in calls:
        row = rows[call.tool_call_id]
        given = answers.get(call.tool_call_id, {})
        if row.awaiting == "subagent" and given:
            sub_session, _ = _sub_agent(row.output)
            plan.run.append(call)
            plan.resumes[call.tool_call_id] = Resume(
                session_id=sub_session,
                approvals={k: v for k, (kind, v) in given.items() if kind == "approval"},
                tool_outputs={k: v for k, (kind, v) in given.items() if kind == "output"},
            )
            plan.resolutions[call.tool_call_id] = ("resumed", None)
        elif given:
            ((kind, value),) = given.values()
            _answer(plan, call, kind, value, max_output_chars)
        elif closing:
            plan.settled.append(unanswered(call))
            plan.resolutions[call.tool_call_id] = ("unanswered", None)
        else:
            plan.waiting.append(Waiting.stored(row, call, session_id))
    return plan


def _match_answers(
    awaited: Sequence[ToolCallRecord],
    session_id: str,
    approvals: Mapping[DecisionKey, Approval],
    tool_outputs: Mapping[DecisionKey, Any],
) -> dict[str, dict[tuple[str, str], tuple[str, Any]]]:
    """Each answer matched to its pending call, grouped by the row that holds it (the call itself, or the
    call running its sub-agent): ``{row tool_call_id: {(session_id, tool_call_id): (kind, value)}}``."""
    index: list[tuple[PendingCall, ToolCallRecord]] = []
    for row in awaited:
        call = ToolCallPart(tool_call_id=row.tool_call_id, tool_name=row.tool_name, args=row.args)
        index.extend((p, row) for p in Waiting.stored(row, call, session_id).pending)
    grouped: dict[str, dict[tuple[str, str], tuple[str, Any]]] = {}
    problems: list[str] = []
    bad: list[str] = []
    for kind, given in (("approval", approvals), ("output", tool_outputs)):
        for key, value in given.items():
            found = [(p, row) for p, row in index if _names(key, p)]
            call_id, session = _parts(key)
            name = call_id if session is None else f"{call_id} (session {session})"
            if len(found) != 1:
                bad.append(call_id)
                problems.append(
                    f"{name} is not awaiting an answer"
                    if not found
                    else f"{name} is ambiguous: answer it by (session_id, tool_call_id)"
                )
                continue
            ((pending, row),) = found
            if isinstance(key, ShownCall) and key.message_id != pending.message_id:
                # The id was reused by another call (the conversation was edited since it was shown).
                bad.append(call_id)
                problems.append(
                    f"{name} was answered as the call of message {key.message_id}, but the call awaiting "
                    f"an answer under that id is another one (message {pending.message_id}): reload it"
                )
                continue
            if pending.kind != kind:
                bad.append(pending.tool_call_id)
                problems.append(
                    f"{name} ({pending.tool_name}) is a client tool: give its output, not an approval"
                    if pending.kind == "output"
                    else f"{name} ({pending.tool_name}) awaits approval: approve or deny it, not an output"
                )
                continue
            if kind == "approval" and not isinstance(value, bool | Denied):
                bad.append(pending.tool_call_id)
                problems.append(
                    f"the approval of {name} must be True, False or Denied(reason), not {value!r}"
                )
                continue
            grouped.setdefault(row.tool_call_id, {})[pending.key] = (kind, value)
    if problems:
        raise ResumeError("cannot apply the answers: " + "; ".join(problems), tool_call_ids=bad)
    return grouped


def _parts(key: DecisionKey) -> tuple[str, str | None]:
    """``(tool_call_id, session_id or None)`` of an answer's key."""
    if isinstance(key, ShownCall):
        return key.tool_call_id, key.session_id
    if isinstance(key, tuple):
        return key[1], key[0]
    return key, None


def _names(key: DecisionKey, pending: PendingCall) -> bool:
    call_id, session = _parts(key)
    return pending.tool_call_id == call_id and (session is None or pending.session_id == session)


def _answer(plan: Plan, call: ToolCallPart, kind: str, value: Any, max_output_chars: int) -> None:
    """Settle one answered call. Text a person or a client wrote (a denial reason, a client tool's failure)
    is cut for the model and the events like any tool output, and kept whole in the row only: it is
    re-sent with every later request, so an uncut one would cost on every turn from then on."""
    call_id = call.tool_call_id
    if kind == "approval":
        if value is True:
            plan.run.append(call)
            plan.resolutions[call_id] = ("approved", None)
            return
        reason = value.reason if isinstance(value, Denied) else ""
        full = denied_output(reason)
        plan.settled.append(
            _settled(call, "denied", full, is_error=True, shown=truncate_output(full, max_output_chars))
        )
        plan.resolutions[call_id] = ("denied", _cut(reason, max_output_chars) or None)
    elif isinstance(value, ToolFailed):
        shown = truncate_output(value.message, max_output_chars)
        plan.settled.append(_settled(call, "error", value.message, is_error=True, shown=shown))
        plan.resolutions[call_id] = ("failed", _cut(value.message, max_output_chars))
    else:
        full, is_error = jsonable_output(value)
        shown = truncate_output(full, max_output_chars)
        plan.settled.append(
            _settled(call, "error" if is_error else "ok", full, is_error=is_error, shown=shown)
        )
        plan.resolutions[call_id] = ("output", None)


def _cut(text: str, max_chars: int) -> str:
    """A person's or client's text as the ``tool-call-resolved`` event carries it: cut like tool output."""
    cut = truncate_output(text, max_chars)
    return cut if isinstance(cut, str) else text


def unanswered(call: ToolCallPart) -> ToolOutcome:
    """A waiting call closed because the conversation moved on."""
    return _settled(call, "unanswered", UNANSWERED_OUTPUT, is_error=True)


def _settled(
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
