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
from toolwire.agent.loop import AgentRun
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
        self._runs: dict[str, AgentRun[Any]] = {}
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
            run = self.agent.stream(prompt, session_id=session_id, user_id=user_id)
            events = run.__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
            self.hub.publish(first)
            self._runs[session_id] = run
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
            raise  # cancel() / shutdown() announce the end (self._runs keeps the run for them)
        except Exception:  # the loop already published its error and interaction end
            logger.info("run on session %s ended with an error", session_id, exc_info=True)
            self._runs.pop(session_id, None)
        else:
            self._runs.pop(session_id, None)
        finally:
            self._tasks.pop(session_id, None)

    async def cancel(self, session_id: str) -> bool:
        task = self._tasks.get(session_id)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        self._announce_end(session_id)
        return True

    async def shutdown(self) -> None:
        sessions = list(self._tasks)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for session_id in sessions:
            self._announce_end(session_id)

    def _announce_end(self, session_id: str) -> None:
        """A cancelled run cannot yield its end; publish it so every watcher sees the turn end."""
        run = self._runs.pop(session_id, None)
        for event in run.unpublished_end if run is not None else ():
            self.hub.publish(event)
