"""Agent events: what the one loop emits and every client (CLI, server, transcript) consumes.

Every event carries the session envelope (``session_id``, ``parent_session_id``, ``user_session_id``,
``interaction_id``, per-session ``seq``). Consumers match tool events by ``(session_id, tool_call_id)``
and, where the event names it, the assistant ``message_id`` (providers that number calls per response
reuse ``call_0`` on every turn), never by arrival order: sub-agent events interleave with their parent's.
An event of a call without ``message_id`` names the latest call with that id in its session.

Every event also has a ``type`` literal: its discriminator on the wire (``event_to_dict``) and the name
``agent.on(...)`` subscribes by (:mod:`toolwire.observability` adds a few short aliases).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, get_args

from pydantic import Field, TypeAdapter

from toolwire._fast_init import fast_frozen_init
from toolwire.messages import Message, ProviderMetadata, Usage

ToolCallStatus: TypeAlias = Literal[
    "ok",
    "error",
    "interrupted",
    "blocked",
    "cancelled",
    "denied",
    "unanswered",
    "awaiting_approval",
    "awaiting_output",
    "awaiting_subagent",
    "awaiting_input",
]
"""How a tool call ended: ``ok``; ``error`` (the tool raised, timed out or got bad arguments);
``interrupted`` (the process stopped while it ran: found on restart); ``blocked`` (an interceptor refused
it); ``cancelled`` (the run was closed while it ran); ``denied`` (the user refused to approve it);
``unanswered`` (it awaited a decision when the user sent a new prompt instead). Or why it waits, the run
being paused: ``awaiting_approval`` (``requires_approval``), ``awaiting_output`` (an ``external`` tool
the client runs), ``awaiting_subagent`` (a sub-agent it started is paused), ``awaiting_input`` (its tool asked a
question: an MCP server's elicitation). A stored call is ``pending``
until one of these (:data:`toolwire.store.records.ToolCallRowStatus`)."""
InteractionStatus: TypeAlias = Literal["completed", "error", "cancelled", "max-steps", "paused", "blocked"]
"""How a run ended; ``paused``: tool calls await a person (``RunResult.pending``), resume with
``agent.run(session_id=..., approvals=..., tool_outputs=...)``; ``blocked``: an interceptor blocked a call
and the agent has ``stop_on_block`` (the step's calls ran and are stored; ``RunResult.blocked``)."""
AwaitingKind: TypeAlias = Literal["approval", "output", "subagent", "input"]
"""What a paused call waits for: a user's approval, a client tool's output, a paused sub-agent, or the
answer to a question its tool asked while it ran (``input``)."""
Resolution: TypeAlias = Literal["approved", "denied", "output", "failed", "unanswered", "resumed"]
"""How an awaited call was resolved: approved (it runs now), denied, given its output by the client,
failed by the client (``ToolFailed``), closed unanswered by a new prompt, or resumed (its sub-agent got
decisions, or its tool the answer to its question, and it continues)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """Session addressing shared by every event."""

    session_id: str
    """The session the event belongs to (a sub-agent run has its own)."""
    parent_session_id: str | None = None
    """For a sub-agent's session: the session whose tool call started it."""
    user_session_id: str = ""
    """The top-level session the user talks to (the same for every sub-agent below it)."""
    interaction_id: str = ""
    """The run (one user turn) in ``session_id`` that emitted the event."""
    seq: int = 0
    """Position in the session's event stream: 1, 2, 3... in publication order, across runs."""
    timestamp: float = field(default_factory=time.time)
    """When the event was created (seconds since the epoch)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InteractionStart(Envelope):
    """A run started (alias ``run:start``)."""

    type: Literal["interaction-start"] = "interaction-start"
    prompt: str = ""
    """The user's prompt for this run."""
    agent_name: str | None = None
    """The agent's ``name``, if it has one."""
    parent_tool_call_id: str | None = None
    """For a sub-agent run: the parent session's tool call that started it."""
    model: str | None = None
    """The model the run asks (``gen_ai.request.model``)."""
    provider_name: str | None = None
    """Its provider as OpenTelemetry names it (``gen_ai.provider.name``: ``openai``, ``gcp.gemini``,
    ``aws.bedrock``, ...)."""
    output_type: Literal["json"] | None = None
    """``json`` when the run asks the model for a JSON answer (native structured output or a grammar)."""
    skipped_from: int | None = None
    """For a run taking over a dead replica's turn: the first seq that run numbered but died before
    publishing. No event ever carries a seq from it up to this event's: a client seeing that jump lost
    nothing (the calls those events completed are announced again right after). ``None`` otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InteractionEnd(Envelope):
    """The run ended, whatever the reason (alias ``run:end``); the session is free for the next run."""

    type: Literal["interaction-end"] = "interaction-end"
    status: InteractionStatus = "completed"
    """How the run ended."""
    output: str = ""
    """The final assistant text (a structured output comes in :class:`OutputAvailable`)."""
    usage: Usage = field(default_factory=Usage)
    """Summed over every step of the run."""
    error: str | None = None
    """``"ExceptionType: message"`` when the run failed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserTurnStart(Envelope):
    """The user's message was stored."""

    type: Literal["user-turn-start"] = "user-turn-start"
    message: Message
    """The stored user message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStart(Envelope):
    """A model step (one model request) started (alias ``step:start``)."""

    type: Literal["step-start"] = "step-start"
    step: int
    """The step number within the run, from 1."""
    provider: str | None = None
    """The provider asked."""
    model: str | None = None
    """The requested model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFinish(Envelope):
    """A model step and its tool calls are done and stored (alias ``step:end``)."""

    type: Literal["step-finish"] = "step-finish"
    step: int
    """The step number within the run, from 1."""
    finish_reason: str
    """Why the model stopped: ``stop``, ``tool-calls``, ``length``, ``content-filter``, ``other``..."""
    usage: Usage = field(default_factory=Usage)
    """Tokens of this step's model request."""
    message_id: str | None = None
    """The assistant message the step produced."""
    provider: str | None = None
    """The provider that answered."""
    model: str | None = None
    """The model that answered, as the provider reported it."""
    response_id: str | None = None
    """The provider's id of the response, when it gives one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextStartEvent(Envelope):
    """The model started a text part."""

    type: Literal["text-start"] = "text-start"
    id: str
    """The part's id within its message; its deltas and end carry the same id."""
    message_id: str = ""
    """The assistant message the part belongs to (the id it is stored under)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaEvent(Envelope):
    """More text of an open part (alias ``text:delta``)."""

    type: Literal["text-delta"] = "text-delta"
    id: str
    """The id of the part, as in its start event."""
    delta: str
    """The new text, to append."""
    message_id: str = ""
    """The assistant message the part belongs to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextEndEvent(Envelope):
    """The text part is complete."""

    type: Literal["text-end"] = "text-end"
    id: str
    """The id of the part, as in its start event."""
    message_id: str = ""
    """The assistant message the part belongs to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningStartEvent(Envelope):
    """The model started a reasoning part."""

    type: Literal["reasoning-start"] = "reasoning-start"
    id: str
    """The part's id within its message; its deltas and end carry the same id."""
    message_id: str = ""
    """The assistant message the part belongs to (the id it is stored under)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDeltaEvent(Envelope):
    """More reasoning of an open part."""

    type: Literal["reasoning-delta"] = "reasoning-delta"
    id: str
    """The id of the part, as in its start event."""
    delta: str
    """The new reasoning, to append."""
    message_id: str = ""
    """The assistant message the part belongs to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningEndEvent(Envelope):
    """The reasoning part is complete."""

    type: Literal["reasoning-end"] = "reasoning-end"
    id: str
    """The id of the part, as in its start event."""
    message_id: str = ""
    """The assistant message the part belongs to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputStartEvent(Envelope):
    """The model started a tool call (the "preparing" notification)."""

    type: Literal["tool-input-start"] = "tool-input-start"
    tool_call_id: str
    """The call's id; every event of the call carries it (match by ``(session_id, tool_call_id)``)."""
    tool_name: str
    """The tool the model calls."""
    provider_executed: bool = False
    """True for a tool the provider runs itself (e.g. web search); toolwire does not execute it."""
    title: str | None = None
    """A human-readable title for the call, when the model gave one."""
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    """Provider data attached to the call (by provider key)."""
    message_id: str = ""
    """The assistant message that made the call: with ``session_id`` and ``tool_call_id`` it names the call
    even when a provider numbers its calls per response (``call_0`` on every turn). Empty when unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputDeltaEvent(Envelope):
    """More of a call's argument JSON, as the model writes it."""

    type: Literal["tool-input-delta"] = "tool-input-delta"
    tool_call_id: str
    """The call the arguments belong to."""
    delta: str
    """The next fragment of the raw argument text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputAvailableEvent(Envelope):
    """The model finished writing the call and its arguments are parsed (alias ``tool:input``)."""

    type: Literal["tool-input-available"] = "tool-input-available"
    tool_call_id: str
    """The call's id."""
    tool_name: str
    """The tool the model calls."""
    args: dict[str, Any] = field(default_factory=dict)
    """The parsed arguments."""
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    """Provider data attached to the call (by provider key)."""
    provider_executed: bool = False
    """True for a tool the provider runs itself; toolwire does not execute it."""
    title: str | None = None
    """A human-readable title for the call, when the model gave one."""
    message_id: str = ""
    """The assistant message the call belongs to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallActive(Envelope):
    """The executor started running the tool: the "executing" notification (alias ``tool:start``)."""

    type: Literal["tool-call-active"] = "tool-call-active"
    tool_call_id: str
    """The call being executed."""
    tool_name: str
    """The tool being executed."""
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments as executed (an interceptor may have rewritten them)."""
    started_at: float = 0.0
    """When execution began (seconds since the epoch)."""
    message_id: str = ""
    """The assistant message that made the call: with ``session_id`` and ``tool_call_id`` it names the call
    even when a provider numbers its calls per response (``call_0`` on every turn). Empty when unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallHeartbeat(Envelope):
    """Emitted at a fixed interval while a tool runs, so a stream never goes silent."""

    type: Literal["tool-call-heartbeat"] = "tool-call-heartbeat"
    tool_call_id: str
    """The call still running."""
    tool_name: str
    """The tool still running."""
    elapsed: float
    """Seconds since the call started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress(Envelope):
    """A running tool reported progress (``ctx.progress(...)``; alias ``tool:progress``)."""

    type: Literal["tool-progress"] = "tool-progress"
    tool_call_id: str
    """The call reporting progress."""
    fraction: float | None = None
    """Done so far, from 0 to 1, when the tool knows."""
    message: str = ""
    """What the tool is doing now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessageEvent(Envelope):
    """A message for the user from a running tool (``ctx.system_message(...)``) or from the driver (a
    re-prompted ReAct decision: ``code`` ``decision-retry``); never stored."""

    type: Literal["system-message"] = "system-message"
    level: Literal["info", "warning", "error"] = "info"
    """How the client should show it."""
    text: str
    """The message."""
    tool_call_id: str | None = None
    """The call that emitted it (``None`` for the driver's)."""
    code: str | None = None
    """What happened, for programs: ``decision-retry`` when the ReAct driver re-prompts the model after
    a reply that was not a valid decision (``text`` says why); ``None`` for a tool's message."""
    attempt: int | None = None
    """With ``decision-retry``: the attempt that failed, from 1."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaEvent(Envelope):
    """An image, audio or other file to show: from a running tool (``ctx.media(...)``) or the model."""

    type: Literal["media"] = "media"
    content_type: str
    """The media type, e.g. ``image/png``."""
    url: str | None = None
    """Where to fetch the file, when it is not inline."""
    data: str | None = None
    """Base64 bytes when no URL is given."""
    tool_call_id: str | None = None
    """The call that emitted it (``None`` when the model produced the file)."""
    message_id: str = ""
    """Set when the model itself produced the file (it is stored on that assistant message)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRenamed(Envelope):
    """The conversation got a new title, stored before this event: by ``ctx.rename(...)`` from a running
    tool, or outside a run (``PATCH /api/sessions/{id}``, ``toolwire sessions rename``: numbered after
    the session's last event, ``tool_call_id`` and ``interaction_id`` empty). Every subscriber of the
    session sees it (the AI SDK stream as a ``data-session-renamed`` part)."""

    type: Literal["session-renamed"] = "session-renamed"
    title: str
    """The stored title (whitespace collapsed, at most 200 characters)."""
    tool_call_id: str | None = None
    """The call that renamed it (``None`` for a rename from outside a run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomDataEvent(Envelope):
    """Application-defined data from a running tool (``ctx.data(name, payload)``)."""

    type: Literal["custom-data"] = "custom-data"
    name: str
    """The application's name for the kind of data."""
    data: Any = None
    """The payload (JSON-compatible)."""
    tool_call_id: str | None = None
    """The call that emitted it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallComplete(Envelope):
    """The tool finished: result or error, with its duration (alias ``tool:end``)."""

    type: Literal["tool-call-complete"] = "tool-call-complete"
    tool_call_id: str
    """The call that finished."""
    tool_name: str
    """The tool that finished."""
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments as executed."""
    output: Any = None
    """The result as the model sees it (possibly truncated), or the error text."""
    is_error: bool = False
    """Whether ``output`` is an error the model is told about."""
    status: ToolCallStatus = "ok"
    """How the call ended."""
    duration: float = 0.0
    """Seconds the tool ran."""
    provider_executed: bool = False
    """True for a tool the provider ran itself."""
    message_id: str = ""
    """The assistant message that made the call: with ``session_id`` and ``tool_call_id`` it names the call
    even when a provider numbers its calls per response (``call_0`` on every turn). Empty when unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallAwaiting(Envelope):
    """The call waits for a person; the run pauses (alias ``tool:awaiting``).

    Published once the waiting state is stored, after the step's other calls finished; the run then
    ends with status ``paused``. Every still-awaited call is announced again at the end of each run that
    leaves it waiting.
    """

    type: Literal["tool-call-awaiting"] = "tool-call-awaiting"
    tool_call_id: str
    """The awaited call (match by ``(session_id, tool_call_id)``)."""
    tool_name: str
    """The tool the model called."""
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments to approve, or to run the client tool with."""
    kind: AwaitingKind = "approval"
    """``approval``: answer with ``approvals={id: True | False | Denied(reason)}``; ``output``: a client
    tool, answer with ``tool_outputs={id: value | ToolFailed(message)}``; ``subagent``: the call's
    sub-agent is paused, its own awaited calls (in ``sub_session_id``) are what to answer; ``input``: the
    tool asked a question (``question``), answer with ``tool_outputs={id: {...the form's fields...}}`` or
    ``{"action": "decline" | "cancel"}``."""
    message_id: str = ""
    """The assistant message that made the call."""
    sub_session_id: str | None = None
    """For ``kind="subagent"``: the paused sub-agent's session."""
    parameters: dict[str, Any] | None = None
    """For ``kind="output"``: the tool's parameters JSON schema, so a client can build a form for it."""
    reason: str | None = None
    """Why a call waits that would otherwise have run: the run's ``tool_calls`` limit (``UsageLimits(
    pause=True)``) would be passed; approving it runs it."""
    question: dict[str, Any] | None = None
    """For ``kind="input"``: what the tool asks, ``{"message", "mode": "form" | "url", "requested_schema",
    "url", "server"}`` (:class:`toolwire.tools.pending.Question`): a form to fill in, or a page to visit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResolved(Envelope):
    """An awaited call got its answer (alias ``tool:resolved``); what happens next follows as usual
    events: an approved call runs (tool-call-active ... tool-call-complete), the others complete."""

    type: Literal["tool-call-resolved"] = "tool-call-resolved"
    tool_call_id: str
    """The call that was awaited."""
    tool_name: str
    """Its tool."""
    resolution: Resolution
    """How it was resolved."""
    reason: str | None = None
    """The user's reason for a denial, or the client's message for a failure."""
    message_id: str = ""
    """The assistant message that made the call: with ``session_id`` and ``tool_call_id`` it names the call
    even when a provider numbers its calls per response (``call_0`` on every turn). Empty when unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPartial(Envelope):
    """A structured output as far as it has arrived (validated as far as it goes)."""

    type: Literal["output-partial"] = "output-partial"
    partial: Any = None
    """The output so far, as JSON-compatible data (objects may miss fields, strings may be cut)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputAvailable(Envelope):
    """The final, validated structured output (as JSON-compatible data)."""

    type: Literal["output-available"] = "output-available"
    output: Any = None
    """The validated output, as JSON-compatible data (``RunResult.output`` holds the typed object)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagePersisted(Envelope):
    """A message of the run was written to the store."""

    type: Literal["message-persisted"] = "message-persisted"
    message_id: str
    """The stored message's id."""
    role: str
    """Its role: ``assistant`` or ``tool``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverEvent(Envelope):
    """A model step failed on one model and is asked of the next (``FallbackModel``, alias ``failover``).

    Whatever the failed attempt streamed for ``message_id`` (text, reasoning, tool inputs) is dropped:
    it is never stored and no tool of it runs. The next model's events for the step follow under the
    same ``message_id``; clients discard the message's streamed parts when ``dropped_output`` is set."""

    type: Literal["failover"] = "failover"
    step: int
    """The step that failed over."""
    message_id: str
    """The assistant message of the step (its parts streamed so far are dropped)."""
    from_provider: str
    """The provider that failed."""
    from_model: str
    """The model that failed."""
    to_provider: str
    """The provider asked next."""
    to_model: str
    """The model asked next."""
    reason: str
    """The error, as text."""
    error_type: str
    """The error's class name, e.g. ``ProviderConnectionError``."""
    status: int | None = None
    """The HTTP status of the failure, when it was one."""
    dropped_output: bool = False
    """Whether the failed attempt had streamed output (then dropped)."""
    usage: Usage = field(default_factory=Usage)
    """What the failed attempt probably cost (the provider's report, else an estimate of what it read and
    streamed; nothing for a request never answered), counted apart from the step's own usage."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(Envelope):
    """The run failed (alias ``error``); an :class:`InteractionEnd` with status ``error`` follows."""

    type: Literal["error"] = "error"
    error_type: str
    """The exception's class name, e.g. ``ProviderHTTPError``."""
    message: str
    """The exception's message."""
    retryable: bool = False
    """Whether trying the same run again may succeed (e.g. a rate limit)."""
    step: int | None = None
    """The step that failed, when known."""
    provider: str | None = None
    """The run's provider as configured (``ollama`` for ``ollama:llama3``: ``Model.configured_provider``)."""
    model: str | None = None
    """The run's model name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionEvent(Envelope):
    """The session's older turns were summarised to fit the model's context window (alias ``compaction``).

    The messages stay stored; from now on what is sent starts with ``summary`` (in the instructions) and the
    message ``first_kept_message_id``. Stored as a record of its own (``Store.compactions``)."""

    type: Literal["compaction"] = "compaction"
    compaction_id: str
    """The stored record's id (``Store.compactions``)."""
    first_kept_message_id: str
    """The first message still sent whole; every message before it is covered by the summary."""
    summary: str
    """What the requests send in place of the older messages (in their instructions)."""
    provider: str | None = None
    """The provider of the model that wrote the summary."""
    model: str | None = None
    """The model that wrote the summary."""
    usage: Usage = field(default_factory=Usage)
    """What writing the summary cost."""
    tokens_before: int = 0
    """The estimated tokens of the step's request before the summary."""
    tokens_after: int = 0
    """The same after it."""


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
    | SessionRenamed
    | ToolCallComplete
    | ToolCallAwaiting
    | ToolCallResolved
    | OutputPartial
    | OutputAvailable
    | MessagePersisted
    | FailoverEvent
    | CompactionEvent
    | ErrorEvent,
    Field(discriminator="type"),
]

for _event_class in get_args(get_args(AgentEvent)[0]):
    fast_frozen_init(_event_class)  # ~9 events per agent step: built at slot speed

EventAdapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """JSON-compatible dict of an event (the wire form of the native event stream)."""
    data: dict[str, Any] = EventAdapter.dump_python(event, mode="json")
    return data


def event_from_dict(data: dict[str, Any]) -> AgentEvent:
    return EventAdapter.validate_python(data)
