"""``Replication``: what a store shared by several server replicas offers them, as one object.

A store returns one from :meth:`~toolwire.store.base.Store.replication` when its runs hold leases that other
processes may take over (PostgreSQL), else ``None`` (SQLite, memory: one process). The server reads the
capability once at start-up instead of probing the store for attributes, so what scale-out needs from a
store is this small interface and nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an agent without a SQL store never loads SQLAlchemy
    from sqlalchemy.ext.asyncio import AsyncEngine

ExpiredRuns = Callable[[], Awaitable[list[tuple[str, str | None, str]]]]
"""Top-level sessions whose run lease expired: (session id, user id, the dead run's lease owner)."""


@dataclass(frozen=True, slots=True)
class Replication:
    """The replicas' shared database and the store operations a takeover needs."""

    engine: AsyncEngine
    """The database every replica shares: its event log and replica registry live there too."""
    lease_ttl: float
    """Seconds a run's lease lasts unless renewed (a replica that stops renewing is taken over after it)."""
    expired_runs: ExpiredRuns
    fence_expired: Callable[[str], Awaitable[None]]
    """Fence the run whose lease on a session expired: its writes and events are refused from now on."""
    raise_last_seq: Callable[[str, int], Awaitable[None]]
    """Record that a session's events up to a seq were published (a run taking over numbers after them)."""
