"""The two ways back into a stored step: answers to a paused step, and a dead replica's step.

Answers. A later run of the session, in any process, reads the awaited rows with the repaired history
(``Store.open_run``); :func:`plan_answers` checks its answers against them before anything is written, and
decides what runs (approved calls, sub-agents to continue), what is settled without running (denials,
client outputs, and with a new prompt every unanswered call) and what still waits. :func:`answer` carries
the plan out on the step, reopened (:meth:`StepRun.reopen`): its new results go in another tool message of
the step; ``load_history`` merges a step's tool messages in call order, so the model is sent exactly what an
uninterrupted step would have given it. The server checks answers with the same plan before it starts a
run (:meth:`Agent.check_answers`); the run plans again under its lock, since another replica may have
answered in between.

Takeover. A run continuing a dead replica's run (``Takeover``, from the server's lease watcher) ends the
calls its predecessor left running, for every watcher, as the model sees them (interrupted), or runs them
again when their tool is ``idempotent`` (:meth:`StepRun.rerun`); a predecessor that had already answered
leaves the run done (:func:`take_over`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from toolwire._text import truncate_output
from toolwire.agent._limit_pause import answer_limit, is_limit
from toolwire.agent._pause import Waiting, settled, unanswered
from toolwire.agent._recorder import TAKEOVER_RUN
from toolwire.agent._scope import RunScope
from toolwire.agent._step import StepRun
from toolwire.agent.config import Takeover
from toolwire.errors import ResumeError, TurnLostError
from toolwire.events import AgentEvent, Resolution, ToolCallStatus
from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.store._locks import run_of
from toolwire.store.base import Store
from toolwire.store.history import INTERRUPTED_OUTPUT, denied_output
from toolwire.store.records import AWAITING, CallKey, ToolCallRecord
from toolwire.tools.executor import jsonable_output
from toolwire.tools.outcome import ToolOutcome
from toolwire.tools.pending import (
    Approval,
    DecisionKey,
    Denied,
    PendingCall,
    Resume,
    ShownCall,
    ToolFailed,
    asked_of,
    checked_answer,
    input_answer,
    sub_agent_of,
)
from toolwire.tools.registry import ToolRegistry


async def answer(
    scope: RunScope,
    awaited: Sequence[ToolCallRecord],
    *,
    approvals: Mapping[DecisionKey, Approval],
    tool_outputs: Mapping[DecisionKey, Any],
    closing: bool,
) -> AsyncGenerator[AgentEvent, None]:
    """Apply a run's answers to the step a paused run left waiting (``closing``, a new prompt follows:
    close what nobody answered), store their results, and pause again if calls still wait."""
    plan = plan_answers(
        awaited,
        scope.history,
        session_id=scope.session_id,
        approvals=approvals,
        tool_outputs=tool_outputs,
        closing=closing,
        max_output_chars=scope.config.max_tool_output_chars,
    )
    if plan is None:
        return
    if isinstance(plan, LimitPlan):
        async with aclosing(answer_limit(scope, plan.row, plan.decision, closing=closing)) as held:
            async for event in held:
                yield event
        return
    step = StepRun.reopen(
        scope, plan.step, plan.message.id, plan.calls, results_at=plan.results_at, waiting=plan.waiting
    )
    for outcome in plan.settled:
        for event in await step.settle(outcome, plan.resolutions[outcome.call.tool_call_id]):
            yield event
    for call in plan.run:
        yield step.resolved(call, *plan.resolutions[call.tool_call_id])
    # With a new prompt, a sub-agent that paused again is closed too.
    approved = {c.tool_call_id for c in plan.run if plan.resolutions[c.tool_call_id][0] == "approved"}
    concluding = step.conclude(plan.run, resumes=plan.resumes, closing=closing, approved=approved)
    async with aclosing(concluding) as events:
        async for event in events:
            yield event


async def take_over(
    scope: RunScope, takeover: Takeover, interrupted: Sequence[CallKey]
) -> AsyncGenerator[AgentEvent, None]:
    """Continue a dead replica's run: the calls it left running end as interrupted, or run again when
    their tool is ``idempotent``; a run that had already answered is done (or, when the answer is the
    previous turn's and the dead turn's prompt was never stored, ends with :class:`TurnLostError`)."""
    recorder, history = scope.recorder, scope.history
    if takeover.unpublished:
        # The dead run counted completions no client received: announce its last step's finished calls.
        rows = await recorder.store.tool_calls(scope.session_id)
        statuses = {(r.message_id, r.tool_call_id): r.status for r in rows if r.status != "pending"}
        for message_id, call, result, status in finished_calls(history, statuses, interrupted):
            yield recorder.ended_call(
                call, result.output, status, is_error=result.is_error, message_id=message_id
            )
    calls = interrupted_calls(history, interrupted)
    again = last_step_calls(history, calls, scope.config.registry)
    for call in calls:
        if call not in again.calls:
            yield recorder.ended_call(call, INTERRUPTED_OUTPUT, "interrupted")
    if again.calls:
        number = await again.step_of(recorder.store, scope.session_id)
        step = StepRun.rerun(scope, number, again.message_id, again.calls, results_at=again.results_at)
        async with aclosing(step.conclude(again.calls)) as events:
            async for event in events:
                yield event
    final = final_answer(history) if scope.config.output is None else None
    if final is not None and await prompt_lost(recorder.store, scope.session_id, takeover.dead_run_owner):
        raise TurnLostError(
            "the run of this turn stopped before its prompt was stored; send the message again"
        )
    if final is not None:
        scope.ledger.answered(final, final)


@dataclass(frozen=True, slots=True)
class LimitPlan:
    """A run held at a usage limit (:mod:`toolwire.agent._limit_pause`) and the person's decision on it
    (``None``: none given, a new prompt closes it)."""

    row: ToolCallRecord
    decision: Approval | None


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
) -> Plan | LimitPlan | None:
    """Check the answers against the awaited calls and plan the step's resolution; nothing is written.
    A run held at a usage limit gets a :class:`LimitPlan` (its row waits alone: the run stopped before a
    request, with no call of its own waiting).

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
    if is_limit(awaited[-1]):
        given = answers.get(awaited[-1].tool_call_id, {})
        return LimitPlan(awaited[-1], next(iter(given.values()))[1] if given else None)
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
        if row.awaiting == "input" and given:
            ((_, value),) = given.values()
            question, answered = asked_of(row.output)
            plan.run.append(call)
            plan.resumes[call.tool_call_id] = Resume(
                session_id=session_id, answers=(*answered, (question, input_answer(value)))
            )
            plan.resolutions[call.tool_call_id] = ("resumed", None)
        elif row.awaiting == "subagent" and given:
            sub_session, _ = sub_agent_of(row.output)
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
            if (pending.kind == "approval") != (kind == "approval"):
                bad.append(pending.tool_call_id)
                problems.append(
                    f"{name} ({pending.tool_name}) is a client tool: give its output, not an approval"
                    if pending.kind == "output"
                    else f"{name} ({pending.tool_name}) asks a question: give its answer in tool_outputs, "
                    "not an approval"
                    if pending.kind == "input"
                    else f"{name} ({pending.tool_name}) awaits approval: approve or deny it, not an output"
                )
                continue
            if pending.kind == "input":
                try:
                    checked_answer(pending.question, value)
                except ValueError as exc:
                    bad.append(pending.tool_call_id)
                    problems.append(f"the answer to {name} ({pending.tool_name}): {exc}")
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
            settled(call, "denied", full, is_error=True, shown=truncate_output(full, max_output_chars))
        )
        plan.resolutions[call_id] = ("denied", _cut(reason, max_output_chars) or None)
    elif isinstance(value, ToolFailed):
        shown = truncate_output(value.message, max_output_chars)
        plan.settled.append(settled(call, "error", value.message, is_error=True, shown=shown))
        plan.resolutions[call_id] = ("failed", _cut(value.message, max_output_chars))
    else:
        full, is_error = jsonable_output(value)
        shown = truncate_output(full, max_output_chars)
        plan.settled.append(
            settled(call, "error" if is_error else "ok", full, is_error=is_error, shown=shown)
        )
        plan.resolutions[call_id] = ("output", None)


def _cut(text: str, max_chars: int) -> str:
    """A person's or client's text as the ``tool-call-resolved`` event carries it: cut like tool output."""
    cut = truncate_output(text, max_chars)
    return cut if isinstance(cut, str) else text


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
