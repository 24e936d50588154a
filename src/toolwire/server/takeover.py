"""``LeaseWatcher``: each replica on PostgreSQL looks for runs whose lease expired (their replica was
killed or lost the database) and continues them, so no turn is left half-done waiting for the user.

Every ``interval`` (a third of the lease TTL, with jitter so replicas do not scan in step) it reads the
expired leases of top-level sessions and starts a takeover run for each (:meth:`RunManager.take_over`):
the run claims the lease with one conditional ``UPDATE`` (the row lock makes racing replicas queue, and
the loser finds the lease renewed), records the unfinished calls as interrupted, and steps on. Its
events go to the shared event log, so clients connected to any replica see the run continue.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from toolwire.server.runs import RunManager
from toolwire.store.replicas import ReplicaRegistry

logger = logging.getLogger("toolwire.server")


@dataclass(slots=True)
class Takeover:
    """One run continued here: which session, and seconds from the lease's expiry scan to its start."""

    session_id: str
    started_at: float


@dataclass
class LeaseWatcher:
    """Scans for expired run leases and continues those runs in this process."""

    runs: RunManager
    expired: Callable[[], Awaitable[list[tuple[str, str | None, str]]]]
    interval: float
    replicas: ReplicaRegistry | None = None
    taken: list[Takeover] = field(default_factory=list)
    """The runs this replica took over (for the health endpoint and tests)."""
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval * random.uniform(0.7, 1.0))
            try:
                await self.scan()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is briefly unreachable: scan again later
                logger.warning("could not scan for expired run leases", exc_info=True)

    async def others_alive(self) -> bool:
        """Whether another replica beat recently (it will take over what this one hands over)."""
        if self.replicas is None:
            return False
        try:
            return await self.replicas.others(within=self.interval * 3) > 0
        except Exception:
            logger.warning("could not read which replicas are alive", exc_info=True)
            return False

    async def scan(self) -> int:
        """Take over what expired now; the number of runs this replica continued."""
        if self.replicas is not None:
            await self.replicas.beat()
        won = 0
        for session_id, user_id, dead_owner in await self.expired():
            if user_id is None:
                continue
            if await self.runs.take_over(session_id, user_id, dead_owner):
                logger.warning("took over the run of session %s (its replica stopped)", session_id)
                self.taken.append(Takeover(session_id, time.time()))
                won += 1
        return won
