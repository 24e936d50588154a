"""Values of the transcript: messages with their attached tool calls, notifications, sessions, changes.

These are the frozen snapshots a UI renders (re-exported by :mod:`toolwire.transcript`); the mutable
bookkeeping behind them lives in ``toolwire.transcript._state``.
The ``*_to_dict`` helpers give the JSON form used by the golden conformance files
(``tests/golden/transcript/``): fields at their default are left out, so a hand-written expectation stays
short and the JavaScript implementation compares the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "MessageAdded",
    "MessageUpdated",
    "NotificationAdded",
    "NotificationRemoved",
    "NotificationStatus",
    "NotificationUpdated",
    "RemovalReason",
    "ToolNotification",
    "TranscriptChange",
    "TranscriptMessage",
    "TranscriptRole",
    "TranscriptSession",
    "TranscriptSnapshot",
    "TranscriptToolCall",
    "change_to_dict",
    "message_to_dict",
    "notification_to_dict",
    "sessions_to_dict",
    "tool_call_to_dict",
]

TranscriptRole: TypeAlias = Literal["user", "assistant", "reasoning", "system", "media"]
NotificationStatus: TypeAlias = Literal[
    "preparing", "executing", "awaiting-approval", "awaiting-output", "awaiting-subagent", "awaiting-input"
]
RemovalReason: TypeAlias = Literal[
    "complete", "interaction-end", "user-turn-start", "resolved", "interaction-start", "failover"
]
AWAITING_NOTIFICATION: dict[str, NotificationStatus] = {
    "approval": "awaiting-approval",
    "output": "awaiting-output",
    "subagent": "awaiting-subagent",
    "input": "awaiting-input",
}
"""The notification status of a call waiting for a person, by what it waits for."""
AWAITING_STATUSES = frozenset(AWAITING_NOTIFICATION.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptToolCall:
    """A finished tool call as shown under the message it is attached to."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    result: Any = None
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptMessage:
    """One bubble of the transcript.

    Assistant text and reasoning of one model message become separate bubbles ("segments"): a new
    segment starts whenever the kind switches, and its ``id`` is ``f"{source_id}:{n}"``.
    """

    id: str
    role: TranscriptRole
    session_id: str
    text: str = ""
    tool_calls: tuple[TranscriptToolCall, ...] = ()
    source_id: str = ""
    """The stored/model message this bubble comes from (the events' ``message_id``); empty if ephemeral."""
    ephemeral: bool = False
    """True for system messages, errors and media that came only from the live stream (never in history)."""
    level: str | None = None
    """``info`` / ``warning`` / ``error`` for system messages."""
    content_type: str | None = None
    url: str | None = None
    data: str | None = None
    """Base64 bytes of a media bubble without URL."""
    tool_call_id: str | None = None
    """The tool call a system message or media bubble was emitted from, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolNotification:
    """A tool the model selected, the executor runs right now, or that waits for a person (an approval,
    a client's output, a paused sub-agent), keyed by ``(session_id, tool_call_id)``."""

    session_id: str
    tool_call_id: str
    tool_name: str
    status: NotificationStatus
    started_at: float
    """When the model selected the tool, replaced by the execution start once it runs."""
    progress: float | None = None
    progress_message: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.session_id, self.tool_call_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptSession:
    """A node of the session tree: a top-level session has ``parent_session_id=None``."""

    session_id: str
    parent_session_id: str | None = None
    children: tuple[str, ...] = ()
    title: str | None = None
    """The latest ``session-renamed`` title (``None``: none seen; a rebuilt transcript takes the stored ones)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageAdded:
    type: Literal["message-added"] = "message-added"
    message_id: str
    index: int
    """Position in ``Transcript.messages``; positions never move."""
    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageUpdated:
    """Text was appended (``text_delta``) or a finished tool call was attached (``tool_call``)."""

    type: Literal["message-updated"] = "message-updated"
    message_id: str
    index: int
    session_id: str
    text_delta: str = ""
    tool_call: TranscriptToolCall | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationAdded:
    type: Literal["notification-added"] = "notification-added"
    notification: ToolNotification


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationUpdated:
    type: Literal["notification-updated"] = "notification-updated"
    notification: ToolNotification


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationRemoved:
    type: Literal["notification-removed"] = "notification-removed"
    notification: ToolNotification
    """The notification as it was when removed."""
    reason: RemovalReason


TranscriptChange: TypeAlias = (
    MessageAdded | MessageUpdated | NotificationAdded | NotificationUpdated | NotificationRemoved
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptSnapshot:
    """Everything a UI shows, as one comparable value (live and resumed transcripts compare equal)."""

    messages: tuple[TranscriptMessage, ...]
    notifications: tuple[ToolNotification, ...]
    sessions: tuple[TranscriptSession, ...]

    def persistent(self) -> TranscriptSnapshot:
        """The snapshot without ephemeral bubbles: what a transcript rebuilt from history can show."""
        return TranscriptSnapshot(
            messages=tuple(m for m in self.messages if not m.ephemeral),
            notifications=self.notifications,
            sessions=self.sessions,
        )


def tool_call_to_dict(call: TranscriptToolCall) -> dict[str, Any]:
    return {
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "args": call.args,
        "result": call.result,
        "is_error": call.is_error,
    }


def message_to_dict(message: TranscriptMessage) -> dict[str, Any]:
    """The golden-file form: id, role, session_id, text and tool_calls always; other fields when set."""
    out: dict[str, Any] = {
        "id": message.id,
        "role": message.role,
        "session_id": message.session_id,
        "text": message.text,
        "tool_calls": [tool_call_to_dict(c) for c in message.tool_calls],
    }
    if message.source_id:
        out["source_id"] = message.source_id
    if message.ephemeral:
        out["ephemeral"] = True
    for name in ("level", "content_type", "url", "data", "tool_call_id"):
        value = getattr(message, name)
        if value is not None:
            out[name] = value
    return out


def notification_to_dict(notification: ToolNotification) -> dict[str, Any]:
    out: dict[str, Any] = {
        "session_id": notification.session_id,
        "tool_call_id": notification.tool_call_id,
        "tool_name": notification.tool_name,
        "status": notification.status,
        "started_at": notification.started_at,
    }
    if notification.progress is not None:
        out["progress"] = notification.progress
    if notification.progress_message:
        out["progress_message"] = notification.progress_message
    return out


def sessions_to_dict(sessions: tuple[TranscriptSession, ...]) -> dict[str, dict[str, Any]]:
    return {
        s.session_id: {"parent_session_id": s.parent_session_id, "children": list(s.children)}
        | ({"title": s.title} if s.title is not None else {})
        for s in sessions
    }


def change_to_dict(change: TranscriptChange) -> dict[str, Any]:
    """Compact form of a change for golden files: what a UI needs to know to re-render."""
    match change:
        case MessageAdded():
            return {"type": change.type, "message_id": change.message_id}
        case MessageUpdated():
            out: dict[str, Any] = {"type": change.type, "message_id": change.message_id}
            if change.text_delta:
                out["text_delta"] = change.text_delta
            if change.tool_call is not None:
                out["tool_call_id"] = change.tool_call.tool_call_id
            return out
        case NotificationAdded() | NotificationUpdated():
            n = change.notification
            return {
                "type": change.type,
                "session_id": n.session_id,
                "tool_call_id": n.tool_call_id,
                "status": n.status,
            }
        case NotificationRemoved():
            n = change.notification
            return {
                "type": change.type,
                "session_id": n.session_id,
                "tool_call_id": n.tool_call_id,
                "reason": change.reason,
            }
