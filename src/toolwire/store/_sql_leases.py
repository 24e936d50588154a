"""Statements and settings of run leases on PostgreSQL (the session row's lock columns, renewed by the
run's replica in the background; :mod:`toolwire.server.takeover` continues runs whose lease expired)."""

from __future__ import annotations

import os

import sqlalchemy as sa

from toolwire.errors import ConfigError
from toolwire.store.schema import sessions

DEFAULT_LEASE_TTL = 6.0
"""Seconds a run lease lasts unless renewed (renewed every third of it): a replica killed mid-run is
noticed within this plus one scan interval (a third of it), 8 s by default."""
LEASE_ENV = "TOOLWIRE_LEASE_TTL"

EXPIRED_RUNS = (
    sa.select(sessions.c.id, sessions.c.user_id, sessions.c.lock_owner)
    .where(
        sessions.c.lock_owner.is_not(None),
        sessions.c.lock_expires_at < sa.bindparam("x_now"),
        sessions.c.parent_session_id.is_(None),
    )
    .order_by(sessions.c.lock_expires_at)
    .limit(sa.bindparam("x_limit"))
)
RENEW_LEASE = (
    sa.update(sessions)
    .where(
        sessions.c.id == sa.bindparam("n_id"),
        sessions.c.lock_owner == sa.bindparam("n_owner"),
        sessions.c.fenced_epoch < sessions.c.lock_epoch,
    )
    .values(lock_expires_at=sa.bindparam("n_expires"))
)
"""A run's renewal: only while it still holds the lock, unfenced (a renewal never claims a lock freed
meanwhile, nor keeps one a takeover is claiming)."""
FENCE_EXPIRED = (
    sa.update(sessions)
    .where(
        sessions.c.id == sa.bindparam("f_id"),
        sessions.c.lock_owner.is_not(None),
        sessions.c.lock_expires_at < sa.bindparam("f_now"),
    )
    .values(fenced_epoch=sessions.c.lock_epoch)
)
"""A takeover's first step: the expired run's epoch is fenced (its events are refused from now on)."""
RAISE_LAST_SEQ = (
    sa.update(sessions)
    .where(sessions.c.id == sa.bindparam("r_id"), sessions.c.last_seq < sa.bindparam("r_seq"))
    .values(last_seq=sa.bindparam("r_seq"))
)


def lease_seconds(value: object) -> float:
    """The lease TTL from the store URL's ``?lease_ttl=``, else ``TOOLWIRE_LEASE_TTL``, else the default."""
    raw = value if isinstance(value, str) else os.environ.get(LEASE_ENV)
    if raw is None or raw == "":
        return DEFAULT_LEASE_TTL
    try:
        ttl = float(raw)
    except ValueError:
        raise ConfigError(f"lease_ttl must be a number of seconds, not {raw!r}") from None
    if not 0.3 <= ttl <= 3600:
        raise ConfigError(f"lease_ttl must be between 0.3 and 3600 seconds, not {ttl}")
    return ttl
