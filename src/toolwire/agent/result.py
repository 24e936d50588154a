"""What a run gives back: ``RunResult`` (one user turn's outcome), ``ToolExecution`` (one executed call) and
``StepDetail`` (one model step: its compiled request and the answer),
and ``RunLedger``, what a run has done so far, which the loop and its steps fill and which becomes the result.

Kept apart from the loop (:mod:`toolwire.agent.loop`): a result is read by callers, the CLI and the server,
none of which need the loop's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic

from typing_extensions import TypeVar

from toolwire._fast_init import fast_frozen_init
from toolwire.events import InteractionStatus, ToolCallStatus
from toolwire.messages import Message, ToolCallPart, ToolResultPart, Usage
from toolwire.models._builder import MessageBuilder
from toolwire.models.base import ModelRequest
from toolwire.pricing import total_cost
from toolwire.tools.outcome import ToolOutcome
from toolwire.tools.pending import PendingCall

OutputT = TypeVar("OutputT", default=str, covariant=True)


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecution:
    """One executed tool call of a run."""

    call: ToolCallPart
    result: ToolResultPart
    status: ToolCallStatus
    started_at: float
    finished_at: float
    session_id: str

    @property
    def is_error(self) -> bool:
        return self.result.is_error

    @property
    def duration(self) -> float:
        return self.finished_at - self.started_at


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StepDetail:
    """One model step of a run, to inspect: what was sent and what came back. Held by reference (the
    request's messages are the history's own objects), kept in memory with the result, never stored."""

    step: int
    request: ModelRequest
    """What the step sent: the messages the driver compiled (``Driver.compile_messages``), the tools,
    the tool choice, the instructions and settings."""
    response: Message
    """The model's answer as the driver's parts assembled it (the assistant message stored for the step)."""
    finish_reason: str
    usage: Usage
    response_id: str | None = None
    """The provider's id of the response, when it sent one."""
    warnings: tuple[str, ...] = ()
    """What the adapter could not honour in the request (``stream-start`` warnings)."""


@dataclass(kw_only=True)
class RunResult(Generic[OutputT]):
    """The outcome of one run (one user turn)."""

    output: OutputT
    """The final assistant text, or the validated object when the agent has an ``output_type``. Only
    meaningful when ``status == "completed"`` (a run closed early or failed has no output)."""
    session_id: str
    interaction_id: str
    status: InteractionStatus
    messages: list[Message] = field(default_factory=list)
    """Messages this run added to the session (user, assistant, tool)."""
    pending: list[PendingCall] = field(default_factory=list)
    """With ``status == "paused"``: the calls waiting for a person (approvals, client tools), sub-agents'
    included. Answer them with ``agent.run(session_id=..., approvals=..., tool_outputs=...)``."""
    tool_executions: list[ToolExecution] = field(default_factory=list)
    """The calls that ran (or ended without running), in completion order; with ``status == "blocked"``
    (``stop_on_block``) the blocked calls are among them with ``status == "blocked"`` (see :attr:`blocked`)."""
    usage: Usage = field(default_factory=Usage)
    """Summed over every step, tool-calling steps included."""
    step_usage: list[Usage] = field(default_factory=list)
    steps: int = 0
    step_details: list[StepDetail] = field(default_factory=list)
    """Each model step of this run, in order: the request it sent and the answer it got."""
    text: str = ""
    """The final assistant text (also when ``output`` is a structured object)."""
    step_models: list[tuple[str | None, str | None]] = field(default_factory=list)
    """(provider, model) that answered each step, parallel to ``step_usage``."""
    sub_agent_steps: list[tuple[str | None, str | None, Usage]] = field(default_factory=list)
    """(provider, model, usage) of every model request the run's sub-agents made (theirs included), kept
    apart from this run's own steps: ``usage`` and ``cost`` are this agent's, ``total_*`` add these."""

    failed_attempts: list[tuple[str | None, str | None, Usage]] = field(default_factory=list)
    """(provider, model, usage) of every attempt that failed over to another model (``FallbackModel``):
    what it probably cost, kept apart from ``usage`` (see ``failed_usage``, ``failed_cost``)."""

    @property
    def failed_usage(self) -> Usage:
        """Tokens and requests of the attempts that failed over."""
        return sum((u for _, _, u in self.failed_attempts), Usage())

    @property
    def failed_cost(self) -> Decimal | None:
        """Estimated USD cost of the attempts that failed over."""
        return total_cost(self.failed_attempts)

    @property
    def blocked(self) -> list[ToolExecution]:
        """The calls an interceptor blocked (a run with ``stop_on_block`` ended on the first step that had one)."""
        return [e for e in self.tool_executions if e.status == "blocked"]

    @property
    def cost(self) -> Decimal | None:
        """Estimated USD cost over this agent's own steps (``None`` when a model's price is unknown)."""
        return total_cost((p, m, u) for (p, m), u in zip(self.step_models, self.step_usage, strict=True))

    @property
    def sub_agent_usage(self) -> Usage:
        """Tokens and requests of the run's sub-agents (at any depth)."""
        return sum((u for _, _, u in self.sub_agent_steps), Usage())

    @property
    def sub_agent_cost(self) -> Decimal | None:
        return total_cost(self.sub_agent_steps)

    @property
    def total_usage(self) -> Usage:
        """This agent's usage and its sub-agents'."""
        return self.usage + self.sub_agent_usage

    @property
    def total_cost(self) -> Decimal | None:
        own, sub = self.cost, self.sub_agent_cost
        return None if own is None or sub is None else own + sub


@dataclass(slots=True, kw_only=True)
class RunLedger:
    """What a run has done so far: its steps' usage and models, its sub-agents' requests, the calls it ran,
    the messages it added, how it ended. The loop and its steps write here; :meth:`result` reads it."""

    session_id: str
    interaction_id: str
    messages: list[Message] = field(default_factory=list)
    executions: list[ToolExecution] = field(default_factory=list)
    step_usage: list[Usage] = field(default_factory=list)
    step_models: list[tuple[str | None, str | None]] = field(default_factory=list)
    step_details: list[StepDetail] = field(default_factory=list)
    sub_agent_steps: list[tuple[str | None, str | None, Usage]] = field(default_factory=list)
    failed_attempts: list[tuple[str | None, str | None, Usage]] = field(default_factory=list)
    pending: list[PendingCall] = field(default_factory=list)
    status: InteractionStatus = "completed"
    done: bool = False
    """Set when the run has its answer (or paused): no further step."""
    output: Any = ""
    text: str = ""

    def answered_step(
        self, step: int, request: ModelRequest, response: Message, builder: MessageBuilder
    ) -> None:
        """The model answered step ``step``'s ``request`` (``builder``: its finish, who answered)."""
        finish = builder.finish
        assert finish is not None  # the model step raises otherwise
        self.step_usage.append(finish.usage)
        self.step_models.append((builder.provider, builder.model))
        self.step_details.append(
            StepDetail(
                step=step,
                request=request,
                response=response,
                finish_reason=finish.reason,
                usage=finish.usage,
                response_id=builder.response_id,
                warnings=builder.warnings,
            )
        )

    def executed(self, outcome: ToolOutcome) -> None:
        """A call of this run's session ran (or ended without running: a blocked or invalid call)."""
        self.executions.append(
            ToolExecution(
                call=outcome.call,
                result=outcome.result,
                status=outcome.status,
                started_at=outcome.started_at,
                finished_at=outcome.finished_at,
                session_id=self.session_id,
            )
        )

    def answered(self, output: Any, text: str) -> None:
        """The run has its answer: ``output`` (the text, or the validated object) written as ``text``."""
        self.output, self.text, self.done = output, text, True

    def paused(self, pending: list[PendingCall]) -> None:
        """Calls wait for a person: the run ends ``paused`` listing them."""
        self.pending, self.done, self.status = pending, True, "paused"

    def blocked(self) -> None:
        """A call was blocked and the agent stops on a block (``stop_on_block``): the run ends ``blocked``
        after the step's calls ran and were stored (calls waiting for a person stay in ``pending``)."""
        self.done, self.status = True, "blocked"

    def result(self) -> RunResult[Any]:
        total = Usage()
        for usage in self.step_usage:
            total = total + usage
        return RunResult(
            output=self.output,
            text=self.text,
            session_id=self.session_id,
            interaction_id=self.interaction_id,
            status=self.status,
            messages=self.messages,
            pending=self.pending,
            tool_executions=self.executions,
            usage=total,
            step_usage=self.step_usage,
            step_models=self.step_models,
            step_details=self.step_details,
            sub_agent_steps=self.sub_agent_steps,
            failed_attempts=self.failed_attempts,
            steps=len(self.step_usage),
        )
