"""The one agent loop. ``Agent.run()`` and ``Agent.stream()`` both consume :class:`AgentRun`'s event stream.

A run, in order: open the session (owner checked, lock taken, history repaired), answer the calls a
paused run left waiting (``_pause``: approvals, client outputs, or closing them before a new prompt), store
the user turn, then step until done or until calls wait for a person (the run pauses). A step streams one model call as events (``_model_step``), hands the assistant
message and its pending calls to the store (``begin_step``), runs the calls while streaming their events
(``ToolExecutor.start_batch``; each result recorded as it finishes), stores the step's results
(``finish_step``) and decides whether the run is done (``OutputPolicy`` when there is an output type).
Every store write goes through the run's :class:`~toolwire.agent._recorder.StepRecorder`: persistence
happens here and nowhere else, whatever the provider or driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any, Generic, Self, cast

from pydantic_core import to_jsonable_python

from toolwire._text import clean_text
from toolwire.agent._model_step import ModelStep
from toolwire.agent._pause import Gate, Waiting, pending_of, plan_answers, unanswered
from toolwire.agent._recorder import StepRecorder
from toolwire.agent._takeover import (
    Takeover,
    final_answer,
    finished_calls,
    interrupted_calls,
    last_step_calls,
    prompt_lost,
)
from toolwire.agent.config import RunConfig
from toolwire.agent.history import INTERRUPTED_OUTPUT
from toolwire.agent.output import NOTHING, OutputPolicy
from toolwire.agent.pending import Approval, DecisionKey, Resume
from toolwire.agent.result import OutputT, RunResult, ToolExecution
from toolwire.errors import LeaseLostError, MaxStepsExceeded, ToolBlockedError, TurnLostError
from toolwire.events import (
    AgentEvent,
    CustomDataEvent,
    ErrorEvent,
    InteractionEnd,
    InteractionStart,
    InteractionStatus,
    MediaEvent,
    MessagePersisted,
    OutputAvailable,
    Resolution,
    StepFinish,
    StepStart,
    SystemMessageEvent,
    ToolCallActive,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolCallResolved,
    ToolCallStatus,
    ToolProgress,
    UserTurnStart,
)
from toolwire.messages import Message, ToolCallPart, Usage, new_id
from toolwire.models._builder import MessageBuilder
from toolwire.models.base import ModelRequest, ToolDefinition
from toolwire.store.base import Store
from toolwire.store.records import AWAITING, OpenedHistory, SessionInfo, ToolCallRecord
from toolwire.tools._batch import CallFinished, CallHeartbeat, CallStarted
from toolwire.tools._inbox import Inbox
from toolwire.tools.context import RunContext
from toolwire.tools.executor import ToolExecutor, ToolOutcome

"""The type of a run's output: the agent's ``output_type``, or ``str`` (the final text) without one."""

_EVENT_KINDS: dict[str, type[Any]] = {
    "tool-progress": ToolProgress,
    "system-message": SystemMessageEvent,
    "media": MediaEvent,
    "custom-data": CustomDataEvent,
}


@dataclass(slots=True)
class _Unnumbered:
    """An event a running tool emitted; it gets its seq when the loop publishes it."""

    cls: type[Any]
    fields: dict[str, Any]


class AgentRun(Generic[OutputT]):
    """One interaction in progress: ``async for event in run``; ``result`` is set once it ended.

    It is also an async context manager: leaving ``async with run:`` closes the run, so a consumer that
    stops early (``break``, an exception) stops the model and cancels running tools at once.
    """

    def __init__(
        self,
        config: RunConfig,
        prompt: str | None,
        *,
        session_id: str | None = None,
        parent: RunContext[Any] | None = None,
        deps: Any = None,
        enabled_tools: Sequence[str] | None = None,
        exclude_tools: Sequence[str] = (),
        user_id: str | None = None,
        approvals: Mapping[DecisionKey, Approval] | None = None,
        tool_outputs: Mapping[DecisionKey, Any] | None = None,
        takeover: Takeover | None = None,
        top_level: bool = False,
    ) -> None:
        self.config = config
        self._takeover = takeover
        self._top_level = top_level
        parent_run = parent.sink if parent is not None and isinstance(parent.sink, AgentRun) else None
        self._parent_run = parent_run
        if parent_run is not None:
            user_id = parent_run.owner  # a sub-session always belongs to its parent's owner
        elif user_id is None:
            user_id = config.user_id
        self.user_id: str | None = user_id
        self.store: Store | None = None
        """The store this run persists to (set when the run starts)."""
        self.prompt = prompt or ""
        """The user's new turn (empty when the run only answers awaited calls)."""
        self._new_turn = prompt is not None
        self.approvals = dict(approvals or {})
        self.tool_outputs = dict(tool_outputs or {})
        self.session_id = session_id or new_id("sess_")
        self.parent_session_id = parent.session_id if parent is not None else None
        self.parent_tool_call_id = parent.tool_call_id if parent is not None else None
        self.user_session_id = parent.user_session_id if parent is not None else self.session_id
        self.interaction_id = new_id("int_")
        self.deps = deps if deps is not None or parent is None else parent.deps
        self.result: RunResult[OutputT] | None = None
        self.unpublished_end: list[AgentEvent] = []
        """The end events of a run that was cancelled or closed (it could not yield them), numbered."""
        """Set when the run ended, however it ended (completed, failed, closed early); ``None`` before."""
        self._enabled_tools = enabled_tools
        self._exclude_tools = exclude_tools
        self._tools: list[ToolDefinition] = []
        self._inbox: Inbox | None = None
        self._gen: AsyncGenerator[AgentEvent, None] | None = None
        self._recorder: StepRecorder | None = None
        self._output = (
            OutputPolicy(config.output, config.output_retries) if config.output is not None else None
        )
        self._history: list[Message] = []
        self._new_messages: list[Message] = []
        self._executions: list[ToolExecution] = []
        self._step_usage: list[Usage] = []
        self._sub_steps: list[tuple[str | None, str | None, Usage]] = []
        self._step_models: list[tuple[str | None, str | None]] = []
        self._gate = Gate(config.registry, frozenset())  # set when the run starts (its tools known)
        self._waiting: list[Waiting] = []
        self._done = False
        self._status: InteractionStatus = "completed"
        self._output_value: Any = ""
        self._text_output = ""

    # -- iteration -------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._gen is None:
            self._gen = self.config.events.wrap(self._events())
        return self._gen

    async def aclose(self) -> None:
        """Stop the run now (running tools are cancelled and recorded as cancelled)."""
        if self._gen is not None:
            await self._gen.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the sink running tools speak through ------------------------------------------------------

    def tool_event(self, kind: str, tool_call_id: str | None, fields: dict[str, Any]) -> None:
        """EventSink: an event a running tool emits through its RunContext (numbered when published)."""
        if self._inbox is not None:
            self._inbox.put_nowait(_Unnumbered(_EVENT_KINDS[kind], {"tool_call_id": tool_call_id, **fields}))

    def forward(self, event: AgentEvent) -> None:
        """EventSink: a sub-agent's events, forwarded unchanged (they keep their own session envelope)."""
        if self._inbox is not None:
            self._inbox.put_nowait(event)

    def detach(self) -> str | None:
        """Let another process continue this run (server drain): stopping it now records nothing (its
        unfinished calls stay pending, the session stays leased). Returns the lease owner to expire
        once this process stopped publishing, or ``None`` when the run holds no session yet."""
        if self._recorder is None:
            return None
        self._recorder.detached = True
        return self._recorder.lock_owner

    async def written_unpublished(self) -> list[AgentEvent]:
        """After a detached run was stopped: the events its last step's write counted as published (it
        was stopped between that write and their publication), once the write committed."""
        if self._recorder is None:
            return []
        # The recorder holds them as the envelopes they are: every one is an AgentEvent the loop made.
        return cast("list[AgentEvent]", await self._recorder.written_unpublished())

    @property
    def incarnation(self) -> int | None:
        """The incarnation of the session this run holds (its stored creation time in µs: see
        :attr:`~toolwire.store.records.SessionInfo.incarnation`); ``None`` before the run opened it."""
        return self._recorder.incarnation if self._recorder is not None else None

    @property
    def lease(self) -> tuple[str, int] | None:
        """This run's fencing token for its events: its session and the lease epoch it claimed (``None``
        before it holds the session, or when the store counts no epochs)."""
        recorder = self._recorder
        if recorder is None or recorder.epoch == 0:
            return None
        return recorder.session_id, recorder.epoch

    @property
    def owner(self) -> str | None:
        """The user this run acts for (sub-agent runs inherit it)."""
        return self.user_id

    # -- the run -----------------------------------------------------------------------------------

    async def _prepare(self) -> tuple[StepRecorder, ModelStep, ToolExecutor, OpenedHistory]:
        """Connect the tool sources, open the store, check the session and read its history."""
        config = self.config
        await config.registry.prepare()  # tool sources such as MCP servers connect first
        self._tools = config.registry.definitions(enabled=self._enabled_tools, exclude=self._exclude_tools)
        if self._output is not None:  # the output mode may depend on whether the run has tools (Gemini 2.x)
            self._output.spec = self._output.spec.for_tools(bool(self._tools))
        executor = config.executor(frozenset(t.name for t in self._tools))
        parent_store = self._parent_run.store if self._parent_run is not None else None
        # A sub-agent without a store of its own records beside its caller.
        store = (
            parent_store
            if parent_store is not None and not config.store_configured
            else await config.open_store()
        )
        self.store = store
        session = SessionInfo(
            id=self.session_id,
            parent_session_id=self.parent_session_id,
            user_session_id=self.user_session_id,
            user_id=self.user_id,
            agent_name=config.name,
        )
        recorder = StepRecorder(
            store,
            session=session,
            interaction_id=self.interaction_id,
            max_output_chars=config.max_tool_output_chars,
            takeover=self._takeover is not None,
            top_level=self._top_level,
        )
        self._recorder = recorder
        model_step = ModelStep(config, recorder, self._output)
        self._gate = Gate(config.registry, frozenset(t.name for t in self._tools))
        opened = await recorder.open()
        self._history = opened.messages
        return recorder, model_step, executor, opened

    async def _events(self) -> AsyncGenerator[AgentEvent, None]:
        config = self.config
        recorder, model_step, executor, opened = await self._prepare()
        error: BaseException | None = None
        try:
            async with aclosing(self._opening(opened, executor)) as opening:
                async for event in opening:
                    yield event
            step = 0
            while not self._done:
                step += 1
                self._check_max_steps(step)
                # One step, inline here (an async generator per step, and a hop per event, fewer): the
                # model's events, the assistant message stored, the tools' events, the step's end stored,
                # and whether the run is done. aclosing: closing this run must close the inner generators
                # at once (cancelling tools).
                await recorder.renew_lock()
                yield recorder.event(
                    StepStart, step=step, provider=config.model.provider, model=config.model.model_name
                )
                builder = MessageBuilder(provider=config.model.provider, model=config.model.model_name)
                message_id = new_id("msg_")
                model_events = model_step.stream(self._request(step), builder, message_id, step)
                async with aclosing(model_events):
                    async for event in model_events:
                        yield event
                assistant, calls, held = await self._begin_step(step, builder, message_id)
                if assistant.parts:
                    yield recorder.event(MessagePersisted, message_id=assistant.id, role="assistant")
                outcomes: dict[str, ToolOutcome] = {}
                accepted, output_errors = await self._settle_output(calls, outcomes)
                for outcome in outcomes.values():
                    yield self._complete_event(outcome, executed=False)
                to_run = [c for c in calls if c.tool_call_id not in outcomes and c.tool_call_id not in held]
                if to_run:
                    tool_events = self._run_tools(to_run, builder.args_errors, step, executor, outcomes)
                    async with aclosing(tool_events):
                        async for event in tool_events:
                            yield event
                announce, waiting = await self._end_step(step, builder, assistant, calls, held, outcomes)
                for event in announce:
                    yield event
                self._raise_for_outcomes(calls, outcomes)
                if not waiting:  # else the run pauses (``_end_step`` ended it): calls wait for a person
                    for event in await self._decide(assistant, calls, accepted, output_errors, builder):
                        yield event
        except BaseException as exc:
            error = self._ended_by(exc)
            if error is not exc:
                raise error from exc
            raise
        finally:
            for event in await self._close(error):
                yield event

    def _ended_by(self, exc: BaseException) -> BaseException:
        """How the run ends after ``exc``: its status set, and the exception it ends with (``exc`` itself,
        or the :class:`LeaseLostError` of a run that lost its session)."""
        lost = self._lease_lost(exc)
        if lost is not None:
            self._status = "error"
            return lost
        if isinstance(exc, asyncio.CancelledError | GeneratorExit):
            self._status = "cancelled"
        elif self._status != "max-steps":
            self._status = "error"
        return exc

    def _lease_lost(self, exc: BaseException) -> LeaseLostError | None:
        """The run's end when its lease was lost (another run continues it): the :class:`LeaseLostError` it
        ends with (the recorder's own cancel taken back), or ``None`` for any other end."""
        recorder = self._recorder
        assert recorder is not None
        if isinstance(exc, LeaseLostError):
            recorder.detached = True
            return exc
        if not recorder.lease_lost or isinstance(exc, GeneratorExit):
            return None
        if isinstance(exc, asyncio.CancelledError) and not recorder.absorb_stop():
            return None  # cancelled by someone else too (a shutdown): a cancellation it stays
        recorder.detached = True
        return LeaseLostError(
            f"session {self.session_id}: this run's lease was lost; another run continues it"
        )

    def _check_max_steps(self, step: int) -> None:
        if step > self.config.max_steps:
            self._status = "max-steps"
            raise MaxStepsExceeded(
                f"the model still asked for tools after max_steps={self.config.max_steps} steps"
            )

    async def _opening(
        self, opened: OpenedHistory, executor: ToolExecutor
    ) -> AsyncGenerator[AgentEvent, None]:
        """The run's start: announced; a dead replica's run taken over, or a paused one answered; the
        user's turn stored."""
        config, recorder = self.config, self._recorder
        assert recorder is not None
        yield recorder.event(
            InteractionStart,
            prompt=self.prompt,
            agent_name=config.name,
            parent_tool_call_id=self.parent_tool_call_id,
            model=config.model.model_name,
            provider_name=config.model.otel_provider_name,
            output_type="json" if self._output and self._output.spec.answers_in_text else None,
        )
        if self._takeover is not None:
            async with aclosing(self._take_over(self._takeover, opened.interrupted, executor)) as taken:
                async for event in taken:
                    yield event
        elif opened.awaited or self.approvals or self.tool_outputs or not self._new_turn:
            async with aclosing(self._answer(opened.awaited, executor)) as answer_events:
                async for event in answer_events:
                    yield event
        if self._new_turn:
            user = Message.user(clean_text(self.prompt), session_id=self.session_id)
            await self._append(user)
            yield recorder.event(UserTurnStart, message=user)

    async def _close(self, error: BaseException | None) -> list[AgentEvent]:
        """The run ended (``error``: how, if it failed): its open step closed, its result set, the
        session released; returns the end events to publish (none when the run can no longer yield)."""
        recorder = self._recorder
        assert recorder is not None
        ending: list[AgentEvent] = []
        if recorder.lease_lost or isinstance(error, LeaseLostError):
            # Another run owns the turn now: nothing of this one is written or announced any more.
            recorder.lease_lost = recorder.detached = True
            self.result = self._make_result()
            await recorder.release()
            return []
        try:
            cancelled = await recorder.close_open_step()
            if cancelled is not None:
                self._new_messages.append(cancelled)
            self.result = self._make_result()
            ending = [
                *recorder.cancelled_calls,
                *self._ending(None if self._status == "cancelled" else error),
            ]
            if isinstance(error, GeneratorExit | asyncio.CancelledError):
                # A closed generator or a cancelled task cannot yield any more: whoever stopped the
                # run may announce its end (the server does, so every watcher sees it end).
                self.unpublished_end, ending = ending, []
        finally:
            # Released BEFORE the end is announced: a client that saw the end can start the next turn.
            await recorder.release()
        return ending

    async def _settle_output(
        self, calls: list[ToolCallPart], outcomes: dict[str, ToolOutcome]
    ) -> tuple[Any, list[str]]:
        """Output in tool mode: the step's ``final_result`` calls end here, stored and put in
        ``outcomes`` (their completion events follow). Returns the accepted output and the errors."""
        output = self._output
        if not calls or output is None or output.spec.mode != "tool":
            return NOTHING, []
        assert self._recorder is not None
        accepted, output_errors, settled = output.settle(calls)
        for outcome in settled.values():
            await self._recorder.complete(outcome)
            outcomes[outcome.call.tool_call_id] = outcome
        return accepted, output_errors

    async def _begin_step(
        self, step: int, builder: MessageBuilder, message_id: str
    ) -> tuple[Message, list[ToolCallPart], dict[str, ToolCallStatus]]:
        """The model answered: store its message and its calls (pending, or held for a person) before any
        runs. Returns the message, the calls to run here and those held."""
        recorder = self._recorder
        assert recorder is not None
        finish = builder.finish
        assert finish is not None  # the model step raises otherwise
        assistant = Message(
            role="assistant",
            parts=builder.parts(),  # clean already: built only from parts the model step cleaned
            id=message_id,
            session_id=self.session_id,
            provider=builder.provider,
            model=builder.model,
        )
        self._step_usage.append(finish.usage)
        self._step_models.append((builder.provider, builder.model))
        calls = [c for c in assistant.tool_calls if not c.provider_executed]
        # The calls that wait for a person instead of running (no work unless a tool of the run may ask).
        held = (
            await self._gate.statuses(calls, builder.args_errors, self._context(step))
            if self._gate.names
            else {}
        )
        # Stored even when empty: its usage was billed (the step row keeps it for pricing); history
        # repair leaves an empty answer out of what is sent.
        await recorder.begin_step(step, assistant, calls, finish.usage, finish.reason, held)
        if assistant.parts:
            self._history.append(assistant)
            self._new_messages.append(assistant)
        return assistant, calls, held

    async def _end_step(
        self,
        step: int,
        builder: MessageBuilder,
        assistant: Message,
        calls: list[ToolCallPart],
        held: dict[str, ToolCallStatus],
        outcomes: dict[str, ToolOutcome],
    ) -> tuple[list[AgentEvent], list[Waiting]]:
        """Store the step's results and usage; returns the events to publish after the write and the
        calls left waiting for a person (the run then pauses)."""
        recorder = self._recorder
        assert recorder is not None
        finish = builder.finish
        assert finish is not None
        waiting = self._waiting_calls(calls, held, outcomes, assistant.id)

        def step_finish() -> AgentEvent:
            return recorder.event(
                StepFinish,
                step=step,
                finish_reason=finish.reason,
                usage=finish.usage,
                message_id=assistant.id,
                provider=builder.provider,
                model=builder.model,
                response_id=builder.response_id,
            )

        announce, tool_message = await self._store_results(
            step, calls, outcomes, waiting, finish.usage, step_finish
        )
        if tool_message is not None:
            self._history.append(tool_message)
        return announce, waiting

    async def _store_results(
        self,
        step: int,
        calls: list[ToolCallPart],
        outcomes: dict[str, ToolOutcome],
        waiting: list[Waiting],
        usage: Usage,
        finish: Callable[[], AgentEvent] | None,
    ) -> tuple[list[AgentEvent], Message | None]:
        """Store the end of a step: the results of its finished calls (all of them, unless calls wait for a
        person: the run then pauses, and the results given later are stored in another tool message of
        the step, which ``load_history`` merges). Returns the events to publish after the write (numbered
        before it, so the store records exactly their seq) and the tool message written, if any."""
        recorder = self._recorder
        assert recorder is not None
        results = tuple(outcomes[c.tool_call_id].result for c in calls if c.tool_call_id in outcomes)
        tool_message = Message(role="tool", parts=results, session_id=self.session_id) if results else None
        announce = self._deferred_completions()
        if tool_message is not None:
            announce.append(recorder.event(MessagePersisted, message_id=tool_message.id, role="tool"))
        if waiting:
            announce.extend(self._awaiting_event(w) for w in waiting)
        if finish is not None:
            announce.append(finish())
        await recorder.finish_step(step, tool_message, usage, announce)
        if tool_message is not None:
            self._new_messages.append(tool_message)
        if waiting:
            self._waiting, self._done, self._status = waiting, True, "paused"
        return announce, tool_message

    def _deferred_completions(self) -> list[AgentEvent]:
        """The completion events of the calls the step's end writes (those finished last): published only
        after that write, like every completion."""
        assert self._recorder is not None
        return [self._complete_event(o) for o in self._recorder.unwritten]

    # -- human in the loop (the logic is in ``_pause``) ----------------------------------------------

    def _waiting_calls(
        self,
        calls: list[ToolCallPart],
        held: dict[str, ToolCallStatus],
        outcomes: dict[str, ToolOutcome],
        message_id: str,
    ) -> list[Waiting]:
        """The calls left waiting after a step's tools ran, in call order: those held, and those whose
        sub-agent paused (taken out of ``outcomes``: they have no result yet)."""
        waiting: list[Waiting] = []
        for call in calls:
            outcome = outcomes.get(call.tool_call_id)
            if outcome is None and call.tool_call_id in held:
                waiting.append(Waiting.held(call, held[call.tool_call_id], self.session_id, message_id))
            elif outcome is not None and outcome.status == "awaiting_subagent":
                waiting.append(Waiting.subagent(outcomes.pop(call.tool_call_id), self.session_id, message_id))
        return waiting

    async def _answer(
        self, awaited: list[ToolCallRecord], executor: ToolExecutor
    ) -> AsyncGenerator[AgentEvent, None]:
        """Apply this run's answers to the step a paused run left waiting (with a new prompt: close what
        nobody answered first), store their results, and pause again if calls still wait."""
        recorder = self._recorder
        assert recorder is not None
        plan = plan_answers(
            awaited,
            self._history,
            session_id=self.session_id,
            approvals=self.approvals,
            tool_outputs=self.tool_outputs,
            closing=self._new_turn,
            max_output_chars=self.config.max_tool_output_chars,
        )
        if plan is None:
            return
        message_id = plan.message.id
        recorder.reopen_step(plan.step, message_id, plan.calls, {})
        outcomes: dict[str, ToolOutcome] = {}
        for outcome in plan.settled:
            await recorder.complete(outcome)
            outcomes[outcome.call.tool_call_id] = outcome
            yield self._resolved_event(outcome.call, *plan.resolutions[outcome.call.tool_call_id])
            yield self._complete_event(outcome, executed=False)
        if plan.run:
            for call in plan.run:
                yield self._resolved_event(call, *plan.resolutions[call.tool_call_id])
            await recorder.mark_running(plan.run)
            tool_events = self._run_tools(plan.run, {}, plan.step, executor, outcomes, resumes=plan.resumes)
            async with aclosing(tool_events) as events:
                async for event in events:
                    yield event
        waiting = plan.waiting + self._waiting_calls(plan.calls, {}, outcomes, message_id)
        if waiting and self._new_turn:  # moving on: a sub-agent that paused again is closed too
            for call in [w.call for w in waiting]:
                outcome = unanswered(call)
                await recorder.complete(outcome)
                outcomes[call.tool_call_id] = outcome
                yield self._resolved_event(call, "unanswered", None)
                yield self._complete_event(outcome, executed=False)
            waiting = []
        announce, _ = await self._store_results(plan.step, plan.calls, outcomes, waiting, Usage(), None)
        # The step's results as the model gets them from now on (``load_history`` merges them likewise).
        merged = self._history[plan.results_at]
        self._history[plan.results_at] = replace(
            merged,
            parts=tuple(
                outcomes[r.tool_call_id].result if r.tool_call_id in outcomes else r
                for r in merged.tool_results
            ),
        )
        for event in announce:
            yield event
        self._raise_for_outcomes(plan.calls, outcomes)

    def _awaiting_event(self, waiting: Waiting) -> AgentEvent:
        assert self._recorder is not None
        event: AgentEvent = self._recorder.event(
            ToolCallAwaiting,
            tool_call_id=waiting.call.tool_call_id,
            tool_name=waiting.call.tool_name,
            args=waiting.call.args,
            kind=waiting.kind,
            message_id=waiting.message_id,
            sub_session_id=waiting.sub_session_id,
        )
        return event

    def _resolved_event(self, call: ToolCallPart, resolution: Resolution, reason: str | None) -> AgentEvent:
        assert self._recorder is not None
        event: AgentEvent = self._recorder.event(
            ToolCallResolved,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            resolution=resolution,
            reason=reason,
        )
        return event

    async def _run_tools(
        self,
        calls: list[ToolCallPart],
        args_errors: dict[str, str],
        step: int,
        executor: ToolExecutor,
        outcomes: dict[str, ToolOutcome],
        *,
        resumes: Mapping[str, Resume] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The step's calls as events: started, heartbeats, what the tools emit, completed (a call whose
        sub-agent paused is not complete: it is announced as waiting when the step ends)."""
        recorder = self._recorder
        assert recorder is not None
        recorder.check_lease()  # right before tools run: a run that lost its session runs none
        ctx = self._context(step, resumes)
        registry = self.config.registry
        sequential = any((t := registry.get(c.tool_name)) is not None and t.sequential for c in calls)
        inbox = Inbox()
        self._inbox = inbox

        async def record(finished: list[ToolOutcome], last: bool) -> None:
            await recorder.finished(finished, last=last)
            for outcome in finished:
                outcomes[outcome.call.tool_call_id] = outcome

        batch = executor.start_batch(
            calls,
            ctx,
            inbox=inbox,
            on_finished=record,
            args_errors=args_errors,
            sequential=sequential,
            heartbeat_interval=self.config.heartbeat_interval,
        )
        try:
            while items := await batch.next():
                for item in items:
                    # Numbered as published: seq follows the order clients receive events in.
                    match item:
                        case CallStarted():
                            call = item.call
                            yield recorder.event(
                                ToolCallActive,
                                tool_call_id=call.tool_call_id,
                                tool_name=call.tool_name,
                                args=call.args,
                                started_at=item.started_at,
                            )
                        case CallHeartbeat():
                            yield recorder.event(
                                ToolCallHeartbeat,
                                tool_call_id=item.call.tool_call_id,
                                tool_name=item.call.tool_name,
                                elapsed=item.elapsed,
                            )
                        case CallFinished():
                            outcome = item.outcome
                            if outcome.status not in AWAITING and all(
                                o is not outcome for o in recorder.unwritten
                            ):
                                yield self._complete_event(outcome)
                        case _Unnumbered():
                            yield recorder.event(item.cls, **item.fields)
                        case StepFinish():  # a sub-agent's (or deeper) model request: it rolls up here
                            self._sub_steps.append((item.provider, item.model, item.usage))
                            yield item
                        case _:
                            yield item  # a sub-agent's event: numbered in its own session
        finally:
            self._inbox = None
            await batch.close()

    async def _decide(
        self,
        assistant: Message,
        calls: list[ToolCallPart],
        accepted: Any,
        output_errors: list[str],
        builder: MessageBuilder,
    ) -> list[AgentEvent]:
        """Is the run done? Without an output type: when the model stopped calling tools. With one: when a
        valid object arrived; an invalid one is re-prompted at most ``output_retries`` times. Returns the
        events to publish (a list, not a generator: every step asks, and one seldom has any)."""
        output = self._output
        if output is None:
            if not calls:
                self._output_value = self._text_output = assistant.text
                self._done = True
            return []
        if accepted is NOTHING and not calls:
            accepted, output_errors = output.parse_text(assistant.text)
        if accepted is not NOTHING:
            self._output_value, self._text_output = accepted, assistant.text
            self._done = True
            assert self._recorder is not None
            return [self._recorder.event(OutputAvailable, output=to_jsonable_python(accepted, fallback=str))]
        if not output_errors:
            return []  # real tools ran; the model continues
        failure = output.rejected(
            assistant,
            output_errors,
            usage=sum(self._step_usage, Usage()),
            finish_reason=builder.finish.reason if builder.finish is not None else "",
        )
        if failure is not None:
            raise failure
        if not calls:  # the model answered in text: tell it what was wrong (stored like any turn)
            await self._append(output.retry_message(output_errors, self.session_id))
        return []

    # -- helpers -----------------------------------------------------------------------------------

    def _context(self, step: int, resumes: Mapping[str, Resume] | None = None) -> RunContext[Any]:
        """What the step's tools (and approval predicates) are handed."""
        return RunContext(
            deps=self.deps,
            session_id=self.session_id,
            user_session_id=self.user_session_id,
            interaction_id=self.interaction_id,
            parent_session_id=self.parent_session_id,
            step=step,
            messages=tuple(self._history),
            agent_name=self.config.name,
            sink=self,
            resumes=resumes or {},
        )

    def _request(self, step: int) -> ModelRequest:
        config, output = self.config, self._output
        tools: Sequence[ToolDefinition] = self._tools
        choice = config.tool_choice_for_step(step)
        spec = output.spec if output is not None else None
        if spec is not None and spec.mode == "tool":
            tools = (*self._tools, spec.tool_definition())
            if choice == "auto":
                choice = "required"  # every step ends in a tool call: a real tool or final_result
        return ModelRequest(
            messages=tuple(self._history),
            tools=tools,
            tool_choice=choice,
            instructions=spec.instructions(config.instructions) if spec is not None else config.instructions,
            settings=config.model_settings,
            output_schema=spec.output_schema if spec is not None else None,
            output_schema_name=spec.name if spec is not None else "output",
            json_answer=spec is not None and spec.mode == "prompted",
        )

    async def _append(self, message: Message) -> None:
        assert self._recorder is not None
        await self._recorder.append(message)
        self._history.append(message)
        self._new_messages.append(message)

    def _complete_event(self, outcome: ToolOutcome, *, executed: bool = True) -> AgentEvent:
        """The tool-call-complete event; executed calls are also recorded on the run result."""
        if executed:
            self._executions.append(
                ToolExecution(
                    call=outcome.call,
                    result=outcome.result,
                    status=outcome.status,
                    started_at=outcome.started_at,
                    finished_at=outcome.finished_at,
                    session_id=self.session_id,
                )
            )
        assert self._recorder is not None
        event: AgentEvent = self._recorder.event(
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

    async def _take_over(
        self, takeover: Takeover, interrupted: Sequence[tuple[str, str]], executor: ToolExecutor
    ) -> AsyncGenerator[AgentEvent, None]:
        """Continuing a dead replica's run: the calls it left running end, for every watcher, as the model
        sees them (interrupted), or run again when their tool is ``idempotent``; a run that had already
        answered is done."""
        recorder = self._recorder
        assert recorder is not None
        if takeover.unpublished:
            # The dead run counted completions no client received: announce its last step's finished calls.
            rows = await recorder.store.tool_calls(self.session_id)
            statuses = {(r.message_id, r.tool_call_id): r.status for r in rows if r.status != "pending"}
            for message_id, call, result, status in finished_calls(self._history, statuses, interrupted):
                yield recorder.ended_call(
                    call, result.output, status, is_error=result.is_error, message_id=message_id
                )
        calls = interrupted_calls(self._history, interrupted)
        again = last_step_calls(self._history, calls, self.config.registry)
        for call in calls:
            if call not in again.calls:
                yield self._interrupted_event(call)
        if again.calls:
            step = await again.step_of(recorder.store, self.session_id)
            recorder.reopen_step(step, again.message_id, again.calls, {})
            await recorder.mark_running(again.calls)
            outcomes: dict[str, ToolOutcome] = {}
            async with aclosing(self._run_tools(again.calls, {}, step, executor, outcomes)) as events:
                async for event in events:
                    yield event
            results = self._history[again.results_at]
            merged = replace(
                results,
                parts=tuple(
                    outcomes[r.tool_call_id].result if r.tool_call_id in outcomes else r
                    for r in results.tool_results
                ),
            )
            announce = self._deferred_completions()
            announce.append(recorder.event(MessagePersisted, message_id=merged.id, role="tool"))
            await recorder.finish_step(step, merged, Usage(), announce)
            self._history[again.results_at] = merged
            self._new_messages.append(merged)
            for event in announce:
                yield event
        final = final_answer(self._history) if self._output is None else None
        if final is not None and await prompt_lost(recorder.store, self.session_id, takeover.dead_run_owner):
            raise TurnLostError(
                "the run of this turn stopped before its prompt was stored; send the message again"
            )
        if final is not None:
            self._output_value = self._text_output = final
            self._done = True

    def _interrupted_event(self, call: ToolCallPart) -> AgentEvent:
        assert self._recorder is not None
        return self._recorder.ended_call(call, INTERRUPTED_OUTPUT, "interrupted")

    def _raise_for_outcomes(self, calls: list[ToolCallPart], outcomes: dict[str, ToolOutcome]) -> None:
        for call in calls:
            outcome = outcomes.get(call.tool_call_id)  # a waiting call has none
            if outcome is None or outcome.error is None:
                continue
            if isinstance(outcome.error, ToolBlockedError) and self.config.stop_on_block:
                raise outcome.error
            if self.config.raise_on_failure and not isinstance(outcome.error, ToolBlockedError):
                raise outcome.error

    def _ending(self, error: BaseException | None) -> list[AgentEvent]:
        """The events that close the run (numbered now, published after the session is released)."""
        recorder = self._recorder
        assert recorder is not None and self.result is not None
        ending: list[AgentEvent] = []
        if error is not None:
            ending.append(
                recorder.event(
                    ErrorEvent,
                    error_type=type(error).__name__,
                    message=str(error),
                    retryable=bool(getattr(error, "retryable", False)),
                )
            )
        ending.append(
            recorder.event(
                InteractionEnd,
                status=self._status,
                output=self._text_output,
                usage=self.result.usage,
                error=f"{type(error).__name__}: {error}" if error is not None else None,
            )
        )
        return ending

    def _make_result(self) -> RunResult[OutputT]:
        total = Usage()
        for usage in self._step_usage:
            total = total + usage
        return RunResult(
            output=self._output_value,
            text=self._text_output,
            session_id=self.session_id,
            interaction_id=self.interaction_id,
            status=self._status,
            messages=self._new_messages,
            pending=pending_of(self._waiting),
            tool_executions=self._executions,
            usage=total,
            step_usage=self._step_usage,
            step_models=self._step_models,
            sub_agent_steps=self._sub_steps,
            steps=len(self._step_usage),
        )
