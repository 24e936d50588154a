"""Budgets and the step hook: what a run may spend (``UsageLimits``), and what one step sends
(``prepare_step`` -> ``StepOverrides``).

A limit is checked *before* what would pass it: a model request is not sent when the requests, the input
tokens (those already used plus the request's own estimate), the output tokens or the cost already spent
(plus the request's estimated input cost) would pass a limit; a step's tool calls do not run when their
number would pass ``tool_calls``. The run then ends with :class:`~toolwire.errors.UsageLimitExceeded`, and
what it did until then is stored as always; a limit with ``pause=True`` pauses it instead
(:mod:`toolwire.agent._limit_pause`), and each extension a person gives a session grows its ``per="session"``
pausing limits by their own size. ``per="session"`` counts the session's whole stored usage (every
earlier run's, from the session row) plus this run's; ``per="run"`` this run's only. Sub-agents count
against their own agent's limits.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from toolwire.agent.config import PrepareStep, StepInfo, UsageLimits
from toolwire.errors import UsageLimitExceeded
from toolwire.messages import Usage
from toolwire.models._tokens import Sizes, estimate_request_tokens
from toolwire.models.base import Model, ModelRequest
from toolwire.pricing import total_cost


async def overridden(
    prepare: PrepareStep | None, info: StepInfo, request: ModelRequest
) -> tuple[ModelRequest, Model | None]:
    """``request`` as ``prepare`` changes it for this step, and the model it asks to use (``None``: the run's)."""
    if prepare is None:
        return request, None
    answer = prepare(info)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is None:
        return request, None
    changes: dict[str, Any] = {}
    if answer.tools is not None:
        wanted = set(answer.tools)
        changes["tools"] = [t for t in request.tools if t.name in wanted or t.name == "final_result"]
    if answer.tool_choice is not None:
        changes["tool_choice"] = answer.tool_choice
    if answer.instructions is not None:
        changes["instructions"] = answer.instructions
    if answer.messages is not None:
        changes["messages"] = tuple(answer.messages)
    return (replace(request, **changes) if changes else request), answer.model


class Budget:
    """One run's limits and step hook: checked before each model request and each step's tool calls."""

    def __init__(
        self,
        limits: Sequence[UsageLimits],
        prepare: PrepareStep | None,
        ledger: Any,
        *,
        stored: Usage,
        stored_calls: int,
        session_id: str,
        deps: Any,
        extensions: int = 0,
    ) -> None:
        self._given = tuple(limits)
        self._limits = tuple(extended(limit, extensions) for limit in limits)
        self._prepare = prepare
        self._ledger = ledger
        """The run's RunLedger: its usage so far."""
        self._stored, self._stored_calls = stored, stored_calls
        """The session's usage and tool calls before this run (``per="session"`` limits count them)."""
        self._session_id, self._deps = session_id, deps
        self._sizes = Sizes()
        """The run's measures of its messages, for the input-token and cost estimates."""

    @property
    def pauses_per_session(self) -> bool:
        """Whether a limit pauses per session (its extensions are then read when the run opens)."""
        return any(limit.pause and limit.per == "session" for limit in self._given)

    def extend(self, extensions: int) -> None:
        """The session was given ``extensions`` extensions in all (a person approved one just now)."""
        self._limits = tuple(extended(limit, extensions) for limit in self._given)

    @property
    def idle(self) -> bool:
        """Nothing to check and no hook: the per-step fast path."""
        return not self._limits and self._prepare is None

    async def before_request(
        self, step: int, request: ModelRequest, model: Model
    ) -> tuple[ModelRequest, Model]:
        """The step's request as ``prepare_step`` changes it and the model to ask; raises
        :class:`UsageLimitExceeded` when sending it would pass a limit."""
        ledger = self._ledger
        used = sum(ledger.step_usage, Usage())
        info = StepInfo(step, self._session_id, request.messages, request.tools, model, used, self._deps)
        request, chosen = await overridden(self._prepare, info, request)
        model = chosen or model
        steps = [(p, m, u) for (p, m), u in zip(ledger.step_models, ledger.step_usage, strict=True)]
        check_request(self._limits, model, request, used, self._stored, steps, self._sizes)
        return request, model

    def before_calls(self, calls: int, approved: int = 0) -> None:
        """Raise :class:`UsageLimitExceeded` when running ``calls`` more tool calls would pass a limit
        (``approved`` of them a person approved: a pausing limit lets those run)."""
        if self._limits:
            check_tool_calls(self._limits, calls, len(self._ledger.executions), self._stored_calls, approved)


def extended(limit: UsageLimits, extensions: int) -> UsageLimits:
    """``limit`` after a session's ``extensions``: a pausing per-session limit grows by its own size for
    each (a per-run one needs none: the answering run counts from zero)."""
    if not extensions or not limit.pause or limit.per != "session":
        return limit
    factor = 1 + extensions
    changes: dict[str, Any] = {}
    for name in ("requests", "input_tokens", "output_tokens", "tool_calls"):
        value = getattr(limit, name)
        if value is not None:
            changes[name] = value * factor
    if limit.cost is not None:
        changes["cost"] = Decimal(str(limit.cost)) * factor
    return replace(limit, **changes)


def check_request(
    limits: Sequence[UsageLimits],
    model: Model,
    request: ModelRequest,
    run: Usage,
    session: Usage,
    steps: Any,
    sizes: Sizes | None = None,
) -> None:
    """Raise :class:`UsageLimitExceeded` when sending ``request`` to ``model`` would pass a limit (``run``:
    this run's usage, ``session``: the session's stored usage before this run; ``steps``: the priced
    (provider, model, usage) of this run's steps)."""
    if not limits:
        return
    estimate: int | None = None
    for limit in limits:
        used = run + session if limit.per == "session" else run
        if limit.requests is not None and used.requests + 1 > limit.requests:
            _exceeded(limit, "requests", limit.requests, used.requests + 1)
        if limit.output_tokens is not None and used.output_tokens >= limit.output_tokens:
            _exceeded(limit, "output_tokens", limit.output_tokens, used.output_tokens)
        if limit.input_tokens is not None:
            estimate = estimate if estimate is not None else estimate_request_tokens(model, request, sizes)
            if used.input_tokens + estimate > limit.input_tokens:
                _exceeded(limit, "input_tokens", limit.input_tokens, used.input_tokens + estimate)
        if limit.cost is not None:
            estimate = estimate if estimate is not None else estimate_request_tokens(model, request, sizes)
            priced = [*steps, (model.provider, model.model_name, Usage(input_tokens=estimate, requests=1))]
            spent = total_cost(priced) or Decimal(0)
            if limit.per == "session":
                spent += total_cost([(model.provider, model.model_name, session)]) or Decimal(0)
            if spent > Decimal(str(limit.cost)):
                _exceeded(limit, "cost", limit.cost, spent)


def check_tool_calls(
    limits: Sequence[UsageLimits], calls: int, run_calls: int, session_calls: int, approved: int = 0
) -> None:
    """Raise :class:`UsageLimitExceeded` when running ``calls`` more would pass a ``tool_calls`` limit
    (a pausing limit does not count the ``approved`` ones: a person let them run)."""
    for limit in limits:
        if limit.tool_calls is None:
            continue
        used = run_calls + (session_calls if limit.per == "session" else 0)
        wanted = calls - approved if limit.pause else calls
        if wanted > 0 and used + wanted > limit.tool_calls:
            _exceeded(limit, "tool_calls", limit.tool_calls, used + wanted)


def _exceeded(limit: UsageLimits, what: str, allowed: Any, would_be: Any) -> None:
    raise UsageLimitExceeded(
        f"the {limit.per}'s {what} limit ({allowed}) would be passed ({would_be}); nothing more was sent",
        limit=what,
        allowed=allowed,
        would_be=would_be,
        per=limit.per,
        pause=limit.pause,
    )
