"""One model call of a run: the driver's stream of parts becomes the run's events.

Every part is cleaned once, here (lone surrogates -> U+FFFD, every delta kind alike), then added to the
step's :class:`~toolwire.models._builder.MessageBuilder` and translated into an event: what clients see
live and what the store keeps are the same text. A failed request is retried with backoff only while
nothing of it was emitted; after partial output the step is aborted (nothing of it is stored). With a
:class:`~toolwire.models.fallback.FallbackModel` a failed step (partial output or not) is asked of the
next model instead, after a ``failover`` event; a model's rate limiter (``models._limits``) is waited on
before each request.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any, assert_never

from toolwire._text import clean_stream_part
from toolwire.agent._budget import Budget
from toolwire.agent._compaction import Compactor
from toolwire.agent._recorder import StepRecorder
from toolwire.agent.config import RunConfig
from toolwire.agent.drivers import Driver, StepState
from toolwire.agent.drivers._default import default_driver
from toolwire.agent.output import OutputPolicy
from toolwire.errors import (
    ContextLengthExceeded,
    DriverError,
    ProviderError,
    ProviderProtocolError,
    StepAborted,
)
from toolwire.events import (
    AgentEvent,
    FailoverEvent,
    MediaEvent,
    OutputPartial,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallComplete,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
)
from toolwire.messages import Message, TextPart, Usage
from toolwire.models._builder import MessageBuilder, closing
from toolwire.models._limits import limiter_for
from toolwire.models._tokens import Sizes, failed_attempt_usage, record_usage
from toolwire.models.base import (
    DecisionRetry,
    File,
    Finish,
    Model,
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
)
from toolwire.models.fallback import FallbackModel

logger = logging.getLogger("toolwire.agent")


class ModelStep:
    """Streams model steps of one run as events."""

    def __init__(
        self,
        config: RunConfig,
        recorder: StepRecorder,
        output: OutputPolicy | None,
        compactor: Compactor | None = None,
        failed: list[tuple[str | None, str | None, Usage]] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self._config = config
        self._recorder = recorder
        self._output = output
        self._compactor = compactor
        """Keeps requests within the model's window (``None``: compaction off)."""
        self._budget = budget
        self._sizes = compactor.sizes if compactor is not None else Sizes()
        """The run's measures of its messages (shared with the compactor): each measured once."""
        # A budget of its own (Compaction.max_request_tokens) is fitted to even when the window is unknown.
        self._window_known = compactor is not None and (
            config.model.context_window is not None or compactor.budgeted
        )
        self._step_model: Model | None = None
        """The model ``prepare_step`` chose for the step being asked (``None``: the run's)."""
        self._failed: list[tuple[str | None, str | None, Usage]] = failed if failed is not None else []
        """What the failed-over attempts of the run probably cost (provider, model, usage), apart."""
        self._titles = {t.name: t.title for t in config.registry if t.title is not None}
        """The tools' own titles, for calls whose provider gave none (no lookup per part without any)."""
        # The default compiler sends the history as it is: skip building its state on every step.
        self._compiles = type(config.driver).compile_messages is not Driver.compile_messages
        self.failure: DriverError | None = None
        """Why the driver gave up on the step being asked (no valid decision), after it ended the step
        with reason ``error`` and the usage it cost: the loop stores the step, then raises :attr:`failure`."""
        self._drivers: dict[int, Driver] = {}
        """Drivers of a FallbackModel's candidates that need another than the agent's (a model without
        function calling among tool-calling ones): one per model for the whole run, as the agent's is
        (the ReAct driver counts its calls per user turn)."""

    def stream(
        self, request: ModelRequest, builder: MessageBuilder, message_id: str, step: int
    ) -> AsyncGenerator[AgentEvent, None]:
        """The step's events; ``builder`` holds the assembled parts and the finish when it returns.

        With a :class:`FallbackModel` a failure it fails over on moves the step to the next candidate:
        what the failed attempt streamed is dropped (the ``failover`` event says so) and never stored.
        """
        model = self._step_model or self._config.model
        self.failure = None
        if self._step_model is not None:  # prepare_step chose the step's model
            builder.provider, builder.model = model.provider, model.model_name
        if isinstance(model, FallbackModel):
            return self._failing_over(model, request, builder, message_id, step)
        return self._attempts(model, request, builder, message_id, step)  # no generator layer per event

    async def prepare(
        self, tools: list[ToolDefinition], history: Sequence[Message], step: int
    ) -> tuple[ModelRequest, list[AgentEvent]]:
        """What step ``step`` sends, compacted to fit the model's window, and the events of a compaction."""
        request, events = self.request(tools, history, step), list[AgentEvent]()
        compactor, model = self._compactor, self._config.model
        # Per-step fast path: nothing stored to apply and no window to fit (a window unknown when the run
        # started is learned from a refusal, which compacts anyway: see _shortened).
        if compactor is not None and (compactor.latest is not None or self._window_known):
            request, events = await compactor.fit(model, request, self._recorder)
        self._step_model = None
        if self._budget is not None:  # prepare_step may change the request and the model; limits checked
            request, chosen = await self._budget.before_request(step, request, model)
            self._step_model = chosen if chosen is not model else None
        return request, events

    def request(self, tools: list[ToolDefinition], history: Sequence[Message], step: int) -> ModelRequest:
        """What step ``step`` sends: the messages the driver compiles from the history (by default the history
        itself), the run's tools (and ``final_result`` in tool output mode)."""
        config, output = self._config, self._output
        choice = config.tool_choice_for_step(step)
        spec = output.spec if output is not None else None
        if spec is not None and spec.mode == "tool":
            tools = [*tools, spec.tool_definition()]
            if choice == "auto":
                choice = "required"  # every step ends in a tool call: a real tool or final_result
        instructions = spec.instructions(config.instructions) if spec is not None else config.instructions
        if self._compiles:
            state = StepState(
                step=step,
                session_id=self._recorder.session_id,
                history=tuple(history),
                tools=tuple(tools),
                instructions=instructions,
            )
            history = config.driver.compile_messages(state)
        return ModelRequest(
            messages=tuple(history),
            tools=tools,
            tool_choice=choice,
            instructions=instructions,
            settings=config.model_settings,
            output_schema=spec.output_schema if spec is not None else None,
            output_schema_name=spec.name if spec is not None else "output",
            json_answer=spec is not None and spec.mode == "prompted",
            cache_key=self._recorder.session_id,  # a conversation's requests share the provider's cache
        )

    async def _failing_over(
        self, model: FallbackModel, request: ModelRequest, builder: MessageBuilder, message_id: str, step: int
    ) -> AsyncGenerator[AgentEvent, None]:
        queue = list(model.candidates())
        recovered = False
        while queue:
            candidate = queue.pop(0)
            builder.provider, builder.model = candidate.provider, candidate.model_name  # who answers
            try:
                async for event in self._attempts(candidate, request, builder, message_id, step):
                    yield event
            except (ProviderError, StepAborted) as exc:
                error = exc.__cause__ if isinstance(exc, StepAborted) else exc
                if not isinstance(error, ProviderError):
                    raise
                queue = list(model.after_failure(candidate, error, queue))
                streamed = sum(len(p.text) for p in builder.parts() if isinstance(p, TextPart))
                failed = failed_attempt_usage(
                    candidate, request, answered=isinstance(exc, StepAborted), streamed_chars=streamed
                )
                if failed.requests or failed.input_tokens:
                    self._failed.append((candidate.provider, candidate.model_name, failed))
                builder.reset()
                too_long = isinstance(error, ContextLengthExceeded) and not isinstance(exc, StepAborted)
                if not queue and too_long and self._compactor is not None and not recovered:
                    # No model with a larger window is left: compacted to fit, and asked once more.
                    recovered = self._window_known = True
                    assert isinstance(error, ContextLengthExceeded)
                    request, events = await self._compactor.fit(model, request, self._recorder, refused=error)
                    for event in events:
                        yield event
                    queue = list(model.candidates())
                    continue
                if not queue:
                    raise
                following = queue[0]
                logger.warning("model step failed on %s (%s); failing over to %s", candidate.model_name, error,
                               following.model_name)  # fmt: skip
                yield self._recorder.event(
                    FailoverEvent,
                    step=step,
                    message_id=message_id,
                    from_provider=candidate.provider,
                    from_model=candidate.model_name,
                    to_provider=following.provider,
                    to_model=following.model_name,
                    reason=str(error),
                    error_type=type(error).__name__,
                    status=error.status,
                    dropped_output=isinstance(exc, StepAborted),
                    usage=failed,
                )
                continue
            model.answered(candidate)
            return

    async def _attempts(
        self, model: Model, request: ModelRequest, builder: MessageBuilder, message_id: str, step: int
    ) -> AsyncGenerator[AgentEvent, None]:
        """One model's attempts at the step: retried with backoff while nothing of it was emitted."""
        config, output = self._config, self._output
        driver = self._driver_for(model)
        limiter = limiter_for(model)
        attempt = 0
        recovered = False
        while True:
            emitted = False
            await self._begin_attempt(limiter)
            try:
                stream, echo = driver.open_step(model, request)
                async with closing(stream) as parts:
                    async for raw in parts:
                        for part in echo.process(raw) if echo is not None else (raw,):
                            part = clean_stream_part(part)
                            event = self._take(part, builder, message_id)
                            if event is None:
                                continue
                            emitted = True
                            yield event
                            if output is not None and (partial := output.partial(part)) is not None:
                                yield self._recorder.event(OutputPartial, partial=partial)
                for part in echo.flush() if echo is not None else ():  # ended without a finish part
                    event = self._take(clean_stream_part(part), builder, message_id)
                    if event is not None:
                        emitted = True
                        yield event
                self._answered(model, request, builder, limiter)
                return
            except DriverError as exc:
                self._gave_up(exc, builder)
                self._answered(model, request, builder, limiter)
                return
            except ContextLengthExceeded as refusal:
                # Too long after all (an estimate short of the provider's count, or an unknown window the
                # error just taught): compacted to fit, and asked once more. A FallbackModel first tries
                # its models with a larger window (``_failing_over``).
                shortened = None if emitted or recovered else await self._shortened(model, request, refusal)
                if shortened is None:
                    raise
                recovered = True
                request, events = shortened
                for event in events:
                    yield event
                builder.reset()
            except ProviderError as exc:
                if emitted or not exc.retryable or attempt >= config.retries:
                    if emitted:
                        raise StepAborted(
                            f"step {step} aborted after partial output: {exc}; nothing of it was stored"
                        ) from exc
                    raise
                delay = backoff(attempt, exc.retry_after, config.retry_delay)
                logger.warning("model request failed (%s); retry %d in %.2fs", exc, attempt + 1, delay)
                attempt += 1
                builder.reset()
                await asyncio.sleep(delay)

    def _gave_up(self, exc: DriverError, builder: MessageBuilder) -> None:
        """The driver gave up on the step: kept in :attr:`failure` when the driver ended the step
        first (reason ``error``, its usage: the loop stores it), else raised now (nothing to store)."""
        if builder.finish is None or builder.finish.reason != "error":
            raise exc
        self.failure = exc

    async def _begin_attempt(self, limiter: Any) -> None:
        """Before each attempt: no partial output of an earlier one counts; the model's rate limit is kept."""
        if self._output is not None:
            self._output.reset_partial()
        if limiter is not None:
            await limiter.acquire()

    def _answered(self, model: Model, request: ModelRequest, builder: MessageBuilder, limiter: Any) -> None:
        """The attempt's stream ended: with a finish part (else a retryable protocol error), its tokens
        counted by the model's rate limiter and, with compaction, by the token estimates."""
        if builder.finish is None:
            raise ProviderProtocolError(
                "the model stream ended without a finish part",
                provider=model.provider,
                model=model.model_name,
                retryable=True,
            )
        if limiter is not None:
            limiter.record(builder.finish.usage.total_tokens)
        if self._compactor is not None and model.counts_tokens:  # the estimates learn what it counts
            record_usage(model, request, builder.finish.usage, self._sizes)

    async def _shortened(
        self, model: Model, request: ModelRequest, refusal: ContextLengthExceeded
    ) -> tuple[ModelRequest, list[AgentEvent]] | None:
        """``request`` compacted to fit ``model`` after it refused it as too long, with the events of the
        compaction; ``None`` when it is not compacted here (compaction off, or a FallbackModel's: compacted
        once no model with a larger window is left)."""
        if self._compactor is None or isinstance(self._config.model, FallbackModel):
            return None
        self._window_known = True  # the refusal taught it (or compaction goes by the refused size)
        return await self._compactor.fit(model, request, self._recorder, refused=refusal)

    def _driver_for(self, model: Model) -> Driver:
        """The agent's driver, unless ``model`` (a fallback) lacks the function calling the agent's model has
        (or has it where the agent's model has not): then the default driver for it."""
        if model.supports_tools == self._config.model.supports_tools:
            return self._config.driver
        driver = self._drivers.get(id(model))
        if driver is None:
            driver = self._drivers[id(model)] = default_driver(model)
        return driver

    def _take(self, part: ModelStreamPart, builder: MessageBuilder, message_id: str) -> AgentEvent | None:
        """A (cleaned) part joins the step's message; its event, or ``None`` for bookkeeping parts."""
        if self._titles and isinstance(part, ToolInputStart | ToolInputEnd) and part.title is None:
            part = self._titled(part)
        builder.add(part)
        if isinstance(part, StreamError):
            raise part.error
        return self.translate(part, message_id)

    def _titled(self, part: ToolInputStart | ToolInputEnd) -> ToolInputStart | ToolInputEnd:
        """The call with its tool's ``title`` (``@tool(title=...)``, an MCP tool's) when the provider gave
        none: set here, before the builder, so the events, the client's part and the stored call agree."""
        title = self._titles.get(part.tool_name)
        if title is None or part.provider_executed:
            return part
        return replace(part, title=title)

    def translate(self, part: ModelStreamPart, message_id: str) -> AgentEvent | None:
        """The event a stream part becomes, numbered now; ``None`` for bookkeeping parts."""
        ev = self._recorder.event
        match part:
            case TextStart():
                return ev(TextStartEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case TextDelta():
                return ev(
                    TextDeltaEvent, id=f"{message_id}-{part.id}", delta=part.delta, message_id=message_id
                )
            case TextEnd():
                return ev(TextEndEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case ReasoningStart():
                return ev(ReasoningStartEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case ReasoningDelta():
                return ev(
                    ReasoningDeltaEvent, id=f"{message_id}-{part.id}", delta=part.delta, message_id=message_id
                )
            case ReasoningEnd():
                return ev(ReasoningEndEvent, id=f"{message_id}-{part.id}", message_id=message_id)
            case ToolInputStart():
                return ev(
                    ToolInputStartEvent,
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    provider_executed=part.provider_executed,
                    title=part.title,
                    provider_metadata=part.provider_metadata,
                    message_id=message_id,
                )
            case ToolInputDelta():
                return ev(ToolInputDeltaEvent, tool_call_id=part.tool_call_id, delta=part.delta)
            case ToolInputEnd():
                return ev(
                    ToolInputAvailableEvent,
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    args=part.args,
                    provider_metadata=part.provider_metadata,
                    provider_executed=part.provider_executed,
                    title=part.title,
                    message_id=message_id,
                )
            case ToolResult():  # a provider-executed tool's result (web search, code execution)
                return ev(
                    ToolCallComplete,
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    output=part.output,
                    is_error=part.is_error,
                    status="error" if part.is_error else "ok",
                    provider_executed=True,
                    message_id=message_id,
                )
            case File():
                return ev(MediaEvent, content_type=part.media_type, data=part.data, message_id=message_id)
            case DecisionRetry():  # the driver asks again: every client sees why
                text = (
                    f"The model's decision was not valid (attempt {part.attempt}): {part.error}. Asked again."
                )
                return ev(
                    SystemMessageEvent, level="warning", text=text, code=part.type, attempt=part.attempt
                )
            case StreamStart() | ResponseMetadata() | Finish() | StreamError():
                return None
            case _:
                assert_never(part)


def backoff(attempt: int, retry_after: float | None, base_delay: float) -> float:
    """Exponential backoff with jitter; the provider's ``Retry-After`` wins when it gave one."""
    if retry_after is not None:
        return min(retry_after, 60.0)
    base: float = min(base_delay * (2**attempt), 8.0)
    return base * (0.5 + random.random())
