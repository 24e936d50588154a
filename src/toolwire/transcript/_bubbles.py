"""The transcript's bubbles: user turns, streamed text, notes, the end of a turn (rule 4) and failover.

What the chat shows, in order: each handler here opens or extends a bubble and gives it the calls that
waited for it. Separate from the calls because a bubble's identity (``(session_id, message_id)`` and its
segments) is its own rule set. The ``bubbles`` section of src/toolwire/server/static/transcript.js.
"""

from __future__ import annotations

from toolwire.events import FailoverEvent
from toolwire.messages import FilePart, Message
from toolwire.transcript._state import Entry, SessionState, Source, first
from toolwire.transcript._tool_calls import ToolCallRules
from toolwire.transcript.types import MessageAdded, MessageUpdated, NotificationRemoved, TranscriptRole


class BubbleRules(ToolCallRules):
    """Keeps ``_entries`` (the ordered bubbles) and ``_sources`` (each model message's current segment)."""

    def _add(self, entry: Entry) -> None:
        entry.index = len(self._entries)
        self._entries.append(entry)
        self._by_id.setdefault(entry.id, entry)
        if self._listeners:
            self._emit(MessageAdded(message_id=entry.id, index=entry.index, session_id=entry.session_id))

    def _user_turn(self, state: SessionState, message: Message) -> None:
        if not (message.parts and message.id in self._user_ids):  # a replayed turn changes nothing
            self._flush(state.id)  # the previous turn's calls are drawn under that turn, not this one
        if message.parts:
            message_id = message.id
            if not message_id:
                message_id = f"{state.id}:user:{state.user_count}"
                state.user_count += 1
            if message_id in self._user_ids:
                return  # a replayed user turn (already shown, e.g. restored from history) changes nothing
            self._user_ids.add(message_id)
            self._add(
                Entry(
                    id=message_id, role="user", session_id=state.id, text=message.text, source_id=message_id
                )
            )
            for index, part in enumerate(message.parts):
                self._ops += 1
                if isinstance(part, FilePart):
                    entry = Entry(
                        id=f"{message_id}:file:{index}",
                        role="media",
                        session_id=state.id,
                        source_id=message_id,
                    )
                    entry.content_type, entry.url, entry.data = part.media_type, part.url, part.data
                    self._add(entry)
        state.last_segment = None
        state.anon = None
        # A top-level user turn means nothing can still run; a sub-agent's own user turn happens while
        # the parent's delegating tool runs, so it only clears its own subtree.
        self._clear_notifications("user-turn-start", state.id if state.parent is not None else None)

    def _text(self, state: SessionState, source_id: str, role: TranscriptRole, delta: str) -> None:
        if not delta:
            return
        if not source_id:
            if state.anon is None:
                state.anon = f"{state.id}.m{state.anon_count}"
                state.anon_count += 1
            source_id = state.anon
        key = (state.id, source_id)
        source = self._sources.get(key)
        if source is None:
            source = self._sources[key] = Source()
        elif source.sealed:
            return
        entry = source.current
        if entry is not None and entry.role == role:
            entry.chunks.append(delta)
            entry.snapshot = None
            if self._listeners:
                self._emit(
                    MessageUpdated(
                        message_id=entry.id, index=entry.index, session_id=state.id, text_delta=delta
                    )
                )
            return
        entry = Entry(
            id=f"{source_id}:{source.count}", role=role, session_id=state.id, text=delta, source_id=source_id
        )
        source.count += 1
        source.current = entry
        self._add(entry)
        state.last_segment = entry
        waiting = self._pending.pop(state.id, None)
        for ordinal, call in sorted(waiting or (), key=first):
            self._ops += 1
            self._insert_call(entry, ordinal, call)

    def _flush(self, subtree: str) -> None:
        """Rule 4's end: the calls of ``subtree``'s sessions that still wait for an answer bubble get one of
        their own, an empty assistant bubble ``{session}:calls:{k}``, where the turn ends."""
        if not self._pending:
            return
        for session_id in list(self._pending):
            self._ops += 1
            if not self._within(session_id, subtree):
                continue
            state = self._sessions[session_id]
            entry = Entry(
                id=f"{session_id}:calls:{state.flushes}", role="assistant", session_id=session_id, text=""
            )
            state.flushes += 1
            self._add(entry)
            state.last_segment = entry
            for ordinal, call in sorted(self._pending.pop(session_id), key=first):
                self._insert_call(entry, ordinal, call)

    def _note(
        self,
        state: SessionState,
        role: TranscriptRole,
        *,
        text: str,
        level: str | None,
        tool_call_id: str | None,
    ) -> Entry:
        entry = Entry(id=f"{state.id}:{role}:{state.notes}", role=role, session_id=state.id, text=text)
        state.notes += 1
        entry.ephemeral = True
        entry.level = level
        entry.tool_call_id = tool_call_id
        self._add(entry)
        return entry

    def _failover(self, state: SessionState, event: FailoverEvent) -> None:
        """The step goes to another model, which streams the message again from its start. What the failed
        model streamed stays shown, but as ephemeral bubbles renamed ``{id}:dropped`` (the store never
        had it), so the next model's bubbles take the message's ids from ``:0`` as history will; its calls
        are forgotten (they never run) and their notifications removed; a warning note follows."""
        message_id = event.message_id
        source = self._sources.get((state.id, message_id))
        # A sealed source is a stored message (restored from history): a replayed failover changes nothing.
        if source is not None and not source.sealed:
            del self._sources[(state.id, message_id)]
            for entry in reversed(self._entries):  # rare: a walk over the bubbles is fine
                self._ops += 1
                if entry.session_id != state.id or entry.source_id != message_id or entry.ephemeral:
                    continue
                if self._by_id.get(entry.id) is entry:
                    del self._by_id[entry.id]
                entry.id = f"{entry.id}:dropped"
                entry.ephemeral, entry.snapshot = True, None
                self._by_id.setdefault(entry.id, entry)
                if state.last_segment is entry:
                    state.last_segment = None
                if self._listeners:
                    self._emit(MessageUpdated(message_id=entry.id, index=entry.index, session_id=state.id))
        for key, call in list(self._calls.items()):
            self._ops += 1
            if key[0] != state.id or key[1] != message_id or call.done:
                continue
            del self._calls[key]
            if self._latest_calls.get((state.id, key[2])) is call:
                del self._latest_calls[(state.id, key[2])]
            notification = self._notifications.pop((state.id, key[2]), None)
            if notification is not None and self._listeners:
                self._emit(NotificationRemoved(notification=notification, reason="failover"))
        dropped = "; what it streamed was dropped" if event.dropped_output else ""
        text = (
            f"Failover: {event.from_provider}:{event.from_model} → {event.to_provider}:{event.to_model}"
            f" ({event.reason}){dropped}"
        )
        self._note(state, "system", text=text, level="warning", tool_call_id=None)
