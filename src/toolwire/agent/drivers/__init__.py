"""Drivers decide how a model is asked for its next move and turn its answer into canonical stream parts.

Per step, the loop (its model step, ``agent/_model_step.py``) first asks the driver what the step sends,
``driver.compile_messages(state)`` (:class:`StepState`: the step number, the stored history as the
model reads it, the tools, the instructions), then calls ``driver.open_step(model, request)`` once per
attempt and consumes the canonical parts it yields; it never knows which driver ran. By default
``open_step`` is ``stream_step``, unfiltered; :class:`NativeToolDriver` returns the model's own stream
and its echo filter instead (no async generator per step), unless a subclass overrides ``stream_step``:
then that runs. So overriding either hook does what it says. :class:`NativeToolDriver` uses provider
function calling; :class:`~toolwire.agent.drivers.react.ReActDriver` asks a model without function
calling for schema-constrained JSON decisions. To script a run in tests, script the model
(:class:`~toolwire.models.scripted.ScriptedModel`), not the driver. What each step sent and got back
is in ``RunResult.step_details``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolwire.messages import Message
from toolwire.models._builder import closing, parse_tool_args
from toolwire.models.base import (
    Finish,
    Model,
    ModelRequest,
    ModelStreamPart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolDefinition,
    ToolInputEnd,
)


class PartFilter(Protocol):
    """Parts in, parts out (held back, dropped or released): what a driver does to a model's own stream."""

    def process(self, part: ModelStreamPart) -> list[ModelStreamPart]: ...

    def flush(self) -> list[ModelStreamPart]:
        """What is still held when the stream ended without a finish part."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StepState:
    """What a step's messages are compiled from (:meth:`Driver.compile_messages`)."""

    step: int
    """The step's number in the run, from 1."""
    session_id: str
    history: Sequence[Message]
    """The session's history as the model reads it: stored, repaired (every call answered), grown by
    this run's steps. Never edit it: the store keeps it as it is."""
    tools: Sequence[ToolDefinition]
    """The tools the step offers (``final_result`` included in tool output mode)."""
    instructions: str | None


class Driver(ABC):
    """Turns one agent step into canonical model stream parts."""

    def compile_messages(self, state: StepState) -> Sequence[Message]:
        """The messages the step sends, compiled from ``state`` (the message compiler of the step): by
        default the history as it is. Override to window, summarise or annotate what the model reads;
        what you return is sent (and recorded in ``RunResult.step_details``), never stored. Keep it a
        valid conversation: every tool call followed by its result."""
        return state.history

    @abstractmethod
    def stream_step(self, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        """Stream one step. ``request`` holds the canonical history, tools and tool_choice."""

    def open_step(
        self, model: Model, request: ModelRequest
    ) -> tuple[AsyncIterator[ModelStreamPart], PartFilter | None]:
        """What the loop consumes: a stream and the filter its parts go through (``None``: as they come).
        By default :meth:`stream_step`, unfiltered; a driver that only filters the model's own stream
        returns that stream and its filter, sparing an async generator around it on every step."""
        return self.stream_step(model, request), None


class NativeToolDriver(Driver):
    """Provider function calling. Passes parts through, holding back text that looks like JSON until the
    step ends, then dropping it if it merely echoes a tool call's arguments (some providers leak them)."""

    async def stream_step(self, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        stream, echo = self._filtered(model, request)
        async with closing(stream) as parts:
            async for part in parts:
                for out in echo.process(part) if echo is not None else (part,):
                    yield out
        for out in echo.flush() if echo is not None else ():  # the stream ended without a finish part
            yield out

    def open_step(
        self, model: Model, request: ModelRequest
    ) -> tuple[AsyncIterator[ModelStreamPart], PartFilter | None]:
        if type(self).stream_step is not NativeToolDriver.stream_step:  # a subclass's own stream_step runs
            return self.stream_step(model, request), None
        return self._filtered(model, request)

    def _filtered(
        self, model: Model, request: ModelRequest
    ) -> tuple[AsyncIterator[ModelStreamPart], PartFilter | None]:
        if request.output_schema is not None or request.json_answer:  # the answer IS JSON: stream it live
            return model.stream(request), None
        return model.stream(request), _EchoFilter()


class _EchoFilter:
    """Holds JSON-looking text parts until the step's tool calls are known."""

    def __init__(self) -> None:
        self.held: dict[str, list[ModelStreamPart]] = {}
        self.held_text: dict[str, list[str]] = {}
        self.undecided: set[str] = set()
        self.prefix: dict[str, str] = {}
        self.calls: list[ToolInputEnd] = []

    def process(self, part: ModelStreamPart) -> list[ModelStreamPart]:
        match part:
            case TextStart():
                self.undecided.add(part.id)
                self.held[part.id] = [part]
                self.held_text[part.id] = []
                return []
            case TextDelta() if part.id in self.held:
                self.held[part.id].append(part)
                self.held_text[part.id].append(part.delta)
                if part.id in self.undecided:
                    return self._decide(part.id, part.delta)
                return []
            case TextEnd() if part.id in self.held:
                self.held[part.id].append(part)
                return []
            case ToolInputEnd():
                self.calls.append(part)
            case Finish():
                out = [
                    held_part
                    for part_id, parts in self.held.items()
                    if not _is_echo("".join(self.held_text[part_id]), self.calls)
                    for held_part in parts
                ]
                self.held.clear()
                return [*out, part]
        return [part]

    def _decide(self, part_id: str, delta: str) -> list[ModelStreamPart]:
        """Release the text if its first visible characters do not look like JSON. Only those (three at
        most) are looked at, once: a long JSON-looking answer held to the end costs linear time."""
        seen = self.prefix.get(part_id, "")
        self.prefix[part_id] = head = (seen + (delta if seen else delta.lstrip()))[:3]
        if not head:
            return []
        if head.startswith("{") or head == "```":
            self.undecided.discard(part_id)  # JSON-looking: held to the end of the step
        elif not "```".startswith(head):
            self.undecided.discard(part_id)  # not JSON-looking: release now and stream live
            self.held_text.pop(part_id)
            return self.held.pop(part_id)
        return []

    def flush(self) -> list[ModelStreamPart]:
        out = [held_part for parts in self.held.values() for held_part in parts]
        self.held.clear()
        return out


def _is_echo(text: str, calls: Sequence[ToolInputEnd]) -> bool:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`")
        body = body.removeprefix("json").strip()
    if not body or not calls:
        return not body and bool(calls)
    try:
        value: Any = json.loads(body)
    except ValueError:
        return False
    candidates = value if isinstance(value, list) else [value]
    for candidate in candidates:
        if not isinstance(candidate, dict):
            return False
        if not any(_matches(candidate, call) for call in calls):
            return False
    return True


def _matches(candidate: dict[str, Any], call: ToolInputEnd) -> bool:
    if candidate == call.args:
        return True
    name = candidate.get("name") or candidate.get("tool_name") or candidate.get("tool")
    args = candidate.get("arguments", candidate.get("args", candidate.get("parameters")))
    if isinstance(args, str):
        args, _ = parse_tool_args(args)
    return name == call.tool_name and args == call.args


__all__ = ["Driver", "NativeToolDriver", "PartFilter", "StepState"]
