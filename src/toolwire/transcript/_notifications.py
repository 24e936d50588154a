"""The transcript's notifications: the tools running or waiting right now, added, updated and cleared.

Separate from the tool calls that raise them because their lifetime is different: a notification is
dropped by clean-ups of whole subtrees (interaction start and end, a user turn), which know nothing of
calls. The ``notifications`` section of src/toolwire/server/static/transcript.js.
"""

from __future__ import annotations

from toolwire.transcript._session_tree import SessionTree
from toolwire.transcript.types import (
    AWAITING_STATUSES,
    NotificationAdded,
    NotificationRemoved,
    NotificationStatus,
    NotificationUpdated,
    RemovalReason,
    ToolNotification,
)


class NotificationRules(SessionTree):
    """Keeps ``_notifications`` (one per ``(session_id, tool_call_id)``) and reports each change."""

    @staticmethod
    def _executing(session_id: str, tool_call_id: str, tool_name: str, at: float) -> ToolNotification:
        status: NotificationStatus = "executing"
        return ToolNotification(
            session_id=session_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            status=status,
            started_at=at,
        )

    def _notify_add(self, notification: ToolNotification) -> None:
        self._notifications[notification.key] = notification
        if self._listeners:
            self._emit(NotificationAdded(notification=notification))

    def _notify_update(self, notification: ToolNotification) -> None:
        self._notifications[notification.key] = notification
        if self._listeners:
            self._emit(NotificationUpdated(notification=notification))

    def _clear_notifications(
        self,
        reason: RemovalReason,
        subtree: str | None,
        *,
        awaiting: bool | None = None,
        below: bool = False,
    ) -> None:
        """Drop leftover notifications: all (``subtree=None``) or those of a session and its sub-sessions
        (``below``: its sub-sessions only); ``awaiting``: only those of calls waiting for a person
        (``True``) or only the others (``False``)."""
        if not self._notifications:
            return
        for key, notification in list(self._notifications.items()):
            self._ops += 1
            if awaiting is not None and (notification.status in AWAITING_STATUSES) != awaiting:
                continue
            if below and notification.session_id == subtree:
                continue
            if subtree is None or self._within(notification.session_id, subtree):
                del self._notifications[key]
                if self._listeners:
                    self._emit(NotificationRemoved(notification=notification, reason=reason))
