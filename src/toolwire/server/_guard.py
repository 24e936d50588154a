"""What ``toolwire serve`` adds to uvicorn so slow or numerous clients cannot stop the service.

- A connection cap: at ``max_connections`` open connections, a new one takes the place of the oldest
  connection that is only waiting for a request head (a slow or idle client); when every connection is
  busy with a request the new one gets a short 503 and is closed at once. The default stays under the
  process's file-descriptor limit with room for a whole accept burst (``ACCEPT_BACKLOG``), so
  ``accept()`` never runs out of descriptors.
- A header timeout: a connection that has not sent a whole request head within ``header_timeout``
  seconds is closed (uvicorn only times out idle keep-alive connections).
- Bounded logs: each distinct log message is written at most a few times per window, then counted.
- Shutdown: runs are cancelled (stored as cancelled) and every stream is closed before uvicorn waits
  for connections, so SIGTERM ends the process within ``timeout_graceful_shutdown``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("toolwire.server")

_BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


ACCEPT_BACKLOG = 128
"""The listen backlog, which is also how many connections asyncio accepts in one burst before any of
them reaches the cap check: the default cap leaves room for it."""


def default_max_connections() -> int:
    """1,000, or fewer when the file-descriptor limit would not leave room for accept bursts, the store
    and the logs."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1_000
    # Two bursts: the connections a burst displaces are closed on the next loop turn, when asyncio may
    # already be accepting the next burst.
    return max(16, min(1_000, soft - 64 - 2 * ACCEPT_BACKLOG))


def guarded_protocol(*, max_connections: int, header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a connection cap and a request-head timeout."""
    # Connections waiting for a request head, oldest first: the ones a new connection may displace.
    waiting: dict[GuardedH11Protocol, None] = {}

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.server_state.connections) >= max_connections:
                if not waiting:
                    _note("connection refused: %d connections busy (max_connections)", max_connections)
                    transport.write(_BUSY)
                    transport.close()
                    return
                oldest = next(iter(waiting))
                _note("closed the oldest connection waiting for a request head (max_connections)")
                oldest._disarm()
                oldest.transport.close()
                oldest.connection_lost(None)  # frees its slot now, not on the next loop turn
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self in self.server_state.connections:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the request head is complete (or this became a WebSocket)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's head must come in time too

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(header_timeout, self._expire)
            waiting[self] = None

        def _disarm(self) -> None:
            waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._disarm()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                _note("closed a connection that sent no complete request head in %.0fs", header_timeout)
                self.transport.close()

    return GuardedH11Protocol


class BoundedLogFilter(logging.Filter):
    """Lets each message template through ``burst`` times per ``window`` seconds, then counts it."""

    def __init__(self, burst: int = 5, window: float = 10.0) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        started, count = self._seen.get(key, (now, 0))
        if now - started > self.window:
            if count > self.burst:
                record.msg = f"{record.msg} [{count - self.burst} more like this were not logged]"
            started, count = now, 0
        count += 1
        if len(self._seen) > 10_000:
            self._seen.clear()  # distinct messages are few; this bounds memory all the same
        self._seen[key] = (started, count)
        return count <= self.burst


_note_filter = BoundedLogFilter()


def _note(message: str, *args: Any) -> None:
    record = logger.makeRecord(logger.name, logging.WARNING, __file__, 0, message, args, None)
    if _note_filter.filter(record):
        logger.handle(record)


def install_log_bounds() -> None:
    """Bound what the server's loggers (and asyncio's accept errors) can write under overload."""
    bounded = BoundedLogFilter()
    for name in ("uvicorn.error", "toolwire.server", "asyncio"):
        logging.getLogger(name).addFilter(bounded)


class Server(uvicorn.Server):
    """uvicorn's server, closing toolwire's runs and streams first when it shuts down."""

    def __init__(
        self,
        config: uvicorn.Config,
        before_shutdown: Callable[[], Awaitable[None]],
        on_signal: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._before_shutdown = before_shutdown
        self._on_signal = on_signal

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # The signal handler itself: uvicorn notices ``should_exit`` only at its next tick (0.1 s) and
        # keeps serving until ``shutdown``; turns arriving meanwhile must already be refused.
        if self._on_signal is not None:
            self._on_signal()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await asyncio.wait_for(self._before_shutdown(), timeout=self.config.timeout_graceful_shutdown)
        except TimeoutError:
            logger.error("runs did not stop in time; shutting down anyway")
        await super().shutdown(sockets)
