"""The ``toolwire`` command: run, chat, demo, sessions, serve. Sync edge over the async core."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from toolwire import __version__
from toolwire.agent.agent import Agent
from toolwire.errors import MissingExtraError, ToolwireError
from toolwire.events import (
    AgentEvent,
    ErrorEvent,
    InteractionEnd,
    MediaEvent,
    ReasoningDeltaEvent,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    ToolCallActive,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolInputStartEvent,
    ToolProgress,
)
from toolwire.messages import Message, ToolResultPart
from toolwire.pricing import total_cost
from toolwire.store import DEFAULT_URL, open_store

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        result: int = asyncio.run(args.handler(args))
        return result
    except ToolwireError as exc:
        err_console.print(f"[red]error:[/red] {escape(_one_line(exc))}")
        return 1
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]")
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolwire", description="LLM tool calling, the same on every provider."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command")

    def agent_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="local | scripted:FILE.json | openai:MODEL | anthropic:MODEL | ...")
        p.add_argument("--store", default=DEFAULT_URL, help=f"store URL (default {DEFAULT_URL})")
        p.add_argument("--agent", help="module:attribute naming an Agent (default: the support-desk demo)")

    run = sub.add_parser("run", help="run one prompt and stream the answer")
    run.add_argument("prompt")
    run.add_argument("--session", help="continue this session id")
    agent_options(run)
    run.set_defaults(handler=_cmd_run)

    chat = sub.add_parser("chat", help="interactive chat (streams, shows tool activity)")
    chat.add_argument("--session", help="continue this session id")
    agent_options(chat)
    chat.set_defaults(handler=_cmd_chat)

    demo = sub.add_parser("demo", help="the support-desk demo: two questions, one session")
    agent_options(demo)
    demo.set_defaults(handler=_cmd_demo)

    sessions = sub.add_parser("sessions", help="inspect stored sessions")
    ssub = sessions.add_subparsers(dest="sessions_command", required=True)
    slist = ssub.add_parser("list", help="list sessions")
    slist.add_argument("--store", default=DEFAULT_URL)
    slist.add_argument("--limit", type=int, default=50)
    slist.set_defaults(handler=_cmd_sessions_list)
    sshow = ssub.add_parser("show", help="show a session's transcript with its tool calls")
    sshow.add_argument("session_id")
    sshow.add_argument("--store", default=DEFAULT_URL)
    sshow.set_defaults(handler=_cmd_sessions_show)

    serve = sub.add_parser(
        "serve", help="serve an agent over HTTP (AI SDK UI stream, native events, web page)"
    )
    serve.add_argument("agent_ref", nargs="?", help="module:attribute naming an Agent (default: demo)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model")
    serve.add_argument("--store", default=DEFAULT_URL)
    serve.add_argument("--tokens", help="file of 'TOKEN USER_ID' lines (bearer auth); also TOOLWIRE_TOKENS")
    serve.add_argument(
        "--ai-sdk-version",
        help="AI SDK client version to speak to, e.g. 5.0.200 (default: the newest 6.x)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (scheme://host[:port]) whose pages may use this server; repeatable",
    )
    serve.add_argument("--max-connections", type=int, help="open connections at most (default 1000)")
    serve.add_argument(
        "--header-timeout", type=float, default=10.0, help="seconds to send a request head (default 10)"
    )
    serve.set_defaults(handler=_cmd_serve)
    return parser


# -- agent construction -----------------------------------------------------------------------------


async def _build_agent(args: argparse.Namespace) -> Agent[Any, Any]:
    from toolwire.models import infer_model

    model = infer_model(args.model) if args.model else None
    store = await open_store(args.store)
    ref = getattr(args, "agent", None) or getattr(args, "agent_ref", None)
    if ref:
        return _load_agent(ref).override(model=model, store=store)
    from toolwire.demo.support_desk import build_agent

    return build_agent(model=model, store=store)


def _load_agent(ref: str) -> Agent[Any, Any]:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ToolwireError(f"agent reference {ref!r} must look like 'module:attribute'")
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


# -- rendering ----------------------------------------------------------------------------------------


class EventPrinter:
    """Renders agent events live: streamed text, tool notifications with a spinner while tools run."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.status: Status | None = None
        self.running: dict[tuple[str, str], tuple[str, float]] = {}
        self.depth: dict[str, int] = {}
        self.at_line_start = True

    def _indent(self, event: AgentEvent) -> str:
        parent = event.parent_session_id
        if event.session_id not in self.depth:
            self.depth[event.session_id] = self.depth.get(parent, 0) + 1 if parent else 0
        return "  " * self.depth[event.session_id]

    def _newline(self) -> None:
        if not self.at_line_start:
            self.out.print()
            self.at_line_start = True

    def _update_status(self) -> None:
        if not self.running:
            if self.status is not None:
                self.status.stop()
                self.status = None
            return
        now = time.time()
        text = ", ".join(f"{name} ({now - started:.1f}s)" for name, started in self.running.values())
        if self.status is None:
            self.status = self.out.status(f"running {escape(text)}", spinner="dots")
            self.status.start()
        else:
            self.status.update(f"running {escape(text)}")

    def __call__(self, event: AgentEvent) -> None:
        indent = self._indent(event)
        match event:
            case TextDeltaEvent():
                if self.at_line_start:
                    self.out.print(indent, end="")
                self.out.print(escape(event.delta), end="")
                self.at_line_start = event.delta.endswith("\n")
            case TextEndEvent():
                self._newline()
            case ReasoningDeltaEvent():
                self.out.print(f"[dim]{escape(event.delta)}[/dim]", end="")
                self.at_line_start = False
            case ToolInputStartEvent():
                self._newline()
                self.out.print(f"{indent}[cyan]◇ preparing {escape(event.tool_name)}[/cyan]")
            case ToolCallActive():
                self._newline()
                args = json.dumps(event.args, ensure_ascii=False)
                self.out.print(
                    f"{indent}[cyan]▶ {escape(event.tool_name)}[/cyan]({escape(_clip(args, 200))})"
                )
                self.running[(event.session_id, event.tool_call_id)] = (event.tool_name, event.started_at)
                self._update_status()
            case ToolCallHeartbeat() | ToolProgress():
                self._update_status()
            case ToolCallComplete():
                self.running.pop((event.session_id, event.tool_call_id), None)
                self._update_status()
                output = (
                    event.output if isinstance(event.output, str) else json.dumps(event.output, default=str)
                )
                mark = "[red]✗[/red]" if event.is_error else "[green]✓[/green]"
                self.out.print(
                    f"{indent}{mark} {escape(event.tool_name)} → {escape(_clip(output, 300))} "
                    f"[dim]({event.duration:.2f}s)[/dim]"
                )
            case SystemMessageEvent():
                self._newline()
                self.out.print(f"{indent}[yellow]{event.level}: {escape(event.text)}[/yellow]")
            case MediaEvent():
                self._newline()
                self.out.print(
                    f"{indent}[magenta]media {escape(event.content_type)} {escape(event.url or '')}[/]"
                )
            case ErrorEvent():
                self._newline()
                self.out.print(f"{indent}[red]error: {escape(event.message)}[/red]")
            case InteractionEnd():
                self._newline()
            case _:
                pass

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


async def _stream_turn(agent: Agent[Any, Any], prompt: str, session_id: str | None) -> str:
    printer = EventPrinter(console)
    try:
        async with agent.stream(prompt, session_id=session_id) as run:
            async for event in run:
                printer(event)
    finally:
        printer.close()
    return run.session_id


# -- commands -------------------------------------------------------------------------------------------


async def _cmd_run(args: argparse.Namespace) -> int:
    agent = await _build_agent(args)
    try:
        session_id = await _stream_turn(agent, args.prompt, args.session)
        err_console.print(f"[dim]session {session_id}[/dim]")
    finally:
        await agent.aclose()
    return 0


async def _cmd_demo(args: argparse.Namespace) -> int:
    from toolwire.demo.support_desk import DEMO_QUESTIONS

    agent = await _build_agent(args)
    session_id: str | None = None
    try:
        for question in DEMO_QUESTIONS:
            console.print(f"\n[bold]you:[/bold] {escape(question)}")
            started = time.perf_counter()
            session_id = await _stream_turn(agent, question, session_id)
            console.print(f"[dim]turn took {time.perf_counter() - started:.1f}s[/dim]")
        store = await agent.get_store()
        calls = [r for r in await store.tool_calls(session_id or "")]
        console.print(f"\n[dim]session {session_id}: {len(calls)} tool call(s) stored in {args.store}[/dim]")
        for record in calls:
            console.print(f"[dim]  {record.tool_name}({json.dumps(record.args)}) -> {record.status}[/dim]")
        if not calls:
            console.print("[yellow]The model answered without calling a tool this time.[/yellow]")
    finally:
        await agent.aclose()
    return 0


async def _cmd_chat(args: argparse.Namespace) -> int:
    agent = await _build_agent(args)
    session_id: str | None = args.session
    console.print("[dim]toolwire chat — empty line or Ctrl-D to quit[/dim]")
    try:
        while True:
            try:
                prompt = await asyncio.to_thread(input, "you> ")
            except EOFError:
                break
            if not prompt.strip():
                break
            session_id = await _stream_turn(agent, prompt, session_id)
    finally:
        await agent.aclose()
    if session_id:
        err_console.print(f"[dim]session {session_id}[/dim]")
    return 0


async def _cmd_sessions_list(args: argparse.Namespace) -> int:
    store = await open_store(args.store)
    try:
        sessions = await store.list_sessions(limit=args.limit)
        if not sessions:
            console.print("no sessions")
        for info in sessions:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.updated_at))
            parent = f" (sub-session of {info.parent_session_id})" if info.parent_session_id else ""
            console.print(
                f"{info.id}  {when}  tokens in/out {info.usage.input_tokens}/{info.usage.output_tokens}{parent}"
            )
    finally:
        await store.close()
    return 0


async def _cmd_sessions_show(args: argparse.Namespace) -> int:
    store = await open_store(args.store)
    try:
        info = await store.get_session(args.session_id)
        if info is None:
            raise ToolwireError(f"no session {args.session_id!r} in {args.store}")
        history = await store.load_history(args.session_id)
        render_history(history, console)
        usage = info.usage
        console.print(
            f"[dim]usage: {usage.input_tokens} input + {usage.output_tokens} output tokens, "
            f"{usage.requests} request(s){await _session_cost(store, args.session_id, history)}[/dim]"
        )
    finally:
        await store.close()
    return 0


async def _session_cost(store: Any, session_id: str, history: Sequence[Message]) -> str:
    """ ", cost $X" from the per-step usage kept on stored steps, priced per answering model."""
    steps = getattr(store, "steps", None)
    if steps is None:
        return ""
    by_id = {m.id: m for m in history}
    priced = [
        (by_id[s.message_id].provider, by_id[s.message_id].model, s.usage)
        for s in await steps(session_id)
        if s.message_id in by_id
    ]
    cost = total_cost(priced)
    return ", cost unknown (no price for a model)" if cost is None else f", cost ${cost:.6f}"


def render_history(history: Sequence[Message], out: Console) -> None:
    """Print a stored history: each tool call with its result under the assistant message that made it."""
    results: dict[str, ToolResultPart] = {}
    for message in history:
        for result in message.tool_results:
            results[result.tool_call_id] = result
    for message in history:
        if message.role == "user":
            out.print(f"[bold]user:[/bold] {escape(message.text)}")
        elif message.role == "system":
            out.print(f"[yellow]system:[/yellow] {escape(message.text)}")
        elif message.role == "assistant":
            text = escape(message.text) if message.text else "[dim](tool calls)[/dim]"
            out.print(f"[bold]assistant:[/bold] {text}")
            for call in message.tool_calls:
                found = results.get(call.tool_call_id)
                out.print(f"  [cyan]▶ {escape(call.tool_name)}[/cyan]({escape(_clip(call.args_json, 200))})")
                if found is not None:
                    output = found.output_text()
                    mark = "[red]✗[/red]" if found.is_error else "[green]✓[/green]"
                    out.print(f"    {mark} {escape(_clip(output, 400))}")


async def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        server = importlib.import_module("toolwire.server")
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "toolwire":
            raise  # a bug in toolwire itself, not a missing extra
        raise MissingExtraError("server", "the server", missing=exc.name) from exc
    limits = server.Limits(max_connections=args.max_connections, header_timeout=args.header_timeout)
    agent = await _build_agent(args)
    # The command owns the process's logging; the library only logs (``toolwire.server`` at INFO).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
