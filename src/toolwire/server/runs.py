"""``RunManager``: the server owns the running agent loops (at most one per session in this process).

Clients only watch a run (its events go to the :class:`~toolwire.server.hub.EventHub`): a client that
disconnects stops watching, never the run. ``cancel`` stops one on purpose (stored as cancelled);
``shutdown`` cancels them all, so no tool keeps running unowned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from toolwire.agent.agent import Agent
from toolwire.errors import SessionBusyError
from toolwire.events import AgentEvent, InteractionEnd
from toolwire.server.hub import EventHub

logger = logging.getLogger("toolwire.server")


class RunManager:
    """Owns the running agent loops: at most one per session in this process."""

    def __init__(self, agent: Agent[Any, Any], hub: EventHub) -> None:
        self.agent = agent
        self.hub = hub
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._starting: set[str] = set()

    def running(self, session_id: str) -> bool:
        return session_id in self._tasks or session_id in self._starting

    async def start(self, session_id: str, prompt: str, *, user_id: str) -> None:
        """Start a run; returns once it holds the session (its first event is published).

        Raises :class:`SessionBusyError` when a run is going on, here or in another replica.
        """
        if self.running(session_id):
            raise SessionBusyError(f"session {session_id!r} is already running; wait for it or cancel it")
        self._starting.add(session_id)
        try:
            events = self.agent.stream(prompt, session_id=session_id, user_id=user_id).__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
            self.hub.publish(first)
            self._tasks[session_id] = asyncio.create_task(self._pump(session_id, events))
        finally:
            self._starting.discard(session_id)

    async def _pump(self, session_id: str, events: AsyncIterator[AgentEvent]) -> None:
        try:
            async for event in events:
                if isinstance(event, InteractionEnd) and event.session_id == session_id:
                    # The loop released the session before yielding its end: so must we, before anyone
                    # sees it, or a client that starts the next turn on [DONE] would get 409.
                    self._tasks.pop(session_id, None)
                self.hub.publish(event)
        except asyncio.CancelledError:
            raise
        except Exception:  # the loop already published its error and interaction end
            logger.info("run on session %s ended with an error", session_id, exc_info=True)
        finally:
            self._tasks.pop(session_id, None)

    async def cancel(self, session_id: str) -> bool:
        task = self._tasks.get(session_id)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return True

    async def shutdown(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
