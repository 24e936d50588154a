"""Agent events: what the one loop emits and every client (CLI, server, transcript) consumes.

Every event carries the session envelope (``session_id``, ``parent_session_id``, ``user_session_id``,
``interaction_id``, per-session ``seq``). Consumers match tool events by ``(session_id, tool_call_id)``,
never by arrival order: sub-agent events interleave with their parent's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from toolwire.messages import Message, ProviderMetadata, Usage

ToolCallStatus: TypeAlias = Literal["ok", "error", "interrupted", "blocked", "cancelled"]
InteractionStatus: TypeAlias = Literal["completed", "error", "cancelled", "max-steps"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """Session addressing shared by every event."""

    session_id: str
    parent_session_id: str | None = None
    user_session_id: str = ""
    interaction_id: str = ""
    seq: int = 0
    timestamp: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True, kw_only=True)
class InteractionStart(Envelope):
    type: Literal["interaction-start"] = "interaction-start"
    prompt: str = ""
    agent_name: str | None = None
    parent_tool_call_id: str | None = None
    """For a sub-agent run: the parent session's tool call that started it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InteractionEnd(Envelope):
    type: Literal["interaction-end"] = "interaction-end"
    status: InteractionStatus = "completed"
    output: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserTurnStart(Envelope):
    type: Literal["user-turn-start"] = "user-turn-start"
    message: Message


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStart(Envelope):
    type: Literal["step-start"] = "step-start"
    step: int
    provider: str | None = None
    model: str | None = None
    """The requested model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinish(Envelope):
    type: Literal["step-finish"] = "step-finish"
    step: int
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
    message_id: str | None = None
    provider: str | None = None
    model: str | None = None
    """The model that answered, as the provider reported it."""
    response_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextStartEvent(Envelope):
    type: Literal["text-start"] = "text-start"
    id: str
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaEvent(Envelope):
    type: Literal["text-delta"] = "text-delta"
    id: str
    delta: str
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextEndEvent(Envelope):
    type: Literal["text-end"] = "text-end"
    id: str
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningStartEvent(Envelope):
    type: Literal["reasoning-start"] = "reasoning-start"
    id: str
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDeltaEvent(Envelope):
    type: Literal["reasoning-delta"] = "reasoning-delta"
    id: str
    delta: str
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningEndEvent(Envelope):
    type: Literal["reasoning-end"] = "reasoning-end"
    id: str
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputStartEvent(Envelope):
    """The model started a tool call (the "preparing" notification)."""

    type: Literal["tool-input-start"] = "tool-input-start"
    tool_call_id: str
    tool_name: str
    provider_executed: bool = False
    title: str | None = None
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputDeltaEvent(Envelope):
    type: Literal["tool-input-delta"] = "tool-input-delta"
    tool_call_id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputAvailableEvent(Envelope):
    """The call is complete and its arguments parsed."""

    type: Literal["tool-input-available"] = "tool-input-available"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = field(default_factory=dict)
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    title: str | None = None
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallActive(Envelope):
    """The executor started running the tool (the "executing" notification)."""

    type: Literal["tool-call-active"] = "tool-call-active"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallHeartbeat(Envelope):
    """Emitted at a fixed interval while a tool runs, so a stream never goes silent."""

    type: Literal["tool-call-heartbeat"] = "tool-call-heartbeat"
    tool_call_id: str
    tool_name: str
    elapsed: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress(Envelope):
    type: Literal["tool-progress"] = "tool-progress"
    tool_call_id: str
    fraction: float | None = None
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessageEvent(Envelope):
    type: Literal["system-message"] = "system-message"
    level: Literal["info", "warning", "error"] = "info"
    text: str
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaEvent(Envelope):
    type: Literal["media"] = "media"
    content_type: str
    url: str | None = None
    data: str | None = None
    """Base64 bytes when no URL is given."""
    tool_call_id: str | None = None
    message_id: str = ""
    """Set when the model itself produced the file (it is stored on that assistant message)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomDataEvent(Envelope):
    type: Literal["custom-data"] = "custom-data"
    name: str
    data: Any = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallComplete(Envelope):
    """The tool finished: result or error, with its duration."""

    type: Literal["tool-call-complete"] = "tool-call-complete"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    is_error: bool = False
    status: ToolCallStatus = "ok"
    duration: float = 0.0
    provider_executed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPartial(Envelope):
    """A structured output as far as it has arrived (validated as far as it goes)."""

    type: Literal["output-partial"] = "output-partial"
    partial: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputAvailable(Envelope):
    """The final, validated structured output (as JSON-compatible data)."""

    type: Literal["output-available"] = "output-available"
    output: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagePersisted(Envelope):
    type: Literal["message-persisted"] = "message-persisted"
    message_id: str
    role: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(Envelope):
    type: Literal["error"] = "error"
    error_type: str
    message: str
    retryable: bool = False
    step: int | None = None


AgentEvent: TypeAlias = Annotated[
    InteractionStart
    | InteractionEnd
    | UserTurnStart
    | StepStart
    | StepFinish
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ReasoningStartEvent
    | ReasoningDeltaEvent
    | ReasoningEndEvent
    | ToolInputStartEvent
    | ToolInputDeltaEvent
    | ToolInputAvailableEvent
    | ToolCallActive
    | ToolCallHeartbeat
    | ToolProgress
    | SystemMessageEvent
    | MediaEvent
    | CustomDataEvent
    | ToolCallComplete
    | OutputPartial
    | OutputAvailable
    | MessagePersisted
    | ErrorEvent,
    Field(discriminator="type"),
]

EventAdapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """JSON-compatible dict of an event (the wire form of the native event stream)."""
    data: dict[str, Any] = EventAdapter.dump_python(event, mode="json")
    return data


def event_from_dict(data: dict[str, Any]) -> AgentEvent:
    return EventAdapter.validate_python(data)
