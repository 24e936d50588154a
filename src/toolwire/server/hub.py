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
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from toolwire.events import (
    AgentEvent,
    InteractionEnd,
    ReasoningDeltaEvent,
    TextDeltaEvent,
    ToolInputDeltaEvent,
    event_to_dict,
)
from toolwire.server._turn import MARKERS, OpenTurn, open_turn

RESET = {"type": "stream-reset"}
DELETED = {"type": "session-deleted"}
"""The last item of a stream whose conversation was deleted: the client stops following it (reloading it
would find nothing, and a page that creates a conversation it cannot find would bring the id back)."""


class StreamKey(NamedTuple):
    """One event stream: a session's events (its sub-sessions' included) in one incarnation of its
    conversation (:attr:`~toolwire.store.records.SessionInfo.incarnation` of the conversation's root).

    Keyed by the incarnation, not the id alone: after a conversation is deleted, whoever creates the same
    id again gets a new stream, so a subscription or a cursor of the deleted one never carries the new
    one's events, nor the new one's replay the deleted one's."""

    session_id: str
    incarnation: int


class Hub(Protocol):
    """The event hub every endpoint and the run manager use: the in-process :class:`EventHub` (one
    process) or :class:`~toolwire.server.shared_hub.SharedEventHub` (replicas on one PostgreSQL). One
    interface, so nothing outside the hubs asks which one it has."""

    shared: bool
    """Whether other replicas see what this hub publishes (the health endpoint reports it)."""

    def publish(self, event: AgentEvent, incarnation: int, fence: tuple[str, int] | None = None) -> None:
        """Publish ``event`` of a run of the conversation in ``incarnation``; ``fence`` (the run's top-level
        session and lease epoch) lets a shared log refuse a run that was taken over."""
        ...

    async def open(self, key: StreamKey, after: int | None = None) -> Subscription: ...

    async def cursor(self, key: StreamKey) -> int: ...

    async def resume_cursor(self, key: StreamKey, persisted: dict[str, int]) -> int: ...

    async def open_turn(self, key: StreamKey) -> OpenTurn | None: ...

    async def max_seq(self, key: StreamKey) -> int:
        """The highest seq published for the stream's session (a takeover numbers after it)."""
        ...

    def end_streams(self, session_ids: Iterable[str], incarnation: int, *, deleted: bool = True) -> None: ...

    async def request_cancel(self, session_id: str) -> bool:
        """Ask the replica running ``session_id``'s run to cancel it; whether the request went anywhere
        (``False`` for a hub that only this process publishes to)."""
        ...

    async def close(self) -> None:
        """Shutdown: write what is queued, then end every subscription."""
        ...


class Ancestry:
    """The parent of each sub-session of the conversations whose runs are going on, to publish a
    sub-agent's event to every ancestor's stream too.

    Kept per conversation and forgotten when the conversation's run ends (its root's ``interaction-end``):
    the map holds the trees of running turns, not every sub-session ever seen."""

    __slots__ = ("_trees",)

    def __init__(self) -> None:
        self._trees: dict[str, dict[str, str]] = {}

    def targets(self, event: AgentEvent) -> list[str]:
        """The streams ``event`` goes to: its session's and each ancestor's (learning its parent)."""
        session_id = event.session_id
        parent = event.parent_session_id
        if not parent or parent == session_id:
            return [session_id]
        root = event.user_session_id or parent
        tree = self._trees.get(root)
        if tree is None:
            tree = self._trees[root] = {}
        tree.setdefault(session_id, parent)
        out: list[str] = []
        target: str | None = session_id
        while target is not None and target not in out:
            out.append(target)
            target = tree.get(target)
        return out

    def ended(self, event: AgentEvent) -> None:
        """Forget a conversation's tree once its root's run ended (``event`` is any published event)."""
        if isinstance(event, InteractionEnd) and not event.parent_session_id and self._trees:
            self._trees.pop(event.session_id, None)

    def forget(self, session_ids: Iterable[str]) -> None:
        for session_id in session_ids:
            self._trees.pop(session_id, None)

    def __len__(self) -> int:
        return sum(len(tree) for tree in self._trees.values())


@dataclass(slots=True)
class StreamItem:
    cursor: int
    event: AgentEvent | None
    """``None`` for a ``stream-reset`` marker."""
    _json: dict[str, Any] | None = None
    size: int = 0
    """Estimated bytes held for this item."""
    first: int = 0
    """For deltas merged into this item once their run ended (:func:`compact_deltas`): the cursor of the
    first of them (``0``: one event). A client that resumes between it and ``cursor`` holds part of the
    text: it is told to reload the history instead."""

    def as_dict(self) -> dict[str, Any]:
        if self._json is None:
            self._json = event_to_dict(self.event) if self.event is not None else dict(RESET)
        return self._json


def final_item(cursor: int, *, deleted: bool) -> StreamItem:
    """The marker that ends a stream: ``session-deleted``, or ``stream-reset`` (reload the history)."""
    return StreamItem(cursor=cursor, event=None, _json=dict(DELETED if deleted else RESET))


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


def end_subscriptions(subscribers: set[Any], *, last: StreamItem | None = None) -> None:
    """End each of ``subscribers`` (:class:`QueueSubscriber`): its iterator ends, its SSE response completes.

    ``last``: a marker item that comes last (a ``stream-reset``: reload the history before following the
    session again; :data:`DELETED`: the conversation is gone)."""
    for subscriber in subscribers:
        if not subscriber.overflowed and last is not None:
            subscriber.queue.put_nowait(last)
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

    shared = False

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
        self._streams: OrderedDict[StreamKey, _Stream] = OrderedDict()
        self._ancestry = Ancestry()
        self._next_sweep = time.monotonic() + min(retain_seconds, 10.0)

    def _stream(self, key: StreamKey) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            base = time.time_ns() // 1000
            stream = _Stream(base=base, buffer=deque(), next_cursor=base + 1)
            self._streams[key] = stream
            self._evict()
        else:
            self._streams.move_to_end(key)
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

    def close_all(self) -> None:
        """End every subscription (server shutdown): each iterator ends, each SSE response completes."""
        for stream in self._streams.values():
            end_subscriptions(stream.subscribers)

    async def close(self) -> None:
        self.close_all()

    async def request_cancel(self, session_id: str) -> bool:
        return False  # only this process runs what it publishes: RunManager.cancel already looked

    async def max_seq(self, key: StreamKey) -> int:
        stream = self._streams.get(key)
        if stream is None:
            return 0
        own = (i.event.seq for i in stream.buffer if i.event and i.event.session_id == key.session_id)
        return max(own, default=0)

    def end_streams(self, session_ids: Iterable[str], incarnation: int, *, deleted: bool = True) -> None:
        """A deleted conversation (``session_ids``: its root and sub-sessions), or with ``deleted=False``
        one whose turns were replaced: every subscription of its streams (of that incarnation or an older
        one) gets a last ``session-deleted`` (or ``stream-reset``) and ends, and what the buffers held of it
        is dropped, so nothing of it can be replayed."""
        ids = set(session_ids)
        for key in [k for k in self._streams if k.session_id in ids and k.incarnation <= incarnation]:
            stream = self._streams.pop(key)
            end_subscriptions(stream.subscribers, last=final_item(stream.cursor, deleted=deleted))
        self._ancestry.forget(ids)

    def _evict(self) -> None:
        while len(self._streams) > self.max_streams:
            for key, stream in self._streams.items():
                if not stream.subscribers:
                    del self._streams[key]
                    break
            else:
                return

    async def cursor(self, key: StreamKey) -> int:
        """The position to resume from after reading the stored history now."""
        return self._stream(key).cursor

    async def resume_cursor(self, key: StreamKey, persisted: dict[str, int]) -> int:
        """Where to resume after reading history persisted up to ``persisted`` (seq per session).

        Just before the first buffered event the history does not hold yet (a tool finished but its
        result is stored only when the step ends); the client drops the replayed rest by seq.
        """
        stream = self._stream(key)
        for item in stream.buffer:
            event = item.event
            if event is not None and event.seq > persisted.get(event.session_id, 0):
                return item.cursor - 1
        return stream.cursor

    async def open_turn(self, key: StreamKey) -> OpenTurn | None:
        """The session's running turn in the buffer (``None`` when its last run ended)."""
        stream = self._streams.get(key)
        if stream is None:
            return None
        session_id = key.session_id
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

    def publish(self, event: AgentEvent, incarnation: int, fence: tuple[str, int] | None = None) -> None:
        """Publish ``event`` of a run of the conversation in its ``incarnation`` (its root's) now. ``fence``
        is for the shared log (:class:`SharedEventHub`): one process has no other replica to take a live run
        over."""
        now = time.monotonic()
        if now >= self._next_sweep:
            self.sweep(now)
        size = _estimate_size(event)
        for target in self._ancestry.targets(event):  # the session and every ancestor
            stream = self._stream(StreamKey(target, incarnation))
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
        if isinstance(event, InteractionEnd) and not event.parent_session_id:
            # The conversation's run ended: what its buffer keeps for a resume need not be delta by delta.
            stream = self._stream(StreamKey(event.session_id, incarnation))
            stream.held_bytes = compact_deltas(stream.buffer)
        self._ancestry.ended(event)

    async def open(self, key: StreamKey, after: int | None = None) -> Subscription:
        """:meth:`subscribe`, with the signature every hub has (the shared one reads the database)."""
        return self.subscribe(key, after)

    def subscribe(self, key: StreamKey, after: int | None = None) -> Subscription:
        """Items of the stream after ``after`` (buffered first, then live); ``None`` = live only."""
        stream = self._stream(key)
        subscriber = QueueSubscriber(queue=asyncio.Queue(), limit=self.subscriber_limit)
        if after is not None and after != stream.cursor:
            first = stream.buffer[0].cursor if stream.buffer else stream.next_cursor
            if after > stream.cursor or after < stream.base or after + 1 < first:
                # Another process's cursor, or events already evicted: the client must reload history.
                subscriber.push(StreamItem(cursor=stream.cursor, event=None))
            elif any(item.first and item.first <= after < item.cursor for item in stream.buffer):
                # Inside deltas merged since: the client holds part of a text it would get again whole.
                subscriber.push(StreamItem(cursor=stream.cursor, event=None))
            else:
                for item in stream.buffer:
                    if item.cursor > after:
                        subscriber.push(item)
        stream.subscribers.add(subscriber)
        return Subscription(self, key, subscriber)

    def _unsubscribe(self, key: StreamKey, subscriber: Any) -> None:
        stream = self._streams.get(key)
        if stream is not None:
            stream.subscribers.discard(subscriber)


_DELTAS = (TextDeltaEvent, ReasoningDeltaEvent, ToolInputDeltaEvent)


def _part_of(event: AgentEvent | None) -> tuple[str, str, str, str] | None:
    """Which streamed part a delta event extends (``None`` for any other event)."""
    if isinstance(event, TextDeltaEvent | ReasoningDeltaEvent):
        return event.type, event.session_id, event.message_id, event.id
    if isinstance(event, ToolInputDeltaEvent):
        return event.type, event.session_id, "", event.tool_call_id
    return None


def compact_deltas(buffer: deque[StreamItem]) -> int:
    """Merge each run of consecutive deltas of one part into one item (its text whole, the last delta's
    seq and cursor, ``first`` its first cursor), in place; the bytes the buffer holds after.

    A finished turn kept every delta as an event of its own (about 33x the text for a 100 KB answer with a
    subscriber, measured with tracemalloc); merged, it keeps the text about once. Only finished runs are
    compacted: a live turn's resume needs its deltas one by one."""
    out: deque[StreamItem] = deque()
    held = 0
    run: list[StreamItem] = []

    def flush() -> None:
        nonlocal held
        if len(run) == 1:
            out.append(run[0])
            held += run[0].size
        elif run:
            last = run[-1].event
            assert isinstance(last, _DELTAS)
            merged_event = replace(last, delta="".join(i.event.delta for i in run))  # type: ignore[union-attr]
            first = run[0].first or run[0].cursor
            item = StreamItem(cursor=run[-1].cursor, event=merged_event, first=first)
            item.size = _estimate_size(merged_event)
            out.append(item)
            held += item.size
        run.clear()

    for item in buffer:
        part = _part_of(item.event)
        if part is not None and run and _part_of(run[-1].event) == part:
            run.append(item)
            continue
        flush()
        if part is not None:
            run.append(item)
        else:
            out.append(item)
            held += item.size
    flush()
    buffer.clear()
    buffer.extend(out)
    return held


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
    def _unsubscribe(self, key: StreamKey, subscriber: Any) -> None: ...


class _Queued(Protocol):
    queue: asyncio.Queue[StreamItem | None]


class Subscription:
    """Async iterator of stream items; ends after a ``stream-reset`` caused by overflow."""

    def __init__(self, hub: _Unsubscribes, key: StreamKey, subscriber: _Queued) -> None:
        self._hub = hub
        self._key = key
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
        self._hub._unsubscribe(self._key, self._subscriber)
