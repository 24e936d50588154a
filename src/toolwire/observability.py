"""A typed event bus on the Agent, fed by the same events as the stream (there is no second path).

``agent.on("tool:start", fn)`` subscribes ``fn`` to :class:`~toolwire.events.ToolCallActive` events;
``"tool:end"`` to :class:`~toolwire.events.ToolCallComplete` (name, args, output or error, duration, session
ids); ``"run:start"`` / ``"run:end"``, ``"step:start"`` / ``"step:end"``, ``"error"``; any event ``type``
string (``"text-delta"``); or ``"*"`` for everything. Callbacks may be sync or async; an async one is
awaited before the event reaches the stream's consumer. A callback that raises is logged and skipped: an
observer never breaks a run. With no subscriber the stream is not wrapped at all.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from toolwire.events import AgentEvent
from toolwire.models.base import closing

logger = logging.getLogger("toolwire.observability")

EventCallback = Callable[[AgentEvent], Awaitable[None] | None]

ALIASES: dict[str, str] = {
    "run:start": "interaction-start",
    "run:end": "interaction-end",
    "step:start": "step-start",
    "step:end": "step-finish",
    "tool:input": "tool-input-available",
    "tool:start": "tool-call-active",
    "tool:end": "tool-call-complete",
    "tool:progress": "tool-progress",
    "text:delta": "text-delta",
    "error": "error",
}


class EventBus:
    def __init__(self) -> None:
        self._by_type: dict[str, list[EventCallback]] = {}
        self._all: list[EventCallback] = []

    @property
    def has_subscribers(self) -> bool:
        return bool(self._by_type or self._all)

    def on(self, name: str, callback: EventCallback) -> Callable[[], None]:
        """Subscribe; returns a function that unsubscribes."""
        if name == "*":
            self._all.append(callback)
            return lambda: self._all.remove(callback)
        kind = ALIASES.get(name, name)
        self._by_type.setdefault(kind, []).append(callback)

        def off() -> None:
            self._by_type[kind].remove(callback)
            if not self._by_type[kind]:
                del self._by_type[kind]

        return off

    async def dispatch(self, event: AgentEvent) -> None:
        callbacks = self._by_type.get(event.type)
        for callback in (*callbacks, *self._all) if callbacks else self._all:
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("event subscriber %r failed on %s", callback, event.type)

    def wrap(self, events: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
        """The stream itself when nobody listens; otherwise the same stream, dispatched as it flows."""
        if not self.has_subscribers:
            return events
        return self._published(events)

    async def _published(self, events: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
        async with closing(events) as stream:
            async for event in stream:
                await self.dispatch(event)
                yield event


def describe(event: AgentEvent) -> dict[str, Any]:
    """A flat summary of an event for logs (no provider metadata, outputs clipped)."""
    data: dict[str, Any] = {"type": event.type, "session_id": event.session_id, "seq": event.seq}
    for key in ("tool_name", "tool_call_id", "duration", "is_error", "status", "step"):
        if hasattr(event, key):
            data[key] = getattr(event, key)
    return data
