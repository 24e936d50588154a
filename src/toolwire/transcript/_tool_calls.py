"""The transcript's tool calls: which call an event names, its notification, and where it lands when done.

A call is keyed by ``(session_id, message_id, tool_call_id)`` (providers reuse ids across messages), so
naming the right one is a concept of its own; a finished call is attached to a bubble by ordinal
(:meth:`ToolCallRules._insert_call`) or waits in ``_pending`` for one. The ``tool calls`` section of
src/toolwire/server/static/transcript.js.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Any

from toolwire.events import AwaitingKind
from toolwire.transcript._notifications import NotificationRules
from toolwire.transcript._state import CallState, Entry, SessionState, first
from toolwire.transcript.types import (
    AWAITING_NOTIFICATION,
    AWAITING_STATUSES,
    MessageUpdated,
    NotificationRemoved,
    NotificationStatus,
    ToolNotification,
    TranscriptToolCall,
)


class ToolCallRules(NotificationRules):
    """The handlers of a call's life: selected, active, heartbeat, progress, awaiting, resolved, complete."""

    def _call(self, state: SessionState, tool_call_id: str, message_id: str) -> tuple[CallState, bool]:
        """The call an event names, and whether this event started it.

        With ``message_id``: the call of that message (a provider that numbers calls per response reuses
        ``call_0`` in every message, so the id alone names several calls). Without: the latest call with
        that id in the session, never an older one, so a completion cannot attach to a call that finished
        steps ago. A call first seen without its message adopts the id the first event naming it brings.
        """
        latest_key = (state.id, tool_call_id)
        latest = self._latest_calls.get(latest_key)
        if message_id:
            call = self._calls.get((state.id, message_id, tool_call_id))
            if call is not None:
                return call, False
            if latest is not None and not latest.message_id and not latest.done:
                latest.message_id = message_id
                self._calls[(state.id, message_id, tool_call_id)] = latest
                return latest, False
        elif latest is not None:
            return latest, False
        self._ordinal += 1
        call = CallState(self._ordinal, message_id)
        self._latest_calls[latest_key] = call
        if message_id:
            self._calls[(state.id, message_id, tool_call_id)] = call
        return call, True

    def _selected(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any] | None,
        at: float,
    ) -> None:
        key = (state.id, tool_call_id)
        call, new = self._call(state, tool_call_id, message_id)
        if call.done:
            return  # a replayed or late selection of a finished call
        call.tool_name = tool_name or call.tool_name
        if args is not None:
            call.args = args
        current = self._notifications.get(key)
        preparing = ToolNotification(
            session_id=state.id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            status="preparing",
            started_at=at,
        )
        if current is None:
            self._notify_add(preparing)
        elif new:
            # The notification is an older call's with the same id that never completed: this call takes
            # its place (notifications are keyed by (session, call id): one per id is shown).
            self._notify_update(preparing)

    def _active(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any],
        at: float,
    ) -> None:
        key = (state.id, tool_call_id)
        call, new = self._live_call(state, tool_call_id, message_id, tool_name, args)
        if call is None:
            return
        current = self._notifications.get(key)
        if current is None:
            self._notify_add(self._executing(state.id, tool_call_id, call.tool_name, at))
        elif current.status != "executing" or new:
            self._notify_update(replace(current, status="executing", started_at=at, tool_name=call.tool_name))

    def _live_call(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any] | None,
    ) -> tuple[CallState | None, bool]:
        """The call with what an activation or a wait tells of it, and whether this event started it;
        ``None`` once it finished (a late or replayed event of a finished call changes nothing)."""
        call, new = self._call(state, tool_call_id, message_id)
        if call.done:
            return None, False
        call.tool_name = tool_name or call.tool_name
        if call.args is None and args:
            call.args = args
        return call, new

    def _heartbeat(self, state: SessionState, tool_call_id: str, tool_name: str, started_at: float) -> None:
        key = (state.id, tool_call_id)
        call, _ = self._call(state, tool_call_id, "")
        if call.done or key in self._notifications:
            return
        # A heartbeat for a tool we never saw start (joined mid-run): it is running, so show it.
        call.tool_name = tool_name or call.tool_name
        self._notify_add(self._executing(state.id, tool_call_id, call.tool_name, started_at))

    def _awaiting(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any] | None,
        kind: AwaitingKind,
        at: float,
    ) -> None:
        key = (state.id, tool_call_id)
        call, new = self._live_call(state, tool_call_id, message_id, tool_name, args)
        if call is None:
            return
        status: NotificationStatus = AWAITING_NOTIFICATION[kind]
        current = self._notifications.get(key)
        waiting = ToolNotification(
            session_id=state.id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            status=status,
            started_at=at,
        )
        if current is None:
            self._notify_add(waiting)
        elif new:
            self._notify_update(waiting)  # it takes the place of an older call's with the same id
        elif current.status != status:  # it keeps the time it was selected at
            self._notify_update(replace(current, status=status, tool_name=call.tool_name))

    def _resolved(self, state: SessionState, tool_call_id: str, message_id: str) -> None:
        key = (state.id, tool_call_id)
        current = self._notifications.get(key)
        if current is None or current.status not in AWAITING_STATUSES:
            return
        named = self._calls.get((state.id, message_id, tool_call_id)) if message_id else None
        if named is not None and named is not self._latest_calls.get(key):
            return  # the answer of an older call with this id: the notification is a later call's
        del self._notifications[key]
        if self._listeners:
            self._emit(NotificationRemoved(notification=current, reason="resolved"))

    def _progress(self, state: SessionState, tool_call_id: str, fraction: float | None, text: str) -> None:
        current = self._notifications.get((state.id, tool_call_id))
        if current is not None:
            progress = fraction if fraction is not None else current.progress
            self._notify_update(
                replace(current, progress=progress, progress_message=text or current.progress_message)
            )

    def _complete(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any],
        output: Any,
        is_error: bool,
    ) -> None:
        key = (state.id, tool_call_id)
        call, _ = self._call(state, tool_call_id, message_id)
        if call.done:
            return  # duplicate completion: attach once
        call.done = True
        if call is self._latest_calls[key]:  # an older call's completion leaves a later call's notification
            notification = self._notifications.pop(key, None)
            if notification is not None and self._listeners:
                self._emit(NotificationRemoved(notification=notification, reason="complete"))
        finished = TranscriptToolCall(
            tool_call_id=tool_call_id,
            tool_name=call.tool_name or tool_name,
            args=call.args if call.args is not None else dict(args),
            result=output,
            is_error=is_error,
        )
        target = state.last_segment
        if target is None:
            # No assistant/reasoning bubble in this turn yet (tools before any text): the call waits
            # for the session's next one.
            self._pending.setdefault(state.id, []).append((call.ordinal, finished))
        else:
            self._insert_call(target, call.ordinal, finished)

    def _insert_call(self, entry: Entry, ordinal: int, call: TranscriptToolCall) -> None:
        position = bisect.bisect_right(entry.calls, ordinal, key=first)
        self._ops += 1 + len(entry.calls) - position  # the shift; calls usually complete in order, so ~1
        entry.calls.insert(position, (ordinal, call))
        entry.snapshot = None
        if self._listeners:
            self._emit(
                MessageUpdated(
                    message_id=entry.id, index=entry.index, session_id=entry.session_id, tool_call=call
                )
            )
