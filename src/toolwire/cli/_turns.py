"""Commands that run an agent: ``run``, ``demo``, ``serve``, and the turn that ``chat`` repeats."""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from toolwire.agent.agent import Agent
from toolwire.agent.loop import AgentRun
from toolwire.cli._output import EventPrinter, console, err_console, loading, print_note
from toolwire.errors import MissingExtraError, ToolwireError
from toolwire.store import DEFAULT_URL, Store, open_store

if TYPE_CHECKING:
    from toolwire.tools.pending import DecisionKey


async def build_agent(args: argparse.Namespace) -> tuple[Agent[Any, Any], Store]:
    """The agent of ``--agent`` (or the demo) on ``--model`` and ``--store``; the caller closes both."""
    from toolwire.models import infer_model

    # Everything that can be refused without the store comes first: a bad model or agent creates no file.
    ref = getattr(args, "agent", None) or getattr(args, "agent_ref", None)
    with loading("loading the model…"):  # the embedded model imports llama.cpp and finds its weights
        spec = model_spec(args.model)
        model = infer_model(spec) if spec else None
        loaded = _load_agent(ref) if ref else None
        if loaded is not None and model is None:
            _ = loaded.model  # its own model, built now: a missing key is refused before the store opens
    store = await open_store(args.store or DEFAULT_URL)
    try:
        if loaded is not None:
            return loaded.override(model=model, store=store), store
        from toolwire.demo.support_desk import build_agent as build_demo

        with loading("loading the model…"):
            return build_demo(model=model, store=store), store
    except BaseException:
        await store.close()
        raise


async def close_agent(agent: Agent[Any, Any], store: Store) -> None:
    try:
        await agent.aclose()
    finally:
        await store.close()  # given to the agent as an object, so the agent leaves it open


def model_spec(values: Sequence[str] | str | None) -> str | list[str] | None:
    """``--model`` as given (repeated, or with commas) as ``infer_model`` takes it: one model string, or a
    list for a :class:`~toolwire.models.fallback.FallbackModel` (the first, then the next on a failure)."""
    if values is None:
        return None
    names = [n.strip() for v in ([values] if isinstance(values, str) else values) for n in v.split(",")]
    names = [n for n in names if n]
    if not names:
        return None
    return names[0] if len(names) == 1 else names


def _load_agent(ref: str) -> Agent[Any, Any]:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ToolwireError(f"agent reference {ref!r} must look like 'module:attribute'")
    # As uvicorn and flask do: the module may sit in the current directory. The installed ``toolwire``
    # script's own directory is first on the path, not the current one (``python -m`` has it already).
    here = str(Path.cwd())
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolwireError(f"cannot import {module_name!r}: {exc}") from exc
    agent = getattr(module, attr, None)
    if callable(agent) and not isinstance(agent, Agent):
        agent = agent()
    if not isinstance(agent, Agent):
        raise ToolwireError(f"{ref} is not a toolwire.Agent")
    return agent


async def say_if_new(store: Store, session_id: str | None) -> None:
    """A ``--session`` that names no stored session (a typo?) starts a new one: say so."""
    if session_id and await store.get_session(session_id) is None:
        print_note(
            f"no session {session_id!r} in the store: starting a new session with that id", style="yellow"
        )


async def stream_turn(store: Store, run: AgentRun[Any]) -> str:
    """Run one turn (``agent.stream(...)``), printing its events; return the session id.

    A turn that fails in a session it created (a provider error on the first turn, say) before the model
    answered anything leaves no session behind: it is deleted. A cancelled turn is kept (the loop
    records it as cancelled).
    """
    existed = await store.get_session(run.session_id) is not None
    # Piped, stdout is the answer alone: tool activity, reasoning and sub-agents' words go to stderr.
    printer = EventPrinter(console, run.session_id, activity=console if console.is_terminal else err_console)
    try:
        async with run:  # (the loop titles a new conversation by its first prompt)
            async for event in run:
                printer(event)
    except Exception:
        if not existed:
            await _discard_unanswered(store, run.session_id)
        raise
    finally:
        printer.close()
    if printer.error is not None:  # the loop raises after its error event; this is a safety net
        raise ToolwireError(printer.error)
    return run.session_id


async def _discard_unanswered(store: Store, session_id: str) -> None:
    try:
        messages = await store.raw_messages(session_id)
        if not any(m.role == "assistant" for m in messages):
            await store.delete_session(session_id)
    except ToolwireError as exc:  # the run's own error is the one to report
        print_note(f"could not remove the failed session {session_id}: {exc}")


async def run(args: argparse.Namespace) -> int:
    approvals, outputs = _answers(args)
    if args.prompt is None and not (approvals or outputs):
        raise ToolwireError("give a prompt, or answers (--approve / --deny / --output) for waiting calls")
    if (approvals or outputs) and not args.session:
        raise ToolwireError("answers need the --session of the waiting calls")
    agent, store = await build_agent(args)
    try:
        await say_if_new(store, args.session)
        turn = agent.stream(
            args.prompt, session_id=args.session, approvals=approvals or None, tool_outputs=outputs or None
        )
        session_id = await stream_turn(store, turn)
        print_note(f"session {session_id}")
        if turn.result is not None and turn.result.status == "paused":
            print_pending(args, session_id, turn.result.pending)
            return 3
    finally:
        await close_agent(agent, store)
    return 0


def _answers(args: argparse.Namespace) -> tuple[dict[DecisionKey, Any], dict[DecisionKey, Any]]:
    """``--approve ID``, ``--deny ID[:reason]``, ``--output ID=JSON`` as the loop's answers."""
    from toolwire.tools.pending import Denied

    approvals: dict[DecisionKey, Any] = dict.fromkeys(args.approve, True)
    for given in args.deny:
        call_id, _, reason = given.partition(":")
        approvals[call_id] = Denied(reason) if reason else False
    outputs: dict[DecisionKey, Any] = {}
    for given in args.output:
        call_id, sep, raw = given.partition("=")
        if not sep or not call_id:
            raise ToolwireError(f"--output {given!r} must look like CALL_ID=VALUE")
        try:
            outputs[call_id] = json.loads(raw)
        except ValueError:
            outputs[call_id] = raw  # plain text is a string output
    return approvals, outputs


def print_pending(args: argparse.Namespace, session_id: str, pending: Any) -> None:
    """What the paused run waits for, and the command that answers all of it, ready to paste: it names
    the same agent, model and store, approves every call awaiting approval and gives every client tool
    an output to fill in (``--deny ID:REASON`` refuses instead)."""
    print_note("the run is waiting for you:", style="yellow")
    answers: list[str] = []
    for call in pending:
        what = "approve or deny" if call.kind == "approval" else "give its output"
        print_note(f"  {call.tool_call_id}: {call.tool_name}({json.dumps(call.args)}) - {what}")
        if call.kind == "approval":
            answers += ["--approve", call.tool_call_id]
        else:
            answers += ["--output", f"{call.tool_call_id}=VALUE"]
    if not answers:
        return
    command = ["toolwire", "run", "--session", session_id, *answers]
    for option in ("agent", "model", "store"):
        if value := getattr(args, option, None):
            command += [f"--{option}", ",".join(value) if isinstance(value, list) else value]
    print_note(f"resume with: {shlex.join(command)}")
    print_note("  (--deny CALL_ID:REASON refuses a call; --output takes JSON or plain text)")


async def demo(args: argparse.Namespace) -> int:
    from toolwire.demo.support_desk import DEMO_QUESTIONS

    agent, store = await build_agent(args)
    session_id: str | None = None
    try:
        for question in DEMO_QUESTIONS:
            console.print()
            console.print(Text.assemble(("you:", "bold"), " ", question), soft_wrap=True)
            started = time.perf_counter()
            session_id = await stream_turn(store, agent.stream(question, session_id=session_id))
            console.print(Text(f"turn took {time.perf_counter() - started:.1f}s", style="dim"))
        calls = await store.tool_calls(session_id or "")
        console.print()
        stored = f"session {session_id}: {len(calls)} tool call(s) stored in {args.store or DEFAULT_URL}"
        console.print(Text(stored, "dim"), soft_wrap=True)
        for record in calls:
            line = f"  {record.tool_name}({json.dumps(record.args)}) -> {record.status}"
            console.print(Text(line, style="dim"), soft_wrap=True)
        if not calls:
            console.print(Text("The model answered without calling a tool this time.", style="yellow"))
    finally:
        await close_agent(agent, store)
    return 0


async def serve(args: argparse.Namespace) -> int:
    try:
        server = importlib.import_module("toolwire.server")
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "toolwire":
            raise  # a bug in toolwire itself, not a missing extra
        raise MissingExtraError("server", "the server", missing=exc.name) from exc
    limits = server.Limits(max_connections=args.max_connections, header_timeout=args.header_timeout)
    agent, _store = await build_agent(args)
    await server.serve(
        agent,
        host=args.host,
        port=args.port,
        tokens_file=args.tokens,
        ai_sdk_version=args.ai_sdk_version,
        allow_origins=args.allow_origin,
        limits=limits,
    )
    return 0
