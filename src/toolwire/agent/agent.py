"""``Agent``: a model, its tools, a store and a driver, run through the one loop.

``Agent[DepsT, OutputT]`` is inferred from the constructor: ``Agent(model)`` is an ``Agent[Any, str]``,
``Agent(model, output_type=Weather)`` an ``Agent[Any, Weather]`` whose ``run(...).output`` is a
``Weather``, and ``deps_type=Db`` makes the ``deps`` of a run a ``Db``.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar, Token
from dataclasses import fields
from typing import Any, Generic, TypedDict, Unpack, overload

from toolwire.agent._resume import plan_answers
from toolwire.agent._sub_agent import sub_agent_tool
from toolwire.agent.config import Compaction, PrepareStep, RunConfig, RunRequest, UsageLimits
from toolwire.agent.drivers import Driver
from toolwire.agent.drivers._default import default_driver
from toolwire.agent.loop import AgentRun
from toolwire.agent.output import OutputMode, OutputSpec, build_output_spec
from toolwire.agent.result import OutputT, RunResult
from toolwire.errors import ConfigError, MissingKeyError
from toolwire.events import AgentEvent, TextDeltaEvent
from toolwire.models import ModelSpec, infer_model
from toolwire.models.base import Model, ModelSettings, ToolChoice
from toolwire.observability import EventBus, EventCallback
from toolwire.store.base import Store
from toolwire.store.memory import MemoryStore
from toolwire.store.records import check_owner
from toolwire.tools.context import DepsT, RunContext
from toolwire.tools.executor import DEFAULT_MAX_OUTPUT_CHARS, ToolInterceptor
from toolwire.tools.function import Tool
from toolwire.tools.pending import Approval, DecisionKey, PendingCall, pending_of_rows
from toolwire.tools.registry import ToolRegistry, ToolSource

ToolLike = Tool | Callable[..., Any] | ToolSource
"""What ``tools=`` takes: a :class:`Tool`, a plain function (made into one), or a source such as an MCP server."""


class _AgentOptions(TypedDict, total=False):
    """The keyword options of :class:`Agent` that do not decide its type parameters (for the overloads)."""

    store: Store | str | None
    max_steps: int
    tool_choice: ToolChoice
    driver: Driver | None
    instructions: str | None
    name: str | None
    interceptors: Sequence[ToolInterceptor]
    raise_on_failure: bool
    stop_on_block: bool
    tool_timeout: float | None
    heartbeat_interval: float | None
    retries: int
    retry_delay: float
    max_tool_output_chars: int
    model_settings: ModelSettings | None
    user_id: str | None
    output_mode: OutputMode
    output_retries: int
    compaction: Compaction | bool
    usage_limits: UsageLimits | Sequence[UsageLimits] | None
    prepare_step: PrepareStep | None


class Agent(Generic[DepsT, OutputT]):
    """An agent: ``await agent.run(prompt)``, ``agent.run_sync(prompt)`` or ``async for event in agent.stream(prompt)``.

    ``run()`` consumes exactly the event stream ``stream()`` yields: there is one loop. ``output_type``
    (a pydantic model, dataclass, TypedDict or other type, a list of alternatives, or a JSON schema dict)
    makes the run end in a validated object of that type; without it the output is the final text.
    """

    @overload
    def __init__(
        self: Agent[DepsT, str],
        model: ModelSpec,
        tools: Iterable[ToolLike] = (),
        *,
        deps_type: type[DepsT] | None = None,
        output_type: None = None,
        **options: Unpack[_AgentOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[DepsT, OutputT],
        model: ModelSpec,
        tools: Iterable[ToolLike] = (),
        *,
        deps_type: type[DepsT] | None = None,
        output_type: type[OutputT],
        **options: Unpack[_AgentOptions],
    ) -> None: ...

    @overload
    def __init__(  # a JSON schema dict, a list of alternatives, a union: the output is not typed
        self: Agent[DepsT, Any],
        model: ModelSpec,
        tools: Iterable[ToolLike] = (),
        *,
        deps_type: type[DepsT] | None = None,
        output_type: object,
        **options: Unpack[_AgentOptions],
    ) -> None: ...

    def __init__(
        self,
        model: ModelSpec,
        tools: Iterable[ToolLike] = (),
        *,
        deps_type: type[DepsT] | None = None,
        store: Store | str | None = None,
        max_steps: int = 10,
        tool_choice: ToolChoice = "auto",
        driver: Driver | None = None,
        instructions: str | None = None,
        name: str | None = None,
        interceptors: Sequence[ToolInterceptor] = (),
        raise_on_failure: bool = False,
        stop_on_block: bool = False,
        tool_timeout: float | None = None,
        heartbeat_interval: float | None = 1.0,
        retries: int = 2,
        retry_delay: float = 0.5,
        max_tool_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        model_settings: ModelSettings | None = None,
        user_id: str | None = None,
        output_type: Any = None,
        output_mode: OutputMode = "auto",
        output_retries: int = 2,
        compaction: Compaction | bool = True,
        usage_limits: UsageLimits | Sequence[UsageLimits] | None = None,
        prepare_step: PrepareStep | None = None,
    ) -> None:
        self._model_spec = model
        try:
            self._model: Model | None = infer_model(model)
        except MissingKeyError:
            # A module that builds its agent at import must import without the provider's key, so that
            # ``toolwire serve mod:agent --model ...`` and tests can swap the model: the model is then
            # built on first use (a run, ``agent.model``), which raises this error if the key is still unset.
            self._model = None
        self.deps_type = deps_type
        """The type of ``deps`` runs take (for type checkers; not checked at run time)."""
        self.registry = ToolRegistry(tools)
        if max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        named = tool_choice not in ("auto", "required", "none")
        if named and self.registry.get(tool_choice) is None and not self.registry.sources:
            raise ConfigError(f"tool_choice {tool_choice!r} is neither auto/required/none nor a known tool")
        self.max_steps = max_steps
        self.tool_choice = tool_choice
        self._driver_given = driver is not None
        self._driver = driver
        self.instructions = instructions
        self.name = name
        self.interceptors = tuple(interceptors)
        self.raise_on_failure = raise_on_failure
        self.stop_on_block = stop_on_block
        self.tool_timeout = tool_timeout
        self.heartbeat_interval = heartbeat_interval
        self.retries = retries
        self.retry_delay = retry_delay
        """Base of the exponential backoff (seconds) between retries of a failed model request."""
        self.max_tool_output_chars = max_tool_output_chars
        self.model_settings = model_settings or ModelSettings()
        self.user_id = user_id
        self.events = EventBus()
        self.output_retries = output_retries
        self.compaction = Compaction() if compaction is True else compaction or None
        self.usage_limits = _limits(usage_limits)
        """What each run (or session) may use: see :class:`~toolwire.UsageLimits`."""
        self.prepare_step = prepare_step
        """Called before each step with a :class:`StepInfo`; may return :class:`StepOverrides`."""
        """How a long session's requests are kept within the context window (``None``: never compacted)."""
        self._output_type = output_type
        self._output_mode: OutputMode = output_mode
        self._output_spec: OutputSpec | None = None
        self._output_ready = False
        if self._model is not None:
            self._prepare_model()  # a bad output_type is refused at construction
        self._store_spec = store
        self._store: Store | None = store if isinstance(store, Store) else None
        self._store_lock = asyncio.Lock()
        self._overridden_by: ContextVar[Agent[Any, Any] | None] = ContextVar(
            f"toolwire_agent_override_{id(self)}", default=None
        )
        self._override_of: Agent[DepsT, OutputT] | None = None
        self._override_tokens: list[Token[Agent[Any, Any] | None]] = []

    @property
    def model(self) -> Model:
        """The model (a model string whose key was missing at construction is built now, or raises)."""
        if self._model is None:
            self._model = infer_model(self._model_spec)
        return self._model

    @model.setter
    def model(self, model: Model) -> None:
        self._model = model

    @property
    def driver(self) -> Driver:
        """The driver given to the constructor, else the model's default (native tool calls or ReAct)."""
        self._prepare_model()
        assert self._driver is not None
        return self._driver

    @driver.setter
    def driver(self, driver: Driver) -> None:
        self._driver = driver

    @property
    def output_spec(self) -> OutputSpec | None:
        """How ``output_type`` is asked of this model (``None`` without one)."""
        self._prepare_model()
        return self._output_spec

    def _prepare_model(self) -> None:
        if self._driver is None:
            self._driver = default_driver(self.model)
        if not self._output_ready:
            self._output_spec = build_output_spec(self._output_type, self.model, self._output_mode)
            self._output_ready = True

    # -- configuration helpers used by the loop ---------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        """The effective tool set as of the last run start (:meth:`list_tools` connects sources first)."""
        return list(self.registry)

    async def list_tools(self) -> list[Tool]:
        """The effective tool set now, after listing every source (MCP servers connect if needed)."""
        await self.registry.prepare()
        return list(self.registry)

    async def get_store(self) -> Store:
        """The store; a URL given to the constructor is opened on first use, ``None`` means in-memory."""
        if self._store is not None:
            return self._store
        async with self._store_lock:
            if self._store is None:
                if isinstance(self._store_spec, str):
                    from toolwire.store import open_store

                    self._store = await open_store(self._store_spec)
                else:
                    self._store = MemoryStore()
        return self._store

    def publish(self, events: AsyncGenerator[AgentEvent, None]) -> AsyncGenerator[AgentEvent, None]:
        """The run's event stream as clients see it: passed through the event bus when anyone listens."""
        return self.events.wrap(events)

    def on(self, name: str, callback: EventCallback) -> Callable[[], None]:
        """Subscribe to events by name (``"tool:start"``, ``"tool:end"``, ``"run:end"``, an event type, ``"*"``);
        returns a function that unsubscribes (:mod:`toolwire.observability`)."""
        return self.events.on(name, callback)

    def override(
        self, *, model: ModelSpec | None = None, store: Store | str | None = None
    ) -> Agent[DepsT, OutputT]:
        """A copy of this agent with another model and/or store; this agent is left as it was.

        With a new model, a default driver is chosen again for it and structured output is set up again
        (a driver given to the constructor is kept); tools, settings and subscribers are shared.

        As a context manager it swaps them in this agent itself, for the runs started inside the block (in
        this task and the tasks it starts), as tests of an application's module-level agent need::

            with support_agent.override(model=ScriptedModel([[TextPart(text="Hello")]])):
                result = await support_agent.run("hi")
        """
        twin = copy.copy(self)
        twin._override_of = self
        twin._override_tokens = []
        if model is not None:
            twin._model_spec = model
            twin._model = infer_model(model)
            twin._driver = twin._driver if self._driver_given else None
            twin._output_ready = False
            twin._prepare_model()
        if store is not None:
            twin._store_spec = store
            twin._store = store if isinstance(store, Store) else None
            twin._store_lock = asyncio.Lock()
        return twin

    def __enter__(self) -> Agent[DepsT, OutputT]:
        if self._override_of is None:
            raise ConfigError("use `with agent.override(model=...):`; an agent is not a context manager")
        self._override_tokens.append(self._override_of._overridden_by.set(self))
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._override_of is not None
        self._override_of._overridden_by.reset(self._override_tokens.pop())

    def _current(self) -> Agent[Any, Any]:
        """This agent, or the override a ``with agent.override(...)`` block put in its place here."""
        if self._override_of is not None:  # a copy (an override, the AG-UI per-request twin) is itself
            return self
        active = self._overridden_by.get()
        return active if active is not None and active is not self else self

    def use_store(self, store: Store | str) -> None:
        """Replace the store (e.g. the CLI's or server's ``--store``); a URL is opened on first use."""
        self._store_spec = store
        self._store = store if isinstance(store, Store) else None

    def run_config(self) -> RunConfig:
        """This agent's settings, frozen for one run."""
        if (current := self._current()) is not self:
            return current.run_config()
        # Every other field is the agent's attribute of the same name.
        own: dict[str, Any] = {
            "output": self.output_spec,
            "open_store": self.get_store,
            "store_configured": self._store_spec is not None,
        }
        same = {f.name: getattr(self, f.name) for f in fields(RunConfig) if f.name not in own}
        return RunConfig(**same, **own)

    # -- running ------------------------------------------------------------------------------------

    def stream(
        self,
        prompt: str | None = None,
        *,
        session_id: str | None = None,
        deps: DepsT | None = None,
        parent: RunContext[Any] | None = None,
        enabled_tools: Sequence[str] | None = None,
        exclude_tools: Sequence[str] = (),
        user_id: str | None = None,
        approvals: Mapping[DecisionKey, Approval] | None = None,
        tool_outputs: Mapping[DecisionKey, Any] | None = None,
        usage_limits: UsageLimits | Sequence[UsageLimits] | None = None,
    ) -> AgentRun[OutputT]:
        """Start a run: ``async for event in agent.stream(...)``. ``parent`` makes it a sub-agent run of
        that tool call.

        To stop a run early, use it as a context manager: ``async with agent.stream(...) as run:``, then
        ``async for event in run:``; leaving the block closes the run (running tools are cancelled and
        recorded as cancelled). ``run.result`` is set once the run ended.

        A paused run (calls wait for a person) is resumed by the next run of its session, in any process:
        ``approvals=`` / ``tool_outputs=`` (:mod:`toolwire.tools.pending`). ``usage_limits``: this run's own,
        besides the agent's.
        """
        return AgentRun(
            self.run_config(),
            prompt,
            session_id=session_id,
            parent=parent,
            deps=deps,
            user_id=user_id,
            request=RunRequest(
                approvals=approvals or {},
                tool_outputs=tool_outputs or {},
                enabled_tools=enabled_tools,
                exclude_tools=exclude_tools,
                usage_limits=_limits(usage_limits),
            ),
        )

    async def run(
        self,
        prompt: str | None = None,
        *,
        session_id: str | None = None,
        deps: DepsT | None = None,
        parent: RunContext[Any] | None = None,
        enabled_tools: Sequence[str] | None = None,
        exclude_tools: Sequence[str] = (),
        user_id: str | None = None,
        approvals: Mapping[DecisionKey, Approval] | None = None,
        tool_outputs: Mapping[DecisionKey, Any] | None = None,
        usage_limits: UsageLimits | Sequence[UsageLimits] | None = None,
    ) -> RunResult[OutputT]:
        """Run to completion, or until calls wait for a person, and return the result (consumes
        :meth:`stream`, which documents resuming a paused run)."""
        async with self.stream(
            prompt,
            session_id=session_id,
            deps=deps,
            parent=parent,
            enabled_tools=enabled_tools,
            exclude_tools=exclude_tools,
            user_id=user_id,
            approvals=approvals,
            tool_outputs=tool_outputs,
            usage_limits=usage_limits,
        ) as run:
            async for _ in run:
                pass
        assert run.result is not None
        return run.result

    async def stream_text(self, prompt: str | None = None, **kwargs: Any) -> AsyncIterator[str]:
        """The answer's text as the model writes it: ``async for text in agent.stream_text(prompt)``.

        Takes :meth:`stream`'s arguments; yields the text deltas of this run's own steps (not its
        sub-agents'). Stopping early closes the run, as leaving ``async with agent.stream(...)`` does.
        """
        async with self.stream(prompt, **kwargs) as run:
            async for event in run:
                if isinstance(event, TextDeltaEvent) and event.session_id == run.session_id:
                    yield event.delta

    def run_sync(self, prompt: str | None = None, **kwargs: Any) -> RunResult[OutputT]:
        """Blocking wrapper around :meth:`run`; closes what the run opened (store, HTTP clients) at the end.

        Inside a running event loop (Jupyter, an async web framework) the run gets an event loop of its
        own on a worker thread, and this call blocks the caller's loop until it ends: there, prefer
        ``await agent.run(...)``.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_and_close(prompt, **kwargs))
        # ``asyncio.run`` refuses to nest; a thread has no loop. The copied context carries an active
        # ``with agent.override(...)`` into the thread.
        context = contextvars.copy_context()
        with ThreadPoolExecutor(1, thread_name_prefix="toolwire-run-sync") as worker:
            return worker.submit(context.run, asyncio.run, self._run_and_close(prompt, **kwargs)).result()

    async def pending(self, session_id: str, *, user_id: str | None = None) -> list[PendingCall]:
        """The calls the session's paused run waits for (empty when it is not paused), sub-agents'
        included, as ``RunResult.pending`` listed them: what a UI shows after a restart."""
        store = await self._current().get_store()
        info = await store.get_session(session_id)
        if info is None:
            return []
        check_owner(info, user_id if user_id is not None else self.user_id)
        return pending_of_rows(await store.tool_calls(session_id), session_id)

    async def check_answers(
        self,
        session_id: str,
        *,
        prompt: str | None = None,
        approvals: Mapping[DecisionKey, Approval] | None = None,
        tool_outputs: Mapping[DecisionKey, Any] | None = None,
    ) -> None:
        """Raise :class:`~toolwire.errors.ResumeError` when answers do not apply to what the session waits
        for now (nothing written; the run checks again under its lock). ``prompt``: a new turn follows."""
        store = await self._current().get_store()
        awaited = [r for r in await store.tool_calls(session_id) if r.awaiting is not None]
        plan_answers(
            awaited,
            await store.load_history(session_id),
            session_id=session_id,
            approvals=approvals or {},
            tool_outputs=tool_outputs or {},
            closing=prompt is not None,
            max_output_chars=self.max_tool_output_chars,
        )

    async def _run_and_close(self, prompt: str | None, **kwargs: Any) -> RunResult[OutputT]:
        try:
            return await self.run(prompt, **kwargs)
        finally:
            # asyncio.run closes its loop: release loop-bound resources (DB connections, HTTP clients), of
            # the override that ran in this agent's place if there is one.
            await self._current().aclose()

    async def aclose(self) -> None:
        """Close the store (if this agent opened it) and the model's own HTTP client."""
        if self._store is not None and self._store is not self._store_spec:
            await self._store.close()
            self._store = None
        await self.registry.aclose()
        if self._model is not None:  # never built (its key was missing): nothing to close
            await self._model.aclose()

    def as_tool(self, name: str, description: str) -> Tool:
        """This agent as a tool of another agent: runs in a child session whose events are forwarded.

        When the sub-agent's run pauses (its calls wait for a person), the caller's call waits with it
        (``awaiting_subagent``) and the caller's run pauses too, listing the sub-agent's pending calls;
        answering them continues the same child session.
        """
        return sub_agent_tool(self.stream, name, description)


def _limits(given: UsageLimits | Sequence[UsageLimits] | None) -> tuple[UsageLimits, ...]:
    return () if given is None else (given,) if isinstance(given, UsageLimits) else tuple(given)
