"""The indexes every transcript handler reads and writes, and the one way a change is reported.

The base of the layers that make up :class:`~toolwire.transcript._rules.Rules` (session tree,
notifications, tool calls, bubbles, history replay, events): each layer is a class over the one below, so
a handler calls only what sits under it and mypy checks every call. Kept apart so the state a handler may
touch is declared once, in one place, rather than spread over the layers that use it. In
src/toolwire/server/static/transcript.js these are the constructor and ``_emit`` (at the end of its
``notifications`` section).
"""

from __future__ import annotations

from toolwire.transcript._state import CallState, Entry, Listener, SessionState, Source
from toolwire.transcript.types import ToolNotification, TranscriptChange, TranscriptToolCall


class RulesState:
    """Transcript state: the bubbles, sessions, calls and notifications by key; the work counter; listeners.

    ``listeners`` is the owner's list of change listeners, shared, not copied: the owner subscribes and
    unsubscribes, the rules only report to whoever is in it.
    """

    def __init__(self, listeners: list[Listener]) -> None:
        self._entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self._sessions: dict[str, SessionState] = {}
        self._sources: dict[tuple[str, str], Source] = {}
        self._calls: dict[tuple[str, str, str], CallState] = {}
        """Calls by ``(session_id, message_id, tool_call_id)``, for the calls whose message is known."""
        self._latest_calls: dict[tuple[str, str], CallState] = {}
        """The latest call per ``(session_id, tool_call_id)``: what an event without ``message_id`` names."""
        self._notifications: dict[tuple[str, str], ToolNotification] = {}
        self._pending: dict[str, list[tuple[int, TranscriptToolCall]]] = {}
        self._user_ids: set[str] = set()
        self._ordinal = 0
        self._current_root: str | None = None
        self._tree_version = 0
        self._listeners = listeners
        self._ops = 0

    def _emit(self, change: TranscriptChange) -> None:
        for listener in list(self._listeners):
            self._ops += 1
            listener(change)
