"""The one tool executor: resolve, validate, intercept, run with a timeout, and always produce a result.

A failing call becomes an error result the model sees (with the reason); raising is opt-in. Unknown tool
names and unparseable arguments give error results, never a crash.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from toolwire._text import clean_json, clean_text, truncate_output
from toolwire.errors import (
    SubAgentPaused,
    ToolArgumentsError,
    ToolAwaitingInput,
    ToolBlockedError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from toolwire.events import ToolCallStatus
from toolwire.messages import ToolCallPart, ToolResultPart
from toolwire.store.history import UNANSWERED_OUTPUT
from toolwire.tools._batch import OnFinished, ToolBatch
from toolwire.tools._inbox import Inbox
from toolwire.tools.context import RunContext
from toolwire.tools.function import Tool
from toolwire.tools.outcome import ToolOutcome
from toolwire.tools.pending import asked_output
from toolwire.tools.registry import ToolRegistry

logger = logging.getLogger("toolwire.tools")

DEFAULT_MAX_OUTPUT_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call run unchanged."""


@dataclass(frozen=True, slots=True)
class Block:
    """Do not run the call; the model sees ``reason`` as an error result."""

    reason: str


@dataclass(frozen=True, slots=True)
class RewriteArgs:
    """Run the call with these arguments instead (they are validated again)."""

    args: dict[str, Any]


BeforeDecision = Allow | Block | RewriteArgs | None


class ToolInterceptor:
    """Hooks around every tool call. Subclass and override what you need."""

    async def before_call(self, call: ToolCallPart, ctx: RunContext[Any]) -> BeforeDecision:
        return None

    async def after_call(
        self, call: ToolCallPart, result: ToolResultPart, ctx: RunContext[Any]
    ) -> ToolResultPart | None:
        """Return a replacement result, or ``None`` to keep it."""
        return None


@dataclass(kw_only=True)
class ToolExecutor:
    registry: ToolRegistry
    interceptors: Sequence[ToolInterceptor] = ()
    default_timeout: float | None = None
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    allowed: frozenset[str] | None = field(default=None)
    """When set, only these tool names may run in this run (``enabled_tools`` / ``exclude_tools``)."""

    def start_batch(
        self,
        calls: Sequence[ToolCallPart],
        ctx: RunContext[Any],
        *,
        inbox: Inbox,
        on_finished: OnFinished,
        args_errors: dict[str, str] | None = None,
        sequential: bool = False,
        heartbeat_interval: float | None = None,
    ) -> ToolBatch:
        """Start one step's calls (concurrently, or one after another when ``sequential``); read what
        happens with :meth:`ToolBatch.next`, and :meth:`ToolBatch.close` it in any case.

        ``on_finished(outcomes, last)`` records outcomes before their :class:`CallFinished` are handed
        on: those of the calls that finished together, in one call; ``last`` is true when no call of the
        batch is left (the loop then writes them with the step's end). Calls of a ``sequential`` batch
        are recorded one by one, each before the next starts.
        """
        return ToolBatch(
            self,
            calls,
            ctx,
            inbox=inbox,
            on_finished=on_finished,
            args_errors=args_errors,
            sequential=sequential,
            heartbeat_interval=heartbeat_interval,
        )

    async def execute(
        self, call: ToolCallPart, ctx: RunContext[Any], *, args_error: str | None = None
    ) -> ToolOutcome:
        started = time.time()
        try:
            tool = self.registry.get(call.tool_name)
            if tool is None or (self.allowed is not None and call.tool_name not in self.allowed):
                available = ", ".join(
                    sorted(self.allowed if self.allowed is not None else self.registry.names)
                )
                raise ToolNotFoundError(
                    f"unknown tool {call.tool_name!r}; available tools: {available or 'none'}",
                    tool_name=call.tool_name,
                    tool_call_id=call.tool_call_id,
                )
            if args_error is not None:
                raise ToolArgumentsError(
                    f"invalid arguments for {call.tool_name}: {args_error}",
                    tool_name=call.tool_name,
                    tool_call_id=call.tool_call_id,
                )
            if self.interceptors:  # no coroutine to await per call when there are none
                call = await self._before(call, ctx)
            kwargs = tool.validate_args(call.args)
            if tool.external:  # the loop holds its calls for the client: only a misrouted one gets here
                raise ToolExecutionError(
                    f"{call.tool_name} runs on the client: its output comes with tool_outputs=",
                    tool_name=call.tool_name,
                    tool_call_id=call.tool_call_id,
                )
            timeout = tool.timeout if tool.timeout is not None else self.default_timeout
            call_ctx = ctx if call is ctx.call else ctx.for_call(call)  # an interceptor may rewrite it
            output = await self._run(tool, kwargs, call_ctx, timeout, call)
        except SubAgentPaused as exc:
            return paused_outcome(call, exc, started)
        except ToolAwaitingInput as exc:
            return asking_outcome(call, exc, started)
        except ToolError as exc:
            exc.tool_name = exc.tool_name or call.tool_name
            exc.tool_call_id = exc.tool_call_id or call.tool_call_id
            status: ToolCallStatus = "blocked" if isinstance(exc, ToolBlockedError) else "error"
            result = ToolResultPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                output=clean_text(exc.message),
                is_error=True,
            )
            return ToolOutcome(
                call=call,
                result=await self._after(call, result, ctx),
                status=status,
                started_at=started,
                finished_at=time.time(),
                full_output=clean_text(exc.message),
                error=exc,
            )
        full, is_error = jsonable_output(output)
        shown = self._truncate(full)
        result = ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=shown, is_error=is_error
        )
        if self.interceptors:
            result = await self._after(call, result, ctx)
        return ToolOutcome(
            call=call,
            result=result,
            status="error" if result.is_error else "ok",
            started_at=started,
            finished_at=time.time(),
            full_output=full if result.output is shown else result.output,
        )

    async def _before(self, call: ToolCallPart, ctx: RunContext[Any]) -> ToolCallPart:
        for interceptor in self.interceptors:
            decision = await interceptor.before_call(call, ctx)
            if isinstance(decision, Block):
                raise ToolBlockedError(
                    f"blocked: {decision.reason}", tool_name=call.tool_name, tool_call_id=call.tool_call_id
                )
            if isinstance(decision, RewriteArgs):
                call = ToolCallPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    args=decision.args,
                    provider_metadata=call.provider_metadata,
                    provider_executed=call.provider_executed,
                    title=call.title,
                )
        return call

    async def _after(
        self, call: ToolCallPart, result: ToolResultPart, ctx: RunContext[Any]
    ) -> ToolResultPart:
        for interceptor in self.interceptors:
            replacement = await interceptor.after_call(call, result, ctx)
            if replacement is not None:
                result = replacement
        return result

    async def _run(
        self,
        tool: Tool,
        kwargs: dict[str, Any],
        ctx: RunContext[Any],
        limit: float | None,
        call: ToolCallPart,
    ) -> Any:
        try:
            if limit is None:
                return await tool.call(kwargs, ctx)
            async with asyncio.timeout(limit):
                return await tool.call(kwargs, ctx)
        except TimeoutError as exc:
            raise ToolTimeoutError(
                f"{tool.name} timed out after {limit:g}s and was cancelled",
                tool_name=tool.name,
                tool_call_id=call.tool_call_id,
            ) from exc
        except ToolError:
            raise
        except Exception as exc:
            raise ToolExecutionError(
                f"{tool.name} failed: {type(exc).__name__}: {exc}",
                tool_name=tool.name,
                tool_call_id=call.tool_call_id,
            ) from exc

    def _truncate(self, output: Any) -> Any:
        return truncate_output(output, self.max_output_chars)


def paused_outcome(call: ToolCallPart, paused: SubAgentPaused, started: float) -> ToolOutcome:
    """A call whose sub-agent paused: stored as ``awaiting_subagent`` with what it waits for; its result
    (never sent while it waits) is the one it gets if nobody answers."""
    return ToolOutcome(
        call=call,
        result=ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=UNANSWERED_OUTPUT, is_error=True
        ),
        status="awaiting_subagent",
        started_at=started,
        finished_at=time.time(),
        full_output={"session_id": paused.session_id, "pending": [p.to_dict() for p in paused.pending]},
    )


def asking_outcome(call: ToolCallPart, asking: ToolAwaitingInput, started: float) -> ToolOutcome:
    """A call whose tool asked a question: stored as ``awaiting_input`` with the question and the answers
    it had; its result (never sent while it waits) is the one it gets if nobody answers."""
    return ToolOutcome(
        call=call,
        result=ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=UNANSWERED_OUTPUT, is_error=True
        ),
        status="awaiting_input",
        started_at=started,
        finished_at=time.time(),
        full_output=asked_output(asking.question, asking.answered),
    )


def jsonable_output(value: Any) -> tuple[Any, bool]:
    """A JSON-compatible copy of a tool's return value, or an error payload that keeps its repr."""
    if isinstance(value, str):
        return clean_text(value), False
    if value is None or isinstance(value, int | float | bool):
        return value, False
    try:
        converted = clean_json(to_jsonable_python(value))
        json.dumps(converted)
        return converted, False
    except (TypeError, ValueError) as exc:
        return {
            "error": f"tool returned a value that is not JSON-serialisable ({type(value).__name__}): {exc}",
            "repr": repr(value)[:10_000],
        }, True
