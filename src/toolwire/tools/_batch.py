"""``ToolBatch``: one step's calls running as tasks, and what they report, handed on in bursts.

The loop asks for :meth:`ToolBatch.next`: everything the calls queued since (their start, their outcome,
what the tools emit), as one list: one await per burst instead of one async-generator step per item.
The calls that finished in the same burst are recorded together (``on_finished``) before they are
handed on; ``last`` tells the recorder that no call is left (the step's end then writes them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolwire._fast_init import fast_frozen_init
from toolwire.messages import ToolCallPart
from toolwire.tools._inbox import TICK, Inbox
from toolwire.tools.context import RunContext
from toolwire.tools.outcome import ToolOutcome


class Executes(Protocol):
    """What runs one call of the batch (``ToolExecutor``)."""

    async def execute(
        self, call: ToolCallPart, ctx: RunContext[Any], *, args_error: str | None = None
    ) -> ToolOutcome: ...


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CallStarted:
    """A call of the batch began executing."""

    call: ToolCallPart
    started_at: float


@dataclass(frozen=True, slots=True)
class CallHeartbeat:
    """A call is still running (sent every ``heartbeat_interval`` while it runs)."""

    call: ToolCallPart
    elapsed: float


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class CallFinished:
    """A call's outcome, already recorded by ``on_finished``."""

    outcome: ToolOutcome


BatchItem = CallStarted | CallHeartbeat | CallFinished
"""What :meth:`ToolBatch.next` hands on, besides whatever the running tools put in the inbox."""


@dataclass(frozen=True, slots=True)
class _Finished:
    """A call's outcome, not recorded yet."""

    outcome: ToolOutcome


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


OnFinished = Callable[[list["ToolOutcome"], bool], Awaitable[None]]


class ToolBatch:
    """One step's calls, run concurrently (or one after another when ``sequential``).

    :meth:`close` cancels the calls still running and waits for them: no call outlives its batch. (The
    tasks are owned here rather than by an ``asyncio.TaskGroup``, which cannot span the loop's yields.)
    """

    __slots__ = (
        "_ctx",
        "_errors",
        "_executor",
        "_finished",
        "_inbox",
        "_interval",
        "_on_finished",
        "_remaining",
        "_running",
        "_sequential",
        "_tasks",
        "_unfinished",
    )

    def __init__(
        self,
        executor: Executes,
        calls: Sequence[ToolCallPart],
        ctx: RunContext[Any],
        *,
        inbox: Inbox,
        on_finished: OnFinished,
        args_errors: dict[str, str] | None,
        sequential: bool,
        heartbeat_interval: float | None,
    ) -> None:
        self._executor = executor
        self._ctx = ctx
        self._errors = args_errors or {}
        self._inbox = inbox
        self._on_finished = on_finished
        self._sequential = sequential
        self._interval = heartbeat_interval
        self._unfinished = self._remaining = len(calls)
        """Calls not recorded yet; calls not handed on yet."""
        self._finished: list[ToolOutcome] = []
        self._running: dict[str, tuple[ToolCallPart, float]] = {}
        batches = [list(calls)] if sequential else [[c] for c in calls]
        self._tasks = [asyncio.create_task(self._run(batch)) for batch in batches]

    async def next(self) -> list[Any]:
        """What happened since the last call, in order (waiting for something when nothing did): each
        :data:`BatchItem`, and every other item the tools put in the inbox (their progress events, a
        sub-agent's events). Empty once every call's outcome was handed on.

        A :class:`CallFinished` comes only after ``on_finished`` recorded its outcome: the outcomes of
        the calls that finished meanwhile (in one event-loop turn, for tools that do not wait) in one
        call, once everything queued before them was handed on."""
        inbox = self._inbox
        out: list[Any] = []
        while self._remaining:
            if not inbox.empty():
                self._take(inbox.get_nowait(), out)
            elif out:
                return out
            elif self._finished:
                group, self._finished = self._finished, []
                self._unfinished -= len(group)
                await self._on_finished(group, self._unfinished == 0)
                self._remaining -= len(group)
                out.extend(CallFinished(outcome) for outcome in group)
            else:
                self._take(await inbox.get(self._interval), out)
        while not inbox.empty():  # what a tool emitted after its result (rare) still reaches clients
            item = inbox.get_nowait()
            if not isinstance(item, _Failed):
                out.append(item)
        return out

    def _take(self, item: Any, out: list[Any]) -> None:
        if isinstance(item, _Finished):
            self._finished.append(item.outcome)
        elif item is TICK:
            now = time.time()
            out.extend(CallHeartbeat(call, now - started) for call, started in self._running.values())
        elif isinstance(item, _Failed):
            raise item.error
        else:
            if isinstance(item, CallFinished):
                self._remaining -= 1
            out.append(item)

    async def close(self) -> None:
        """Cancel the calls still running and wait for them. Calls that finished but were not recorded
        yet (the batch was closed before it handed them on) are recorded now, as the batch's last: the
        run's end then stores and announces their real outcome instead of calling them cancelled."""
        still_running = [task for task in self._tasks if not task.done()]
        if still_running:  # gathering finished tasks would still cost an event-loop turn per step
            for task in still_running:
                task.cancel()
            await asyncio.gather(*still_running, return_exceptions=True)
        left = self._finished
        while not self._inbox.empty():
            item = self._inbox.get_nowait()
            if isinstance(item, _Finished):
                left.append(item.outcome)
        if left:
            self._finished = []
            await self._on_finished(left, True)

    async def _run(self, calls: Sequence[ToolCallPart]) -> None:
        """One task's calls (one, or the whole batch when sequential)."""
        inbox, running = self._inbox, self._running
        try:
            for call in calls:
                started = time.time()
                running[call.tool_call_id] = (call, started)
                inbox.put_nowait(CallStarted(call, started))
                outcome = await self._executor.execute(
                    call, self._ctx.for_call(call), args_error=self._errors.get(call.tool_call_id)
                )
                del running[call.tool_call_id]
                if not self._sequential:
                    inbox.put_nowait(_Finished(outcome))  # recorded by next(), with those finishing with it
                    continue
                self._unfinished -= 1
                await self._on_finished([outcome], self._unfinished == 0)  # before the next call starts
                inbox.put_nowait(CallFinished(outcome))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a store failure must not leave the batch waiting forever
            inbox.put_nowait(_Failed(exc))
