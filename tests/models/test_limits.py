"""Per-model rate limiters and circuit breakers (``toolwire.models._limits``), without a provider."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolwire.errors import ConfigError
from toolwire.models._limits import Breaker, CircuitBreaker, RateLimit, RateLimiter


def test_a_rate_limiter_serves_runs_on_different_event_loops() -> None:
    """``run_sync`` callers each run their own event loop: the limiter's queue must not belong to the first."""
    limiter = RateLimiter(RateLimit(requests_per_minute=1, period=0.05))

    async def three_at_once() -> float:
        started = time.monotonic()
        # the second waits for the window holding the queue, the third waits in the queue
        await asyncio.gather(limiter.acquire(), limiter.acquire(), limiter.acquire())
        return time.monotonic() - started

    assert asyncio.run(three_at_once()) >= 0.08
    assert asyncio.run(three_at_once()) >= 0.08


def test_a_breaker_opens_after_failures_in_its_window_and_once_more_after_its_cooldown() -> None:
    breaker = CircuitBreaker(Breaker(failures=2, window=10.0, cooldown=5.0))
    breaker.failure(now=0.0)
    breaker.failure(now=11.0)  # the first left the window: still closed
    assert breaker.available(now=11.0)
    breaker.failure(now=12.0)
    assert not breaker.available(now=16.0) and breaker.available(now=17.0)
    breaker.failure(now=17.5)  # after the cooldown one failure opens it again
    assert not breaker.available(now=18.0)
    breaker.success()
    assert breaker.available(now=18.0)


def test_bad_limits_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        RateLimit(requests_per_minute=0)
    with pytest.raises(ConfigError):
        RateLimit(period=0)
    with pytest.raises(ConfigError):
        Breaker(window=0)
