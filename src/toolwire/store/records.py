"""The records the store hook takes and gives: sessions, steps, tool-call rows."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from toolwire._fast_init import fast_frozen_init
from toolwire.errors import SessionAccessError, SubSessionError
from toolwire.events import AwaitingKind, ToolCallStatus
from toolwire.messages import Message, Usage

ToolCallRowStatus: TypeAlias = Literal["pending", ToolCallStatus]
"""A stored call's status: ``pending`` from the step's start until it ends with a :data:`ToolCallStatus`
(or waits, the run paused: ``awaiting_*``)."""

USAGE_LIMIT_TOOL = "toolwire:usage_limit"
"""The tool name of the row a run paused at a usage limit holds (``UsageLimits(pause=True)``): awaiting a
person's approval to go on, answered like any approval; no model call has this name (providers refuse a
``:`` in a tool name), and no message holds the row, so it is never sent."""

AWAITING: dict[str, AwaitingKind] = {
    "awaiting_approval": "approval",
    "awaiting_output": "output",
    "awaiting_subagent": "subagent",
    "awaiting_input": "input",
}
"""The statuses of a call that waits for a person, and what it waits for."""
AWAITING_STATUS: dict[AwaitingKind, ToolCallStatus] = {
    "approval": "awaiting_approval",
    "output": "awaiting_output",
    "subagent": "awaiting_subagent",
    "input": "awaiting_input",
}


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    id: str
    parent_session_id: str | None = None
    user_session_id: str | None = None
    user_id: str | None = None
    agent_name: str | None = None
    title: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    last_seq: int = 0
    usage: Usage = field(default_factory=Usage)
    """Summed over every step of every run of the session."""

    @property
    def incarnation(self) -> int:
        """This life of the session id: its creation time in microseconds. An id that is deleted and
        created again (by anyone) starts a new incarnation, and event streams are keyed by it, so one
        life's subscribers and replays never see the other's events."""
        return round(self.created_at * 1_000_000)


CallKey: TypeAlias = tuple[str, str]
"""A tool call's identity within a session: ``(message_id, tool_call_id)``. Providers may repeat a call
id in later steps (``call_0`` every turn), so the id alone would alias an earlier call's result."""


def check_owner(
    info: SessionInfo,
    user_id: str | None,
    *,
    parent_session_id: str | None = None,
    top_level: bool = False,
) -> None:
    """Raise :class:`SessionAccessError` unless ``user_id`` may act on the stored session ``info``.

    ``user_id=None`` is trusted library code acting for nobody in particular; a session stored without
    an owner can only be used that way. A sub-session must hang under the expected parent; with
    ``top_level`` the session must hang under none (:class:`SubSessionError`, checked after the owner so
    that a stranger learns nothing more than "not yours").
    """
    if user_id is not None and info.user_id != user_id:
        raise SessionAccessError(f"session {info.id!r} belongs to another user")
    if top_level and info.parent_session_id is not None:
        raise SubSessionError(f"session {info.id!r} is a sub-agent's session")
    if parent_session_id is not None and info.parent_session_id != parent_session_id:
        raise SessionAccessError(f"session {info.id!r} is not a sub-session of {parent_session_id!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRecord:
    """A summary that stands for the start of a session's history in what its requests send (the store
    keeps every message: see :mod:`toolwire.agent._compaction`)."""

    id: str
    session_id: str
    first_kept_message_id: str
    """The first message sent after the summary: every message before it is covered by ``summary``."""
    summary: str
    provider: str | None = None
    model: str | None = None
    """The model that wrote the summary."""
    usage: Usage = field(default_factory=Usage)
    """What writing it cost."""
    tokens_before: int = 0
    """The estimated tokens of the request it was written for, before and after."""
    tokens_after: int = 0
    created_at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnError:
    """The error that ended a turn, kept with it so a reloaded conversation still shows it (never sent to a
    model: it is no message)."""

    session_id: str
    interaction_id: str
    """The turn (interaction) it ended: one error per turn."""
    error_type: str
    """The exception's class name, e.g. ``ProviderHTTPError``."""
    message: str
    retryable: bool = False
    """Whether asking again may succeed (e.g. a rate limit): the page offers Retry."""
    provider: str | None = None
    """The provider as configured (``ollama`` for ``ollama:llama3``) and the model's name."""
    model: str | None = None
    created_at: float = 0.0
    """When the turn ended; it sits after the turn's messages and before the next turn's."""

    @classmethod
    def of(
        cls,
        error: BaseException,
        session_id: str,
        interaction_id: str,
        provider: str | None,
        model: str | None,
    ) -> TurnError:
        """The record of ``error``, which ends the turn ``interaction_id`` now."""
        return cls(
            session_id=session_id,
            interaction_id=interaction_id,
            error_type=type(error).__name__,
            message=str(error),
            retryable=bool(getattr(error, "retryable", False)),
            provider=provider,
            model=model,
            created_at=time.time(),
        )


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    session_id: str
    tool_call_id: str
    tool_name: str
    message_id: str
    step: int
    args: dict[str, Any] = field(default_factory=dict)
    status: ToolCallRowStatus = "pending"
    output: Any = None
    is_error: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    provider: str | None = None
    model: str | None = None
    interaction_id: str | None = None

    @property
    def awaiting(self) -> AwaitingKind | None:
        """What the call waits for while its run is paused, else ``None``."""
        return AWAITING.get(self.status)


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CallCompletion:
    """A tool call's end, written by :meth:`~toolwire.store.base.Store.finish_step` in the step's own
    transaction: the loop hands the call that finishes a step's batch there instead of to a separate
    :meth:`~toolwire.store.base.Store.complete_tool_call` (one commit per step fewer)."""

    tool_call_id: str
    message_id: str
    status: ToolCallRowStatus
    output: Any
    is_error: bool
    started_at: float | None
    finished_at: float | None


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One model step as handed to the store by the loop."""

    session_id: str
    interaction_id: str
    step: int
    message: Message
    """The assistant message (text, reasoning, tool calls with provider metadata)."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Client-executed calls of the message, status ``pending``."""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    started_at: float = 0.0
    finished_at: float = 0.0


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StoredStep:
    """Per-step bookkeeping kept on the step's assistant message row."""

    message_id: str
    interaction_id: str | None
    step: int
    usage: Usage
    finish_reason: str | None
    started_at: float | None
    finished_at: float | None
    provider: str | None = None
    model: str | None = None
    """Who answered the step (what its usage is priced by)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenedHistory:
    """What a run reads when it starts (:meth:`toolwire.store.base.Store.open_history`)."""

    messages: list[Message]
    """The history repaired for the model (an awaited call shows the result it gets if nobody answers)."""
    awaited: list[ToolCallRecord]
    """The calls waiting for a person (``awaiting_*``), in recorded order: what a resumed run answers."""
    interrupted: list[CallKey] = field(default_factory=list)
    """The calls found unfinished and recorded as interrupted now (their run's process died)."""
    epoch: int = 0
    """The lease epoch of this run's claim of the session (the session's count of claims, this one
    included): the run's events are refused once a takeover fenced it (0: the store keeps no epochs)."""
    compaction: CompactionRecord | None = None
    """The session's latest summary, which what the run sends starts from."""
