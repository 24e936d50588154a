"""``RunManager``: the server owns the running agent loops (at most one per session in this process).

Clients only watch a run (its events go to the :class:`~toolwire.server.hub.EventHub`): a client that
disconnects stops watching, never the run. ``cancel`` stops one on purpose (stored as cancelled);
``shutdown`` cancels them all, so no tool keeps running unowned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from toolwire.agent.agent import Agent
from toolwire.agent.config import RunRequest, Takeover
from toolwire.agent.loop import AgentRun
from toolwire.errors import LeaseLostError, SessionBusyError
from toolwire.events import AgentEvent, InteractionEnd
from toolwire.server.errors import draining
from toolwire.server.hub import Hub, StreamKey
from toolwire.tools.pending import Approval, DecisionKey

logger = logging.getLogger("toolwire.server")

W = TypeVar("W")
_START_GRACE = 5.0
"""Seconds a drain waits for runs still starting (opening their session) before it stops the others, and
for a stopped run's step write under way."""


class RunManager:
    """Owns the running agent loops: at most one per session in this process."""

    def __init__(self, agent: Agent[Any, Any], hub: Hub) -> None:
        self.agent = agent
        self.hub = hub
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._runs: dict[str, AgentRun[Any]] = {}
        self._incarnations: dict[str, int] = {}
        """The conversation incarnation each run publishes to (read when the run opened its session)."""
        self._starting: set[str] = set()
        self._no_starts = asyncio.Event()
        """Set while no :meth:`start` is under way (a drain waits for those before handing runs over)."""
        self._no_starts.set()
        self.draining = False
        """Set once the server begins to shut down: every new run is refused (503, see
        :func:`~toolwire.server.errors.draining`) before it stores or runs anything."""

    def count(self) -> int:
        """Runs going on in this process."""
        return len(self._tasks)

    def running(self, session_id: str) -> bool:
        return session_id in self._tasks or session_id in self._starting

    async def start(
        self,
        session_id: str,
        prompt: str | None,
        *,
        user_id: str,
        approvals: Mapping[DecisionKey, Approval] | None = None,
        tool_outputs: Mapping[DecisionKey, Any] | None = None,
        takeover: Takeover | None = None,
        top_level: bool = False,
        watch: Callable[[StreamKey], Awaitable[W]] | None = None,
        agent: Agent[Any, Any] | None = None,
    ) -> W | None:
        """Start a run; returns once it holds the session (its first event is published).

        ``approvals`` / ``tool_outputs`` answer the calls a paused run left waiting (with or without a new
        ``prompt``); they are checked against the store first, so answers that do not apply raise
        :class:`~toolwire.errors.ResumeError` before anything is started or written. Raises
        :class:`SessionBusyError` when a run is going on, here or in another replica.

        ``top_level``: the run's start claims the session (creates it for ``user_id``, or checks that
        ``user_id`` owns it and that it is no sub-agent's) in its one store transaction, so a caller need
        not claim it first. ``watch`` (e.g. a hub subscription) is called with the run's stream once that
        claim succeeded and before the first event is published, so it sees every event of the run and
        nothing of a refused session; what it returns is returned.

        ``agent``: the agent to run instead of the server's (the AG-UI endpoint passes a copy that also
        knows the client's front-end tools); same store, so any replica continues its session.
        """
        self.check_accepting()
        if self.running(session_id):
            raise SessionBusyError(f"session {session_id!r} is already running; wait for it or cancel it")
        self._starting.add(session_id)
        self._no_starts.clear()
        try:
            agent = agent or self.agent
            if takeover is None and (prompt is None or approvals or tool_outputs):
                # Refused answers are a ResumeError before anything is started, published or written.
                await agent.check_answers(
                    session_id, prompt=prompt, approvals=approvals, tool_outputs=tool_outputs
                )
            run: AgentRun[Any] = AgentRun(
                agent.run_config(),
                prompt,
                session_id=session_id,
                user_id=user_id,
                request=RunRequest(
                    approvals=approvals or {},
                    tool_outputs=tool_outputs or {},
                    takeover=takeover,
                    top_level=top_level,
                ),
            )
            events = run.__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return None
            # A run that could not open its session (it failed first) publishes where nobody listens.
            incarnation = run.incarnation or 0
            watcher: W | None = None
            if watch is not None:
                try:
                    watcher = await watch(StreamKey(session_id, incarnation))
                except BaseException:
                    await run.aclose()  # the run ends (recorded) and gives the session back
                    raise
            self.hub.publish(first, incarnation, run.lease)
            self._incarnations[session_id] = incarnation
            self._runs[session_id] = run
            self._tasks[session_id] = asyncio.create_task(self._pump(session_id, run, events))
            return watcher
        finally:
            self._starting.discard(session_id)
            if not self._starting:
                self._no_starts.set()

    def check_accepting(self) -> None:
        """Raise the 503 of a draining server: every way a turn comes in passes here before its first
        write (native messages, the WebSocket, ``POST /api/chat``, answers to paused calls)."""
        if self.draining:
            raise draining()

    async def take_over(self, session_id: str, user_id: str, dead_run_owner: str | None = None) -> bool:
        """Continue the run of a replica that died (its lease expired; ``dead_run_owner``: that run's lease
        owner); ``False`` when another replica was faster (the lease is taken by one conditional UPDATE:
        exactly one wins) or it runs here."""
        if self.running(session_id) or self.draining:
            return False
        store = await self.agent.get_store()
        replication = store.replication()
        unpublished_from: int | None = None
        if replication is not None:  # number after what the dead run already published
            # First fence it: from now on the log refuses its events (it may be only paused, not dead),
            # so the highest seq read next is final and this run never numbers a seq twice.
            await replication.fence_expired(session_id)
            info = await store.get_session(session_id)
            if info is not None:
                published = await self.hub.max_seq(StreamKey(session_id, info.incarnation))
                # Counted in the store but never in the log: the run died between a step's write and the
                # publication of what it counted (its last completions): the takeover announces them.
                if info.last_seq > published:
                    unpublished_from = published + 1
                await replication.raise_last_seq(session_id, published)
        takeover = Takeover(dead_run_owner=dead_run_owner, unpublished_from=unpublished_from)
        try:
            await self.start(session_id, None, user_id=user_id, takeover=takeover)
        except SessionBusyError:
            return False
        return True

    async def _pump(self, session_id: str, run: AgentRun[Any], events: AsyncIterator[AgentEvent]) -> None:
        incarnation = self._incarnations[session_id]
        lease = run.lease
        task = asyncio.current_task()
        try:
            async for event in events:
                if isinstance(event, InteractionEnd) and event.session_id == session_id:
                    # The loop released the session before yielding its end: so must we, before anyone
                    # sees it, or a client that starts the next turn on [DONE] would get 409.
                    self._forget(session_id, task, run)
                self.hub.publish(event, incarnation, lease)
        except asyncio.CancelledError:
            raise  # cancel() / shutdown() announce the end (self._runs keeps the run for them)
        except LeaseLostError:  # another replica took the run over: it owns the turn, nothing to announce
            logger.warning("run on session %s stopped: another replica continues it", session_id)
            self._forget(session_id, task, run)
        except Exception:  # the loop already published its error and interaction end
            logger.info("run on session %s ended with an error", session_id, exc_info=True)
            self._forget(session_id, task, run)
        else:
            self._forget(session_id, task, run)
        finally:
            self._forget(session_id, task, None)

    def _forget(self, session_id: str, task: object, run: AgentRun[Any] | None) -> None:
        """Drop this run's entries, never those of the session's next run (it may start here as soon as
        this one released the session, while this pump still drains its generator)."""
        if self._tasks.get(session_id) is task:
            del self._tasks[session_id]
        if run is not None and self._runs.get(session_id) is run:
            del self._runs[session_id]
            self._incarnations.pop(session_id, None)

    async def cancel(self, session_id: str) -> bool:
        task = self._tasks.get(session_id)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        self._announce_end(session_id)
        return True

    async def hand_over(self) -> list[tuple[str, str]]:
        """Stop every run without recording an end (drain: another replica continues them). Returns
        (session id, lease owner) of each, for the caller to expire the leases once its events are out."""
        await self._starts_settled()
        handed: list[tuple[str, str]] = []
        tasks = []
        stopped: list[tuple[AgentRun[Any], int]] = []
        for session_id, task in list(self._tasks.items()):
            run = self._runs.pop(session_id, None)
            incarnation = self._incarnations.pop(session_id, 0)
            owner = run.detach() if run is not None else None
            if owner is not None:
                handed.append((session_id, owner))
            if run is not None:
                stopped.append((run, incarnation))
            task.cancel()
            tasks.append(task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for run, incarnation in stopped:
            # A run stopped between a step's write and the publication of the events that write counted:
            # publish them (once written), so the next owner numbers after them with no gap and every
            # client sees those calls complete.
            try:
                async with asyncio.timeout(_START_GRACE):
                    events = await run.written_unpublished()
            except TimeoutError:  # not written in time: the next owner finds those calls unfinished
                continue
            for event in events:
                self.hub.publish(event, incarnation, run.lease)
        return handed

    async def _starts_settled(self) -> None:
        """Wait for the runs that were starting when the drain began: each then has its task, so it is
        handed over or cancelled with the others instead of running on unowned after the shutdown."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._no_starts.wait(), _START_GRACE)

    async def shutdown(self) -> None:
        await self._starts_settled()
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
        incarnation = self._incarnations.pop(session_id, 0)
        for event in run.unpublished_end if run is not None else ():
            self.hub.publish(event, incarnation, run.lease if run is not None else None)
