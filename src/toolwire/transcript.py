"""Rebuild the chat a user sees from the interleaved, interruptible agent event stream (or from history).

:class:`Transcript` consumes :mod:`toolwire.events` of any number of sessions (sub-agents included) and
keeps: the ordered bubbles (user, assistant, reasoning, system, media), each finished tool call attached
to a bubble, the tools running right now (notifications), and the session tree. Every mutation is
reported as a :data:`TranscriptChange`, so a UI re-renders only what changed. The rules are written down in
``docs/transcript.md`` and pinned by the data in ``tests/golden/transcript/``, which the web page's
JavaScript implementation is tested against too.

Identity: assistant bubbles are keyed by ``(session_id, message_id)`` of the events (the id the loop
also stores the assistant message under), so text from interleaved sessions lands on the right bubble
and a transcript rebuilt from history gets the same ids. Tool calls are keyed by
``(session_id, tool_call_id)``: sub-agents may reuse a parent's ids.

Cost: every event is handled in O(1) amortized (dictionary lookups and appends); only the rare
clean-ups (interaction end, user turn, switching top-level session) walk the *active* notifications or
the *buffered* calls, never the transcript. :attr:`Transcript.ops` counts that work so tests can check it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import assert_never

from toolwire._transcript_agent_c import from_agent_c
from toolwire._transcript_reducer import Reducer
from toolwire._transcript_state import ChangeStream, Listener, SessionState, first
from toolwire._transcript_types import (
    MessageAdded,
    MessageUpdated,
    NotificationAdded,
    NotificationRemoved,
    NotificationUpdated,
    ToolNotification,
    TranscriptChange,
    TranscriptMessage,
    TranscriptSession,
    TranscriptSnapshot,
    TranscriptToolCall,
    change_to_dict,
    message_to_dict,
    notification_to_dict,
    sessions_to_dict,
)
from toolwire.events import (
    AgentEvent,
    CustomDataEvent,
    ErrorEvent,
    InteractionEnd,
    InteractionStart,
    MediaEvent,
    MessagePersisted,
    OutputAvailable,
    OutputPartial,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    StepFinish,
    StepStart,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallActive,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
    ToolProgress,
    UserTurnStart,
)
from toolwire.messages import Message

__all__ = [
    "ChangeStream",
    "MessageAdded",
    "MessageUpdated",
    "NotificationAdded",
    "NotificationRemoved",
    "NotificationUpdated",
    "ToolNotification",
    "Transcript",
    "TranscriptChange",
    "TranscriptMessage",
    "TranscriptSession",
    "TranscriptSnapshot",
    "TranscriptToolCall",
    "change_to_dict",
    "from_agent_c",
    "merge_histories",
    "message_to_dict",
    "notification_to_dict",
    "sessions_to_dict",
]


class Transcript(Reducer):
    """The chat as a UI shows it, rebuilt from agent events of any number of (sub-)sessions."""

    def __init__(self, *, on_change: Listener | None = None) -> None:
        super().__init__(on_change=on_change)
        self._streams: list[ChangeStream] = []

    # -- public surface ------------------------------------------------------------------------------

    @property
    def messages(self) -> list[TranscriptMessage]:
        """The ordered bubbles (snapshots; a bubble's snapshot is rebuilt only after it changed)."""
        self._ops += len(self._entries)
        return [entry.freeze() for entry in self._entries]

    def message(self, message_id: str) -> TranscriptMessage | None:
        """The bubble with this transcript id (as named in a change), if any."""
        entry = self._by_id.get(message_id)
        return entry.freeze() if entry is not None else None

    @property
    def active_tools(self) -> Mapping[tuple[str, str], ToolNotification]:
        """Current notifications by ``(session_id, tool_call_id)``, oldest first (read-only view)."""
        return MappingProxyType(self._notifications)

    @property
    def pending_calls(self) -> dict[str, tuple[TranscriptToolCall, ...]]:
        """Finished calls waiting for their session's next assistant/reasoning bubble."""
        self._ops += sum(len(calls) for calls in self._pending.values())
        return {
            sid: tuple(call for _, call in sorted(calls, key=first)) for sid, calls in self._pending.items()
        }

    @property
    def sessions(self) -> dict[str, TranscriptSession]:
        """The session tree: every session seen, with its parent and children (in order of appearance)."""
        self._ops += len(self._sessions)
        return {
            s.id: TranscriptSession(session_id=s.id, parent_session_id=s.parent, children=tuple(s.children))
            for s in self._sessions.values()
            if s.id
        }

    @property
    def ops(self) -> int:
        """Units of work done so far (events, loop iterations, snapshots): linear in the events applied."""
        return self._ops

    def snapshot(self) -> TranscriptSnapshot:
        return TranscriptSnapshot(
            messages=tuple(self.messages),
            notifications=tuple(self._notifications.values()),
            sessions=tuple(self.sessions.values()),
        )

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every change; returns the function that unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def changes(self) -> ChangeStream:
        """Async iterator of changes, registered at once: no change is missed before the first ``await``."""
        stream = ChangeStream(self.subscribe, self._forget_stream)
        self._streams.append(stream)
        return stream

    def close(self) -> None:
        """End every :meth:`changes` iterator (after they drained what was already queued)."""
        for stream in list(self._streams):
            stream.close()

    def _forget_stream(self, stream: ChangeStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)

    def apply_all(self, events: Iterable[AgentEvent]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: AgentEvent) -> None:
        """Consume one agent event of any session. Never raises on odd streams; see docs/transcript.md."""
        self._ops += 1
        state = self._enter(event)
        if state is None:
            return
        match event:
            case TextDeltaEvent():
                self._text(state, event.message_id, "assistant", event.delta)
            case ReasoningDeltaEvent():
                self._text(state, event.message_id, "reasoning", event.delta)
            case (
                ToolInputStartEvent()
                | ToolInputAvailableEvent()
                | ToolCallActive()
                | ToolCallHeartbeat()
                | ToolProgress()
                | ToolCallComplete()
            ):
                self._tool_event(state, event)
            case UserTurnStart():
                self._user_turn(state, event.message)
            case InteractionEnd():
                state.anon = None
                self._clear_notifications("interaction-end", state.id)
            case StepFinish():
                state.anon = None
            case SystemMessageEvent():
                self._note(
                    state, "system", text=event.text, level=event.level, tool_call_id=event.tool_call_id
                )
            case ErrorEvent():
                self._note(state, "system", text=event.message, level="error", tool_call_id=None)
            case MediaEvent():
                entry = self._note(state, "media", text="", level=None, tool_call_id=event.tool_call_id)
                entry.content_type, entry.url, entry.data = event.content_type, event.url, event.data
            case (
                InteractionStart()
                | StepStart()
                | TextStartEvent()
                | TextEndEvent()
                | ReasoningStartEvent()
                | ReasoningEndEvent()
                | ToolInputDeltaEvent()
                | CustomDataEvent()
                | OutputPartial()
                | OutputAvailable()
                | MessagePersisted()
            ):
                pass  # registering the session (done in _enter) is all these need
            case _:
                assert_never(event)

    def _tool_event(
        self,
        state: SessionState,
        event: ToolInputStartEvent
        | ToolInputAvailableEvent
        | ToolCallActive
        | ToolCallHeartbeat
        | ToolProgress
        | ToolCallComplete,
    ) -> None:
        match event:
            case ToolInputStartEvent():
                self._selected(state, event.tool_call_id, event.tool_name, None, event.timestamp)
            case ToolInputAvailableEvent():
                self._selected(state, event.tool_call_id, event.tool_name, event.args, event.timestamp)
            case ToolCallActive():
                at = event.started_at or event.timestamp
                self._active(state, event.tool_call_id, event.tool_name, event.args, at)
            case ToolCallHeartbeat():
                self._heartbeat(state, event.tool_call_id, event.tool_name, event.timestamp - event.elapsed)
            case ToolProgress():
                self._progress(state, event.tool_call_id, event.fraction, event.message)
            case ToolCallComplete():
                self._complete(
                    state, event.tool_call_id, event.tool_name, event.args, event.output, event.is_error
                )
            case _:
                assert_never(event)

    @classmethod
    def from_history(
        cls,
        messages: Iterable[Message],
        *,
        parents: Mapping[str, str | None] | None = None,
        last_seq: Mapping[str, int] | None = None,
        on_change: Listener | None = None,
    ) -> Transcript:
        """Rebuild the transcript a live stream would have produced, from stored messages (resume).

        ``messages`` may hold several sessions; sub-session messages must sit where they happened
        (merge the sessions' histories by ``created_at``). ``parents`` maps session id to parent id
        (from the sessions table) to rebuild the tree. ``last_seq`` is each session's last persisted
        event seq: live events replayed at or below it are dropped as already shown. Use the raw
        stored messages: a call without result shows as executing until its completion arrives.
        """
        transcript = cls(on_change=on_change)
        parent_of = dict(parents or {})
        for message in messages:
            transcript._ops += 1
            state = transcript._register_chain(message.session_id or "", parent_of)
            if state.id:
                transcript._switch_root(state)
            transcript._replay(state, message)
        for session_id in parent_of:
            transcript._register_chain(session_id, parent_of)
        for session_id, seq in (last_seq or {}).items():
            state = transcript._register_chain(session_id, parent_of)
            state.high_seq = max(state.high_seq, seq)
        return transcript


def merge_histories(histories: Iterable[Sequence[Message]]) -> list[Message]:
    """Merge the stored histories of a session and its sub-sessions into the order things happened.

    Each history is already in order; messages are interleaved by ``created_at`` (ties keep the order
    of ``histories``), which puts a sub-session's messages between the parent's assistant message that
    delegated and the parent's tool message, as :meth:`Transcript.from_history` expects.
    """
    return list(heapq.merge(*histories, key=_created_at))


def _created_at(message: Message) -> float:
    return message.created_at
