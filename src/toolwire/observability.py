"""A typed event bus on the Agent, fed by the same events as the stream (there is no second path).

``agent.on(name, fn)`` subscribes ``fn`` by an event's ``type`` (``"tool-call-active"``), by one of the
short aliases below, or by ``"*"`` for every event. The aliases are derived from the event classes, so
they cannot drift from the event vocabulary:

==================  ====================================================  ===========================
alias               event class (:mod:`toolwire.events`)                  its ``type``
==================  ====================================================  ===========================
``run:start``       :class:`~toolwire.events.InteractionStart`            ``interaction-start``
``run:end``         :class:`~toolwire.events.InteractionEnd`              ``interaction-end``
``step:start``      :class:`~toolwire.events.StepStart`                   ``step-start``
``step:end``        :class:`~toolwire.events.StepFinish`                  ``step-finish``
``tool:input``      :class:`~toolwire.events.ToolInputAvailableEvent`     ``tool-input-available``
``tool:start``      :class:`~toolwire.events.ToolCallActive`              ``tool-call-active``
``tool:end``        :class:`~toolwire.events.ToolCallComplete`            ``tool-call-complete``
``tool:progress``   :class:`~toolwire.events.ToolProgress`                ``tool-progress``
``tool:awaiting``   :class:`~toolwire.events.ToolCallAwaiting`            ``tool-call-awaiting``
``tool:resolved``   :class:`~toolwire.events.ToolCallResolved`            ``tool-call-resolved``
``text:delta``      :class:`~toolwire.events.TextDeltaEvent`              ``text-delta``
``error``           :class:`~toolwire.events.ErrorEvent`                  ``error``
==================  ====================================================  ===========================

An unknown name is a :class:`~toolwire.errors.ConfigError` (a typo would otherwise never fire). Callbacks
may be sync or async; an async one is awaited before the event reaches the stream's consumer. A callback
that raises is logged and skipped: an observer never breaks a run. With no subscriber the stream is not
wrapped at all.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, get_args

from toolwire.errors import ConfigError
from toolwire.events import (
    AgentEvent,
    Envelope,
    ErrorEvent,
    InteractionEnd,
    InteractionStart,
    StepFinish,
    StepStart,
    TextDeltaEvent,
    ToolCallActive,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallResolved,
    ToolInputAvailableEvent,
    ToolProgress,
)
from toolwire.models._builder import closing

logger = logging.getLogger("toolwire.observability")

EventCallback = Callable[[AgentEvent], Awaitable[None] | None]


def _type_of(event_class: type[Envelope]) -> str:
    """The ``type`` literal of an event class (the default of its ``type`` field)."""
    return str(event_class.__dataclass_fields__["type"].default)


# AgentEvent is Annotated[Union[...], Field(...)]: the union is its first argument.
EVENT_TYPES: frozenset[str] = frozenset(_type_of(cls) for cls in get_args(get_args(AgentEvent)[0]))
"""Every event ``type`` of :data:`~toolwire.events.AgentEvent`."""

ALIASES: dict[str, str] = {
    alias: _type_of(event_class)
    for alias, event_class in {
        "run:start": InteractionStart,
        "run:end": InteractionEnd,
        "step:start": StepStart,
        "step:end": StepFinish,
        "tool:input": ToolInputAvailableEvent,
        "tool:start": ToolCallActive,
        "tool:end": ToolCallComplete,
        "tool:progress": ToolProgress,
        "tool:awaiting": ToolCallAwaiting,
        "tool:resolved": ToolCallResolved,
        "text:delta": TextDeltaEvent,
        "error": ErrorEvent,
    }.items()
}
"""Short names for the events most subscribers want (the table above), mapped to the event ``type``."""


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
        if kind not in EVENT_TYPES:
            known = ", ".join(sorted({*ALIASES, *EVENT_TYPES}))
            raise ConfigError(f"no event is called {name!r}; use '*', an alias or an event type: {known}")
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

    def wrap(self, events: AsyncGenerator[AgentEvent, None]) -> AsyncGenerator[AgentEvent, None]:
        """The stream itself when nobody listens; otherwise the same stream, dispatched as it flows."""
        if not self.has_subscribers:
            return events
        return self._published(events)

    async def _published(self, events: AsyncGenerator[AgentEvent, None]) -> AsyncGenerator[AgentEvent, None]:
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
