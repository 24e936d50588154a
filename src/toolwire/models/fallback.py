"""``FallbackModel``: a step that fails on one model is asked of the next, whatever its wire family.

The agent's model step does the failing over (``toolwire.agent._model_step``): it asks
:meth:`FallbackModel.candidates` for the models to try, in order, drops whatever the failed attempt
streamed (nothing of it is stored), emits a ``failover`` event and asks the next model with the same
canonical request. The history needs no rewriting for the next provider: every adapter already reads only
its own ``provider_metadata`` key and sends another provider's signatures, item ids and provider-executed
parts the way it would after a provider switch (``models/_blocks.py`` also makes foreign tool-call ids fit
Anthropic's and Bedrock's id pattern).

:meth:`FallbackModel.stream` (for :func:`~toolwire.models.collect` and other direct callers) fails over
only while nothing of the answer has been yielded: a stream cut after output raises, as a plain model's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from toolwire.errors import ConfigError, ProviderError
from toolwire.models._builder import closing
from toolwire.models._limits import Breaker, CircuitBreaker, breaker_for
from toolwire.models._window import is_context_length_error
from toolwire.models.base import (
    Model,
    ModelRequest,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    StreamStart,
)

if TYPE_CHECKING:
    from toolwire.models import ModelSpec

FailoverOn: TypeAlias = int | str | type[ProviderError]
"""A non-retryable error to fail over on anyway: an HTTP status (``400``), a provider error code
(``"content_filter"``, ``"context_length_exceeded"``) or an error class."""


_DEFAULT_BREAKER = Breaker()


class FallbackModel(Model):
    """Asks ``primary``, and when a step fails with a retryable error, each fallback in turn.

    Retryable errors are those a plain model is retried on (connection refused or reset, timeouts, 5xx,
    429, 529, a stream cut at any point, even after partial text or tool arguments); each model first gets
    the agent's own ``retries`` for failures before any output. Other errors (400, 401, a content filter)
    end the step unless ``failover_on`` lists them. A request too long for the model asked (a context-length
    error) goes to ``larger_context`` when one is given. Every step starts on the primary again unless its
    circuit breaker (``breaker``, shared by every run of the process) has it cooling down.
    """

    def __init__(
        self,
        primary: ModelSpec,
        *fallbacks: ModelSpec,
        failover_on: Iterable[FailoverOn] = (),
        breaker: Breaker | None = _DEFAULT_BREAKER,
        larger_context: ModelSpec | None = None,
    ) -> None:
        from toolwire.models import infer_model  # the resolver imports this module

        if not fallbacks and larger_context is None:
            raise ConfigError("FallbackModel needs a fallback model or a larger_context model")
        self.models: tuple[Model, ...] = tuple(infer_model(m) for m in (primary, *fallbacks))
        """The models in the order they are asked."""
        self.larger_context = infer_model(larger_context) if larger_context is not None else None
        """The model asked when a step's request is too long for the model asked (a context-length error),
        instead of the other fallbacks (which may have the same window)."""
        if any(isinstance(m, FallbackModel) for m in (*self.models, self.larger_context)):
            raise ConfigError("a FallbackModel cannot contain another FallbackModel: list its models instead")
        self.failover_on = tuple(failover_on)
        self.breaker = breaker
        """Policy of the per-model circuit breakers (``None``: every step tries every model in order)."""
        # The process's breakers, looked up once: the registry hands every run the same objects.
        self._breakers: dict[int, CircuitBreaker] = (
            {id(m): breaker_for(m, breaker) for m in self.models} if breaker is not None else {}
        )
        first = self.models[0]
        # What the loop asks of "the model" before a step (driver, output mode, step-start) is the
        # primary's: the step's answering model is recorded on the step itself.
        self.provider = first.provider
        self.model_name = first.model_name
        self.supports_tools = first.supports_tools
        self.tool_calls_per_turn = first.tool_calls_per_turn
        self.supports_native_output = first.supports_native_output
        self.forced_tool_call = first.forced_tool_call
        self.prompted_output_without_tools = first.prompted_output_without_tools

    @property
    def primary(self) -> Model:
        return self.models[0]

    @property
    def otel_provider_name(self) -> str:
        return self.primary.otel_provider_name

    @property
    def context_window(self) -> int | None:
        """The primary's (a step is sized for the model asked first), unless set on the wrapper."""
        return self._context_window if self._context_window is not None else self.primary.context_window

    @context_window.setter
    def context_window(self, tokens: int | None) -> None:
        self._context_window = tokens

    @property
    def max_output_tokens(self) -> int | None:
        return (
            self._max_output_tokens if self._max_output_tokens is not None else self.primary.max_output_tokens
        )

    @max_output_tokens.setter
    def max_output_tokens(self, tokens: int | None) -> None:
        self._max_output_tokens = tokens

    @property
    def native_output_with_tools(self) -> bool:
        return self.primary.native_output_with_tools

    def candidates(self) -> Sequence[Model]:
        """The models to ask for one step, in order: those whose breaker is not cooling down; when every
        one is, all of them, the one whose cooldown ends first leading (better a try than no answer)."""
        if not self._breakers:
            return self.models
        now = time.monotonic()
        breakers = [self._breakers[id(m)] for m in self.models]
        if all(b.available(now) for b in breakers):  # the usual case: no new list
            return self.models
        ready = tuple(m for m, b in zip(self.models, breakers, strict=True) if b.available(now))
        if ready:
            return ready
        order = sorted(range(len(self.models)), key=lambda i: breakers[i].open_until)
        return tuple(self.models[i] for i in order)

    def fails_over(self, error: ProviderError) -> bool:
        """Whether ``error`` moves the step to the next model."""
        if error.retryable:
            return True
        for item in self.failover_on:
            if isinstance(item, int) and not isinstance(item, bool):
                if error.status == item:
                    return True
            elif isinstance(item, str):
                if item in (error.code, type(error).__name__):
                    return True
            elif isinstance(item, type) and isinstance(error, item):
                return True
        return False

    def after_failure(
        self, model: Model, error: ProviderError, remaining: Sequence[Model]
    ) -> Sequence[Model]:
        """The models still to ask after ``model`` failed a step with ``error`` (empty: the error ends it).

        A context-length error (not counted by the breaker: the model is well) goes to ``larger_context``,
        or without one to the ``remaining`` candidates whose known window is larger than the failed one (the
        window the error states, else the failed model's); an error the wrapper fails over on goes to the
        ``remaining`` candidates and counts as a failure."""
        if is_context_length_error(error) and model is not self.larger_context:
            if self.larger_context is not None:
                return (self.larger_context,)
            larger = _larger_windows(remaining, getattr(error, "limit", None) or model.context_window)
            if larger:
                return larger
        if not self.fails_over(error):
            return ()
        self.failed(model, error)
        return remaining

    def failed(self, model: Model, error: ProviderError) -> None:
        """A step failed on ``model`` with ``error`` (that it fails over on): counted by its breaker."""
        breaker = self._breakers.get(id(model))
        if breaker is not None:
            breaker.failure()

    def answered(self, model: Model) -> None:
        """``model`` answered a step: its breaker closes."""
        breaker = self._breakers.get(id(model))
        if breaker is not None:
            breaker.success()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        queue = list(self.candidates())
        while queue:
            model = queue.pop(0)
            # Bookkeeping parts are held back until the answer starts, so a failure before it can still
            # move to the next model with nothing yielded.
            held: list[ModelStreamPart] = []
            started = False
            try:
                async with closing(model.stream(request)) as parts:
                    async for part in parts:
                        if not started and isinstance(part, StreamError):
                            raise part.error  # an error event before the answer: fails over too
                        if not started and isinstance(part, StreamStart | ResponseMetadata):
                            held.append(part)
                            continue
                        if not started:
                            started = True
                            for early in held:
                                yield early
                        yield part
            except ProviderError as exc:
                if started:
                    raise
                queue = list(self.after_failure(model, exc, queue))
                if not queue:
                    raise
                continue
            for early in held if not started else ():
                yield early
            self.answered(model)
            return

    async def aclose(self) -> None:
        for model in (*self.models, *((self.larger_context,) if self.larger_context else ())):
            await model.aclose()


def _larger_windows(models: Sequence[Model], window: int | None) -> Sequence[Model]:
    """The ``models`` known to hold more than ``window`` tokens (none when that window is unknown: a model
    of unknown size would likely fail the same way)."""
    if window is None:
        return ()
    return tuple(m for m in models if (m.context_window or 0) > window)
