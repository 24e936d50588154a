"""``RunScope``: a run as its steps see it, and ``RunSink``, the way its running tools speak.

A step (:class:`~toolwire.agent._step.StepRun`) needs the run's configuration, its recorder (the one way to
the store), its tool executor, the history as the model reads it, the ledger that becomes its result, and
what a tool is handed (:class:`~toolwire.tools.context.RunContext`). The loop builds one scope when the run
opens its session and hands it to every step, new, answered or taken over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolwire.agent._budget import Budget
from toolwire.agent._limit_pause import extensions_of
from toolwire.agent._pause import Gate
from toolwire.agent._recorder import StepRecorder
from toolwire.agent.config import RunConfig, RunRequest
from toolwire.agent.result import RunLedger
from toolwire.events import AgentEvent
from toolwire.messages import Message
from toolwire.models.base import ToolDefinition
from toolwire.store.base import Store
from toolwire.store.records import OpenedHistory, SessionInfo
from toolwire.tools._inbox import Inbox
from toolwire.tools.context import RunContext, ToolEmitted
from toolwire.tools.executor import ToolExecutor
from toolwire.tools.pending import Resume


class ClosableStep(Protocol):
    """A step whose calls are under way (a :class:`~toolwire.agent._step.StepRun`): closed if the run
    stops, its unfinished calls recorded as cancelled."""

    async def close(self) -> tuple[Message | None, list[AgentEvent]]: ...


@dataclass(slots=True)
class Unnumbered:
    """An event a running tool emitted; it gets its seq when the step publishes it."""

    cls: ToolEmitted
    fields: dict[str, Any]


class RunSink:
    """The :class:`~toolwire.tools.context.EventSink` of a run's tools: what they emit goes to the inbox of
    the step's running batch (dropped between batches: nobody runs then), and a sub-agent they start acts
    for the run's owner and records in the run's store."""

    __slots__ = ("inbox", "owner", "store")

    def __init__(self, owner: str | None) -> None:
        self.owner = owner
        self.store: Store | None = None
        self.inbox: Inbox | None = None

    def emit(self, kind: ToolEmitted, /, **fields: Any) -> None:
        if self.inbox is not None:
            self.inbox.put_nowait(Unnumbered(kind, fields))

    def forward(self, event: AgentEvent) -> None:
        if self.inbox is not None:
            self.inbox.put_nowait(event)


@dataclass(slots=True, kw_only=True)
class RunScope:
    """What every step of one run works with."""

    config: RunConfig
    recorder: StepRecorder
    executor: ToolExecutor
    sink: RunSink
    ledger: RunLedger
    deps: Any
    tools: list[ToolDefinition]
    """The tools this run offers the model."""
    gate: Gate
    """Which of a step's calls wait for a person."""
    history: list[Message] = field(default_factory=list)
    """The history as the model reads it: repaired when the run opened, then grown by each step."""
    budget: Budget | None = None
    """The run's usage limits and step hook (``None``: neither, the per-step fast path)."""
    session_id: str = ""
    """The run's session (its recorder's, read on every step)."""
    open_step: ClosableStep | None = None
    """The step whose calls are under way (closed if the run stops)."""

    @classmethod
    async def open(
        cls,
        config: RunConfig,
        store: Store,
        session: SessionInfo,
        interaction_id: str,
        *,
        deps: Any,
        tools: list[ToolDefinition],
        request: RunRequest,
    ) -> tuple[RunScope, OpenedHistory]:
        """The scope of a run that opens ``session`` in ``store`` (owner checked, lock taken), with the
        history read back repaired and what a paused or dead run left awaiting."""
        recorder = StepRecorder(
            store,
            session=session,
            interaction_id=interaction_id,
            max_output_chars=config.max_tool_output_chars,
            takeover=request.takeover is not None,
            top_level=request.top_level,
            model=(config.model.configured_provider, config.model.model_name),
        )
        sink = RunSink(session.user_id)
        sink.store = store
        names = frozenset(t.name for t in tools)
        scope = cls(
            config=config,
            recorder=recorder,
            executor=config.executor(names),
            sink=sink,
            ledger=RunLedger(session_id=session.id, interaction_id=interaction_id),
            deps=deps,
            tools=tools,
            gate=Gate(config.registry, names),
        )
        scope.session_id = session.id
        opened = await recorder.open()
        scope.history = opened.messages
        limits = (*config.usage_limits, *request.usage_limits)
        if limits or config.prepare_step is not None:
            calls = sum(len(m.tool_calls) for m in opened.messages if m.role == "assistant")
            scope.budget = Budget(
                limits,
                config.prepare_step,
                scope.ledger,
                stored=recorder.stored_usage,
                stored_calls=calls,
                session_id=session.id,
                deps=deps,
            )
            if scope.budget.pauses_per_session:  # the extensions a person gave the session so far
                scope.budget.extend(extensions_of(await store.tool_calls(session.id)))
        return scope, opened

    async def refresh_tools(self, request: RunRequest) -> None:
        """Before a step: a tool source whose tools changed (an MCP server's ``tools/list_changed``) is
        listed again, and the step offers, runs and gates the new set."""
        registry = self.config.registry
        if not await registry.refresh():
            return
        self.tools = registry.definitions(enabled=request.enabled_tools, exclude=request.exclude_tools)
        names = frozenset(t.name for t in self.tools)
        self.executor = self.config.executor(names)
        self.gate = Gate(registry, names)

    def context(self, step: int, resumes: Mapping[str, Resume] | None = None) -> RunContext[Any]:
        """What the step's tools (and approval predicates) are handed."""
        session = self.recorder.session
        return RunContext(
            deps=self.deps,
            session_id=session.id,
            user_session_id=session.user_session_id or session.id,
            interaction_id=self.recorder.interaction_id,
            parent_session_id=session.parent_session_id,
            step=step,
            messages=tuple(self.history),
            agent_name=self.config.name,
            model=self.config.model,
            sink=self.sink,
            resumes=resumes or {},
        )

    async def append(self, message: Message) -> None:
        """A message of the run's own (the user's turn, an output retry), stored, then in the history."""
        await self.recorder.append(message)
        self.history.append(message)
        self.ledger.messages.append(message)
