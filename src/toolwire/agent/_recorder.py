"""``StepRecorder``: a run's only way to the store, and the numbering of its events.

It owns what must stay consistent between the two: the session row (owner checked when the run starts),
the session lock (taken, renewed after half its TTL, released), the event ``seq`` and the highest seq the
store has recorded. Events are numbered here, at the moment they are published; a write that records a seq
only ever records the seq of events already numbered. The hook calls a run makes are its methods, in the
order a run makes them: ``open`` (``Store.open_run``), ``append`` (``append_message``), ``begin_step``,
``complete_call`` (``complete_tool_call``), ``finish_step``, when a request is compacted
``record_compaction``, and ``release`` (``record_turn_error`` for a failed run, ``finish_step`` for the last
seq, then ``unlock_session``). What a step's calls are and when their outcomes are written is the step's
own business (:mod:`toolwire.agent._step`).

Fencing: every write carries the run's lock owner (``fence``), so it happens only while this run holds the
session. A lease (PostgreSQL replicas) is lost when a renewal is refused (another run took it over) or when
no renewal succeeded for a whole TTL (another replica may take it over from then on): the recorder then
cancels the task driving the run, and the loop ends it quietly (:class:`~toolwire.errors.LeaseLostError`:
nothing more is written or published). While the lease holds, a write the database could not take (it is
unreachable) is retried, so a finished tool's outcome is not lost to a short outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from toolwire._text import title_from
from toolwire.agent.result import RunResult
from toolwire.errors import LeaseLostError, StoreError
from toolwire.events import AgentEvent, Envelope, ErrorEvent, InteractionEnd, ToolCallComplete, ToolCallStatus
from toolwire.messages import Message, ToolCallPart, Usage
from toolwire.store._locks import lock_owner
from toolwire.store.base import Store
from toolwire.store.records import (
    CallCompletion,
    CompactionRecord,
    OpenedHistory,
    SessionInfo,
    StepRecord,
    ToolCallRecord,
    TurnError,
)

logger = logging.getLogger("toolwire.agent")
E = TypeVar("E", bound=Envelope)

TAKEOVER_RUN = "takeover~"
"""How a takeover run's lease owner starts its run name (before its interaction id)."""

LOCK_TTL = 600.0
"""Seconds a run's session lock lasts without renewal (renewed at step starts after half of it)."""


class StepRecorder:
    """Persists one run through the store hook and numbers its events."""

    def __init__(
        self,
        store: Store,
        *,
        session: SessionInfo,
        interaction_id: str,
        max_output_chars: int,
        takeover: bool = False,
        top_level: bool = False,
        model: tuple[str | None, str | None] | None = None,
    ) -> None:
        self.store = store
        self._model = model or (None, None)  # configured: named with the run's error
        self._turn_error: TurnError | None = None
        self._takeover = takeover
        self._top_level = top_level
        self.session = session
        self.interaction_id = interaction_id
        self.seq = 0
        self._persisted_seq = 0
        self._max_output_chars = max_output_chars
        # A takeover's lease says so: if it dies too, the next takeover must not judge its turn lost
        # because nothing of *its* interaction is stored (see _takeover.prompt_lost).
        self._lock_owner = lock_owner(f"{TAKEOVER_RUN}{interaction_id}" if takeover else interaction_id)
        self._locked_at = 0.0
        self._ttl = store.lease_ttl or LOCK_TTL
        self._ttl_leased = store.lease_ttl is not None
        """Whether the run holds a lease another replica may take (then a lost lease stops its task)."""
        self._heartbeat: asyncio.Task[None] | None = None
        self.epoch = 0
        """The lease epoch of this run's claim (the shared event log refuses its events once fenced)."""
        self._renewed_at = 0.0
        """``time.monotonic()`` when the last successful claim or renewal of the lease was sent."""
        self.lease_lost = False
        """Set once the lease is lost (taken over, or not renewed within its TTL): the run ends quietly."""
        self._driver: asyncio.Task[Any] | None = None
        """The task that last asked this run for an event: cancelled when the lease is lost."""
        self._stopped_driver: asyncio.Task[Any] | None = None
        self.detached = False
        """Set when the server hands this run over to another replica: stopping it writes nothing more
        (its calls stay pending for the next owner, the session stays leased until the server expires it)."""
        self._untitled = False
        self.stored_usage = Usage()
        """The session's usage before this run (read when it opened the session)."""
        self.incarnation: int | None = None
        """The stored session's incarnation, once :meth:`open` read it."""
        self._in_flight: tuple[asyncio.Future[None], list[Envelope]] | None = None
        """A step's write under way and the events it counts (see :meth:`finish_step`)."""

    @property
    def session_id(self) -> str:
        return self.session.id

    # -- events ------------------------------------------------------------------------------------

    def event(self, cls: type[E], **fields: Any) -> E:
        """A new event of this run's session, numbered now."""
        if self._ttl_leased:  # the task a lost lease must stop (see _lose)
            self._driver = asyncio.current_task()
        self.seq += 1
        return cls(
            session_id=self.session.id,
            parent_session_id=self.session.parent_session_id,
            user_session_id=self.session.user_session_id or self.session.id,
            interaction_id=self.interaction_id,
            seq=self.seq,
            **fields,
        )

    def ended_call(
        self,
        call: ToolCallPart,
        output: Any,
        status: ToolCallStatus,
        *,
        is_error: bool = True,
        duration: float = 0.0,
        message_id: str = "",
    ) -> ToolCallComplete:
        """The completion event of a call the run's end announces (cancelled, interrupted, or finished
        but never announced), numbered now."""
        return self.event(
            ToolCallComplete,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            output=output,
            is_error=is_error,
            status=status,
            duration=duration,
            message_id=message_id,
        )

    def end_events(self, result: RunResult[Any], error: BaseException | None) -> list[AgentEvent]:
        """The events that close the run (numbered now, published after the session is released)."""
        ending: list[AgentEvent] = []
        if error is not None:
            # Kept with its turn by release(), before the end is announced.
            turn = self._turn_error = TurnError.of(error, self.session.id, self.interaction_id, *self._model)
            shown = ("error_type", "message", "retryable", "provider", "model")
            ending.append(self.event(ErrorEvent, **{f: getattr(turn, f) for f in shown}))
        ending.append(
            self.event(
                InteractionEnd,
                status=result.status,
                output=result.text,
                usage=result.usage,
                error=f"{type(error).__name__}: {error}" if error is not None else None,
            )
        )
        return ending

    # -- the run's lifecycle ----------------------------------------------------------------------

    async def open(self) -> OpenedHistory:
        """Create or check the session, take its lock, and return the history repaired for the model with
        the calls a paused run left awaiting a person.

        The stored row decides: a session created by someone else (or elsewhere in the tree) is refused
        with :class:`~toolwire.errors.SessionAccessError` before anything is read or written.
        """
        started = time.monotonic()
        info, opened = await self.store.open_run(
            self.session,
            self._lock_owner,
            ttl=self._ttl,
            max_output_chars=self._max_output_chars,
            takeover=self._takeover,
            top_level=self._top_level,
        )
        self._untitled = info.title is None and info.parent_session_id is None
        self.stored_usage = info.usage
        self.incarnation = info.incarnation
        self.seq = self._persisted_seq = info.last_seq
        self.epoch = opened.epoch
        self._locked_at = time.monotonic()
        self._renewed_at = started
        if self.store.lease_ttl:
            self._heartbeat = asyncio.create_task(self._renew_forever(self.store.lease_ttl))
        return opened

    async def renew_lock(self) -> None:
        """Check the lease before the run goes on (a model call, tools), and keep a long lock through a long
        run (cheap: writes only after half the TTL)."""
        self.check_lease()
        if self._heartbeat is None and time.monotonic() - self._locked_at > self._ttl / 2:
            if not await self.store.renew_lease(self.session.id, self._lock_owner, ttl=self._ttl):
                self._lose("another run holds the session now")
                self.check_lease()
            self._locked_at = time.monotonic()

    def check_lease(self) -> None:
        """Raise :class:`LeaseLostError` when the lease is lost, or its last renewal is older than its TTL
        (another replica may have taken the run over by now)."""
        if not self.lease_lost and self.store.lease_ttl and self._lease_left() <= 0:
            self._lose("the lease was not renewed within its TTL")
        if self.lease_lost:
            raise LeaseLostError(
                f"session {self.session.id}: this run's lease was lost; another run continues it"
            )

    def _lease_left(self) -> float:
        return self._renewed_at + self._ttl - time.monotonic()

    def _lose(self, why: str) -> None:
        """The lease is lost: stop the run now (the task driving it is cancelled; the loop ends it quietly)."""
        if self.lease_lost:
            return
        self.lease_lost = True
        logger.error(
            "session %s: the run lost its lease (%s); it stops, writing nothing more", self.session.id, why
        )
        driver = self._driver
        if driver is not None and not driver.done() and driver is not asyncio.current_task():
            self._stopped_driver = driver
            driver.cancel()

    def lost_by(self, exc: BaseException) -> LeaseLostError | None:
        """The :class:`LeaseLostError` a run that stopped with ``exc`` ends with when its lease was lost
        (it writes nothing more: another run continues it), or ``None`` for any other end."""
        lost: LeaseLostError | None = None
        if isinstance(exc, LeaseLostError):
            lost = exc
        # A cancel of the recorder's own is taken back; cancelled by someone else too (a shutdown), a
        # cancellation it stays.
        elif (
            self.lease_lost
            and not isinstance(exc, GeneratorExit)
            and (not isinstance(exc, asyncio.CancelledError) or self.absorb_stop())
        ):
            lost = LeaseLostError(
                f"session {self.session.id}: this run's lease was lost; another run continues it"
            )
        if lost is not None:
            self.detached = True
        return lost

    def absorb_stop(self) -> bool:
        """Called by the loop with the :class:`asyncio.CancelledError` it caught: ``True`` when the cancel was
        :meth:`_lose`'s own (then taken back, so the run can end with :class:`LeaseLostError` instead)."""
        task = asyncio.current_task()
        if self._stopped_driver is None or task is not self._stopped_driver:
            return False
        self._stopped_driver = None
        task.uncancel()
        return True

    async def _renew_forever(self, ttl: float) -> None:
        """A lease: renewed every third of its TTL whatever the run is doing (a long tool included), so
        it expires only when this process stops; other replicas then take the run over. Only this run's
        own lease is renewed (a renewal never claims): refused, or not renewed within the TTL (the database
        unreachable), the lease is lost and the run stops."""
        while not self.lease_lost:
            await asyncio.sleep(min(ttl / 3, max(self._lease_left(), 0.0)))
            left = self._lease_left()
            if left <= 0:
                self._lose("not renewed within its TTL")
                return
            sent = time.monotonic()
            try:
                async with asyncio.timeout(left):
                    held = await self.store.renew_lease(self.session.id, self._lock_owner, ttl=ttl)
            except TimeoutError:
                continue  # the deadline is checked at the top
            except Exception:  # the database is briefly unreachable: try again at the next beat
                logger.warning("could not renew the run lease of %s", self.session.id, exc_info=True)
                continue
            if not held:
                self._lose("another run holds the session now")
                return
            self._renewed_at = sent

    async def _durably(self, write: Callable[[], Awaitable[None]]) -> None:
        """One fenced write of the hook. With a lease, a write the database could not take (unreachable,
        restarting) is retried until the lease runs out, so a finished tool's outcome outlives a short
        outage; every write is idempotent (a retry after a lost acknowledgement writes nothing twice)."""
        delay = 0.05
        while True:
            self.check_lease()
            try:
                await write()
                return
            except StoreError as exc:
                if not (self.store.lease_ttl and exc.unreachable) or self.lease_lost:
                    raise
                logger.warning("session %s: the store is unreachable; retrying a write", self.session.id)
            await asyncio.sleep(max(0.0, min(delay, self._lease_left())))
            delay = min(delay * 2, 0.5)

    async def _stop_heartbeat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def lock_owner(self) -> str:
        return self._lock_owner

    async def release(self) -> None:
        """Record the error that ended the turn, if one did, and the last seq (resume by ``Last-Event-ID``
        across runs), and give the session back."""
        if self.detached:
            await self._stop_heartbeat()
            return
        try:
            if (error := self._turn_error) is not None:
                await self._durably(lambda: self.store.record_turn_error(error, fence=self._lock_owner))
            if self.seq > self._persisted_seq:
                # A step's end with nothing in it (step 0) records only the seq.
                await self._durably(functools.partial(self._write_end, 0, None, Usage(), self.seq, ()))
                self._persisted_seq = self.seq
        except Exception:
            logger.exception("could not record the end of the run of session %s", self.session.id)
        finally:
            await self._stop_heartbeat()
            await self.store.unlock_session(self.session.id, self._lock_owner)

    # -- the hook ----------------------------------------------------------------------------------

    async def append(self, message: Message) -> None:
        await self._durably(
            lambda: self.store.append_message(
                self.session.id, message, interaction_id=self.interaction_id, fence=self._lock_owner
            )
        )
        if self._untitled and message.role == "user":
            # A conversation is named by its first prompt (once; a title set since is kept).
            self._untitled = False
            title = title_from(message.text)
            if title:
                await self.store.set_title(self.session.id, title, only_if_empty=True)

    async def hold_call(self, record: ToolCallRecord) -> None:
        """A pause no model call made (the run held at a usage limit: ``Store.hold_call``)."""
        await self._durably(lambda: self.store.hold_call(record, fence=self._lock_owner))

    async def record_compaction(self, record: CompactionRecord) -> None:
        """A summary the run's requests start from now on (``Store.record_compaction``)."""
        await self._durably(lambda: self.store.record_compaction(record, fence=self._lock_owner))

    async def begin_step(
        self,
        step: int,
        message: Message,
        calls: Sequence[ToolCallPart],
        usage: Usage,
        finish_reason: str,
        awaiting: Mapping[str, ToolCallStatus],
    ) -> None:
        """The assistant message and its calls, before any tool runs: pending, or awaiting a person."""
        now = time.time()
        records = tuple(
            ToolCallRecord(
                session_id=self.session.id,
                tool_call_id=c.tool_call_id,
                tool_name=c.tool_name,
                message_id=message.id,
                step=step,
                args=c.args,
                status=awaiting.get(c.tool_call_id, "pending"),
                provider=message.provider,
                model=message.model,
                interaction_id=self.interaction_id,
            )
            for c in calls
        )
        record = StepRecord(
            session_id=self.session.id,
            interaction_id=self.interaction_id,
            step=step,
            message=message,
            tool_calls=records,
            usage=usage,
            finish_reason=finish_reason,
            started_at=now,
            finished_at=now,
        )
        await self._durably(lambda: self.store.begin_step(record, fence=self._lock_owner))

    async def complete_call(self, completion: CallCompletion, *, durable: bool = True) -> None:
        """One call's row: its outcome (or ``pending`` again); ``durable=False``: one attempt (a run that is
        ending records what it can; history repair does the rest)."""
        write = functools.partial(
            self.store.complete_tool_call,
            self.session.id,
            completion.tool_call_id,
            message_id=completion.message_id,
            status=completion.status,
            output=completion.output,
            is_error=completion.is_error,
            started_at=completion.started_at,
            finished_at=completion.finished_at,
            fence=self._lock_owner,
        )
        if durable:
            await self._durably(write)
        else:
            await write()

    async def _write_end(
        self,
        step: int,
        tool_message: Message | None,
        usage: Usage,
        last_seq: int,
        completed: Sequence[CallCompletion],
    ) -> None:
        await self.store.finish_step(
            self.session.id,
            step=step,
            interaction_id=self.interaction_id,
            tool_message=tool_message,
            usage=usage,
            last_seq=last_seq,
            completed=completed,
            fence=self._lock_owner,
        )

    async def finish_step(
        self,
        step: int,
        tool_message: Message | None,
        usage: Usage,
        announce: Sequence[E],
        completed: Sequence[CallCompletion] = (),
        *,
        durable: bool = True,
    ) -> None:
        """The step's end: its tool message, the rows of the calls that finished last (``completed``), its
        usage and the seq of ``announce`` (numbered, about to be published): one transaction, so a client
        resuming after them never misses or repeats one. ``durable=False``: one attempt, awaited as it is
        (a run that is ending)."""
        last_seq = max((e.seq for e in announce), default=self.seq)
        end = functools.partial(self._write_end, step, tool_message, usage, last_seq, completed)
        if not durable:
            await end()
            self._persisted_seq = max(self._persisted_seq, last_seq)
            return
        written = self._durably(end)
        # With a lease (replicas) the write is shielded from a hand-over (detached first, then cancelled),
        # which may stop the run between this write (it counts ``announce`` in last_seq) and their
        # publication: the write goes on and the server publishes them once it committed
        # (:meth:`written_unpublished`), so no seq is skipped and no finished call goes unseen. Any other stop
        # abandons the write, as before. One process hands nothing over: the write is awaited as it is (a
        # task and a shield per step cost the in-memory loop ~15 % of its step).
        write: asyncio.Future[None] | None = None
        try:
            if self.store.lease_ttl is None:
                await written
            else:
                write = asyncio.ensure_future(written)
                await asyncio.shield(write)
        except asyncio.CancelledError:
            if write is None:
                raise
            if self.detached:
                self._in_flight = (write, list(announce))
            else:
                write.cancel()
            raise
        except Exception:
            # Not written, so ``announce`` is never published (the run ends; the finished calls are
            # announced again with its end): give its seqs back, unless more were numbered since, so the
            # stream has no gap that no client can explain.
            if announce and self.seq == last_seq:
                self.seq = min(e.seq for e in announce) - 1
            raise
        self._persisted_seq = max(self._persisted_seq, last_seq)

    async def written_unpublished(self) -> list[Envelope]:
        """The events a step's write counted when the run was stopped during it, once that write
        committed; none if it failed or no write was under way."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return []
        write, announce = in_flight
        try:
            await asyncio.shield(write)
        except Exception:  # not written: the next owner finds the calls unfinished
            logger.warning("session %s: a step's write did not finish", self.session.id, exc_info=True)
            return []
        return list(announce)
