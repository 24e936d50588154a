"""An MCP server's questions (``elicitation/create``) as the run's durable pauses.

While a server serves a tool call it may ask the user something. Without an ``elicitation_handler`` toolwire
asks the person through the run: the call ends the step as ``awaiting_input`` (the executor's
:class:`~toolwire.errors.ToolAwaitingInput`), the run pauses, and the answer comes like a client tool's
output, from any process, over any API. Two ways back:

- **continued**: the call is still open in this process (the server awaits the answer on the same
  connection): the answer is sent to the server and the same call goes on;
- **made again**: after a restart, on another replica, or after :attr:`AskingCalls.wait` passed, the call
  is made again and each question the server asks again is answered from the stored answers, in order, as
  long as it is the same question; the first different one pauses the run again. A tool that does something
  before it asks does it again then: the continued way, when it is available, does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import ToolAwaitingInput
from toolwire.tools.context import RunContext
from toolwire.tools.pending import AnsweredQuestion, ElicitationAnswer, Question, Resume

logger = logging.getLogger("toolwire.tools.mcp")

CallKey = tuple[str, str]
"""``(session_id, tool_call_id)``: the call a question is asked for."""


@dataclass(eq=False, kw_only=True)
class AskingCall:
    """One tool call being served, which may ask questions."""

    ctx: RunContext[Any]
    """The run context of the run the call belongs to now (a continued call moves to the answering run)."""
    replay: list[AnsweredQuestion] = field(default_factory=list)
    """Earlier answers to give to the questions the server asks again, in order (a call made again)."""
    answered: list[AnsweredQuestion] = field(default_factory=list)
    """What this call asked and was answered so far, replayed answers included."""
    task: asyncio.Task[Any] | None = None
    asked: asyncio.Future[Question] | None = None
    """Set when the server asks a question nobody answered: the tool then pauses the run."""
    answer: asyncio.Future[ElicitationAnswer] | None = None
    waiting_on: Question | None = None
    deadline: asyncio.Timeout | None = None
    """The request's timeout: it does not run while a person is asked."""
    timeout: float = 0.0

    def hold_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.reschedule(None)

    def restart_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.reschedule(asyncio.get_running_loop().time() + self.timeout)


class AskingCalls:
    """The calls of one MCP server that may ask questions, by ``(session_id, tool_call_id)``."""

    def __init__(self, server: str, *, wait: float) -> None:
        self.server = server
        self.wait = wait
        """How long a call asking a question stays open in this process for the answer; after that the
        server is told ``cancel`` and a later answer makes the call again."""
        self._calls: dict[CallKey, AskingCall] = {}

    async def call(
        self,
        ctx: RunContext[Any],
        request_timeout: float,
        request: Callable[[AskingCall], Coroutine[Any, Any, Any]],
    ) -> Any:
        """Make the call (or continue the one open here, when ``ctx.resume`` answers its question) and
        return its result; raise :class:`ToolAwaitingInput` when the server asks a question nobody
        answered yet."""
        assert ctx.call is not None
        key = (ctx.session_id, ctx.call.tool_call_id)
        resume = ctx.resume
        current = self._calls.get(key)
        if current is not None and _continues(current, resume):
            assert resume is not None and current.answer is not None
            current.ctx = ctx
            current.asked = asyncio.get_running_loop().create_future()
            current.answer.set_result(resume.answers[-1][1])
        else:
            if current is not None:
                self._abandon(key, current)
            current = AskingCall(
                ctx=ctx, replay=list(resume.answers) if resume else [], timeout=request_timeout
            )
            current.asked = asyncio.get_running_loop().create_future()
            current.task = asyncio.create_task(request(current), name=f"{self.server} {key[1]}")
            current.task.add_done_callback(_quiet)
            self._calls[key] = current
        assert current.task is not None and current.asked is not None
        await asyncio.wait({current.task, current.asked}, return_when=asyncio.FIRST_COMPLETED)
        if current.task.done():
            if self._calls.get(key) is current:
                del self._calls[key]
            return current.task.result()
        question = current.asked.result()
        raise ToolAwaitingInput(question, answered=current.answered)

    def waits(self, ctx: RunContext[Any]) -> bool:
        """Whether the call ``ctx`` serves waits for a person's answer now."""
        current = self._calls.get((ctx.session_id, ctx.tool_call_id or ""))
        return current is not None and current.waiting_on is not None

    async def ask(self, key: CallKey, question: Question) -> ElicitationAnswer:
        """The server asks ``question`` while it serves the call ``key``: an earlier answer to the same
        question when the call is made again, else the person's, once the run that pauses for it gets it."""
        current = self._calls.get(key)
        if current is None or current.asked is None:
            return ElicitationAnswer(action="decline")  # no run to ask through
        if current.replay:
            earlier, answer = current.replay.pop(0)
            if _same(earlier, question):
                current.answered.append((question, answer))
                return answer
            current.replay.clear()  # the server asks something else now: the later answers are stale too
        loop = asyncio.get_running_loop()
        current.answer = loop.create_future()
        current.waiting_on = question
        current.hold_deadline()
        if not current.asked.done():
            current.asked.set_result(question)
        try:
            async with asyncio.timeout(self.wait):
                answer = await asyncio.shield(current.answer)
        except TimeoutError:
            logger.info(
                "%s: nobody answered %r within %gs; told the server cancel",
                self.server,
                question.message,
                self.wait,
            )
            if self._calls.get(key) is current:
                del self._calls[key]
            answer = ElicitationAnswer(action="cancel")
        current.waiting_on = None
        current.answered.append((question, answer))
        current.restart_deadline()
        return answer

    def close(self) -> None:
        """Forget every open call (the connection is closing): a later answer makes its call again."""
        for key, current in list(self._calls.items()):
            self._abandon(key, current)

    def _abandon(self, key: CallKey, current: AskingCall) -> None:
        if self._calls.get(key) is current:
            del self._calls[key]
        if current.answer is not None and not current.answer.done():
            current.answer.set_result(ElicitationAnswer(action="cancel"))
        if current.task is not None:
            current.task.cancel()


def _continues(current: AskingCall, resume: Resume | None) -> bool:
    """Whether ``resume`` answers the question this open call waits on."""
    return (
        resume is not None
        and bool(resume.answers)
        and current.waiting_on is not None
        and current.answer is not None
        and not current.answer.done()
        and current.task is not None
        and not current.task.done()
        and _same(resume.answers[-1][0], current.waiting_on)
        and len(resume.answers) == len(current.answered) + 1
    )


def _same(a: Question, b: Question) -> bool:
    """The same question: same text, mode, form and link (who asks is the same server)."""
    return (a.message, a.mode, dict(a.requested_schema), a.url) == (
        b.message,
        b.mode,
        dict(b.requested_schema),
        b.url,
    )


def _quiet(task: asyncio.Task[Any]) -> None:
    """An abandoned call's end is nobody's business: retrieve it so asyncio does not log it."""
    if not task.cancelled():
        with contextlib.suppress(BaseException):
            task.exception()
