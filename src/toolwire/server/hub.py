"""In-process fan-out of agent events to stream subscribers, with bounded replay for resume.

Every event is published to the stream of its own session and of each ancestor session, so a
client watching a conversation sees its sub-agents too. Each stream numbers what it carries with a
*cursor* (the SSE ``id``): clients resume with ``Last-Event-ID``. Cursors start at the stream's
creation time in microseconds, so a cursor handed out before a restart is never mistaken for one
of the new process: it falls outside the buffer and the client is told to reload the history
(``stream-reset``) instead of silently missing events.

Nothing here ever blocks the agent run: buffers are bounded rings, and a subscriber that falls
more than ``subscriber_limit`` events behind is cut off with a ``stream-reset`` (it reloads history
and resumes), rather than slowing the run or growing memory without bound.

What finished streams keep is bounded three ways: events per stream (``buffer_size``), bytes per
stream (``buffer_bytes``, estimated from each event's text and payload) and age: a stream nobody
watches that has published nothing for ``retain_seconds`` is dropped (a client that comes back later
is told to reload the history, as after a restart).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwire.events import AgentEvent, InteractionEnd, event_to_dict
from toolwire.server._turn import MARKERS, OpenTurn, open_turn

RESET = {"type": "stream-reset"}


@dataclass(slots=True)
class StreamItem:
    cursor: int
    event: AgentEvent | None
    """``None`` for a ``stream-reset`` marker."""
    _json: dict[str, Any] | None = None
    size: int = 0
    """Estimated bytes held for this item."""

    def as_dict(self) -> dict[str, Any]:
        if self._json is None:
            self._json = event_to_dict(self.event) if self.event is not None else dict(RESET)
        return self._json


@dataclass(slots=True, eq=False)
class QueueSubscriber:
    """One subscription's queue: a subscriber ``limit`` items behind is cut off with a ``stream-reset``."""

    queue: asyncio.Queue[StreamItem | None]
    limit: int
    overflowed: bool = False

    def push(self, item: StreamItem) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= self.limit:
            self.overflowed = True
            self.queue.put_nowait(StreamItem(cursor=item.cursor, event=None))
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(item)


def end_subscriptions(subscribers: set[Any]) -> None:
    """End each of ``subscribers`` (:class:`QueueSubscriber`): its iterator ends, its SSE response completes."""
    for subscriber in subscribers:
        subscriber.overflowed = True
        subscriber.queue.put_nowait(None)
    subscribers.clear()


@dataclass(slots=True)
class _Stream:
    base: int
    buffer: deque[StreamItem]
    next_cursor: int = 0
    subscribers: set[QueueSubscriber] = field(default_factory=set)
    held_bytes: int = 0
    last_publish: float = field(default_factory=time.monotonic)

    @property
    def cursor(self) -> int:
        """The cursor of the last item published (``base`` when none)."""
        return self.next_cursor - 1


class EventHub:
    """Per-session event streams (a session's stream includes its sub-sessions' events)."""

    def __init__(
        self,
        *,
        buffer_size: int = 10_000,
        subscriber_limit: int = 50_000,
        max_streams: int = 10_000,
        buffer_bytes: int = 4_000_000,
        retain_seconds: float = 300.0,
    ):
        self.buffer_size = buffer_size
        self.subscriber_limit = subscriber_limit
        self.max_streams = max_streams
        self.buffer_bytes = buffer_bytes
        self.retain_seconds = retain_seconds
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._parents: dict[str, str] = {}
        self._next_sweep = time.monotonic() + min(retain_seconds, 10.0)

    def _stream(self, session_id: str) -> _Stream:
        stream = self._streams.get(session_id)
        if stream is None:
            base = time.time_ns() // 1000
            stream = _Stream(base=base, buffer=deque(), next_cursor=base + 1)
            self._streams[session_id] = stream
            self._evict()
        else:
            self._streams.move_to_end(session_id)
        return stream

    def held_bytes(self) -> int:
        """Estimated bytes held by every stream's buffer."""
        return sum(stream.held_bytes for stream in self._streams.values())

    def sweep(self, now: float | None = None) -> None:
        """Drop streams nobody watches that published nothing for ``retain_seconds``."""
        now = time.monotonic() if now is None else now
        self._next_sweep = now + min(self.retain_seconds, 10.0)
        stale = [
            key
            for key, stream in self._streams.items()
            if not stream.subscribers and now - stream.last_publish >= self.retain_seconds
        ]
        for key in stale:
            del self._streams[key]
            self._parents.pop(key, None)

    def close_all(self) -> None:
        """End every subscription (server shutdown): each iterator ends, each SSE response completes."""
        for stream in self._streams.values():
            end_subscriptions(stream.subscribers)

    def _evict(self) -> None:
        while len(self._streams) > self.max_streams:
            for key, stream in self._streams.items():
                if not stream.subscribers:
                    del self._streams[key]
                    self._parents.pop(key, None)
                    break
            else:
                return

    async def cursor(self, session_id: str) -> int:
        """The position to resume from after reading the stored history now."""
        return self._stream(session_id).cursor

    async def resume_cursor(self, session_id: str, persisted: dict[str, int]) -> int:
        """Where to resume after reading history persisted up to ``persisted`` (seq per session).

        Just before the first buffered event the history does not hold yet (a tool finished but its
        result is stored only when the step ends); the client drops the replayed rest by seq.
        """
        stream = self._stream(session_id)
        for item in stream.buffer:
            event = item.event
            if event is not None and event.seq > persisted.get(event.session_id, 0):
                return item.cursor - 1
        return stream.cursor

    async def open_turn(self, session_id: str) -> OpenTurn | None:
        """The session's running turn in the buffer (``None`` when its last run ended)."""
        stream = self._streams.get(session_id)
        if stream is None:
            return None
        markers = (
            (
                item.cursor,
                item.event.type,
                item.event.status if isinstance(item.event, InteractionEnd) else None,
            )
            for item in reversed(stream.buffer)
            if item.event is not None and item.event.session_id == session_id and item.event.type in MARKERS
        )
        return open_turn(markers)

    def publish(self, event: AgentEvent, fence: tuple[str, int] | None = None) -> None:
        """Hand ``event`` to its streams now. ``fence`` is for the shared log (:class:`SharedEventHub`): one
        process has no other replica to take a live run over."""
        session_id = event.session_id
        parent = event.parent_session_id
        if parent and parent != session_id and session_id not in self._parents:
            self._parents[session_id] = parent
        now = time.monotonic()
        if now >= self._next_sweep:
            self.sweep(now)
        size = _estimate_size(event)
        seen: set[str] = set()
        target: str | None = session_id
        while target is not None and target not in seen:  # the session and every ancestor
            seen.add(target)
            stream = self._stream(target)
            item = StreamItem(cursor=stream.next_cursor, event=event, size=size)
            stream.next_cursor += 1
            stream.last_publish = now
            buffer = stream.buffer
            buffer.append(item)
            stream.held_bytes += size
            while len(buffer) > self.buffer_size or (
                stream.held_bytes > self.buffer_bytes and len(buffer) > 1
            ):
                stream.held_bytes -= buffer.popleft().size
            for subscriber in stream.subscribers:
                subscriber.push(item)
            target = self._parents.get(target)

    async def open(self, session_id: str, after: int | None = None) -> Subscription:
        """:meth:`subscribe`, with the signature every hub has (the shared one reads the database)."""
        return self.subscribe(session_id, after)

    def subscribe(self, session_id: str, after: int | None = None) -> Subscription:
        """Items of the stream after ``after`` (buffered first, then live); ``None`` = live only."""
        stream = self._stream(session_id)
        subscriber = QueueSubscriber(queue=asyncio.Queue(), limit=self.subscriber_limit)
        if after is not None and after != stream.cursor:
            first = stream.buffer[0].cursor if stream.buffer else stream.next_cursor
            if after > stream.cursor or after < stream.base or after + 1 < first:
                # Another process's cursor, or events already evicted: the client must reload history.
                subscriber.push(StreamItem(cursor=stream.cursor, event=None))
            else:
                for item in stream.buffer:
                    if item.cursor > after:
                        subscriber.push(item)
        stream.subscribers.add(subscriber)
        return Subscription(self, session_id, subscriber)

    def _unsubscribe(self, session_id: str, subscriber: Any) -> None:
        stream = self._streams.get(session_id)
        if stream is not None:
            stream.subscribers.discard(subscriber)


_TEXT_FIELDS = ("delta", "prompt", "message", "text")
_PAYLOAD_FIELDS = ("output", "args", "data", "partial", "usage")


def _estimate_size(event: AgentEvent) -> int:
    """Bytes an event holds, roughly: a fixed envelope plus its text and payload fields."""
    size = 300
    for name in _TEXT_FIELDS:
        value = getattr(event, name, None)
        if isinstance(value, str):
            size += len(value)
    for name in _PAYLOAD_FIELDS:
        value = getattr(event, name, None)
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, dict | list) and value:
            try:
                size += len(json.dumps(value, default=str))
            except (TypeError, ValueError, RecursionError):
                size += 10_000
    return size


class _Unsubscribes(Protocol):
    def _unsubscribe(self, session_id: str, subscriber: Any) -> None: ...


class _Queued(Protocol):
    queue: asyncio.Queue[StreamItem | None]


class Subscription:
    """Async iterator of stream items; ends after a ``stream-reset`` caused by overflow."""

    def __init__(self, hub: _Unsubscribes, session_id: str, subscriber: _Queued) -> None:
        self._hub = hub
        self._session_id = session_id
        self._subscriber = subscriber

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StreamItem]:
        try:
            while True:
                item = await self._subscriber.queue.get()
                if item is None:
                    return
                yield item
        finally:
            self.close()

    async def get(self) -> StreamItem | None:
        """The next item; ``None`` at the end of an overflowed subscription."""
        return await self._subscriber.queue.get()

    def has_queued(self) -> bool:
        """Whether an item is waiting: it is taken without a ping timer, and a writer holds its frames back
        until none is, then sends them in one write (a run publishes several events at once; a write per
        frame is a system call each)."""
        return not self._subscriber.queue.empty()

    def close(self) -> None:
        self._hub._unsubscribe(self._session_id, self._subscriber)
