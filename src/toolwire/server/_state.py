"""``ToolwireServer``: what every endpoint shares (agent, store, auth, hub, limits, runs), and who may use
which session.

A session's owner is fixed atomically when it is created (the store's first writer wins) and checked again
at every read, write, command and subscription; a session that does not exist and a session of another
user are refused alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.websockets import WebSocket

from toolwire.agent.agent import Agent
from toolwire.errors import ConfigError
from toolwire.server._input import Limits
from toolwire.server.auth import Auth
from toolwire.server.errors import RequestError, not_found
from toolwire.server.hub import EventHub, Hub, StreamKey, Subscription
from toolwire.server.runs import RunManager
from toolwire.server.shared_hub import SharedEventHub
from toolwire.server.takeover import LeaseWatcher
from toolwire.server.ui_stream import ClientFeatures, parse_client_version
from toolwire.store._locks import lock_owner
from toolwire.store.base import Store
from toolwire.store.records import SessionInfo
from toolwire.store.replicas import ReplicaRegistry
from toolwire.tools.pending import Approval, DecisionKey

logger = logging.getLogger("toolwire.server")


class ToolwireServer:
    """One agent, one store, one hub, and the rules about sessions and users."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        auth: Auth,
        hub: Hub | None,
        limits: Limits,
        ai_sdk_version: str | None,
    ) -> None:
        self.agent = agent
        self.auth = auth
        self._hub_given = hub is not None
        self.hub: Hub = hub or EventHub()
        self.limits = limits
        try:
            self.features = ClientFeatures.for_version(parse_client_version(ai_sdk_version))
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        self.runs = RunManager(agent, self.hub)
        self.watcher: LeaseWatcher | None = None
        self.draining = False
        """Set once shutdown began (at the signal): the health endpoint says so, so balancers stop routing
        here, and new turns are refused with 503 (:meth:`begin_draining`)."""
        self.replica = lock_owner("replica")
        """This process, as named in run leases (host, pid and start time)."""

    async def start(self) -> None:
        """Open the store; on PostgreSQL (its runs hold leases) join the other replicas: one shared
        event log (unless a hub was given) and the watcher that continues runs of dead replicas."""
        replication = (await self.store()).replication()
        if replication is None:
            return
        if not self._hub_given:
            shared = SharedEventHub(replication.engine)
            shared.on_cancel = self.runs.cancel
            await shared.start()
            self.hub = self.runs.hub = shared
        replicas = ReplicaRegistry(replication.engine, self.replica)
        await replicas.create()
        await replicas.beat()
        self.watcher = LeaseWatcher(
            self.runs, replication.expired_runs, interval=replication.lease_ttl / 3, replicas=replicas
        )
        self.watcher.start()

    async def store(self) -> Store:
        """The agent's store, opened on first use."""
        return await self.agent.get_store()

    def user(self, request: Request | WebSocket) -> str:
        """The caller's user id (its token's, or the development user); a :class:`RequestError` if refused."""
        client = request.client.host if request.client else None
        return self.auth.user_for(
            request.headers.get("authorization"), request.query_params.get("token"), client
        )

    async def owns(self, info: SessionInfo, user: str) -> bool:
        """Whether ``user`` owns the session: its own row and, for a sub-session, its conversation's root."""
        if info.user_id != user:
            return False
        root_id = info.user_session_id or info.id
        if root_id == info.id:
            return True
        root = await (await self.store()).get_session(root_id)
        return root is not None and root.user_id == user

    async def authorize(self, session_id: str, user: str) -> SessionInfo:
        """An existing session of ``user``; 404 alike for sessions that do not exist or are someone else's."""
        info = await (await self.store()).get_session(session_id)
        if info is None or not await self.owns(info, user):
            raise not_found(session_id)
        return info

    async def stream_key(self, info: SessionInfo) -> StreamKey:
        """The event stream of a session the caller was authorized for: keyed by its conversation's
        incarnation (the root's), which its runs publish to; 404 when the root is gone meanwhile."""
        root_id = info.user_session_id or info.id
        if root_id == info.id:
            return StreamKey(info.id, info.incarnation)
        root = await (await self.store()).get_session(root_id)
        if root is None:
            raise not_found(info.id)
        return StreamKey(info.id, root.incarnation)

    async def claim(self, session_id: str, user: str) -> SessionInfo:
        """The session for a new turn: created for ``user`` if it does not exist, in one atomic step (the
        first writer fixes the owner), otherwise only if ``user`` owns it; 404 alike if not. A draining
        server refuses first (503): it creates nothing."""
        self.runs.check_accepting()
        store = await self.store()
        info = await store.ensure_session(
            SessionInfo(id=session_id, user_session_id=session_id, user_id=user)
        )
        if not await self.owns(info, user):
            raise not_found(session_id)
        if info.parent_session_id:
            raise RequestError("sub-agent sessions take no user messages", status=403, kind="forbidden")
        return info

    async def start_watched(
        self,
        session_id: str,
        prompt: str | None,
        *,
        user: str,
        approvals: Mapping[DecisionKey, Approval] | None = None,
        tool_outputs: Mapping[DecisionKey, Any] | None = None,
        top_level: bool = False,
        agent: Agent[Any, Any] | None = None,
    ) -> Subscription:
        """Start a turn (:meth:`RunManager.start`) and subscribe to its stream: subscribed once the run holds
        the session and before its first event is published, so it misses none of them and follows the
        incarnation the run writes to; a run that ended before any event gets a subscription from now."""
        subscription = await self.runs.start(
            session_id,
            prompt,
            user_id=user,
            approvals=approvals,
            tool_outputs=tool_outputs,
            top_level=top_level,
            agent=agent,
            watch=lambda key: self.hub.open(key, None),
        )
        if subscription is None:
            info = await self.authorize(session_id, user)
            subscription = await self.hub.open(StreamKey(session_id, info.incarnation), None)
        return subscription

    async def cancel(self, session_id: str) -> bool:
        """Cancel the session's run, here or on the replica running it (it is stored as cancelled there);
        whether one was running. Across replicas this waits, briefly, for that replica to end it."""
        if await self.runs.cancel(session_id):
            return True
        store = await self.store()
        if not await store.run_in_progress(session_id) or not await self.hub.request_cancel(session_id):
            return False
        for _ in range(100):  # the running replica releases the session once the run is cancelled
            await asyncio.sleep(0.05)
            if not await store.run_in_progress(session_id):
                return True
        return False

    def begin_draining(self) -> None:
        """Shutdown began: refuse new turns from now on (503 with ``Retry-After``, nothing stored or run),
        so their clients send them to another replica while this one hands its runs over. Synchronous:
        it is called from the signal handler, before the server stops accepting connections."""
        self.draining = True
        self.runs.draining = True

    async def close(self) -> None:
        """Shutdown. With other replicas alive (PostgreSQL), hand the runs over: stop them recording
        nothing, publish what they streamed, and expire their leases so another replica continues each at
        its next scan. Otherwise cancel every run (stored as cancelled). Then end every open stream."""
        self.begin_draining()
        watcher, self.watcher = self.watcher, None
        handed: list[tuple[str, str]] = []
        if watcher is not None:
            await watcher.stop()
            if self.runs.count() and await watcher.others_alive():
                handed = await self.runs.hand_over()
        await self.runs.shutdown()
        await self.hub.close()  # the handed-over runs' last events are written first
        if watcher is not None:
            await self._expire(handed, watcher)

    async def _expire(self, handed: list[tuple[str, str]], watcher: LeaseWatcher) -> None:
        store = await self.store()
        for session_id, owner in handed:
            try:
                await store.lock_session(session_id, owner, ttl=0)  # expired now: taken at the next scan
                logger.warning("handed the run of session %s over to another replica", session_id)
            except Exception:  # it expires by itself within its TTL
                logger.warning("could not expire the lease of %s", session_id, exc_info=True)
        if watcher.replicas is not None:
            with contextlib.suppress(Exception):
                await watcher.replicas.leave()
