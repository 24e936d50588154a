"""``toolwire chat``: a line editor with history (prompt_toolkit, loaded only here), one turn per line.

Ctrl-C while a turn runs cancels that turn (the loop records it as cancelled) and the chat goes on;
Ctrl-C or Ctrl-D at the prompt leaves, printing the session id to continue with ``--session``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from toolwire.cli._output import print_error, print_note, read_line
from toolwire.cli._turns import build_agent, close_agent, print_pending, say_if_new, stream_turn
from toolwire.errors import ToolwireError
from toolwire.store import Store

T = TypeVar("T")
PROMPT = "you> "
LineReader = Callable[[], Awaitable[str]]


class _Cancelled(Exception):
    """The user pressed Ctrl-C while a turn ran."""


async def chat(args: argparse.Namespace) -> int:
    if args.continue_last and args.session:
        raise ToolwireError("give --session ID or -c (the last session), not both")
    agent, store = await build_agent(args)
    session_id: str | None = args.session
    try:
        if args.continue_last:
            session_id = await _last_session(store)
        await say_if_new(store, session_id)
        read_line = _line_reader(await _past_prompts(store, session_id))
        print_note("toolwire chat: Ctrl-C stops a turn; Ctrl-D or Ctrl-C at the prompt quits")
        while True:
            try:
                prompt = await read_line()
            except (EOFError, KeyboardInterrupt):
                break
            if not prompt.strip():
                continue
            run = agent.stream(prompt, session_id=session_id)
            while run is not None:
                try:
                    session_id = await _interruptible(stream_turn(store, run))
                except _Cancelled:
                    session_id = run.session_id  # the loop keeps the cancelled turn
                    print_note("turn cancelled", style="yellow")
                    break
                except ToolwireError as exc:
                    print_error(exc)
                    if await store.get_session(run.session_id) is not None:
                        session_id = run.session_id  # kept: the model had answered before it failed
                    break
                # A paused run asks here; the answers resume it (a new turn with no prompt).
                run = _resume_after_asking(args, agent, run)
    finally:
        await close_agent(agent, store)
    if session_id is not None:
        print_note(f"session {session_id}")
    return 0


def _resume_after_asking(args: argparse.Namespace, agent: Any, run: Any) -> Any:
    """When ``run`` paused, ask about each waiting call and return the run that resumes it; else None.

    Approvals: ``y`` approves, anything else denies (what was typed is the reason the model reads).
    Client-side tools: the line typed is the output (JSON when it parses, else text). Ctrl-D leaves the
    calls waiting and prints the ``toolwire run`` command that answers them later.
    """
    import json

    from toolwire.tools.pending import Denied

    result = run.result
    if result is None or result.status != "paused":
        return None
    approvals: dict[Any, Any] = {}
    outputs: dict[Any, Any] = {}
    try:
        for call in result.pending:
            shown = f"{call.tool_name}({json.dumps(call.args)})"
            if call.kind == "approval":
                answer = read_line(f"approve {shown}? [y / a reason to deny] ").strip()
                approvals[call.tool_call_id] = True if answer.lower() in ("y", "yes") else Denied(answer)
            else:
                answer = read_line(f"output of {shown}: ")
                try:
                    outputs[call.tool_call_id] = json.loads(answer)
                except ValueError:
                    outputs[call.tool_call_id] = answer
    except (EOFError, KeyboardInterrupt):
        print_note("left waiting")
        print_pending(args, run.session_id, result.pending)
        return None
    return agent.stream(None, session_id=run.session_id, approvals=approvals, tool_outputs=outputs)


async def _interruptible(turn: Coroutine[Any, Any, T]) -> T:
    """Run ``turn`` as a task that Ctrl-C (SIGINT) cancels, raising :class:`_Cancelled` instead."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(turn)
    previous = signal.getsignal(signal.SIGINT)
    loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if task.cancelled() and (current is None or current.cancelling() == 0):
            raise _Cancelled from None
        raise  # the chat itself is being cancelled
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)  # asyncio.run's own handler, for the rest of the chat


async def _last_session(store: Store) -> str | None:
    """The conversation updated last (sub-agents' sessions aside); ``None`` starts a new one."""
    latest = await store.list_sessions(limit=1, top_level=True)
    if not latest:
        print_note("no session to continue: starting a new one", style="yellow")
        return None
    print_note(f"continuing session {latest[0].id}" + (f" ({latest[0].title})" if latest[0].title else ""))
    return latest[0].id


async def _past_prompts(store: Store, session_id: str | None) -> list[str]:
    if session_id is None:
        return []
    return [m.text for m in await store.raw_messages(session_id) if m.role == "user" and m.text]


def _line_reader(history: Sequence[str]) -> LineReader:
    """prompt_toolkit on a terminal (line editing, the session's earlier prompts as history); plain
    ``input()`` when stdin or stdout is not one (scripts, pipes)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory

        memory = InMemoryHistory()
        for line in history:
            memory.append_string(line)
        session: PromptSession[str] = PromptSession(history=memory)

        async def edit() -> str:
            return await session.prompt_async(PROMPT)

        return edit

    async def plain() -> str:
        return read_line(PROMPT)

    return plain
