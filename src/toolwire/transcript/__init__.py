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

Layout: ``types`` (the public values and their golden-file ``*_to_dict`` forms), ``_rules`` (``Rules``: the
reading side and the event dispatch, over the handlers' layers ``_rules_state``, ``_session_tree``,
``_notifications``, ``_tool_calls``, ``_bubbles``, ``_history_replay``: together the code to hold against the
web page's ``static/transcript.js``), ``_state`` (mutable
bookkeeping), ``agent_c`` (the Agent C event mapping), ``_agent_c_history`` (an Agent C ``history``
event's vendor messages as stored messages, for :meth:`Transcript.from_agent_c`). :class:`Transcript` holds a ``_rules.Rules`` and
adds the public surface: snapshots, subscriptions, change streams, :meth:`Transcript.from_history`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from toolwire.events import AgentEvent, AwaitingKind
from toolwire.messages import Message
from toolwire.transcript._agent_c_history import history_messages
from toolwire.transcript._rules import Rules
from toolwire.transcript._state import ChangeStream, Listener
from toolwire.transcript.agent_c import from_agent_c
from toolwire.transcript.types import (
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


_HISTORY_EVENTS = frozenset({"history", "history_delta"})


class Transcript:
    """The chat as a UI shows it, rebuilt from agent events of any number of (sub-)sessions."""

    def __init__(self, *, on_change: Listener | None = None) -> None:
        self._listeners: list[Listener] = [on_change] if on_change is not None else []
        self._rules = Rules(self._listeners)  # reports every change to self._listeners
        self._streams: list[ChangeStream] = []

    # -- public surface ------------------------------------------------------------------------------

    @property
    def messages(self) -> list[TranscriptMessage]:
        """The ordered bubbles (snapshots; a bubble's snapshot is rebuilt only after it changed)."""
        return self._rules.messages()

    def message(self, message_id: str) -> TranscriptMessage | None:
        """The bubble with this transcript id (as named in a change), if any."""
        return self._rules.message(message_id)

    @property
    def active_tools(self) -> Mapping[tuple[str, str], ToolNotification]:
        """Current notifications by ``(session_id, tool_call_id)``, oldest first (read-only view)."""
        return self._rules.notifications

    @property
    def pending_calls(self) -> dict[str, tuple[TranscriptToolCall, ...]]:
        """Finished calls waiting for their session's next assistant/reasoning bubble (until the turn ends)."""
        return self._rules.pending_calls()

    @property
    def sessions(self) -> dict[str, TranscriptSession]:
        """The session tree: every session seen, with its parent and children (in order of appearance)."""
        return self._rules.sessions()

    @property
    def ops(self) -> int:
        """Units of work done so far (events, loop iterations, snapshots): linear in the events applied."""
        return self._rules.ops

    def snapshot(self) -> TranscriptSnapshot:
        return TranscriptSnapshot(
            messages=tuple(self.messages),
            notifications=tuple(self._rules.notifications.values()),
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
        self._rules.apply_all(events)

    def apply(self, event: AgentEvent) -> None:
        """Consume one agent event of any session. Never raises on odd streams; see docs/transcript.md."""
        self._rules.apply(event)

    @classmethod
    def from_history(
        cls,
        messages: Iterable[Message],
        *,
        parents: Mapping[str, str | None] | None = None,
        last_seq: Mapping[str, int] | None = None,
        awaiting: Mapping[tuple[str, str], AwaitingKind] | None = None,
        ended: bool = False,
        titles: Mapping[str, str | None] | None = None,
        on_change: Listener | None = None,
    ) -> Transcript:
        """Rebuild the transcript a live stream would have produced, from stored messages (resume).

        ``messages`` may hold several sessions; sub-session messages must sit where they happened
        (merge the sessions' histories by ``created_at``). ``parents`` maps session id to parent id
        (from the sessions table) to rebuild the tree. ``last_seq`` is each session's last persisted
        event seq: live events replayed at or below it are dropped as already shown. Use the raw
        stored messages: a call without result shows as executing until its completion arrives.
        ``awaiting`` maps ``(session_id, tool_call_id)`` to what a call of a paused run waits for
        (``approval``, ``output``, ``subagent``; from the tool-call rows whose status is ``awaiting_*``:
        ``{(r.session_id, r.tool_call_id): r.awaiting for r in rows if r.awaiting}``): those calls show as
        ``tool-call-awaiting`` showed them. ``ended=True`` says no run is in progress (none, or a paused
        one: the last ``interaction-end`` was published): calls of that turn still waiting for an answer
        bubble get their own, as the live transcript gave them at that end (rule 4). ``titles`` maps
        session id to its stored title (the sessions table's), which ``session-renamed`` events keep live.
        """
        transcript = cls(on_change=on_change)
        transcript._rules.restore(
            messages, parents=parents, last_seq=last_seq, awaiting=awaiting, ended=ended, titles=titles
        )
        return transcript

    @classmethod
    def from_agent_c(
        cls,
        history: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        on_change: Listener | None = None,
    ) -> Transcript:
        """Rebuild the transcript of a resumed Agent C session from its ``history`` event(s): the vendor
        messages (Anthropic, OpenAI Chat or Responses shapes) become the user and assistant bubbles with
        their tool calls and results, as :meth:`from_history` rebuilds a toolwire session. Several events
        (a parent's and its sub-sessions') are taken in the order given; the Agent C events that follow
        are applied with ``transcript.apply_all(from_agent_c(event))``."""
        events = [history] if isinstance(history, Mapping) else list(history)
        messages = [
            m for event in events if event.get("type") in _HISTORY_EVENTS for m in history_messages(event)
        ]
        parents = {
            str(e.get("session_id") or ""): str(e["parent_session_id"])
            for e in events
            if e.get("parent_session_id") and e.get("parent_session_id") != e.get("session_id")
        }
        return cls.from_history(messages, parents=parents, on_change=on_change)


def merge_histories(histories: Iterable[Sequence[Message]]) -> list[Message]:
    """Merge the stored histories of a session and its sub-sessions into the order things happened.

    Each history is already in order; messages are interleaved by ``created_at`` (ties keep the order
    of ``histories``), which puts a sub-session's messages between the parent's assistant message that
    delegated and the parent's tool message, as :meth:`Transcript.from_history` expects.
    """
    return list(heapq.merge(*histories, key=_created_at))


def _created_at(message: Message) -> float:
    return message.created_at
