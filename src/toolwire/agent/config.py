"""``RunConfig``: the frozen snapshot of an :class:`~toolwire.agent.Agent` that one run reads, and
``RunRequest``: what one run is asked to do (its prompt aside).

The loop never reaches back into the ``Agent``: changing an agent's settings while a run is going on
does not change that run, and the loop's dependencies are the fields listed here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, TypeAlias

from toolwire.agent.drivers import Driver
from toolwire.agent.output import OutputSpec
from toolwire.messages import Message, Usage
from toolwire.models.base import Model, ModelSettings, ToolChoice, ToolDefinition
from toolwire.observability import EventBus
from toolwire.store.base import Store
from toolwire.tools.executor import ToolExecutor, ToolInterceptor
from toolwire.tools.pending import Approval, DecisionKey
from toolwire.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """How a long session is kept within its request budget and its model's context window
    (``Agent(..., compaction=...)``).

    On by default; ``Agent(..., compaction=False)`` sends the whole history on every step (a request
    that outgrows the window then fails at the provider).
    """

    threshold: float = 0.8
    """The share of the context window a request may fill before it is compacted (the hard limit)."""
    max_request_tokens: int | None = 32_000
    """The most input tokens a request may carry before it is compacted, whatever the window: compaction
    starts at ``min(threshold x window, max_request_tokens)``, and also for a model whose window is unknown.
    ``None``: the window alone (a session's requests then grow to ``threshold`` of it).

    Why 32,000: a long session pays for its history once, not on every step. At this size a support session
    whose turns carry a ~2 KB tool result (~500 tokens) sends up to ~60 recent turns whole and the older ones
    with their results as stand-ins, writes a summary about every 170 turns, and its turns cost about what
    turn 50 did for the rest of the session (BENCHMARKS.md, "Conversations that last"); beyond a few tens
    of thousands of tokens most of a long request is old tool output, paid for at every step even when
    cached. Raise it (or ``None``) for work that needs long inputs whole."""
    keep_recent_turns: int = 2
    """User turns (with their steps) always sent whole, the current one included."""
    trim_tool_results: bool = True
    """Shrink earlier turns' large tool results first (recomputed per step, never stored)."""
    summarize: bool = True
    """Then replace older turns with a stored summary."""
    summary_model: Model | None = None
    """The model that writes summaries (a cheaper one); ``None``: the agent's own."""
    max_summary_input_chars: int = 200_000
    """At most this much of the older conversation is sent to the summariser (its most recent part)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimits:
    """The most a run (``per="run"``) or a whole session (``per="session"``) may use; ``None``: no limit."""

    requests: int | None = None
    """Model requests."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int | None = None
    """Tool calls run (those a person answered or the client ran included)."""
    cost: Decimal | float | None = None
    """US dollars at list prices (``toolwire.pricing``); a model without a known price counts nothing."""
    per: Literal["run", "session"] = "run"
    pause: bool = False
    """What happens before a request or calls that would pass a limit: ``False`` ends the run with
    :class:`~toolwire.errors.UsageLimitExceeded`; ``True`` pauses it for a person to extend (a pending
    approval, ``tool_name`` ``toolwire:usage_limit``, its ``args`` saying which limit and by how much;
    durable, answerable over every door that answers approvals). Approving goes on with the limits once
    more: a ``per="run"`` limit counts from the answering run on, a ``per="session"`` limit grows by its own
    size for each extension the session was given; denying ends the run with ``UsageLimitExceeded``; a
    new prompt closes it unanswered. Calls that would pass ``tool_calls`` wait for approval instead, each
    call approved past it runs."""


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What ``prepare_step`` is told about the step it may change."""

    step: int
    session_id: str
    messages: Sequence[Message]
    """The history the step would send (after compaction)."""
    tools: Sequence[ToolDefinition]
    model: Model
    usage: Usage
    """What the run used so far."""
    deps: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOverrides:
    """What ``prepare_step`` changes for one step (``None`` fields: unchanged). The request actually sent is
    the one recorded in ``RunResult.step_details``; the model that answered is stored with the step."""

    model: Model | None = None
    tools: Sequence[str] | None = None
    """The names of the tools offered in this step (a subset of the run's)."""
    tool_choice: ToolChoice | None = None
    instructions: str | None = None
    messages: Sequence[Message] | None = None


PrepareStep: TypeAlias = Callable[[StepInfo], "StepOverrides | Awaitable[StepOverrides | None] | None"]
"""``Agent(..., prepare_step=fn)``: called before each step, sync or async."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """Everything a run needs from its agent, fixed when the run starts."""

    model: Model
    driver: Driver
    registry: ToolRegistry
    name: str | None
    instructions: str | None
    model_settings: ModelSettings
    tool_choice: ToolChoice
    max_steps: int
    retries: int
    """Retries of a model request that failed before it produced any output."""
    retry_delay: float
    """Base of the exponential backoff (seconds) between those retries."""
    heartbeat_interval: float | None
    raise_on_failure: bool
    stop_on_block: bool
    max_tool_output_chars: int
    interceptors: Sequence[ToolInterceptor]
    tool_timeout: float | None
    output: OutputSpec | None
    output_retries: int
    user_id: str | None
    events: EventBus
    open_store: Callable[[], Awaitable[Store]]
    """The agent's own store (opened on first use)."""
    store_configured: bool
    """Whether the agent was given a store; a sub-agent without one records beside its caller."""
    compaction: Compaction | None = None
    """How requests are kept within the model's context window (``None``: never compacted)."""
    usage_limits: Sequence[UsageLimits] = ()
    """What a run, or its session, may use (each checked before what would pass it)."""
    prepare_step: PrepareStep | None = None
    """Called before each step; may change what the step sends (``StepOverrides``)."""

    def tool_choice_for_step(self, step: int) -> ToolChoice:
        """``required`` or a named tool applies to the first step only; later steps are ``auto`` so the
        model can answer with the results (otherwise it could never stop)."""
        if step > 1 and self.tool_choice not in ("auto", "none"):
            return "auto"
        return self.tool_choice

    def executor(self, allowed: frozenset[str]) -> ToolExecutor:
        return ToolExecutor(
            registry=self.registry,
            interceptors=self.interceptors,
            default_timeout=self.tool_timeout,
            max_output_chars=self.max_tool_output_chars,
            allowed=allowed,
        )


@dataclass(frozen=True, slots=True)
class Takeover:
    """What a run continuing a dead replica's run knows of it (the server's lease watcher makes one and
    starts the run with it: ``AgentRun(agent.run_config(), None, request=RunRequest(takeover=...))``)."""

    dead_run_owner: str | None = None
    """The dead run's lease owner, which names its interaction: a turn whose interaction stored nothing
    died before storing its prompt (the run then ends with :class:`~toolwire.errors.TurnLostError`)."""
    unpublished_from: int | None = None
    """The first seq the dead run numbered but no client received (the store's last seq is past the event
    log's: it died between a step's write and the publication of what that write counted); ``None``: none.
    Its last step's finished calls are then announced again, so no client keeps a call that never
    completes, and the takeover's ``interaction-start`` says where the seqs it skips start."""

    @property
    def unpublished(self) -> bool:
        """Whether the dead run numbered events no client received."""
        return self.unpublished_from is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """What one run is asked to do besides answering a prompt (``Agent.stream`` builds one)."""

    new_turn: bool = True
    """The run has a prompt (``False``: it only answers awaited calls, or takes a dead run over); the run
    sets it from its prompt."""
    approvals: Mapping[DecisionKey, Approval] = field(default_factory=dict)
    tool_outputs: Mapping[DecisionKey, Any] = field(default_factory=dict)
    enabled_tools: Sequence[str] | None = None
    exclude_tools: Sequence[str] = ()
    takeover: Takeover | None = None
    """Continue a dead replica's run (the server's; no prompt)."""
    usage_limits: Sequence[UsageLimits] = ()
    """Limits of this run, besides the agent's."""
    top_level: bool = False
    """Refuse a session that is a sub-agent's (:class:`~toolwire.errors.SubSessionError`, nothing
    written), in the store transaction that creates the session or checks its owner (the server's turns)."""
