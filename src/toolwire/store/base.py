"""The one store hook, and the read side the server and CLI use.

During a run, exactly one object writes: the loop's :class:`~toolwire.agent._recorder.StepRecorder`, through

1. :meth:`Store.open_run` when the run starts: :meth:`Store.ensure_session` (the first writer of a
   session fixes its owner), the owner check, :meth:`Store.lock_session` (the lock keeps other runs out)
   and :meth:`Store.open_history` (the SQL store does all four in one transaction);
2. :meth:`Store.append_message` for the user message of a run;
3. :meth:`Store.begin_step` after the model finished a step: the assistant message and every tool call
   it made, recorded as *pending* (or *awaiting* a person: the run will pause), in one transaction,
   BEFORE any tool runs;
4. :meth:`Store.complete_tool_call` as each tool finishes while others of its step still run (so a crash
   later loses no finished result; calls finishing together are written concurrently, which the SQL
   store group-commits), but not the calls that finish last, together (in one event-loop turn with the
   step's last one, e.g. every call of a step of fast tools): their rows are written by
5. :meth:`Store.finish_step` with the step's tool-result message, usage and the session's last event seq,
   in one transaction (in either case before anyone hears of the result). A paused step's message holds
   the results it has; the run that answers the waiting calls stores theirs in another (``load_history``
   merges them);
6. :meth:`Store.record_compaction` when a step's request was summarised to fit the model's window;
7. at the end, :meth:`Store.finish_step` of step 0 (the last event seq only), then
   :meth:`Store.unlock_session`.

The same list, in the same order, is the recorder's methods and invariant 3 of ``docs/design.md``.

Fencing: a run passes its lock owner as ``fence`` to every write of the hook (``append_message``,
``begin_step``, ``complete_tool_call``, ``finish_step``, ``record_compaction``): the write happens only while that run still holds the
session's lock, else it raises :class:`~toolwire.errors.LeaseLostError` and writes nothing (a completion written
in a group commit is dropped silently instead; the run's next fenced write raises). Owners name one run, and a
run never claims the lock again once it lost it (:meth:`Store.renew_lease`), so the owner is the run's token.

A run reads with :meth:`Store.open_history` (the repaired history and the calls a paused run left
awaiting).

The named writers outside a run are :meth:`Store.import_history` (the server starting a conversation
from a client's messages, in one transaction) and :meth:`Store.truncate_history` (the server dropping the
turns a client regenerated or edited, under the session's lock). Everything else is reading (:class:`SessionReader`);
:meth:`Store.load_history` returns the history repaired by :func:`toolwire.store.history.repair_history`,
always valid to send to any provider.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from toolwire.messages import Message, Usage
from toolwire.store.history import repair_history
from toolwire.store.records import (
    CallCompletion,
    CallKey,
    CompactionRecord,
    OpenedHistory,
    SessionInfo,
    StepRecord,
    StoredStep,
    ToolCallRecord,
    ToolCallRowStatus,
    TurnError,
    check_owner,
)
from toolwire.store.replication import Replication

DEFAULT_URL = "sqlite+aiosqlite:///./toolwire.db"
"""The embedded default store: a SQLite file in the working directory."""


class SessionReader(Protocol):
    """What the server and the CLI read; every :class:`Store` is one."""

    async def get_session(self, session_id: str) -> SessionInfo | None: ...

    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        user_session_id: str | None = None,
        limit: int = 100,
        top_level: bool = False,
        after: tuple[float, str] | None = None,
    ) -> list[SessionInfo]: ...

    async def raw_messages(self, session_id: str) -> list[Message]: ...

    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]: ...

    async def steps(self, session_id: str) -> list[StoredStep]: ...

    async def compactions(self, session_id: str) -> list[CompactionRecord]: ...

    async def turn_errors(self, session_id: str) -> list[TurnError]: ...

    async def load_history(
        self, session_id: str, *, mark_interrupted: bool = False, max_output_chars: int = 0
    ) -> list[Message]: ...

    async def run_in_progress(self, session_id: str) -> bool: ...


class Store(ABC):
    """Storage behind the one hook. Implementations: ``toolwire.store.memory.MemoryStore``,
    ``toolwire.store.sql.SQLStore``."""

    lease_ttl: float | None = None
    """Seconds a run's session lock lasts unless renewed, when runs hold it as a lease renewed in the
    background (PostgreSQL: replicas take over a run whose lease expired); ``None``: a long lock
    renewed at step starts (single process; a killed process's lock is reclaimed at once)."""

    def replication(self) -> Replication | None:
        """What replicas sharing this store need (:class:`~toolwire.store.replication.Replication`), or
        ``None`` when one process owns it (no leases to take over)."""
        return None

    @abstractmethod
    async def ensure_session(self, info: SessionInfo) -> SessionInfo:
        """Create the session if it does not exist; return the stored row (existing rows win)."""

    async def create_session(self, info: SessionInfo) -> bool:
        """Create the session; ``False`` (writing nothing) when the id is taken, by anyone."""
        stored = await self.ensure_session(info)
        return stored == info

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionInfo | None: ...

    @abstractmethod
    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        user_session_id: str | None = None,
        limit: int = 100,
        top_level: bool = False,
        after: tuple[float, str] | None = None,
    ) -> list[SessionInfo]:
        """Most recently updated first (ties by id); ``user_id=None`` lists all.

        ``user_session_id`` narrows the list to one conversation tree (a top-level session and every
        sub-agent session under it); ``top_level`` to sessions that are not sub-agent sessions;
        ``after`` (``(updated_at, id)`` of the last row of a previous page) to the rows after it.
        """

    @abstractmethod
    async def append_message(
        self, session_id: str, message: Message, *, interaction_id: str, fence: str | None = None
    ) -> None: ...

    @abstractmethod
    async def import_history(
        self, info: SessionInfo, messages: Sequence[Message], *, interaction_id: str
    ) -> bool:
        """Start a conversation from a history that came from elsewhere (a client), in ONE transaction.

        Creates the session for ``info.user_id`` if it does not exist; raises :class:`SessionAccessError`
        (writing nothing) when it exists for another user. Writes the messages only when the session
        holds none yet (the store is authoritative afterwards), so re-sending the same conversation is
        idempotent. Returns whether the messages were written.
        """

    @abstractmethod
    async def begin_step(self, record: StepRecord, *, fence: str | None = None) -> None:
        """Assistant message + pending tool calls, one transaction. Idempotent on (session_id, tool_call_id)."""

    @abstractmethod
    async def complete_tool_call(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        status: ToolCallRowStatus,
        output: Any,
        is_error: bool,
        started_at: float | None,
        finished_at: float | None,
        message_id: str | None = None,
        fence: str | None = None,
    ) -> None:
        """Record a call's outcome. ``message_id`` (the step's assistant message) names the call exactly;
        without it the latest row with that ``tool_call_id`` is updated."""

    @abstractmethod
    async def finish_step(
        self,
        session_id: str,
        *,
        step: int,
        interaction_id: str,
        tool_message: Message | None,
        usage: Usage,
        last_seq: int,
        completed: Sequence[CallCompletion] = (),
        fence: str | None = None,
    ) -> None:
        """The step's tool-result message, usage added to the session total, last seq, and the rows of
        ``completed`` calls (as :meth:`complete_tool_call` writes them): one transaction."""

    @abstractmethod
    async def record_compaction(self, record: CompactionRecord, *, fence: str | None = None) -> None:
        """A summary that stands for the start of the session's history in what runs send from now on
        (the messages stay stored: see :mod:`toolwire.agent._compaction`)."""

    @abstractmethod
    async def compactions(self, session_id: str) -> list[CompactionRecord]:
        """The session's summaries, oldest first (the last one applies)."""

    @abstractmethod
    async def hold_call(self, record: ToolCallRecord, *, fence: str | None = None) -> None:
        """A row of its own for a pause that no model call made (a run held at a usage limit,
        :data:`~toolwire.store.records.USAGE_LIMIT_TOOL`): stored once (a retry writes nothing twice),
        never part of a message, so never sent to a model."""

    @abstractmethod
    async def record_turn_error(self, record: TurnError, *, fence: str | None = None) -> None:
        """The error that ended a turn, kept with the session (once per turn; shown, never sent)."""

    @abstractmethod
    async def turn_errors(self, session_id: str) -> list[TurnError]:
        """The errors that ended the session's turns, oldest first."""

    @abstractmethod
    async def raw_messages(self, session_id: str) -> list[Message]:
        """Messages exactly as stored, in order (no repair)."""

    @abstractmethod
    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        """Tool call rows of the session, in the order they were recorded."""

    @abstractmethod
    async def steps(self, session_id: str) -> list[StoredStep]:
        """Per-step usage, finish reason and model timings of the session, in history order."""

    @abstractmethod
    async def mark_interrupted(self, session_id: str, calls: Sequence[CallKey]) -> None:
        """Set ``pending`` rows to ``interrupted`` (called by :meth:`load_history`)."""

    async def load_history(
        self, session_id: str, *, mark_interrupted: bool = False, max_output_chars: int = 0
    ) -> list[Message]:
        """The stored history, repaired so it is valid to send to any provider.

        Only the holder of the session lock (the loop, at the start of a run) may pass
        ``mark_interrupted=True`` to record unfinished calls as interrupted: any other reader could be
        looking at a live run whose tool is still executing. Results recovered from tool-call rows (the
        full output) are cut to ``max_output_chars`` by the same rule as live results.
        """
        opened = await self._repaired(session_id, mark_interrupted, max_output_chars)
        return opened.messages

    async def open_history(self, session_id: str, *, max_output_chars: int = 0) -> OpenedHistory:
        """What a run reads when it starts, as the holder of the session lock: the repaired history (its
        unfinished calls recorded as interrupted, as with ``mark_interrupted=True``) and the calls a
        paused run left awaiting a person, from the same two reads."""
        opened = await self._repaired(session_id, True, max_output_chars)
        latest = (await self.compactions(session_id))[-1:]
        return replace(opened, compaction=latest[0]) if latest else opened

    async def open_run(
        self,
        info: SessionInfo,
        owner: str,
        *,
        ttl: float,
        max_output_chars: int = 0,
        takeover: bool = False,
        top_level: bool = False,
    ) -> tuple[SessionInfo, OpenedHistory]:
        """The start of a run: :meth:`ensure_session`, :func:`check_owner` (a session of someone else, or
        elsewhere in the tree, is refused with :class:`~toolwire.errors.SessionAccessError` before
        anything is locked or read), :meth:`lock_session` and :meth:`open_history`. A store may do them
        in one transaction (the SQL store does: one round trip instead of four when many runs start).
        ``takeover``: the run continues a dead replica's; a store with leases (SQL) then claims only a
        lease still held and expired, so a run another replica took over and finished is not taken again.
        Stores without leases claim as for any run. ``top_level``: a sub-agent's session is refused too
        (:class:`~toolwire.errors.SubSessionError`): the server's chat turn claims its session here."""
        stored = await self.ensure_session(info)
        check_owner(stored, info.user_id, parent_session_id=info.parent_session_id, top_level=top_level)
        await self.lock_session(info.id, owner, ttl=ttl)
        return stored, await self.open_history(info.id, max_output_chars=max_output_chars)

    async def _repaired(
        self, session_id: str, mark_interrupted: bool, max_output_chars: int
    ) -> OpenedHistory:
        opened = repaired_history(
            await self.raw_messages(session_id),
            await self.tool_calls(session_id),
            max_output_chars=max_output_chars,
            mark_interrupted=mark_interrupted,
        )
        if opened.interrupted:
            await self.mark_interrupted(session_id, opened.interrupted)
        return opened

    # -- managing conversations (the server's and the CLI's, never a run's) ---------------------------

    @abstractmethod
    async def set_title(self, session_id: str, title: str, *, only_if_empty: bool = False) -> bool:
        """Set the session's title; with ``only_if_empty`` only when it has none. Whether it was set."""

    async def raise_last_seq(self, session_id: str, seq: int) -> None:
        """Record that the session's events up to ``seq`` were published (the next run numbers after
        them): a rename outside a run numbers its one event this way (:mod:`toolwire.store._rename`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot number events outside a run")

    @abstractmethod
    async def delete_session(self, session_id: str) -> bool:
        """Delete a conversation: the session, every session of its tree (``user_session_id``), their
        messages and tool calls, in one transaction. ``False`` when it does not exist; raises
        :class:`SessionBusyError` (deleting nothing) while a live run holds any session of the tree."""

    @abstractmethod
    async def truncate_history(self, session_id: str, from_message_id: str) -> bool:
        """Drop a conversation's turns from message ``from_message_id`` on (a regenerated or edited turn):
        those messages, their tool-call rows, and the sub-agent sessions of the tree created since that
        message, in one transaction. ``False`` (dropping nothing) when the session has no such message.
        The caller holds the session's lock (no run may write meanwhile)."""

    async def lock_session(self, session_id: str, owner: str, *, ttl: float = 600.0) -> None:
        """Claim the session for one run; raise :class:`SessionBusyError` if another run holds it."""

    async def renew_lease(self, session_id: str, owner: str, *, ttl: float) -> bool:
        """Extend the lock ``owner`` holds by ``ttl``; ``False`` (changing nothing) once it no longer holds
        it. Never claims a lock: a run whose lease was taken over must not take a freed lock back."""
        return True

    async def unlock_session(self, session_id: str, owner: str) -> None: ...

    async def run_in_progress(self, session_id: str) -> bool:
        """Whether a live run holds the session (in any process): its lock is held, unexpired, and its
        owner is not a dead process of this host."""
        return False

    async def close(self) -> None: ...


def repaired_history(
    messages: list[Message], rows: list[ToolCallRecord], *, max_output_chars: int, mark_interrupted: bool
) -> OpenedHistory:
    """:meth:`Store.open_history` from the two reads; ``interrupted`` lists the calls the caller must
    record as interrupted (none unless ``mark_interrupted``)."""
    records = {(r.message_id, r.tool_call_id): r for r in rows}
    repaired, interrupted = repair_history(messages, records, max_output_chars=max_output_chars)
    return OpenedHistory(
        messages=repaired,
        awaited=[r for r in rows if r.awaiting is not None],
        interrupted=list(interrupted) if mark_interrupted else [],
    )
