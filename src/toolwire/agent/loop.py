"""The one agent loop. ``Agent.run()`` and ``Agent.stream()`` both consume :class:`AgentRun`'s event stream.

Per step: ask the driver for canonical parts (streamed live as events), build the assistant message,
hand it and its tool calls (pending) to the store (``begin_step``), run the calls concurrently while
streaming their events (heartbeats included), record each result as it finishes
(``complete_tool_call``), then persist the step's tool-result message (``finish_step``). Persistence
happens here and nowhere else, whatever the provider or driver.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_core import to_jsonable_python

from toolwire._partial_json import PartialJSONParser
from toolwire._text import clean_part, clean_stream_part, clean_text
from toolwire.agent.output import FINAL_RESULT_TOOL, OutputSpec, OutputValidationError
from toolwire.errors import (
    DriverError,
    MaxStepsExceeded,
    NoObjectGenerated,
    ProviderError,
    ProviderProtocolError,
    StepAborted,
    ToolBlockedError,
)
from toolwire.events import (
    AgentEvent,
    CustomDataEvent,
    Envelope,
    ErrorEvent,
    InteractionEnd,
    InteractionStart,
    InteractionStatus,
    MediaEvent,
    MessagePersisted,
    OutputAvailable,
    OutputPartial,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    StepFinish,
    StepStart,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallActive,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolCallStatus,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
    ToolProgress,
    UserTurnStart,
)
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage, new_id
from toolwire.models.base import (
    File,
    Finish,
    MessageBuilder,
    ModelRequest,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResult,
    closing,
)
from toolwire.pricing import total_cost
from toolwire.store.base import SessionInfo, StepRecord, Store, ToolCallRecord, check_owner, lock_owner
from toolwire.tools.context import RunContext
from toolwire.tools.executor import ToolOutcome

if TYPE_CHECKING:
    from toolwire.agent.agent import Agent

logger = logging.getLogger("toolwire.agent")
E = TypeVar("E", bound=Envelope)
_LOCK_TTL = 600.0
"""Seconds a run's session lock lasts without renewal (renewed at step starts after half of it)."""

CANCELLED_OUTPUT = "Tool call cancelled: the run was stopped before the tool finished."
_EVENT_KINDS: dict[str, type[Any]] = {
    "tool-progress": ToolProgress,
    "system-message": SystemMessageEvent,
    "media": MediaEvent,
    "custom-data": CustomDataEvent,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """One executed tool call of a run."""

    call: ToolCallPart
    result: ToolResultPart
    status: ToolCallStatus
    started_at: float
    finished_at: float
    session_id: str

    @property
    def is_error(self) -> bool:
        return self.result.is_error

    @property
    def duration(self) -> float:
        return self.finished_at - self.started_at


@dataclass(kw_only=True)
class RunResult:
    """The outcome of one run (one user turn)."""

    output: Any
    """The final assistant text, or the validated object when the agent has an ``output_type``."""
    session_id: str
    interaction_id: str
    status: InteractionStatus
    messages: list[Message] = field(default_factory=list)
    """Messages this run added to the session (user, assistant, tool)."""
    tool_executions: list[ToolExecution] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    """Summed over every step, tool-calling steps included."""
    step_usage: list[Usage] = field(default_factory=list)
    steps: int = 0
    text: str = ""
    """The final assistant text (also when ``output`` is a structured object)."""
    step_models: list[tuple[str | None, str | None]] = field(default_factory=list)
    """(provider, model) that answered each step, parallel to ``step_usage``."""

    @property
    def cost(self) -> Decimal | None:
        """Estimated USD cost over every step (``None`` when a model's price is unknown)."""
        return total_cost((p, m, u) for (p, m), u in zip(self.step_models, self.step_usage, strict=True))


@dataclass(slots=True)
class _Done:
    outcome: ToolOutcome


@dataclass(slots=True)
class _Failed:
    error: BaseException


@dataclass(slots=True)
class _Unnumbered:
    """An event queued by a running tool; it gets its seq when the loop publishes it."""

    cls: type[Any]
    fields: dict[str, Any]


class AgentRun:
    """One interaction in progress: iterate it for events; ``result`` is set once it completed."""

    def __init__(
        self,
        agent: Agent[Any],
        prompt: str,
        *,
        session_id: str | None = None,
        parent: RunContext[Any] | None = None,
        deps: Any = None,
        enabled_tools: Sequence[str] | None = None,
        exclude_tools: Sequence[str] = (),
        user_id: str | None = None,
    ) -> None:
        self.agent = agent
        parent_run = parent.sink if parent is not None and isinstance(parent.sink, AgentRun) else None
        self._parent_run = parent_run
        if parent_run is not None:
            user_id = parent_run.owner  # a sub-session always belongs to its parent's owner
        elif user_id is None:
            user_id = agent.user_id
        self.user_id: str | None = user_id
        self.store: Store | None = None
        """The store this run persists to (set when the run starts)."""
        self.prompt = prompt
        self.session_id = session_id or new_id("sess_")
        self.parent_session_id = parent.session_id if parent is not None else None
        self.parent_tool_call_id = parent.tool_call_id if parent is not None else None
        self.user_session_id = parent.user_session_id if parent is not None else self.session_id
        self.interaction_id = new_id("int_")
        self.deps = deps if deps is not None or parent is None else parent.deps
        self.result: RunResult | None = None
        self._enabled_tools = enabled_tools
        self._exclude_tools = exclude_tools
        # resolved at the start of the run (_events): tool sources such as MCP servers connect first
        self._tools: list[ToolDefinition] = []
        self._executor = agent.executor_for(frozenset())
        self._seq = 0
        self._persisted_seq = 0
        self._queue: asyncio.Queue[Any] | None = None
        self._gen: AsyncIterator[AgentEvent] | None = None
        self._new_messages: list[Message] = []
        self._executions: list[ToolExecution] = []
        self._step_usage: list[Usage] = []
        self._step_models: list[tuple[str | None, str | None]] = []
        self._open_step: tuple[int, str, list[ToolCallPart], dict[str, ToolOutcome]] | None = None
        """(step, assistant message id, calls, outcomes so far) while a step's tools run."""
        self._output: OutputSpec | None = agent.output_spec
        self._history: list[Message] = []
        self._lock_owner = ""
        self._locked_at = 0.0
        self._done = False
        self._status: InteractionStatus = "completed"
        self._output_value: Any = ""
        self._text_output = ""
        self._output_attempts = 0
        self._partial: PartialJSONParser | None = None
        self._partial_call: str | None = None
        self._last_partial: Any = None

    # -- iteration -------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._gen is None:
            self._gen = self.agent.publish(self._events())
        return self._gen

    async def aclose(self) -> None:
        if self._gen is not None:
            await self._gen.aclose()  # type: ignore[attr-defined]

    # -- event helpers ---------------------------------------------------------------------------

    def _ev(self, cls: type[E], **fields: Any) -> E:
        self._seq += 1
        return cls(
            session_id=self.session_id,
            parent_session_id=self.parent_session_id,
            user_session_id=self.user_session_id,
            interaction_id=self.interaction_id,
            seq=self._seq,
            **fields,
        )

    def tool_event(self, kind: str, tool_call_id: str | None, fields: dict[str, Any]) -> None:
        """EventSink: events a running tool emits through its RunContext (numbered when published)."""
        if self._queue is not None:
            self._queue.put_nowait(_Unnumbered(_EVENT_KINDS[kind], {"tool_call_id": tool_call_id, **fields}))

    def forward(self, event: AgentEvent) -> None:
        """EventSink: a sub-agent's events, forwarded unchanged (they keep their own session envelope)."""
        if self._queue is not None:
            self._queue.put_nowait(event)

    def _numbered(self, item: Any) -> AgentEvent:
        """A queued event as published: seq is taken now, so it follows publication order (a heartbeat
        yielded meanwhile can never carry a higher seq than a progress event published after it)."""
        if isinstance(item, _Unnumbered):
            event: AgentEvent = self._ev(item.cls, **item.fields)
            return event
        result: AgentEvent = item  # a sub-agent's event: numbered in its own session
        return result

    @property
    def owner(self) -> str | None:
        """The user this run acts for (sub-agent runs inherit it)."""
        return self.user_id

    # -- the loop ----------------------------------------------------------------------------------

    async def _events(self) -> AsyncGenerator[AgentEvent, None]:
        agent = self.agent
        await agent.registry.prepare()
        self._tools = agent.registry.definitions(enabled=self._enabled_tools, exclude=self._exclude_tools)
        self._executor = agent.executor_for(frozenset(t.name for t in self._tools))
        if self._parent_run is not None and self._parent_run.store is not None and not agent.store_configured:
            store = self._parent_run.store  # a sub-agent without a store of its own records beside its parent
        else:
            store = await agent.get_store()
        self.store = store
        info = await store.ensure_session(
            SessionInfo(
                id=self.session_id,
                parent_session_id=self.parent_session_id,
                user_session_id=self.user_session_id,
                user_id=self.user_id,
                agent_name=agent.name,
            )
        )
        # The stored row decides: a session created by someone else (or elsewhere in the tree) is refused
        # before anything is read or written.
        check_owner(info, self.user_id, parent_session_id=self.parent_session_id)
        self._seq = self._persisted_seq = info.last_seq
        self._lock_owner = lock_owner(self.interaction_id)
        await store.lock_session(self.session_id, self._lock_owner, ttl=_LOCK_TTL)
        self._locked_at = time.monotonic()
        error: BaseException | None = None
        try:
            self._history = await store.load_history(
                self.session_id, mark_interrupted=True, max_output_chars=agent.max_tool_output_chars
            )
            yield self._ev(
                InteractionStart,
                prompt=self.prompt,
                agent_name=agent.name,
                parent_tool_call_id=self.parent_tool_call_id,
            )
            user = Message.user(clean_text(self.prompt), session_id=self.session_id)
            await self._append(store, user)
            yield self._ev(UserTurnStart, message=user)
            step = 0
            while not self._done:
                step += 1
                if step > agent.max_steps:
                    self._status = "max-steps"
                    raise MaxStepsExceeded(
                        f"the model still asked for tools after max_steps={agent.max_steps} steps"
                    )
                # aclosing: closing this run must close the inner generators at once (cancelling tools).
                async with aclosing(self._step(step, store)) as step_events:
                    async for event in step_events:
                        yield event
        except BaseException as exc:
            error = exc
            if isinstance(exc, asyncio.CancelledError | GeneratorExit):
                self._status = "cancelled"
            elif self._status != "max-steps":
                self._status = "error"
            raise
        finally:
            ending: list[AgentEvent] = []
            try:
                await self._close_open_step(store)
                self.result = self._make_result()
                # A closed generator (GeneratorExit) or a cancelled task cannot yield any more.
                if not isinstance(error, GeneratorExit | asyncio.CancelledError):
                    if error is not None:
                        ending.append(
                            self._ev(
                                ErrorEvent,
                                error_type=type(error).__name__,
                                message=str(error),
                                retryable=bool(getattr(error, "retryable", False)),
                            )
                        )
                    ending.append(
                        self._ev(
                            InteractionEnd,
                            status=self._status,
                            output=self._text_output,
                            usage=self.result.usage,
                            error=_describe(error) if error is not None else None,
                        )
                    )
            finally:
                # Released BEFORE the end is announced: a client that saw the end can start the next turn.
                await self._release(store)
            for event in ending:
                yield event

    async def _step(self, step: int, store: Store) -> AsyncGenerator[AgentEvent, None]:
        """One model step, its tools, its persistence, and the decision whether the run is done."""
        agent = self.agent
        if time.monotonic() - self._locked_at > _LOCK_TTL / 2:  # renew: a long run keeps its session
            await store.lock_session(self.session_id, self._lock_owner, ttl=_LOCK_TTL)
            self._locked_at = time.monotonic()
        yield self._ev(StepStart, step=step, provider=agent.model.provider, model=agent.model.model_name)
        builder = MessageBuilder(provider=agent.model.provider, model=agent.model.model_name)
        message_id = new_id("msg_")
        async with aclosing(self._model_step(self._request(step), builder, message_id, step)) as model_events:
            async for event in model_events:
                yield event
        finish = builder.finish
        assert finish is not None  # _model_step raises otherwise
        assistant = Message(
            role="assistant",
            parts=tuple(clean_part(p) for p in builder.parts()),
            id=message_id,
            session_id=self.session_id,
            provider=builder.provider,
            model=builder.model,
        )
        self._step_usage.append(finish.usage)
        self._step_models.append((builder.provider, builder.model))
        calls = [c for c in assistant.tool_calls if not c.provider_executed]
        if assistant.parts:
            await store.begin_step(self._step_record(step, assistant, calls, finish.usage, finish.reason))
            self._history.append(assistant)
            self._new_messages.append(assistant)
            yield self._ev(MessagePersisted, message_id=assistant.id, role="assistant")
        outcomes: dict[str, ToolOutcome] = {}
        accepted, output_error = _NOTHING, ""
        if calls:
            self._open_step = (step, assistant.id, calls, outcomes)
            spec = self._output
            if spec is not None and spec.mode == "tool":
                accepted, output_error = self._settle_final_result(calls, spec, outcomes)
                for settled in list(outcomes.values()):
                    await self._record_outcome(store, settled, assistant.id)
                    yield self._complete_event(settled, executed=False)
            to_run = [c for c in calls if c.tool_call_id not in outcomes]
            if to_run:
                async with aclosing(
                    self._run_tools(to_run, builder.args_errors, step, store, outcomes, assistant.id)
                ) as events:
                    async for event in events:
                        yield event
        tool_message = (
            Message(
                role="tool",
                parts=tuple(outcomes[c.tool_call_id].result for c in calls),
                session_id=self.session_id,
            )
            if calls
            else None
        )
        persisted_seq = self._seq + (1 if tool_message is not None else 0) + 1
        await store.finish_step(
            self.session_id,
            step=step,
            interaction_id=self.interaction_id,
            tool_message=tool_message,
            usage=finish.usage,
            last_seq=persisted_seq,
        )
        self._persisted_seq = persisted_seq
        self._open_step = None
        if tool_message is not None:
            self._history.append(tool_message)
            self._new_messages.append(tool_message)
            yield self._ev(MessagePersisted, message_id=tool_message.id, role="tool")
        yield self._ev(
            StepFinish,
            step=step,
            finish_reason=finish.reason,
            usage=finish.usage,
            message_id=assistant.id,
            provider=builder.provider,
            model=builder.model,
            response_id=builder.response_id,
        )
        self._raise_for_outcomes(calls, outcomes)
        async with aclosing(self._decide(assistant, calls, accepted, output_error, store)) as events:
            async for event in events:
                yield event

    async def _decide(
        self, assistant: Message, calls: list[ToolCallPart], accepted: Any, output_error: str, store: Store
    ) -> AsyncGenerator[AgentEvent, None]:
        """Is the run done? Without an output type: when the model stopped calling tools. With one: when a
        valid object arrived; an invalid one is re-prompted at most ``output_retries`` times."""
        spec = self._output
        if spec is None:
            if not calls:
                self._output_value = self._text_output = assistant.text
                self._done = True
            return
        if accepted is _NOTHING and not calls:
            accepted, output_error = self._parse_text_output(assistant.text, spec)
        if accepted is not _NOTHING:
            self._output_value, self._text_output = accepted, assistant.text
            self._done = True
            yield self._ev(OutputAvailable, output=to_jsonable_python(accepted, fallback=str))
            return
        if not output_error:
            return  # real tools ran; the model continues
        self._output_attempts += 1
        if self._output_attempts > self.agent.output_retries:
            raise NoObjectGenerated(
                f"no valid {spec.name} after {self._output_attempts} attempt(s): {output_error}",
                raw_output=_raw_output(assistant, spec),
                errors=[output_error],
            )
        if not calls:  # the model answered in text: tell it what was wrong (stored like any turn)
            retry = Message(
                role="user",
                parts=(
                    TextPart(
                        text=_retry_prompt(spec, output_error),
                        provider_metadata={"toolwire": {"output_retry": True}},
                    ),
                ),
                session_id=self.session_id,
            )
            await self._append(store, retry)

    async def _append(self, store: Store, message: Message) -> None:
        await store.append_message(self.session_id, message, interaction_id=self.interaction_id)
        self._history.append(message)
        self._new_messages.append(message)

    def _make_result(self) -> RunResult:
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
            tool_executions=self._executions,
            usage=total,
            step_usage=self._step_usage,
            step_models=self._step_models,
            steps=len(self._step_usage),
        )

    async def _model_step(
        self, request: ModelRequest, builder: MessageBuilder, message_id: str, step: int
    ) -> AsyncGenerator[AgentEvent, None]:
        """Stream one model step into events. Retries only while nothing was emitted."""
        agent = self.agent
        attempt = 0
        while True:
            emitted = False
            self._partial, self._partial_call, self._last_partial = None, None, None
            try:
                async with closing(agent.driver.stream_step(agent.model, request)) as parts:
                    async for raw in parts:
                        part = clean_stream_part(raw)  # once, here: live events and the stored copy agree
                        builder.add(part)
                        if isinstance(part, StreamError):
                            raise part.error
                        event = self._translate(part, message_id)
                        if event is not None:
                            emitted = True
                            yield event
                            if self._output is not None:
                                partial = self._partial_output(part)
                                if partial is not None:
                                    yield partial
                if builder.finish is None:
                    raise ProviderProtocolError(
                        "the model stream ended without a finish part",
                        provider=agent.model.provider,
                        model=agent.model.model_name,
                        retryable=True,
                    )
                return
            except ProviderError as exc:
                if emitted or not exc.retryable or attempt >= agent.retries:
                    if emitted:
                        raise StepAborted(
                            f"step {step} aborted after partial output: {exc}; nothing of it was stored"
                        ) from exc
                    raise
                delay = _backoff(attempt, exc.retry_after, agent.retry_delay)
                logger.warning("model request failed (%s); retry %d in %.2fs", exc, attempt + 1, delay)
                attempt += 1
                builder.reset()
                await asyncio.sleep(delay)
            except DriverError:
                raise

    def _request(self, step: int) -> ModelRequest:
        agent, spec = self.agent, self._output
        tools: Sequence[ToolDefinition] = self._tools
        choice = agent.tool_choice_for_step(step)
        if spec is not None and spec.mode == "tool":
            tools = (*self._tools, spec.tool_definition())
            if choice == "auto":
                choice = "required"  # every step ends in a tool call: a real tool or final_result
        return ModelRequest(
            messages=tuple(self._history),
            tools=tools,
            tool_choice=choice,
            instructions=agent.instructions,
            settings=agent.model_settings,
            output_schema=spec.schema if spec is not None and spec.mode != "tool" else None,
            output_schema_name=spec.name if spec is not None else "output",
        )

    def _partial_output(self, part: ModelStreamPart) -> AgentEvent | None:
        spec = self._output
        assert spec is not None
        fragment = None
        if spec.mode == "tool":
            if isinstance(part, ToolInputStart) and part.tool_name == FINAL_RESULT_TOOL:
                self._partial_call, self._partial = part.id, PartialJSONParser()
            elif isinstance(part, ToolInputDelta) and part.id == self._partial_call:
                fragment = part.delta
        elif isinstance(part, TextDelta):
            if self._partial is None:
                self._partial = PartialJSONParser()
            fragment = part.delta
        if fragment is None or self._partial is None:
            return None
        try:
            self._partial.feed(fragment)
        except ValueError:
            self._partial = None  # not JSON after all; the final check reports it
            return None
        value = self._partial.value()
        if spec.mode == "tool" and spec.wrapped:
            value = value.get("result") if isinstance(value, dict) else None
        if value is None or value == self._last_partial:
            return None
        self._last_partial = value
        shown = to_jsonable_python(spec.validate_partial(value), fallback=str)
        event: AgentEvent = self._ev(OutputPartial, partial=shown)
        return event

    def _settle_final_result(
        self, calls: list[ToolCallPart], spec: OutputSpec, outcomes: dict[str, ToolOutcome]
    ) -> tuple[Any, str]:
        """Validate ``final_result`` calls; when one is valid the step's other calls are skipped, not run."""
        accepted: Any = _NOTHING
        error = ""
        now = time.time()
        for call in calls:
            if call.tool_name != FINAL_RESULT_TOOL:
                continue
            try:
                value = spec.from_tool_args(call.args)
            except OutputValidationError as exc:
                error = str(exc)
                output, is_error = (
                    f"Invalid final result: {exc}. Call {FINAL_RESULT_TOOL} again, fixed.",
                    True,
                )
            else:
                if accepted is _NOTHING:
                    accepted = value
                output, is_error = "Final result accepted.", False
            outcomes[call.tool_call_id] = _settled(call, output, is_error, now)
        if accepted is not _NOTHING:
            for call in calls:
                if call.tool_call_id not in outcomes:
                    outcomes[call.tool_call_id] = _settled(
                        call, "Not executed: the final result ended the run.", True, now
                    )
        return accepted, error

    def _parse_text_output(self, text: str, spec: OutputSpec) -> tuple[Any, str]:
        if spec.mode == "tool":
            return (
                _NOTHING,
                f"no {FINAL_RESULT_TOOL} call: the answer must be given by calling {FINAL_RESULT_TOOL}",
            )
        try:
            return spec.from_text(text), ""
        except OutputValidationError as exc:
            return _NOTHING, str(exc)

    async def _record_outcome(self, store: Store, outcome: ToolOutcome, message_id: str) -> None:
        await store.complete_tool_call(
            self.session_id,
            outcome.call.tool_call_id,
            message_id=message_id,
            status=outcome.status,
            output=outcome.full_output,
            is_error=outcome.result.is_error,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
        )

    def _translate(self, part: ModelStreamPart, message_id: str) -> AgentEvent | None:
        match part:
            case TextStart():
                return self._ev(TextStartEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case TextDelta():
                return self._ev(
                    TextDeltaEvent, id=f"{message_id}-{part.id}", delta=part.delta, message_id=message_id
                )
            case TextEnd():
                return self._ev(TextEndEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case ReasoningStart():
                return self._ev(ReasoningStartEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case ReasoningDelta():
                return self._ev(
                    ReasoningDeltaEvent,
                    id=f"{message_id}-{part.id}",
                    delta=part.delta,
                    message_id=message_id,
                )
            case ReasoningEnd():
                return self._ev(ReasoningEndEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case ToolInputStart():
                return self._ev(
                    ToolInputStartEvent,
                    tool_call_id=part.id,
                    tool_name=part.tool_name,
                    provider_executed=part.provider_executed,
                    title=part.title,
                    provider_metadata=part.provider_metadata,
                )
            case ToolInputDelta():
                return self._ev(ToolInputDeltaEvent, tool_call_id=part.id, delta=part.delta)
            case ToolInputEnd():
                return self._ev(
                    ToolInputAvailableEvent,
                    tool_call_id=part.id,
                    tool_name=part.tool_name,
                    args=part.args,
                    provider_metadata=part.provider_metadata,
                    provider_executed=part.provider_executed,
                    title=part.title,
                    message_id=message_id,
                )
            case ToolResult():
                return self._ev(
                    ToolCallComplete,
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    output=part.output,
                    is_error=part.is_error,
                    status="error" if part.is_error else "ok",
                    provider_executed=True,
                )
            case File():
                return self._ev(
                    MediaEvent, content_type=part.media_type, data=part.data, message_id=message_id
                )
            case StreamStart() | ResponseMetadata() | Finish() | StreamError():
                return None
        return None

    async def _run_tools(
        self,
        calls: list[ToolCallPart],
        args_errors: dict[str, str],
        step: int,
        store: Store,
        outcomes: dict[str, ToolOutcome],
        message_id: str,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the step's calls (concurrently unless one is sequential), streaming their events as they happen."""
        ctx = RunContext(
            deps=self.deps,
            session_id=self.session_id,
            user_session_id=self.user_session_id,
            interaction_id=self.interaction_id,
            parent_session_id=self.parent_session_id,
            step=step,
            messages=tuple(self._history),
            agent_name=self.agent.name,
            sink=self,
        )
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queue = queue
        running: dict[str, tuple[str, float]] = {}
        executor = self._executor

        async def run_one(call: ToolCallPart) -> None:
            started = time.time()
            running[call.tool_call_id] = (call.tool_name, started)
            queue.put_nowait(
                _Unnumbered(
                    ToolCallActive,
                    {
                        "tool_call_id": call.tool_call_id,
                        "tool_name": call.tool_name,
                        "args": call.args,
                        "started_at": started,
                    },
                )
            )
            outcome = await executor.execute(
                call, ctx.for_call(call), args_error=args_errors.get(call.tool_call_id)
            )
            running.pop(call.tool_call_id, None)
            await self._record_outcome(store, outcome, message_id)
            outcomes[call.tool_call_id] = outcome
            queue.put_nowait(_Done(outcome))

        async def guarded(batch: list[ToolCallPart]) -> None:
            try:
                for call in batch:
                    await run_one(call)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # a store failure must not leave the loop waiting forever
                queue.put_nowait(_Failed(exc))

        sequential = any(
            (t := self.agent.registry.get(c.tool_name)) is not None and t.sequential for c in calls
        )
        batches = [calls] if sequential else [[c] for c in calls]
        tasks = [asyncio.create_task(guarded(batch)) for batch in batches]
        remaining = len(calls)
        interval = self.agent.heartbeat_interval
        try:
            while remaining:
                item = await _next_item(queue, interval)
                if item is _TICK:
                    now = time.time()
                    for call_id, (name, started) in list(running.items()):
                        yield self._ev(
                            ToolCallHeartbeat, tool_call_id=call_id, tool_name=name, elapsed=now - started
                        )
                    continue
                if isinstance(item, _Done):
                    remaining -= 1
                    yield self._complete_event(item.outcome)
                elif isinstance(item, _Failed):
                    raise item.error
                else:
                    yield self._numbered(item)
            while not queue.empty():  # events a tool emitted after its result (rare) still reach clients
                item = queue.get_nowait()
                if not isinstance(item, _Done | _Failed):
                    yield self._numbered(item)
        finally:
            self._queue = None
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

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
        event: AgentEvent = self._ev(
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

    def _raise_for_outcomes(self, calls: list[ToolCallPart], outcomes: dict[str, ToolOutcome]) -> None:
        for call in calls:
            outcome = outcomes[call.tool_call_id]
            if outcome.error is None:
                continue
            if isinstance(outcome.error, ToolBlockedError) and self.agent.stop_on_block:
                raise outcome.error
            if self.agent.raise_on_failure and not isinstance(outcome.error, ToolBlockedError):
                raise outcome.error

    def _step_record(
        self, step: int, message: Message, calls: list[ToolCallPart], usage: Usage, finish_reason: str
    ) -> StepRecord:
        now = time.time()
        return StepRecord(
            session_id=self.session_id,
            interaction_id=self.interaction_id,
            step=step,
            message=message,
            tool_calls=tuple(
                ToolCallRecord(
                    session_id=self.session_id,
                    tool_call_id=c.tool_call_id,
                    tool_name=c.tool_name,
                    message_id=message.id,
                    step=step,
                    args=c.args,
                    provider=message.provider,
                    model=message.model,
                    interaction_id=self.interaction_id,
                )
                for c in calls
            ),
            usage=usage,
            finish_reason=finish_reason,
            started_at=now,
            finished_at=now,
        )

    async def _close_open_step(self, store: Store) -> None:
        """The run stopped while tools ran: record the unfinished calls as cancelled so history stays valid."""
        if self._open_step is None:
            return
        step, message_id, calls, outcomes = self._open_step
        self._open_step = None
        try:
            results: list[ToolResultPart] = []
            now = time.time()
            for call in calls:
                outcome = outcomes.get(call.tool_call_id)
                if outcome is not None:
                    results.append(outcome.result)
                    continue
                await store.complete_tool_call(
                    self.session_id,
                    call.tool_call_id,
                    message_id=message_id,
                    status="cancelled",
                    output=CANCELLED_OUTPUT,
                    is_error=True,
                    started_at=None,
                    finished_at=now,
                )
                results.append(
                    ToolResultPart(
                        tool_call_id=call.tool_call_id,
                        tool_name=call.tool_name,
                        output=CANCELLED_OUTPUT,
                        is_error=True,
                    )
                )
            message = Message(role="tool", parts=tuple(results), session_id=self.session_id)
            await store.finish_step(
                self.session_id,
                step=step,
                interaction_id=self.interaction_id,
                tool_message=message,
                usage=Usage(),
                last_seq=self._seq + 2,
            )
            self._persisted_seq = self._seq + 2
            self._new_messages.append(message)
        except Exception:  # best effort: load_history repairs whatever is left pending
            logger.exception("could not record cancelled tool calls for session %s", self.session_id)

    async def _release(self, store: Store) -> None:
        try:
            if self._seq > self._persisted_seq:  # keep seq monotonic across runs (resume by Last-Event-ID)
                await store.finish_step(
                    self.session_id,
                    step=0,
                    interaction_id=self.interaction_id,
                    tool_message=None,
                    usage=Usage(),
                    last_seq=self._seq,
                )
        except Exception:
            logger.exception("could not record the last event seq for session %s", self.session_id)
        finally:
            await store.unlock_session(self.session_id, self._lock_owner)


_NOTHING: Any = object()
_TICK: Any = object()


async def _next_item(queue: asyncio.Queue[Any], interval: float | None) -> Any:
    """The next queued item, or ``_TICK`` when ``interval`` passed without one (time for heartbeats)."""
    try:
        return queue.get_nowait()
    except asyncio.QueueEmpty:
        pass
    if not interval:
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), interval)
    except TimeoutError:
        return _TICK


def _settled(call: ToolCallPart, output: str, is_error: bool, now: float) -> ToolOutcome:
    return ToolOutcome(
        call=call,
        result=ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=output, is_error=is_error
        ),
        status="error" if is_error else "ok",
        started_at=now,
        finished_at=now,
        full_output=output,
    )


def _retry_prompt(spec: OutputSpec, error: str) -> str:
    if spec.mode == "tool":
        return f"Your answer was not accepted: {error}. Call {FINAL_RESULT_TOOL} with the result."
    return (
        f"Your answer was not accepted: {error}. Reply again with only a JSON value matching the "
        f"{spec.name} schema."
    )


def _raw_output(message: Message, spec: OutputSpec) -> str:
    finals = [c.args_json for c in message.tool_calls if c.tool_name == FINAL_RESULT_TOOL]
    return finals[-1] if finals else message.text


def _backoff(attempt: int, retry_after: float | None, base_delay: float) -> float:
    """Exponential backoff with jitter; the provider's ``Retry-After`` wins when it gave one."""
    if retry_after is not None:
        return min(retry_after, 60.0)
    base: float = min(base_delay * (2**attempt), 8.0)
    return base * (0.5 + random.random())


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
