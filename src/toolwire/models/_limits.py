"""Per-model health shared by every run of the process: circuit breakers and rate limiters.

Both are kept in small registries keyed by the model's identity (:func:`model_key`), not by the model
object: the 500 runs of a server each build their own agent, often their own model object, yet they share
one provider quota and one provider outage. Nothing here talks to a provider; the model step consults the
registries before a request and reports each outcome after it.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

from toolwire.errors import ConfigError
from toolwire.models.base import Model


def model_key(model: Model) -> Hashable:
    """The identity runs share health by: adapter class, provider, model name and endpoint."""
    return (type(model).__qualname__, model.provider, model.model_name, getattr(model, "base_url", None))


# ---------------------------------------------------------------------------------------------
# Circuit breaker


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    """When a model of a :class:`~toolwire.models.FallbackModel` is skipped: after ``failures`` failed
    steps within ``window`` seconds it is left out for ``cooldown`` seconds; then it is asked again, and
    one more failure leaves it out for another cooldown (a success closes the breaker)."""

    failures: int = 3
    window: float = 30.0
    cooldown: float = 30.0

    def __post_init__(self) -> None:
        if self.failures < 1 or self.window <= 0 or self.cooldown < 0:
            raise ConfigError("Breaker needs failures >= 1, window > 0 and cooldown >= 0")


class CircuitBreaker:
    """One model's breaker (see :class:`Breaker`)."""

    def __init__(self, policy: Breaker) -> None:
        self.policy = policy
        self._failures: deque[float] = deque()
        self._open_until = 0.0
        self._tripped = False
        """Opened since its last success: after the cooldown one failure opens it again."""

    def available(self, now: float | None = None) -> bool:
        """Whether the model may be asked (closed, or its cooldown is over)."""
        return (time.monotonic() if now is None else now) >= self._open_until

    @property
    def open_until(self) -> float:
        """The ``time.monotonic()`` the cooldown ends at (in the past when closed)."""
        return self._open_until

    def failure(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        failures, policy = self._failures, self.policy
        while failures and failures[0] <= now - policy.window:
            failures.popleft()
        failures.append(now)
        if self._tripped or len(failures) >= policy.failures:
            self._open_until = now + policy.cooldown
            self._tripped = True
            failures.clear()

    def success(self) -> None:
        """The model answered (asked after its cooldown, or while every model was cooling down): closed."""
        self._failures.clear()
        self._tripped = False
        self._open_until = 0.0


_BREAKERS: dict[tuple[Hashable, Breaker], CircuitBreaker] = {}


def breaker_for(model: Model, policy: Breaker) -> CircuitBreaker:
    """The process's breaker of ``model`` under ``policy`` (created on first use)."""
    key = (model_key(model), policy)
    breaker = _BREAKERS.get(key)
    if breaker is None:
        breaker = _BREAKERS[key] = CircuitBreaker(policy)
    return breaker


# ---------------------------------------------------------------------------------------------
# Rate limiter


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    """Requests and tokens per minute one model may take from this process (``None``: no limit)."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    """Counted from the usage finished requests reported (input + output): a request waits while the
    last minute's tokens reached the limit. A request's own tokens are not known before it is sent."""
    period: float = 60.0
    """The window, in seconds ("per minute": 60; shorter in tests)."""

    def __post_init__(self) -> None:
        for value in (self.requests_per_minute, self.tokens_per_minute):
            if value is not None and value < 1:
                raise ConfigError("rate limits must be at least 1 per minute")
        if self.period <= 0:
            raise ConfigError("a rate limit's period must be positive")


class RateLimiter:
    """A sliding one-minute window of request starts and reported tokens; waiters are let in in order."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._starts: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_sum = 0
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        """One waiter at a time checks the window, so runs are admitted first come, first served; one lock
        per event loop (``run_sync`` callers each run their own), the window shared by all."""

    def _wait(self, now: float) -> float:
        """Seconds until a request may start (0: now)."""
        horizon = now - self.limit.period
        while self._starts and self._starts[0] <= horizon:
            self._starts.popleft()
        while self._tokens and self._tokens[0][0] <= horizon:
            self._token_sum -= self._tokens.popleft()[1]
        wait = 0.0
        rpm, tpm = self.limit.requests_per_minute, self.limit.tokens_per_minute
        if rpm is not None and len(self._starts) >= rpm:
            wait = self._starts[len(self._starts) - rpm] + self.limit.period - now
        if tpm is not None and self._token_sum >= tpm:
            excess, frees_at = self._token_sum - tpm, now
            for counted_at, tokens in self._tokens:  # tokens leave the window oldest first
                excess -= tokens
                frees_at = counted_at + self.limit.period
                if excess < 0:
                    break
            wait = max(wait, frees_at - now)
        return max(wait, 0.0)

    async def acquire(self) -> None:
        """Wait (without a busy loop) until the window has room, then count one request start."""
        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = asyncio.Lock()
        async with turn:
            # The clock, not another task, frees the window: there is no event to wait on.
            while (wait := self._wait(time.monotonic())) > 0:  # noqa: ASYNC110
                await asyncio.sleep(wait)
            self._starts.append(time.monotonic())

    def record(self, tokens: int) -> None:
        """Count a finished request's reported tokens."""
        if tokens > 0 and self.limit.tokens_per_minute is not None:
            self._tokens.append((time.monotonic(), tokens))
            self._token_sum += tokens


_LIMITERS: dict[Hashable, RateLimiter] = {}


def rate_limit(
    model: Model,
    *,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    period: float = 60.0,
) -> Model:
    """Limit ``model`` (and every model object with its identity: adapter, name, endpoint) to these rates
    for every run of this process; returns ``model``. Calling it again replaces the limit."""
    limit = RateLimit(
        requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute, period=period
    )
    _LIMITERS[model_key(model)] = RateLimiter(limit)
    return model


def limiter_for(model: Model) -> RateLimiter | None:
    """The process's rate limiter of ``model``, if one was set."""
    if not _LIMITERS:  # the common case: one dictionary check per step
        return None
    return _LIMITERS.get(model_key(model))
