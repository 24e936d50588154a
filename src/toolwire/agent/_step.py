"""``StepRun``: one stored step and its calls, recorded, run, maybe paused, and finished.

A step is the model's answer with the calls it made. It enters in one of three ways, one constructor each:

- :meth:`StepRun.begin`: the model just answered. Its message and calls are stored before any call runs:
  pending, or held for a person (:class:`~toolwire.agent._pause.Gate`).
- :meth:`StepRun.reopen`: a later run brings answers to a paused step (:func:`~toolwire.agent._resume.answer`).
- :meth:`StepRun.rerun`: a run continuing a dead replica's run runs its idempotent calls again
  (:func:`~toolwire.agent._resume.take_over`).

Then, the same for all three: calls settled without running (:meth:`settle`), and :meth:`conclude`: the
calls run (the one place a step's tools run), the step's end stored (the one place: its tool message,
usage, the calls left waiting) and its results merged into the history the model reads.

When a finished call is written (the deferred-completion rule, here and nowhere else). Its outcome is
durable before anyone hears of it. Calls that finish while others of the step still run are written at
once (those finishing together in one group commit). Those that finish last are written by the step's end,
in the same transaction as its tool message (one commit fewer per step), and announced after it. A run
stopped mid-step records its unfinished calls as cancelled (:meth:`close`): the history stays valid.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolwire.agent._limit_pause import hold_calls
from toolwire.agent._pause import Waiting, pending_of, unanswered
from toolwire.agent._recorder import StepRecorder
from toolwire.agent._scope import RunScope, Unnumbered
from toolwire.errors import ToolBlockedError, UsageLimitExceeded
from toolwire.events import (
    AgentEvent,
    MessagePersisted,
    Resolution,
    StepFinish,
    ToolCallActive,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolCallResolved,
    ToolCallStatus,
)
from toolwire.messages import Message, ToolCallPart, ToolResultPart, Usage
from toolwire.models._builder import MessageBuilder
from toolwire.models.base import ModelRequest
from toolwire.store.history import CANCELLED_OUTPUT
from toolwire.store.records import AWAITING, CallCompletion
from toolwire.tools._batch import CallFinished, CallHeartbeat, CallStarted
from toolwire.tools._inbox import Inbox
from toolwire.tools.outcome import ToolOutcome
from toolwire.tools.pending import Resume

logger = logging.getLogger("toolwire.agent")


class StepRun:
    """One step whose calls are under way (see the module docstring)."""

    __slots__ = (
        "_results_at",
        "_scope",
        "_unwritten",
        "_waiting",
        "answer",
        "calls",
        "held",
        "message_id",
        "outcomes",
        "step",
    )

    def __init__(
        self,
        scope: RunScope,
        step: int,
        message_id: str,
        calls: Sequence[ToolCallPart],
        *,
        held: Mapping[str, ToolCallStatus] | None = None,
        results_at: int | None = None,
        waiting: Sequence[Waiting] = (),
    ) -> None:
        self._scope = scope
        self.step = step
        self.message_id = message_id
        """The assistant message that made the calls."""
        self.calls = list(calls)
        self.held = dict(held or {})
        """Calls that wait for a person instead of running, with their ``awaiting_*`` status."""
        self.outcomes: dict[str, ToolOutcome] = {}
        self._unwritten: list[ToolOutcome] = []
        """Outcomes of the calls that finished last: written by :meth:`finish`, announced after it."""
        self._results_at = results_at
        """Where the step's results already are in the history (a paused or taken-over step); ``None``
        for a new step, whose tool message is appended."""
        self._waiting = list(waiting)
        """Calls known to wait already (a paused step's unanswered calls)."""

        self.answer: tuple[Message, MessageBuilder] | None = None
        """A new step's assistant message and the model's answer it was built from (usage, finish reason)."""
        if self.calls:
            scope.open_step = self

    @property
    def recorder(self) -> StepRecorder:
        """The run's recorder (events of the step are numbered by it)."""
        return self._scope.recorder

    # -- the three ways in ---------------------------------------------------------------------------

    @classmethod
    async def begin(
        cls, scope: RunScope, step: int, builder: MessageBuilder, message_id: str, request: ModelRequest
    ) -> StepRun:
        """The model answered ``request`` (in ``builder``): message and calls stored before any call runs."""
        finish = builder.finish
        assert finish is not None  # the model step raises otherwise
        assistant = Message(
            role="assistant",
            parts=builder.parts(),  # clean already: built only from parts the model step cleaned
            id=message_id,
            session_id=scope.session_id,
            provider=builder.provider,
            model=builder.model,
        )
        scope.ledger.answered_step(step, request, assistant, builder)
        calls = [c for c in assistant.tool_calls if not c.provider_executed]
        # The calls that wait for a person instead of running (no work unless a tool of the run may ask).
        gate = scope.gate
        held = await gate.statuses(calls, builder.args_errors, scope.context(step)) if gate.names else {}
        # Stored even when empty: its usage was billed (the step row keeps it for pricing); history
        # repair leaves an empty answer out of what is sent.
        await scope.recorder.begin_step(step, assistant, calls, finish.usage, finish.reason, held)
        if assistant.parts:
            scope.history.append(assistant)
            scope.ledger.messages.append(assistant)
        new = cls(scope, step, message_id, calls, held=held)
        new.answer = (assistant, builder)
        return new

    @classmethod
    def reopen(
        cls,
        scope: RunScope,
        step: int,
        message_id: str,
        calls: Sequence[ToolCallPart],
        *,
        results_at: int,
        waiting: Sequence[Waiting],
    ) -> StepRun:
        """A paused step gets its answers: its awaited ``calls`` are open again (``waiting``: those still
        unanswered), so a run stopped now records the unfinished ones as cancelled, as for any step."""
        return cls(scope, step, message_id, calls, results_at=results_at, waiting=waiting)

    @classmethod
    def rerun(
        cls, scope: RunScope, step: int, message_id: str, calls: Sequence[ToolCallPart], *, results_at: int
    ) -> StepRun:
        """A dead replica's step whose idempotent ``calls`` run again (marked running when they start)."""
        return cls(scope, step, message_id, calls, results_at=results_at)

    # -- calls settled, calls run ------------------------------------------------------------------

    async def _within_limit(
        self, to_run: Sequence[ToolCallPart], approved: Collection[str]
    ) -> Sequence[ToolCallPart]:
        """The calls to run under the run's ``tool_calls`` limits: all, or none when they would pass one
        (``UsageLimitExceeded``; ``approved``: calls a person approved, which a pausing limit lets run). A
        pausing limit holds them for approval instead: each waits, its row saying why."""
        budget = self._scope.budget
        assert budget is not None
        try:
            budget.before_calls(len(to_run), sum(1 for c in to_run if c.tool_call_id in approved))
        except UsageLimitExceeded as exc:
            if not exc.pause:
                raise
            self._waiting.extend(await hold_calls(self._scope, to_run, self.message_id, exc))
            return []
        return to_run

    async def _mark_running(self, calls: Sequence[ToolCallPart]) -> None:
        """Answered calls about to run are ``pending`` again: a crash now makes them interrupted (their
        outcome unknown), never awaiting a second approval."""
        for call in calls:
            await self._scope.recorder.complete_call(
                CallCompletion(
                    tool_call_id=call.tool_call_id,
                    message_id=self.message_id,
                    status="pending",
                    output=None,
                    is_error=False,
                    started_at=None,
                    finished_at=None,
                )
            )

    async def settle(
        self, outcome: ToolOutcome, resolution: tuple[Resolution, str | None] | None = None
    ) -> list[AgentEvent]:
        """A call that ends without running (a structured output, a person's or client's answer, a call
        nobody answered), written now. Returns its events: how it was resolved, if it was, and its end."""
        await self._write(outcome)
        events: list[AgentEvent] = []
        if resolution is not None:
            events.append(self.resolved(outcome.call, *resolution))
        events.append(self._complete_event(outcome, executed=False))
        return events

    def resolved(self, call: ToolCallPart, resolution: Resolution, reason: str | None) -> AgentEvent:
        """The ``tool-call-resolved`` event of an answered call."""
        event: AgentEvent = self._scope.recorder.event(
            ToolCallResolved,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            resolution=resolution,
            reason=reason,
        )
        return event

    async def conclude(
        self,
        to_run: Sequence[ToolCallPart],
        *,
        args_errors: Mapping[str, str] | None = None,
        resumes: Mapping[str, Resume] | None = None,
        closing: bool = False,
        approved: Collection[str] = (),
    ) -> AsyncGenerator[AgentEvent, None]:
        """The rest of the step, the same for its three ways in: ``to_run`` run (``resumes``: answers for
        sub-agents that continue), with ``closing`` (a new prompt follows) every call still waiting closed
        as unanswered, the step's end stored, then a call's error raised when the agent says so.

        The calls come out as events: started, heartbeats, what the tools emit, completed (a call whose
        sub-agent paused is not complete: it is announced as waiting when the step ends). One generator,
        not one per part: every event of every tool step passes here."""
        if to_run and self._scope.budget is not None:  # a tool_calls limit: none runs that would pass it
            to_run = await self._within_limit(to_run, approved)
        if to_run:
            scope = self._scope
            if self._results_at is not None:  # a stored step's calls run (again): pending first
                await self._mark_running(to_run)
            recorder = scope.recorder
            recorder.check_lease()  # right before tools run: a run that lost its session runs none
            registry = scope.config.registry
            sequential = any((t := registry.get(c.tool_name)) is not None and t.sequential for c in to_run)
            inbox = Inbox()
            scope.sink.inbox = inbox
            batch = scope.executor.start_batch(
                list(to_run),
                scope.context(self.step, resumes),
                inbox=inbox,
                on_finished=self._finished,
                args_errors=dict(args_errors or {}),
                sequential=sequential,
                heartbeat_interval=scope.config.heartbeat_interval,
            )
            try:
                while items := await batch.next():
                    for item in items:
                        if (event := self._published(item)) is not None:
                            yield event
            finally:
                scope.sink.inbox = None
                await batch.close()
        if closing:
            for waiting in self.waiting():
                for event in await self.settle(unanswered(waiting.call), ("unanswered", None)):
                    yield event
            self._waiting = []
        for event in await self._finish():
            yield event
        self._check_failures()

    def _published(self, item: Any) -> AgentEvent | None:
        """What a running batch's item becomes in the stream, numbered as published (seq follows the order
        clients receive events in); ``None`` for a completion the step's end announces."""
        recorder = self._scope.recorder
        match item:
            case CallStarted():
                call = item.call
                return recorder.event(
                    ToolCallActive,
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    args=call.args,
                    started_at=item.started_at,
                )
            case CallHeartbeat():
                return recorder.event(
                    ToolCallHeartbeat,
                    tool_call_id=item.call.tool_call_id,
                    tool_name=item.call.tool_name,
                    elapsed=item.elapsed,
                )
            case CallFinished():
                outcome = item.outcome
                if outcome.status in AWAITING or outcome in self._unwritten:  # announced by the end
                    return None
                return self._complete_event(outcome)
            case Unnumbered():
                return recorder.event(item.cls, **item.fields)
            case StepFinish():  # a sub-agent's (or deeper) model request: it rolls up here
                self._scope.ledger.sub_agent_steps.append((item.provider, item.model, item.usage))
                return item
            case _:
                event: AgentEvent = item  # a sub-agent's event: numbered in its own session
                return event

    async def _finished(self, outcomes: list[ToolOutcome], last: bool) -> None:
        """Calls that finished together, durable before anyone hears of them: written now in one group
        commit or, when no call of the step is left running (``last``), handed to the step's end, whose
        transaction writes them. A call whose sub-agent paused is always written now (the run pauses)."""
        if last:
            for outcome in outcomes:
                if outcome.status in AWAITING:
                    await self._write(outcome)
                else:
                    self.outcomes[outcome.call.tool_call_id] = outcome
                    self._unwritten.append(outcome)
        elif len(outcomes) == 1:
            await self._write(outcomes[0])
        else:
            await asyncio.gather(*(self._write(o) for o in outcomes))  # they share a commit

    async def _write(self, outcome: ToolOutcome) -> None:
        self.outcomes[outcome.call.tool_call_id] = outcome
        await self._scope.recorder.complete_call(self._completion(outcome))

    def _completion(self, outcome: ToolOutcome) -> CallCompletion:
        return outcome.completion(self.message_id)

    # -- the step's end ---------------------------------------------------------------------------

    def waiting(self) -> list[Waiting]:
        """The calls left waiting, in call order: those held or unanswered, and those whose sub-agent
        paused (taken out of :attr:`outcomes`: they have no result yet)."""
        known = {w.call.tool_call_id: w for w in self._waiting}
        waiting: list[Waiting] = []
        for call in self.calls:
            call_id = call.tool_call_id
            outcome = self.outcomes.get(call_id)
            if outcome is None and call_id in known:
                waiting.append(known[call_id])
            elif outcome is None and call_id in self.held:
                waiting.append(
                    Waiting.held(call, self.held[call_id], self._scope.session_id, self.message_id)
                )
            elif outcome is not None and outcome.status in ("awaiting_subagent", "awaiting_input"):
                # Its tool paused inside (a sub-agent, a question): no result yet, its output says why.
                del self.outcomes[call_id]
                kind = AWAITING[outcome.status]
                waiting.append(
                    Waiting.from_output(
                        outcome.call, kind, outcome.full_output, self._scope.session_id, self.message_id
                    )
                )
        self._waiting, self.held = waiting, {}
        return waiting

    def to_run(self) -> list[ToolCallPart]:
        """The calls left to run here: not settled, not held for a person."""
        done, held = self.outcomes, self.held
        return [c for c in self.calls if c.tool_call_id not in done and c.tool_call_id not in held]

    async def _finish(self) -> list[AgentEvent]:
        """Store the step's end: the results of its finished calls (all of them, unless calls wait for a
        person: the run then pauses, and results given later go in another tool message of the step,
        which ``load_history`` merges), the rows of the calls that finished last, its usage. Returns the
        events to publish after the write (numbered before it, so the store records exactly their seq)."""
        scope = self._scope
        recorder = scope.recorder
        waiting = self.waiting()
        results = tuple(
            self.outcomes[c.tool_call_id].result for c in self.calls if c.tool_call_id in self.outcomes
        )
        tool_message = Message(role="tool", parts=results, session_id=scope.session_id) if results else None
        announce = [self._complete_event(o) for o in self._unwritten]
        if tool_message is not None:
            announce.append(recorder.event(MessagePersisted, message_id=tool_message.id, role="tool"))
        announce.extend(
            recorder.event(ToolCallAwaiting, **w.announced(self._scope.config.registry)) for w in waiting
        )
        usage = Usage()
        if self.answer is not None:  # a model step: its usage, and its end announced last
            assistant, builder = self.answer
            assert builder.finish is not None
            usage = builder.finish.usage
            announce.append(
                recorder.event(
                    StepFinish,
                    step=self.step,
                    finish_reason=builder.finish.reason,
                    usage=usage,
                    message_id=assistant.id,
                    provider=builder.provider,
                    model=builder.model,
                    response_id=builder.response_id,
                )
            )
        completed = [self._completion(o) for o in self._unwritten]
        await recorder.finish_step(self.step, tool_message, usage, announce, completed)
        self._unwritten = []
        if scope.open_step is self:
            scope.open_step = None
        if tool_message is not None:
            scope.ledger.messages.append(tool_message)
            self._merge(tool_message)
        if waiting:
            scope.ledger.paused(pending_of(waiting))
        return announce

    def _merge(self, tool_message: Message) -> None:
        """The step's results as the model gets them from now on (``load_history`` merges them likewise)."""
        history = self._scope.history
        at = self._results_at
        if at is None:
            history.append(tool_message)
            return
        merged = history[at]
        history[at] = replace(
            merged,
            parts=tuple(
                self.outcomes[r.tool_call_id].result if r.tool_call_id in self.outcomes else r
                for r in merged.tool_results
            ),
        )

    def _check_failures(self) -> None:
        """Once the step's end is stored: ``raise_on_failure`` raises a call's error; ``stop_on_block``
        ends the run ``blocked`` on a blocked call (:meth:`~toolwire.agent.result.RunLedger.blocked`)."""
        config = self._scope.config
        for call in self.calls:
            outcome = self.outcomes.get(call.tool_call_id)  # a waiting call has none
            error = outcome.error if outcome is not None else None
            if isinstance(error, ToolBlockedError) and config.stop_on_block:
                self._scope.ledger.blocked()
            elif error is not None and not isinstance(error, ToolBlockedError) and config.raise_on_failure:
                raise error

    async def close(self) -> tuple[Message | None, list[AgentEvent]]:
        """The run stopped while the step's calls were under way: the unfinished ones are recorded as
        cancelled (history stays valid). Returns the step's tool message (``None`` when the store failed:
        ``load_history`` then repairs whatever is left pending) and the completion events to publish with
        the run's end (the cancelled calls, and those that finished but were never announced)."""
        scope = self._scope
        recorder = scope.recorder
        scope.open_step = None
        if recorder.detached:  # handed over: its calls stay pending for the next owner
            return None, []
        unwritten = {o.call.tool_call_id for o in self._unwritten}
        ended: list[AgentEvent] = []
        results: list[ToolResultPart] = []
        cancelled: list[CallCompletion] = []
        now = time.time()
        for call in self.calls:
            outcome = self.outcomes.get(call.tool_call_id)
            if outcome is not None and outcome.status not in AWAITING:
                results.append(outcome.result)
                if call.tool_call_id in unwritten:  # finished, never announced: it is, with the end
                    ended.append(
                        recorder.ended_call(
                            call,
                            outcome.result.output,
                            outcome.status,
                            is_error=outcome.result.is_error,
                            duration=outcome.duration,
                        )
                    )
                continue
            # Announced with the run's end, so no client keeps showing the call as running.
            ended.append(recorder.ended_call(call, CANCELLED_OUTPUT, "cancelled"))
            results.append(
                ToolResultPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    output=CANCELLED_OUTPUT,
                    is_error=True,
                )
            )
            cancelled.append(
                CallCompletion(
                    tool_call_id=call.tool_call_id,
                    message_id=self.message_id,
                    status="cancelled",
                    output=CANCELLED_OUTPUT,
                    is_error=True,
                    started_at=None,
                    finished_at=now,
                )
            )
        try:
            for completion in cancelled:
                await recorder.complete_call(completion, durable=False)
            message = Message(role="tool", parts=tuple(results), session_id=scope.session_id)
            completed = [self._completion(o) for o in self._unwritten]
            await recorder.finish_step(self.step, message, Usage(), (), completed, durable=False)
        except Exception:  # best effort: load_history repairs whatever is left pending
            logger.exception("could not record cancelled tool calls for session %s", scope.session_id)
            return None, ended
        self._unwritten = []
        return message, ended

    # -- events -------------------------------------------------------------------------------------

    def _complete_event(self, outcome: ToolOutcome, *, executed: bool = True) -> AgentEvent:
        """The tool-call-complete event; executed calls are also recorded on the run's ledger."""
        scope = self._scope
        if executed:
            scope.ledger.executed(outcome)
        event: AgentEvent = scope.recorder.event(
            ToolCallComplete,
            tool_call_id=outcome.call.tool_call_id,
            tool_name=outcome.call.tool_name,
            args=outcome.call.args,
            output=outcome.result.output,
            is_error=outcome.result.is_error,
            status=outcome.status,
            duration=outcome.duration,
        )
        return event
