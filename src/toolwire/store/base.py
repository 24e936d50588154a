"""The one store hook: what the agent loop hands to storage, and the history repair every store shares.

The loop calls exactly these methods, from one place (``agent/loop.py``):

1. :meth:`Store.append_message` for the user message of a run;
2. :meth:`Store.begin_step` after the model finished a step: the assistant message and every tool call
   it made, recorded as *pending*, in one transaction, BEFORE any tool runs;
3. :meth:`Store.complete_tool_call` as each tool finishes (so a crash later loses no finished result);
4. :meth:`Store.finish_step` with the step's tool-result message, usage and the session's last event seq,
   in one transaction.

:meth:`Store.load_history` returns a history that is always valid to send to any provider: a tool call
whose result never arrived (the process died) is marked *interrupted* and given a synthetic error result.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from toolwire._text import truncate_output
from toolwire.errors import SessionAccessError, SessionBusyError
from toolwire.messages import Message, ToolCallPart, ToolResultPart, Usage

ToolCallRowStatus: TypeAlias = Literal["pending", "ok", "error", "interrupted", "blocked", "cancelled"]

INTERRUPTED_OUTPUT = (
    "Tool call interrupted: the process stopped before the tool finished, so its outcome is unknown. "
    "Do not assume it succeeded; call it again if it is still needed."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    id: str
    parent_session_id: str | None = None
    user_session_id: str | None = None
    user_id: str | None = None
    agent_name: str | None = None
    title: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    last_seq: int = 0
    usage: Usage = field(default_factory=Usage)
    """Summed over every step of every run of the session."""


CallKey: TypeAlias = tuple[str, str]
"""A tool call's identity within a session: ``(message_id, tool_call_id)``. Providers may repeat a call
id in later steps (``call_0`` every turn), so the id alone would alias an earlier call's result."""


def check_owner(info: SessionInfo, user_id: str | None, *, parent_session_id: str | None = None) -> None:
    """Raise :class:`SessionAccessError` unless ``user_id`` may act on the stored session ``info``.

    ``user_id=None`` is trusted library code acting for nobody in particular; a session stored without
    an owner can only be used that way. A sub-session must hang under the expected parent.
    """
    if user_id is not None and info.user_id != user_id:
        raise SessionAccessError(f"session {info.id!r} belongs to another user")
    if parent_session_id is not None and info.parent_session_id != parent_session_id:
        raise SessionAccessError(f"session {info.id!r} is not a sub-session of {parent_session_id!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    session_id: str
    tool_call_id: str
    tool_name: str
    message_id: str
    step: int
    args: dict[str, Any] = field(default_factory=dict)
    status: ToolCallRowStatus = "pending"
    output: Any = None
    is_error: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    provider: str | None = None
    model: str | None = None
    interaction_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One model step as handed to the store by the loop."""

    session_id: str
    interaction_id: str
    step: int
    message: Message
    """The assistant message (text, reasoning, tool calls with provider metadata)."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Client-executed calls of the message, status ``pending``."""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    started_at: float = 0.0
    finished_at: float = 0.0


class Store(ABC):
    """Storage behind the one hook. Implementations: :class:`MemoryStore`, ``toolwire.store.sql.SQLStore``."""

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
    async def append_message(self, session_id: str, message: Message, *, interaction_id: str) -> None: ...

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
    async def begin_step(self, record: StepRecord) -> None:
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
    ) -> None:
        """The step's tool-result message, usage added to the session total, last seq: one transaction."""

    @abstractmethod
    async def raw_messages(self, session_id: str) -> list[Message]:
        """Messages exactly as stored, in order (no repair)."""

    @abstractmethod
    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        """Tool call rows of the session, in the order they were recorded."""

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
        messages = await self.raw_messages(session_id)
        records = {(r.message_id, r.tool_call_id): r for r in await self.tool_calls(session_id)}
        repaired, interrupted = repair_history(messages, records, max_output_chars=max_output_chars)
        if interrupted and mark_interrupted:
            await self.mark_interrupted(session_id, interrupted)
        return repaired

    async def lock_session(self, session_id: str, owner: str, *, ttl: float = 600.0) -> None:
        """Claim the session for one run; raise :class:`SessionBusyError` if another run holds it."""

    async def unlock_session(self, session_id: str, owner: str) -> None: ...

    async def run_in_progress(self, session_id: str) -> bool:
        """Whether a live run holds the session (in any process): its lock is held, unexpired, and its
        owner is not a dead process of this host."""
        return False

    async def close(self) -> None: ...


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or ``""``.

    With the boot id it names one process for good: a PID reused later (a container restarted as PID 1)
    has another start time.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def _host_identity() -> str:
    # The boot id tells apart two machines that share a hostname (and one machine across reboots).
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()[:8]
    except OSError:
        boot = ""
    return f"{socket.gethostname()}~{boot}" if boot else socket.gethostname()


_HOST = _host_identity()
_PROCESS = (os.getpid(), _process_start(os.getpid()))


def lock_owner(run_id: str) -> str:
    """A lock owner naming this host and process (pid and start time), so a lock left by a killed
    process can be reclaimed, even when a restarted process got the same PID."""
    pid = os.getpid()
    if _PROCESS[0] != pid:  # forked since import
        _refresh_process()
    return f"{_HOST}/{pid}.{_PROCESS[1]}/{run_id}"


def _refresh_process() -> None:
    global _PROCESS
    _PROCESS = (os.getpid(), _process_start(os.getpid()))


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` is a process on this host that no longer exists (it was killed mid-run).

    Owners on other hosts are never judged dead here; their locks expire by TTL instead.
    """
    host, _, rest = owner.partition("/")
    process, _, _ = rest.partition("/")
    pid_text, _, started = process.partition(".")
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if started and started != _process_start(pid):
        return True  # that PID is gone, or now names another process (PID reuse after a restart)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed child not yet reaped by its parent is a zombie: dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def repair_history(
    messages: Sequence[Message], records: dict[CallKey, ToolCallRecord], *, max_output_chars: int = 0
) -> tuple[list[Message], list[CallKey]]:
    """Give every client-executed tool call exactly one result, right after its assistant message, in call order.

    Missing results come from the tool_calls row when the tool finished (``ok`` / ``error``); otherwise
    the call is *interrupted* and gets a synthetic error result. Results whose call is not in the
    history are dropped. Returns the repaired history and the calls newly found interrupted.
    """
    out: list[Message] = []
    interrupted: list[CallKey] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role == "tool":
            continue  # consumed together with its assistant message below; orphans are dropped
        out.append(message)
        calls = (
            [c for c in message.tool_calls if not c.provider_executed] if message.role == "assistant" else []
        )
        if not calls:
            continue
        found: dict[str, ToolResultPart] = {}
        tool_message: Message | None = None
        while i < len(messages) and messages[i].role == "tool":
            tool_message = tool_message or messages[i]
            for stored in messages[i].tool_results:
                found.setdefault(stored.tool_call_id, stored)
            i += 1
        results: list[ToolResultPart] = []
        for call in calls:
            result: ToolResultPart | None = found.get(call.tool_call_id) or _result_from_record(
                call, records.get((message.id, call.tool_call_id)), max_output_chars
            )
            if result is None:
                interrupted.append((message.id, call.tool_call_id))
                result = ToolResultPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    output=INTERRUPTED_OUTPUT,
                    is_error=True,
                )
            results.append(result)
        if tool_message is not None and [r.tool_call_id for r in tool_message.tool_results] == [
            c.tool_call_id for c in calls
        ]:
            out.append(tool_message)
        elif tool_message is not None:
            out.append(replace(tool_message, parts=tuple(results)))
        else:
            out.append(
                Message(
                    role="tool",
                    parts=tuple(results),
                    id=f"{message.id}:results",
                    session_id=message.session_id,
                    created_at=message.created_at,
                )
            )
    return out, interrupted


def _result_from_record(
    call: ToolCallPart, record: ToolCallRecord | None, max_output_chars: int
) -> ToolResultPart | None:
    if record is None or record.status in ("pending",):
        return None
    if record.status == "interrupted":
        return ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=INTERRUPTED_OUTPUT, is_error=True
        )
    return ToolResultPart(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        output=truncate_output(record.output, max_output_chars),
        is_error=record.is_error,
    )


class MemoryStore(Store):
    """In-process store used when ``Agent(store=None)``: same hook, no persistence across processes."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionInfo] = {}
        self._messages: dict[str, list[Message]] = {}
        self._calls: dict[str, dict[CallKey, ToolCallRecord]] = {}
        self._locks: dict[str, tuple[str, float]] = {}
        self._mutex = asyncio.Lock()

    async def ensure_session(self, info: SessionInfo) -> SessionInfo:
        existing = self._sessions.get(info.id)
        if existing is not None:
            return existing
        self._sessions[info.id] = info
        self._messages[info.id] = []
        self._calls[info.id] = {}
        return info

    async def get_session(self, session_id: str) -> SessionInfo | None:
        return self._sessions.get(session_id)

    async def create_session(self, info: SessionInfo) -> bool:
        if info.id in self._sessions:
            return False
        await self.ensure_session(info)
        return True

    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        user_session_id: str | None = None,
        limit: int = 100,
        top_level: bool = False,
        after: tuple[float, str] | None = None,
    ) -> list[SessionInfo]:
        rows = [
            s
            for s in self._sessions.values()
            if (user_id is None or s.user_id == user_id)
            and (user_session_id is None or (s.user_session_id or s.id) == user_session_id)
            and not (top_level and s.parent_session_id)
            and (after is None or (-s.updated_at, s.id) > (-after[0], after[1]))
        ]
        rows.sort(key=lambda s: (-s.updated_at, s.id))
        return rows[:limit]

    async def append_message(self, session_id: str, message: Message, *, interaction_id: str) -> None:
        self._messages[session_id].append(message)
        self._touch(session_id)

    async def import_history(
        self, info: SessionInfo, messages: Sequence[Message], *, interaction_id: str
    ) -> bool:
        stored = await self.ensure_session(info)
        check_owner(stored, info.user_id)
        if self._messages[info.id]:
            return False
        self._messages[info.id].extend(messages)
        self._touch(info.id)
        return True

    async def begin_step(self, record: StepRecord) -> None:
        self._messages[record.session_id].append(record.message)
        calls = self._calls[record.session_id]
        for call in record.tool_calls:
            calls.setdefault((call.message_id, call.tool_call_id), call)
        self._touch(record.session_id)

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
    ) -> None:
        calls = self._calls[session_id]
        if message_id is None:  # the latest call with that id
            key = next((k for k in reversed(calls) if k[1] == tool_call_id), ("", tool_call_id))
        else:
            key = (message_id, tool_call_id)
        record = calls.get(key)
        if record is not None:
            calls[key] = replace(
                record,
                status=status,
                output=output,
                is_error=is_error,
                started_at=started_at,
                finished_at=finished_at,
            )

    async def finish_step(
        self,
        session_id: str,
        *,
        step: int,
        interaction_id: str,
        tool_message: Message | None,
        usage: Usage,
        last_seq: int,
    ) -> None:
        if tool_message is not None:
            self._messages[session_id].append(tool_message)
        info = self._sessions[session_id]
        self._sessions[session_id] = replace(
            info, usage=info.usage + usage, last_seq=max(info.last_seq, last_seq), updated_at=time.time()
        )

    async def raw_messages(self, session_id: str) -> list[Message]:
        return list(self._messages.get(session_id, ()))

    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        return list(self._calls.get(session_id, {}).values())

    async def mark_interrupted(self, session_id: str, calls: Sequence[CallKey]) -> None:
        for key in calls:
            record = self._calls[session_id].get(key)
            if record is not None and record.status == "pending":
                self._calls[session_id][key] = replace(
                    record, status="interrupted", output=INTERRUPTED_OUTPUT, is_error=True
                )

    async def lock_session(self, session_id: str, owner: str, *, ttl: float = 600.0) -> None:
        now = time.time()
        holder = self._locks.get(session_id)
        if holder is not None and holder[0] != owner and holder[1] > now and not owner_is_dead(holder[0]):
            raise SessionBusyError(f"session {session_id} is busy with another run")
        self._locks[session_id] = (owner, now + ttl)

    async def unlock_session(self, session_id: str, owner: str) -> None:
        holder = self._locks.get(session_id)
        if holder is not None and holder[0] == owner:
            del self._locks[session_id]

    async def run_in_progress(self, session_id: str) -> bool:
        holder = self._locks.get(session_id)
        return holder is not None and holder[1] > time.time() and not owner_is_dead(holder[0])

    def _touch(self, session_id: str) -> None:
        info = self._sessions.get(session_id)
        if info is not None:
            self._sessions[session_id] = replace(info, updated_at=time.time())
