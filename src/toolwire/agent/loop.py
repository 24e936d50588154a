"""The one agent loop. ``Agent.run()`` and ``Agent.stream()`` both consume :class:`AgentRun`'s event stream.

A run, in order: open the session (owner checked, lock taken, history repaired); continue a dead replica's
run, or answer the calls a paused run left waiting (:mod:`~toolwire.agent._resume`); store the user turn;
then step until done or until calls wait for a person (the run pauses); then close. A step streams one model
call as events (:mod:`~toolwire.agent._model_step`), and its calls are recorded, run and finished by a
:class:`~toolwire.agent._step.StepRun`; the run then decides whether it is done (``OutputPolicy`` when there
is an output type). Every store write goes through the run's :class:`~toolwire.agent._recorder.StepRecorder`:
persistence happens there and nowhere else, whatever the provider or driver. Only the run's sequence is here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from typing import Any, Generic, Self, cast

from pydantic_core import to_jsonable_python

from toolwire._text import clean_text
from toolwire.agent._compaction import Compactor
from toolwire.agent._limit_pause import hold
from toolwire.agent._model_step import ModelStep
from toolwire.agent._resume import answer, take_over
from toolwire.agent._scope import RunScope, RunSink
from toolwire.agent._step import StepRun
from toolwire.agent._stopped import StreamingStep
from toolwire.agent.config import RunConfig, RunRequest
from toolwire.agent.output import NOTHING, OutputPolicy
from toolwire.agent.result import OutputT, RunResult
from toolwire.errors import LeaseLostError, MaxStepsExceeded, UsageLimitExceeded
from toolwire.events import (
    AgentEvent,
    InteractionStart,
    MessagePersisted,
    OutputAvailable,
    StepStart,
    UserTurnStart,
)
from toolwire.messages import Message, Usage, new_id
from toolwire.models._builder import MessageBuilder
from toolwire.models.base import ModelRequest
from toolwire.store.base import Store
from toolwire.store.records import OpenedHistory, SessionInfo
from toolwire.tools.context import RunContext


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
        user_id: str | None = None,
        request: RunRequest | None = None,
    ) -> None:
        self.config = config
        self.prompt = prompt or ""
        """The user's new turn (empty when the run only answers awaited calls)."""
        self._request = replace(request or RunRequest(), new_turn=prompt is not None)
        self._parent = parent
        """The tool call that started this run (a sub-agent run), if one did."""
        if parent is not None and isinstance(parent.sink, RunSink):
            user_id = parent.sink.owner  # a sub-session always belongs to its caller's owner
        elif user_id is None:
            user_id = config.user_id
        session_id = session_id or new_id("sess_")
        self.session = SessionInfo(
            id=session_id,
            parent_session_id=parent.session_id if parent is not None else None,
            user_session_id=parent.user_session_id if parent is not None else session_id,
            user_id=user_id,
            agent_name=config.name,
        )
        self.session_id = session_id
        self.interaction_id = new_id("int_")
        self.deps = deps if deps is not None or parent is None else parent.deps
        self.store: Store | None = None
        """The store this run persists to (set when the run starts)."""
        self.result: RunResult[OutputT] | None = None
        """Set when the run ended, however it ended (completed, failed, closed early); ``None`` before."""
        self.unpublished_end: list[AgentEvent] = []
        """The end events of a run that was cancelled or closed (it could not yield them), numbered."""
        self._gen: AsyncGenerator[AgentEvent, None] | None = None
        self._scope: RunScope | None = None
        self._output = (
            OutputPolicy(config.output, config.output_retries) if config.output is not None else None
        )

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

    # -- what the server asks of a run -----------------------------------------------------------

    def detach(self) -> str | None:
        """Let another process continue this run (server drain): stopping it now records nothing (its
        unfinished calls stay pending, the session stays leased). Returns the lease owner to expire
        once this process stopped publishing, or ``None`` when the run holds no session yet."""
        if self._scope is None:
            return None
        self._scope.recorder.detached = True
        return self._scope.recorder.lock_owner

    async def written_unpublished(self) -> list[AgentEvent]:
        """After a detached run was stopped: the events its last step's write counted as published (it
        was stopped between that write and their publication), once the write committed."""
        if self._scope is None:
            return []
        # The recorder holds them as the envelopes they are: every one is an AgentEvent the loop made.
        return cast("list[AgentEvent]", await self._scope.recorder.written_unpublished())

    @property
    def incarnation(self) -> int | None:
        """The incarnation of the session this run holds (its stored creation time in µs: see
        :attr:`~toolwire.store.records.SessionInfo.incarnation`); ``None`` before the run opened it."""
        return self._scope.recorder.incarnation if self._scope is not None else None

    @property
    def lease(self) -> tuple[str, int] | None:
        """This run's fencing token for its events: its session and the lease epoch it claimed (``None``
        before it holds the session, or when the store counts no epochs)."""
        if self._scope is None or self._scope.recorder.epoch == 0:
            return None
        return self.session_id, self._scope.recorder.epoch

    @property
    def owner(self) -> str | None:
        """The user this run acts for (sub-agent runs inherit it)."""
        return self.session.user_id

    # -- the run -----------------------------------------------------------------------------------

    async def _prepare(self) -> tuple[RunScope, ModelStep, OpenedHistory]:
        """Connect the tool sources, open the store, check the session and read its history."""
        config, request = self.config, self._request
        await config.registry.prepare()  # tool sources such as MCP servers connect first
        tools = config.registry.definitions(enabled=request.enabled_tools, exclude=request.exclude_tools)
        if self._output is not None:  # the output mode may depend on whether the run has tools (Gemini 2.x)
            self._output.spec = self._output.spec.for_tools(bool(tools))
        # A sub-agent without a store of its own records beside its caller.
        parent_store = self._parent.sink.store if self._parent is not None else None
        own = parent_store is None or config.store_configured
        store = self.store = await config.open_store() if own else parent_store
        assert store is not None
        scope, opened = await RunScope.open(
            config, store, self.session, self.interaction_id, deps=self.deps, tools=tools, request=request
        )
        self._scope = scope
        compactor = Compactor(config.compaction, opened.compaction) if config.compaction is not None else None
        failed, budget = scope.ledger.failed_attempts, scope.budget
        return scope, ModelStep(config, scope.recorder, self._output, compactor, failed, budget), opened

    async def _events(self) -> AsyncGenerator[AgentEvent, None]:
        scope, model_step, opened = await self._prepare()
        config, recorder, ledger = self.config, scope.recorder, scope.ledger
        error: BaseException | None = None
        try:
            async with aclosing(self._opening(scope, opened)) as opening:
                async for event in opening:
                    yield event
            number = 0
            while not ledger.done:
                number += 1
                if number > config.max_steps:
                    ledger.status = "max-steps"
                    raise MaxStepsExceeded(
                        f"the model still asked for tools after max_steps={config.max_steps} steps"
                    )
                # One step, inline (no generator per step): the model's events, its calls (StepRun), whether
                # the run is done. aclosing: closing this run closes the inner generators at once.
                await self._ready(scope)
                yield recorder.event(
                    StepStart, step=number, provider=config.model.provider, model=config.model.model_name
                )
                builder = MessageBuilder(provider=config.model.provider, model=config.model.model_name)
                message_id = new_id("msg_")
                request, prepared = await self._step_request(scope, model_step, number)
                for event in prepared:  # older turns summarised, or the run held at a usage limit
                    yield event
                if request is None:
                    break
                model_events = model_step.stream(request, builder, message_id, number)
                scope.open_step = StreamingStep(scope, number, builder, message_id)  # Stop keeps its text
                async with aclosing(model_events):
                    async for event in model_events:
                        yield event
                scope.open_step = None
                step = await StepRun.begin(scope, number, builder, message_id, request)
                accepted, output_errors, settled = await self._settle_output(step)
                for event in settled:
                    yield event
                concluding = step.conclude(step.to_run(), args_errors=builder.args_errors)
                async with aclosing(concluding):
                    async for event in concluding:
                        yield event
                if model_step.failure is not None:  # a step the driver gave up on: stored, then the end
                    raise model_step.failure
                if not ledger.done:  # else calls wait for a person: the run pauses
                    for event in await self._decide(scope, step, accepted, output_errors):
                        yield event
        except BaseException as exc:
            error = self._ended_by(exc)
            if error is not exc:
                raise error from exc
            raise
        finally:
            for event in await self._close(error):
                yield event

    async def _ready(self, scope: RunScope) -> None:
        """Before a step: the lease renewed, and the tools listed again if a source changed them (an MCP
        server may have announced new tools)."""
        await scope.recorder.renew_lock()
        if self.config.registry.sources:
            await scope.refresh_tools(self._request)

    async def _step_request(
        self, scope: RunScope, model_step: ModelStep, number: int
    ) -> tuple[ModelRequest | None, list[AgentEvent]]:
        """The step's request (compacted when the history outgrew the window, with the compaction's events),
        or ``None`` when it would pass a pausing usage limit: the run is then held for a person to extend
        it (:mod:`~toolwire.agent._limit_pause`)."""
        try:
            return await model_step.prepare(scope.tools, scope.history, number)
        except UsageLimitExceeded as exc:
            if not exc.pause:
                raise
            return None, await hold(scope, exc, number)

    def _ended_by(self, exc: BaseException) -> BaseException:
        """How the run ends after ``exc``: its status set, and the exception it ends with (``exc`` itself,
        or the :class:`LeaseLostError` of a run that lost its lease: another run continues it)."""
        assert self._scope is not None
        ledger = self._scope.ledger
        lost = self._scope.recorder.lost_by(exc)
        if lost is not None:
            ledger.status = "error"
            return lost
        if isinstance(exc, asyncio.CancelledError | GeneratorExit):
            ledger.status = "cancelled"
        elif ledger.status != "max-steps":
            ledger.status = "error"
        return exc

    async def _opening(self, scope: RunScope, opened: OpenedHistory) -> AsyncGenerator[AgentEvent, None]:
        """The run's start: announced; a dead replica's run taken over, or a paused one answered; the
        user's turn stored."""
        config, recorder, request = self.config, scope.recorder, self._request
        yield recorder.event(
            InteractionStart,
            prompt=self.prompt,
            agent_name=config.name,
            parent_tool_call_id=self._parent.tool_call_id if self._parent is not None else None,
            model=config.model.model_name,
            provider_name=config.model.otel_provider_name,
            output_type="json" if self._output and self._output.spec.answers_in_text else None,
            skipped_from=request.takeover.unpublished_from if request.takeover is not None else None,
        )
        resuming: AsyncGenerator[AgentEvent, None] | None = None
        if request.takeover is not None:
            resuming = take_over(scope, request.takeover, opened.interrupted)
        elif opened.awaited or request.approvals or request.tool_outputs or not request.new_turn:
            resuming = answer(scope, opened.awaited, approvals=request.approvals,
                              tool_outputs=request.tool_outputs, closing=request.new_turn)  # fmt: skip
        if resuming is not None:
            async with aclosing(resuming) as events:
                async for event in events:
                    yield event
        if request.new_turn:
            user = Message.user(clean_text(self.prompt), session_id=self.session_id)
            await scope.append(user)
            yield recorder.event(UserTurnStart, message=user)

    async def _close(self, error: BaseException | None) -> list[AgentEvent]:
        """The run ended (``error``: how, if it failed): its open step closed, its result set, the
        session released; returns the end events to publish (none when the run can no longer yield)."""
        assert self._scope is not None
        recorder, ledger, step = self._scope.recorder, self._scope.ledger, self._scope.open_step
        if recorder.lease_lost or isinstance(error, LeaseLostError):
            # Another run owns the turn now: nothing of this one is written or announced any more.
            recorder.lease_lost = recorder.detached = True
            self.result = ledger.result()
            await recorder.release()
            return []
        ending: list[AgentEvent] = []
        try:
            if step is not None:
                cancelled, ending = await step.close()
                if cancelled is not None:
                    ledger.messages.append(cancelled)
            self.result = ledger.result()
            ending.extend(recorder.end_events(self.result, None if ledger.status == "cancelled" else error))
            if isinstance(error, GeneratorExit | asyncio.CancelledError):
                # A closed generator or a cancelled task cannot yield any more: whoever stopped the
                # run may announce its end (the server does, so every watcher sees it end).
                self.unpublished_end, ending = ending, []
        finally:
            # Released BEFORE the end is announced: a client that saw the end can start the next turn.
            await recorder.release()
        return ending

    async def _settle_output(self, step: StepRun) -> tuple[Any, list[str], list[AgentEvent]]:
        """The step's message announced as stored; in tool output mode its ``final_result`` calls end here,
        stored. Returns the accepted output, the errors, and the events."""
        output, events = self._output, list[AgentEvent]()
        if step.answer is not None and step.answer[0].parts:
            events.append(step.recorder.event(MessagePersisted, message_id=step.message_id, role="assistant"))
        if not step.calls or output is None or output.spec.mode != "tool":
            return NOTHING, [], events
        accepted, output_errors, settled = output.settle(step.calls)
        for outcome in settled.values():
            events.extend(await step.settle(outcome))
        return accepted, output_errors, events

    async def _decide(
        self, scope: RunScope, step: StepRun, accepted: Any, output_errors: list[str]
    ) -> list[AgentEvent]:
        """Is the run done? Without an output type: when the model stopped calling tools. With one: when a
        valid object arrived; an invalid one is re-prompted at most ``output_retries`` times. Returns the
        events to publish (a list, not a generator: every step asks, and one seldom has any)."""
        output, ledger = self._output, scope.ledger
        assert step.answer is not None
        assistant, builder = step.answer
        calls = step.calls
        if output is None:
            if not calls:
                ledger.answered(assistant.text, assistant.text)
            return []
        if accepted is NOTHING and not calls:
            accepted, output_errors = output.parse_text(assistant.text)
        if accepted is not NOTHING:
            ledger.answered(accepted, assistant.text)
            return [scope.recorder.event(OutputAvailable, output=to_jsonable_python(accepted, fallback=str))]
        if not output_errors:
            return []  # real tools ran; the model continues
        failure = output.rejected(
            assistant,
            output_errors,
            usage=sum(ledger.step_usage, Usage()),
            finish_reason=builder.finish.reason if builder.finish is not None else "",
        )
        if failure is not None:
            raise failure
        if not calls:  # the model answered in text: tell it what was wrong (stored like any turn)
            await scope.append(output.retry_message(output_errors, self.session_id))
        return []
