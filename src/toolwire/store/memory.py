"""``MemoryStore``: the hook in process memory (``Agent(store=None)``); nothing survives the process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolwire._fast_init import fast_replace
from toolwire.errors import LeaseLostError, SessionBusyError
from toolwire.messages import Message, Usage
from toolwire.store._locks import owner_is_dead
from toolwire.store.base import Store
from toolwire.store.history import INTERRUPTED_OUTPUT
from toolwire.store.records import (
    CallCompletion,
    CallKey,
    CompactionRecord,
    SessionInfo,
    StepRecord,
    StoredStep,
    ToolCallRecord,
    ToolCallRowStatus,
    TurnError,
    check_owner,
)


class MemoryStore(Store):
    """In-process store used when ``Agent(store=None)``: same hook, no persistence across processes."""

    def __init__(self) -> None:
        self._sessions: dict[str, SessionInfo] = {}
        self._messages: dict[str, list[Message]] = {}
        self._calls: dict[str, dict[CallKey, ToolCallRecord]] = {}
        self._steps: dict[str, list[StoredStep]] = {}
        self._compactions: dict[str, list[CompactionRecord]] = {}
        self._errors: dict[str, list[TurnError]] = {}
        self._locks: dict[str, tuple[str, float]] = {}
        self._touched: dict[str, float] = {}
        """Last write per session (``updated_at``), kept apart: rebuilding the frozen row on every write
        cost more than the write itself; readers see it through :meth:`_row`."""
        self._mutex = asyncio.Lock()

    async def ensure_session(self, info: SessionInfo) -> SessionInfo:
        existing = self._row(info.id)
        if existing is not None:
            return existing
        self._sessions[info.id] = info
        self._messages[info.id] = []
        self._calls[info.id] = {}
        return info

    async def get_session(self, session_id: str) -> SessionInfo | None:
        return self._row(session_id)

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
            for s in (self._row(sid) for sid in self._sessions)
            if s is not None
            and (user_id is None or s.user_id == user_id)
            and (user_session_id is None or (s.user_session_id or s.id) == user_session_id)
            and not (top_level and s.parent_session_id)
            and (after is None or (-s.updated_at, s.id) > (-after[0], after[1]))
        ]
        rows.sort(key=lambda s: (-s.updated_at, s.id))
        return rows[:limit]

    async def append_message(
        self, session_id: str, message: Message, *, interaction_id: str, fence: str | None = None
    ) -> None:
        self._check_fence(session_id, fence)
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

    async def begin_step(self, record: StepRecord, *, fence: str | None = None) -> None:
        self._check_fence(record.session_id, fence)
        self._messages[record.session_id].append(record.message)
        self._steps.setdefault(record.session_id, []).append(
            StoredStep(
                message_id=record.message.id,
                interaction_id=record.interaction_id,
                step=record.step,
                usage=record.usage,
                finish_reason=record.finish_reason,
                started_at=record.started_at,
                finished_at=record.finished_at,
                provider=record.message.provider,
                model=record.message.model,
            )
        )
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
        fence: str | None = None,
    ) -> None:
        if fence is not None and not self._holds(session_id, fence):
            return  # as the SQL store's group commit: dropped, noticed at the run's next fenced write
        calls = self._calls[session_id]
        if message_id is None:  # the latest call with that id
            key = next((k for k in reversed(calls) if k[1] == tool_call_id), ("", tool_call_id))
        else:
            key = (message_id, tool_call_id)
        record = calls.get(key)
        if record is not None:
            calls[key] = fast_replace(
                record,
                status=status,
                output=output,
                is_error=is_error,
                started_at=started_at,
                finished_at=finished_at,
            )

    async def record_compaction(self, record: CompactionRecord, *, fence: str | None = None) -> None:
        self._check_fence(record.session_id, fence)
        self._compactions.setdefault(record.session_id, []).append(record)

    async def compactions(self, session_id: str) -> list[CompactionRecord]:
        return list(self._compactions.get(session_id, []))

    async def hold_call(self, record: ToolCallRecord, *, fence: str | None = None) -> None:
        self._check_fence(record.session_id, fence)
        self._calls[record.session_id].setdefault((record.message_id, record.tool_call_id), record)
        self._touch(record.session_id)

    async def record_turn_error(self, record: TurnError, *, fence: str | None = None) -> None:
        self._check_fence(record.session_id, fence)
        errors = self._errors.setdefault(record.session_id, [])
        if all(e.interaction_id != record.interaction_id for e in errors):  # once per turn, as in SQL
            errors.append(record)

    async def turn_errors(self, session_id: str) -> list[TurnError]:
        return list(self._errors.get(session_id, []))

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
        self._check_fence(session_id, fence)
        for c in completed:
            await self.complete_tool_call(
                session_id,
                c.tool_call_id,
                message_id=c.message_id,
                status=c.status,
                output=c.output,
                is_error=c.is_error,
                started_at=c.started_at,
                finished_at=c.finished_at,
            )
        if tool_message is not None:
            self._messages[session_id].append(tool_message)
        info = self._sessions[session_id]
        self._sessions[session_id] = fast_replace(
            info, usage=info.usage + usage, last_seq=max(info.last_seq, last_seq), updated_at=time.time()
        )
        self._touched.pop(session_id, None)

    async def raw_messages(self, session_id: str) -> list[Message]:
        return list(self._messages.get(session_id, ()))

    async def steps(self, session_id: str) -> list[StoredStep]:
        return list(self._steps.get(session_id, ()))

    async def tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        return list(self._calls.get(session_id, {}).values())

    async def mark_interrupted(self, session_id: str, calls: Sequence[CallKey]) -> None:
        for key in calls:
            record = self._calls[session_id].get(key)
            if record is not None and record.status == "pending":
                self._calls[session_id][key] = replace(
                    record, status="interrupted", output=INTERRUPTED_OUTPUT, is_error=True
                )

    async def set_title(self, session_id: str, title: str, *, only_if_empty: bool = False) -> bool:
        info = self._sessions.get(session_id)
        if info is None or (only_if_empty and info.title is not None):
            return False
        self._sessions[session_id] = replace(info, title=title)
        return True

    async def raise_last_seq(self, session_id: str, seq: int) -> None:
        info = self._sessions.get(session_id)
        if info is not None and info.last_seq < seq:
            self._sessions[session_id] = replace(info, last_seq=seq)

    async def delete_session(self, session_id: str) -> bool:
        tree = [s.id for s in self._sessions.values() if session_id in (s.id, s.user_session_id)]
        if not tree:
            return False
        if [sid for sid in tree if await self.run_in_progress(sid)]:
            raise SessionBusyError(f"session {session_id} is busy with a run")
        for sid in tree:
            for table in (
                self._sessions,
                self._messages,
                self._calls,
                self._steps,
                self._compactions,
                self._errors,
                self._locks,
                self._touched,
            ):
                table.pop(sid, None)
        return True

    async def truncate_history(self, session_id: str, from_message_id: str) -> bool:
        history = self._messages.get(session_id, [])
        at = next((i for i, m in enumerate(history) if m.id == from_message_id), None)
        if at is None:
            return False
        since = history[at].created_at
        dropped = {m.id for m in history[at:]}
        del history[at:]
        calls = self._calls.get(session_id, {})
        for key in [k for k in calls if k[0] in dropped]:
            del calls[key]
        self._steps[session_id] = [s for s in self._steps.get(session_id, []) if s.message_id not in dropped]
        # the errors of the dropped turns go with them (they ended after the cut)
        self._errors[session_id] = [e for e in self._errors.get(session_id, []) if e.created_at < since]
        for sub in [
            s.id
            for s in self._sessions.values()
            if s.user_session_id == session_id and s.id != session_id and s.created_at >= since
        ]:
            for table in (
                self._sessions,
                self._messages,
                self._calls,
                self._steps,
                self._locks,
                self._compactions,
                self._errors,
            ):
                table.pop(sub, None)
        self._touch(session_id)
        return True

    async def lock_session(self, session_id: str, owner: str, *, ttl: float = 600.0) -> None:
        now = time.time()
        holder = self._locks.get(session_id)
        if holder is not None and holder[0] != owner and holder[1] > now and not owner_is_dead(holder[0]):
            raise SessionBusyError(f"session {session_id} is busy with another run")
        self._locks[session_id] = (owner, now + ttl)

    async def renew_lease(self, session_id: str, owner: str, *, ttl: float) -> bool:
        if not self._holds(session_id, owner):
            return False
        self._locks[session_id] = (owner, time.time() + ttl)
        return True

    def _holds(self, session_id: str, owner: str) -> bool:
        holder = self._locks.get(session_id)
        return holder is not None and holder[0] == owner

    def _check_fence(self, session_id: str, fence: str | None) -> None:
        if fence is not None and not self._holds(session_id, fence):
            raise LeaseLostError(
                f"session {session_id}: the run's lease was taken over; its write was refused"
            )

    async def unlock_session(self, session_id: str, owner: str) -> None:
        holder = self._locks.get(session_id)
        if holder is not None and holder[0] == owner:
            del self._locks[session_id]

    async def run_in_progress(self, session_id: str) -> bool:
        holder = self._locks.get(session_id)
        return holder is not None and holder[1] > time.time() and not owner_is_dead(holder[0])

    def _touch(self, session_id: str) -> None:
        if session_id in self._sessions:
            self._touched[session_id] = time.time()

    def _row(self, session_id: str) -> SessionInfo | None:
        """The session's row as stored, with its last write time."""
        info = self._sessions.get(session_id)
        touched = self._touched.get(session_id)
        if info is None or touched is None or touched <= info.updated_at:
            return info
        return replace(info, updated_at=touched)
