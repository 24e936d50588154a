"""A run held at a usage limit for a person to extend (``UsageLimits(pause=True)``).

Before a model request that would pass a pausing limit, the run stores a row of its own (``Store.hold_call``:
tool name :data:`~toolwire.store.records.USAGE_LIMIT_TOOL`, status ``awaiting_approval``, its ``args`` the
limit, what is allowed and what the request would make it; in no message, so never sent), announces it
(``tool-call-awaiting``, kind ``approval``) and ends ``paused``. Every door that answers approvals answers it:
approving goes on from the stored history (no new prompt) with the limits once more, denying ends the run
with :class:`~toolwire.errors.UsageLimitExceeded`, a new prompt closes it unanswered. Each approved row of a
session is an extension, which grows the session's pausing ``per="session"`` limits by their own size.

Calls that would pass a pausing ``tool_calls`` limit are held for approval instead (their own rows, their
``awaiting`` event saying why: :meth:`~toolwire.agent._step.StepRun.conclude`), and a call a person approved
past it runs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from toolwire.agent._pause import Waiting
from toolwire.errors import UsageLimitExceeded
from toolwire.events import AgentEvent, ToolCallAwaiting, ToolCallResolved
from toolwire.messages import ToolCallPart, new_id
from toolwire.store.records import USAGE_LIMIT_TOOL, CallCompletion, ToolCallRecord
from toolwire.tools.pending import Approval, Denied, PendingCall

if TYPE_CHECKING:  # the scope imports this module (for extensions_of)
    from toolwire.agent._scope import RunScope


def limit_args(exc: UsageLimitExceeded) -> dict[str, Any]:
    """What a person is asked to extend: which limit, what it allows, what going on would make it."""
    return {
        "limit": exc.limit,
        "per": exc.per,
        "allowed": _number(exc.allowed),
        "would_be": _number(exc.would_be),
        "message": str(exc),
    }


async def hold_calls(
    scope: RunScope, calls: Sequence[ToolCallPart], message_id: str, exc: UsageLimitExceeded
) -> list[Waiting]:
    """A step's calls that would pass a pausing ``tool_calls`` limit: each stored awaiting approval, its
    row saying why (``{"reason": ...}``, shown with the pending call and its ``awaiting`` event)."""
    reason = str(exc).replace("; nothing more was sent", ": approve the call to run it")
    held: list[Waiting] = []
    for call in calls:
        completion = CallCompletion(
            tool_call_id=call.tool_call_id,
            message_id=message_id,
            status="awaiting_approval",
            output={"reason": reason},
            is_error=False,
            started_at=None,
            finished_at=None,
        )
        await scope.recorder.complete_call(completion)
        held.append(Waiting.held(call, "awaiting_approval", scope.session_id, message_id, reason))
    return held


def _number(value: Any) -> Any:
    """JSON for a limit's figure (a cost is a ``Decimal``)."""
    return float(value) if isinstance(value, Decimal) else value


def is_limit(row: ToolCallRecord) -> bool:
    return row.tool_name == USAGE_LIMIT_TOOL


def extensions_of(rows: Sequence[ToolCallRecord]) -> int:
    """How many extensions a person gave the session: its approved usage-limit rows."""
    return sum(1 for row in rows if is_limit(row) and row.status == "ok")


async def hold(scope: RunScope, exc: UsageLimitExceeded, step: int) -> list[AgentEvent]:
    """Pause the run before the request that would pass a pausing limit: the row stored, then announced."""
    recorder = scope.recorder
    row = ToolCallRecord(
        session_id=scope.session_id,
        tool_call_id=new_id("limit_"),
        tool_name=USAGE_LIMIT_TOOL,
        message_id="",
        step=step,
        args=limit_args(exc),
        status="awaiting_approval",
        interaction_id=recorder.interaction_id,
    )
    await recorder.hold_call(row)
    pending = PendingCall(
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        args=row.args,
        kind="approval",
        session_id=scope.session_id,
    )
    scope.ledger.paused([pending])
    return [
        recorder.event(
            ToolCallAwaiting,
            tool_call_id=row.tool_call_id,
            tool_name=row.tool_name,
            args=row.args,
            kind="approval",
        )
    ]


async def answer_limit(
    scope: RunScope, row: ToolCallRecord, decision: Approval | None, *, closing: bool
) -> AsyncGenerator[AgentEvent, None]:
    """Apply a person's answer to the run held at a limit: approved, the run goes on (its caller runs the
    steps); denied, it ends with :class:`UsageLimitExceeded`; unanswered with a new prompt, closed."""
    if decision is None:
        if closing:
            await _settle(scope, row, "unanswered", "the usage limit was not extended: a new prompt came")
            yield _resolved(scope, row, "unanswered", None)
        return
    if decision is True:
        await _settle(scope, row, "ok", "extended")
        if scope.budget is not None:
            extensions = extensions_of(await scope.recorder.store.tool_calls(scope.session_id))
            scope.budget.extend(extensions)
        yield _resolved(scope, row, "approved", None)
        return
    reason = decision.reason if isinstance(decision, Denied) else ""
    await _settle(scope, row, "denied", reason or "not extended")
    yield _resolved(scope, row, "denied", reason or None)
    args = row.args
    raise UsageLimitExceeded(
        f"{args.get('message', 'a usage limit was reached')}; the person did not extend it",
        limit=str(args.get("limit", "")),
        allowed=args.get("allowed"),
        would_be=args.get("would_be"),
        per=str(args.get("per", "run")),
    )


async def _settle(scope: RunScope, row: ToolCallRecord, status: Any, output: str) -> None:
    now = time.time()
    completion = CallCompletion(
        tool_call_id=row.tool_call_id,
        message_id=row.message_id,
        status=status,
        output=output,
        is_error=status != "ok",
        started_at=now,
        finished_at=now,
    )
    await scope.recorder.complete_call(completion)


def _resolved(scope: RunScope, row: ToolCallRecord, resolution: Any, reason: str | None) -> AgentEvent:
    event: AgentEvent = scope.recorder.event(
        ToolCallResolved,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        resolution=resolution,
        reason=reason,
    )
    return event
