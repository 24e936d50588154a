"""Which server replicas are alive on one PostgreSQL: each beats in ``toolwire_replicas`` while it runs
(the lease watcher's scan), so a replica shutting down knows whether anyone can take its runs over."""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

_DDL_LOCK_KEY = 0x74775F7265706C69  # "tw_repli": only the same in every process matters
_CREATE = """CREATE TABLE IF NOT EXISTS toolwire_replicas (
    id VARCHAR(255) PRIMARY KEY,
    seen_at DOUBLE PRECISION NOT NULL
)"""
_BEAT = sa.text(
    "INSERT INTO toolwire_replicas (id, seen_at) VALUES (:id, :now) "
    "ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at"
)
_OTHERS = sa.text("SELECT count(*) FROM toolwire_replicas WHERE id <> :id AND seen_at > :since")
_LEAVE = sa.text("DELETE FROM toolwire_replicas WHERE id = :id OR seen_at < :stale")


class ReplicaRegistry:
    """This replica's heartbeat row, and how many others beat recently."""

    def __init__(self, engine: AsyncEngine, replica_id: str) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._setup = engine
        self.replica_id = replica_id

    async def create(self) -> None:
        async with self._setup.begin() as conn:
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_DDL_LOCK_KEY)))
            await conn.execute(sa.text(_CREATE))

    async def beat(self) -> None:
        async with self._engine.connect() as conn:
            await conn.execute(_BEAT, {"id": self.replica_id, "now": time.time()})

    async def others(self, within: float) -> int:
        """Replicas other than this one that beat in the last ``within`` seconds."""
        async with self._engine.connect() as conn:
            since = time.time() - within
            return int((await conn.execute(_OTHERS, {"id": self.replica_id, "since": since})).scalar_one())

    async def leave(self) -> None:
        """Remove this replica's row (and rows of replicas silent for an hour)."""
        async with self._engine.connect() as conn:
            await conn.execute(_LEAVE, {"id": self.replica_id, "stale": time.time() - 3600})
