"""``SharedEventHub``: the event hub of replicas that share one PostgreSQL (chosen by ``create_app`` when
the store is PostgreSQL), so any replica serves any session's stream.

Publishing stays synchronous and never blocks a run: events queue for one writer task per process,
which writes each batch in one statement (:class:`~toolwire.store.event_log.EventLog`) and then hands
them to this process's subscribers with their cursors (the rows' ids). Other replicas hear a ``NOTIFY``
naming the stream and read the new rows by cursor. A subscription first replays the rows after the
client's cursor (``Last-Event-ID``, from any replica, from before a restart), then follows live; rows
are delivered once each, in cursor order (a subscriber drops anything at or before its last cursor).

Streams are keyed by the conversation's incarnation (:class:`~toolwire.server.hub.StreamKey`): a deleted
conversation's rows are purged in the deleting transaction, and its subscriptions on every replica end
(the ``end:`` command), so an id created again starts empty.

Events stay in the table ``retain_seconds`` (default one hour; any replica prunes). A client resuming
from a cursor further back than ``replay_limit`` events or ``replay_bytes`` of event bodies is told to
reload the history (``stream-reset``), as with the in-process hub; a replay is read in pages of
``page_rows`` rows and ``page_bytes``, so a replica holds about ``replay_bytes`` per slow reader at most,
whatever the size of the events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from toolwire.events import AgentEvent, InteractionEnd, event_from_dict, event_to_dict
from toolwire.server._turn import OpenTurn, open_turn
from toolwire.server.hub import (
    Ancestry,
    QueueSubscriber,
    StreamItem,
    StreamKey,
    Subscription,
    end_subscriptions,
    final_item,
)
from toolwire.store.event_log import MARKER_KINDS, EventLog, LogRow

logger = logging.getLogger("toolwire.server")

_RETRY_SECONDS = 0.5
_MAX_MARKERS = 1_000
"""Turn markers read to find a session's open turn (a turn is its start, its ends when paused, and the
starts of the runs that continued it: far fewer in practice)."""


@dataclass(slots=True, eq=False)
class _Subscriber(QueueSubscriber):
    last: int = 0
    ready: bool = False
    held: list[StreamItem] = field(default_factory=list)

    def push(self, item: StreamItem) -> None:
        if self.overflowed:
            return
        if not self.ready:  # still replaying: live items wait (dropped later if replayed already)
            self.held.append(item)
            return
        if item.event is not None and item.cursor <= self.last:
            return
        self.last = max(self.last, item.cursor)
        QueueSubscriber.push(self, item)

    def start(self, last: int, replay: list[StreamItem]) -> None:
        """Replay done up to cursor ``last``: deliver ``replay``, then what arrived live meanwhile."""
        self.last, self.ready = last, True
        held, self.held = self.held, []
        for item in [*replay, *held]:
            self.push(item)


@dataclass(slots=True)
class _Stream:
    subscribers: set[_Subscriber] = field(default_factory=set)
    delivered: int | None = None
    """The last cursor handed to this stream's subscribers; ``None`` until the first one replayed."""
    dirty: bool = False
    fetching: bool = False


def _first(written: tuple[Any, ...]) -> Any:
    return written[0]


def _item(cursor: int, body: str) -> StreamItem:
    data = json.loads(body)
    return StreamItem(cursor=cursor, event=event_from_dict(data), _json=data)


class SharedEventHub:
    """Per-session event streams shared by every replica on one PostgreSQL (the :class:`Hub` interface)."""

    shared = True

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        subscriber_limit: int = 50_000,
        replay_limit: int = 10_000,
        replay_bytes: int = 4_000_000,
        page_rows: int = 500,
        page_bytes: int = 1_000_000,
        retain_seconds: float = 3600.0,
        max_pending: int = 200_000,
    ) -> None:
        self.subscriber_limit = subscriber_limit
        self.replay_limit = replay_limit
        self.replay_bytes = replay_bytes
        self.page_rows = page_rows
        self.page_bytes = page_bytes
        self.retain_seconds = retain_seconds
        self.max_pending = max_pending
        self.log = EventLog(engine)
        self._streams: dict[StreamKey, _Stream] = {}
        self._ancestry = Ancestry()
        self._pending: list[tuple[LogRow, AgentEvent]] = []
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._dropping = False
        self.on_cancel: Callable[[str], Coroutine[Any, Any, object]] | None = None
        """Called with a session id when another replica asks to cancel its run (set by the server)."""
        self._writer_pid = 0
        self._writer_conn: AsyncConnection | None = None
        self._next_prune = 0.0
        self.batches = 0
        """Batches written (each one statement, one round trip)."""

    async def start(self) -> None:
        await self.log.create()
        self._tasks = [
            asyncio.create_task(self._write_forever()),
            asyncio.create_task(self._listen_forever()),
        ]

    async def close(self) -> None:
        """Write what is queued (briefly), stop, and end every subscription."""
        for _ in range(50):
            if not self._pending:
                break
            self._wake.set()
            await asyncio.sleep(0.02)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        self.close_all()

    def close_all(self) -> None:
        for stream in self._streams.values():
            end_subscriptions(stream.subscribers)
        self._streams.clear()

    def end_streams(self, session_ids: Iterable[str], incarnation: int, *, deleted: bool = True) -> None:
        """A deleted conversation: end this replica's subscriptions of its streams (that incarnation or
        older) with a last ``session-deleted`` (``stream-reset`` when ``deleted=False``: its turns were
        replaced). Its rows were purged, and the other replicas told, by the store's deleting transaction
        (``SQLStore.delete_session``)."""
        ids = set(session_ids)
        for key in [k for k in self._streams if k.session_id in ids and k.incarnation <= incarnation]:
            stream = self._streams.pop(key)
            end_subscriptions(stream.subscribers, last=final_item(stream.delivered or 0, deleted=deleted))
        self._ancestry.forget(ids)

    # -- publishing ----------------------------------------------------------------------------------

    def publish(self, event: AgentEvent, incarnation: int, fence: tuple[str, int] | None = None) -> None:
        """Queue ``event`` of a run of the conversation in its ``incarnation`` (its root's) for the log;
        ``fence`` (the publishing run's top-level session and lease epoch): dropped at the write if a
        takeover fenced that run meanwhile."""
        if len(self._pending) >= self.max_pending:  # the database has been unreachable for long
            if not self._dropping:
                logger.error("event log unreachable: dropping new events until it answers")
            self._dropping = True
            return
        self._dropping = False
        body = json.dumps(event_to_dict(event), separators=(",", ":"))
        session_id = event.session_id
        kind = event.type if event.type in MARKER_KINDS else None
        status = event.status if isinstance(event, InteractionEnd) else None
        for target in self._ancestry.targets(event):  # the session and every ancestor
            row = LogRow(target, session_id, incarnation, event.seq, body, kind, status, fence)
            self._pending.append((row, event))
        self._ancestry.ended(event)
        self._wake.set()

    async def _write_forever(self) -> None:
        try:
            await self._write_batches()
        finally:
            if self._writer_conn is not None:
                with contextlib.suppress(Exception):
                    await self._writer_conn.close()

    async def _write_batches(self) -> None:
        driver: Any = None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                try:
                    if driver is None:
                        self._writer_conn, driver = await self.log.dedicated()
                        self._writer_pid = driver.get_server_pid()
                    batch = self._pending[:]  # publish() appends to the list meanwhile
                    ids = await self.log.insert(driver, [row for row, _ in batch], time.time())
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.warning("could not write events; retrying", exc_info=True)
                    if self._writer_conn is not None:
                        with contextlib.suppress(Exception):
                            await self._writer_conn.invalidate()
                    self._writer_conn = driver = None
                    await asyncio.sleep(_RETRY_SECONDS)
                    continue
                del self._pending[: len(batch)]
                self.batches += 1
                # In cursor order (rows of a batch written again keep their first, lower, ids); a row
                # without one was refused: its run was fenced by a takeover.
                written = [
                    (cursor, row, event)
                    for (row, event), cursor in zip(batch, ids, strict=True)
                    if cursor is not None
                ]
                for cursor, row, event in sorted(written, key=_first):
                    key = StreamKey(row.stream, row.incarnation)
                    self._deliver(key, StreamItem(cursor=cursor, event=event))
                await self._maybe_prune()

    def _deliver(self, key: StreamKey, item: StreamItem) -> None:
        stream = self._streams.get(key)
        if stream is None:
            return
        if stream.delivered is not None:
            stream.delivered = max(stream.delivered, item.cursor)
        for subscriber in stream.subscribers:
            subscriber.push(item)

    async def _maybe_prune(self) -> None:
        now = time.time()
        if now < self._next_prune:
            return
        self._next_prune = now + 60 + random.uniform(0, 30)  # replicas rarely prune at once
        try:
            await self.log.prune(now - self.retain_seconds)
        except Exception:
            logger.warning("could not prune old events", exc_info=True)

    # -- other replicas' events ----------------------------------------------------------------------

    async def _listen_forever(self) -> None:
        while True:
            held: AsyncConnection | None = None
            try:
                held, driver = await self.log.dedicated()
                lost = asyncio.Event()
                driver.add_termination_listener(lambda _conn, lost=lost: lost.set())
                await driver.add_listener(self.log.channel, self._on_notify)
                await driver.add_listener(self.log.control, self._on_command)
                for key in list(self._streams):  # caught up after a reconnect: nothing missed meanwhile
                    self._refresh(key)
                await lost.wait()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("event listener lost its connection; reconnecting", exc_info=True)
            finally:
                if held is not None:
                    with contextlib.suppress(Exception):
                        await held.close()
            await asyncio.sleep(_RETRY_SECONDS)

    def _on_command(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        kind, _, argument = payload.partition(":")
        if kind == "cancel" and self.on_cancel is not None:
            asyncio.get_running_loop().create_task(self.on_cancel(argument))
        elif kind == "end":
            incarnation, _, session_id = argument.partition(":")
            with contextlib.suppress(ValueError):
                self.end_streams([session_id], int(incarnation))

    async def request_cancel(self, session_id: str) -> bool:
        """Ask every replica to cancel the run of ``session_id`` (the one running it does)."""
        await self.log.command(f"cancel:{session_id}")
        return True

    def _on_notify(self, _conn: Any, pid: int, _channel: str, payload: str) -> None:
        if pid != self._writer_pid:
            for key in [k for k in self._streams if k.session_id == payload]:
                self._refresh(key)

    def _refresh(self, key: StreamKey) -> None:
        stream = self._streams.get(key)
        if stream is None:
            return
        stream.dirty = True
        if not stream.fetching and stream.delivered is not None:
            stream.fetching = True
            asyncio.get_running_loop().create_task(self._fetch(key, stream))

    async def _fetch(self, key: StreamKey, stream: _Stream) -> None:
        try:
            while stream.dirty and stream.delivered is not None and self._streams.get(key) is stream:
                stream.dirty = False
                try:
                    rows, cut = await self.log.fetch(
                        key.session_id, key.incarnation, stream.delivered, self.page_rows, self.page_bytes
                    )
                except Exception:
                    logger.warning("could not read events of a stream", exc_info=True)
                    stream.dirty = True
                    await asyncio.sleep(_RETRY_SECONDS)
                    continue
                for cursor, body in rows:
                    self._deliver(key, _item(cursor, body))
                if cut or len(rows) == self.page_rows:
                    stream.dirty = True
        finally:
            stream.fetching = False
            if not stream.subscribers and self._streams.get(key) is stream:
                del self._streams[key]

    # -- subscribing ---------------------------------------------------------------------------------

    async def cursor(self, key: StreamKey) -> int:
        """The position to resume from after reading the stored history now."""
        return await self.log.max_id(*key)

    async def resume_cursor(self, key: StreamKey, persisted: dict[str, int]) -> int:
        """Just before the first event the history read does not hold yet (see ``EventHub``)."""
        session_id = key.session_id
        # Read only the unpersisted tail when the stream is one session's (no sub-sessions to scan for).
        lowest = persisted.get(session_id, 0) if list(persisted) == [session_id] else 0
        rows = await self.log.after_seq(session_id, key.incarnation, lowest, self.replay_limit)
        for cursor, event_session, seq in rows:
            if seq > persisted.get(event_session, 0):
                return cursor - 1
        return await self.log.max_id(*key)

    async def open_turn(self, key: StreamKey) -> OpenTurn | None:
        """The session's running turn in the log, written by any replica (``None`` when its last run
        ended)."""
        return open_turn(await self.log.markers(key.session_id, key.incarnation, _MAX_MARKERS))

    async def open(self, key: StreamKey, after: int | None = None) -> Subscription:
        """Items of the stream after cursor ``after`` (replayed, then live); ``None`` = live only."""
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream()
        subscriber = _Subscriber(queue=asyncio.Queue(), limit=self.subscriber_limit)
        stream.subscribers.add(subscriber)
        try:
            replay: list[StreamItem] = []
            if after is None:
                last = await self.log.max_id(*key)
            else:
                last, replay = await self._replay(key, after)
        except BaseException:
            stream.subscribers.discard(subscriber)
            raise
        subscriber.start(last, replay)
        if stream.delivered is None:
            stream.delivered = subscriber.last
            if stream.dirty:
                self._refresh(key)
        return Subscription(self, key, subscriber)

    async def _replay(self, key: StreamKey, after: int) -> tuple[int, list[StreamItem]]:
        """The rows after cursor ``after``, read a page at a time, and the cursor to start from; past
        ``replay_limit`` rows or ``replay_bytes`` of bodies, a ``stream-reset`` at the stream's end
        instead (the client reloads the history: cheaper than holding the whole backlog here)."""
        replay: list[StreamItem] = []
        held = 0
        last = after  # the cursor read up to; the subscriber starts at ``after`` and takes the replay
        while True:
            budget = min(self.page_bytes, self.replay_bytes - held)
            rows, cut = await self.log.fetch(key.session_id, key.incarnation, last, self.page_rows, budget)
            for cursor, body in rows:
                held += len(body)
                replay.append(_item(cursor, body))
                last = cursor
            full = cut or len(rows) == self.page_rows
            if full and (held >= self.replay_bytes or len(replay) >= self.replay_limit):
                end = await self.log.max_id(*key)
                return end, [StreamItem(cursor=end, event=None)]
            if not full:
                return after, replay

    def _unsubscribe(self, key: StreamKey, subscriber: Any) -> None:
        stream = self._streams.get(key)
        if stream is None:
            return
        stream.subscribers.discard(subscriber)
        if not stream.subscribers and not stream.fetching:
            del self._streams[key]  # the table is the buffer: nothing to keep here

    async def max_seq(self, key: StreamKey) -> int:
        """The highest seq published for the session by any replica (a takeover numbers after it)."""
        return await self.log.max_seq(*key)
