"""The ``toolwire`` command: run, chat, demo, sessions, models, serve, mcp. Sync edge over the async core.

Only the argument parser is built at import; each command imports what it needs when it runs, so
``toolwire --help`` stays fast. The command owns the process's logging (``--log-level``) and reads a
``.env`` file of the current directory for provider keys, and nothing else (variables already set win).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, cast

from toolwire.errors import ToolwireError

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
STORE_HELP = "store URL (default: the SQLite file ./toolwire.db)"
MODEL_HELP = (
    "local | scripted:FILE.json | openai:MODEL | anthropic:MODEL | ...; several (a,b,c or --model repeated): "
    "the first, failing over to the next (FallbackModel)"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    _configure_logging(getattr(args, "log_level", None), args.command)
    _load_env_file(Path.cwd() / ".env")
    handler = _handler(args.handler)
    import asyncio  # here, not at the top: ``--help`` does not need it

    try:
        return asyncio.run(handler(args))
    except ToolwireError as exc:
        from toolwire.cli._output import print_error

        print_error(exc)
        return 1
    except KeyboardInterrupt:
        from toolwire.cli._output import print_note

        print_note("interrupted", style="yellow")
        return 130


# Read from ``./.env`` beside the key variables ``toolwire models`` lists: the rest of an AWS access key.
_KEY_COMPANIONS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _load_env_file(path: Path) -> None:
    """Provider keys from a ``.env`` file; a variable already set in the environment is never replaced.

    Only the key variables ``toolwire models`` lists are read. A ``.env`` sits in whatever directory the
    command runs in (a cloned repository, a download): anything else in it could add a bearer token
    ``serve`` accepts (``TOOLWIRE_TOKENS``), route every request through a proxy (``HTTPS_PROXY``) or
    point a provider at another host, so it is ignored, with a warning naming it.
    """
    if not path.is_file():
        return
    import os

    from dotenv import dotenv_values

    from toolwire.cli._models import rows

    keys = {name for row in rows() for name in row.key_variables} | set(_KEY_COMPANIONS)
    ignored: list[str] = []
    for name, value in dotenv_values(path).items():
        if name not in keys:
            ignored.append(name)
        elif value is not None and name not in os.environ:
            os.environ[name] = value
    if ignored:
        logging.getLogger("toolwire.cli").warning(
            "%s: ignored %s (only provider keys are read from it: see `toolwire models`)",
            path,
            ", ".join(sorted(ignored)),
        )


def _configure_logging(level: str | None, command: str) -> None:
    # The library only logs; the command decides where it goes. The server logs its requests at INFO.
    chosen = level or ("info" if command == "serve" else "warning")
    fmt = "%(asctime)s " if command == "serve" else ""
    logging.basicConfig(
        level=chosen.upper(), format=fmt + "%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


def _handler(ref: str) -> Handler:
    module, _, name = ref.partition(":")
    return cast(Handler, getattr(importlib.import_module(f"toolwire.cli.{module}"), name))


class _Version(argparse.Action):
    """``--version``, computed only when asked for (reading the distribution's metadata takes a while)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import toolwire

        print(f"{parser.prog} {toolwire.__version__}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # Accepted before the command and after it; SUPPRESS keeps a later default from hiding an earlier value.
    common.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="log level (default: warning; info for serve)",
    )
    parser = argparse.ArgumentParser(
        prog="toolwire", description="LLM tool calling, the same on every provider.", parents=[common]
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command")

    def command(
        name: str, handler: str, help: str, description: str | None = None
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=description, parents=[common])
        p.set_defaults(handler=handler)
        return p

    def agent_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", action="append", help=MODEL_HELP)
        p.add_argument("--store", help=STORE_HELP)
        p.add_argument(
            "--agent",
            help="module:attribute naming an Agent, imported from the current directory (default: the demo)",
        )

    run = command("run", "_turns:run", "run one prompt and stream the answer")
    run.add_argument("prompt", nargs="?", help="the prompt (optional when answering waiting calls)")
    run.add_argument("--session", help="continue this session id (a new session if there is none)")
    run.add_argument(
        "--approve", action="append", default=[], metavar="CALL_ID", help="approve a waiting call"
    )
    run.add_argument(
        "--deny", action="append", default=[], metavar="CALL_ID[:REASON]", help="deny a waiting call"
    )
    run.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="CALL_ID=JSON",
        help="the output of a waiting client-side tool (JSON, or plain text)",
    )
    agent_options(run)

    chat = command(
        "chat",
        "_chat:chat",
        "interactive chat (line editing, history, streams, shows tool activity)",
        description="Interactive chat. Ctrl-C stops the running turn; Ctrl-C or Ctrl-D at the prompt quits.",
    )
    chat.add_argument("--session", help="continue this session id (a new session if there is none)")
    chat.add_argument(
        "-c", "--continue", dest="continue_last", action="store_true", help="continue the last session"
    )
    agent_options(chat)

    demo = command("demo", "_turns:demo", "the support-desk demo: two questions, one session")
    agent_options(demo)

    sessions = sub.add_parser(
        "sessions", help="list, show, rename and delete stored sessions", parents=[common]
    )
    ssub = sessions.add_subparsers(dest="sessions_command", required=True)
    slist = ssub.add_parser("list", help="list sessions: title, last update, message count", parents=[common])
    slist.add_argument("--store", help=STORE_HELP)
    slist.add_argument("--limit", type=int, default=50)
    slist.set_defaults(handler="_sessions:list_sessions")
    sshow = ssub.add_parser("show", help="show a session's transcript with its tool calls", parents=[common])
    sshow.add_argument("session_id")
    sshow.add_argument("--store", help=STORE_HELP)
    sshow.set_defaults(handler="_sessions:show_session")
    sdelete = ssub.add_parser("delete", help="delete a session and its sub-agent sessions", parents=[common])
    sdelete.add_argument("session_id")
    sdelete.add_argument("--store", help=STORE_HELP)
    sdelete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    sdelete.set_defaults(handler="_sessions:delete_session")
    srename = ssub.add_parser("rename", help="rename a session (live watchers see it)", parents=[common])
    srename.add_argument("session_id")
    srename.add_argument("title")
    srename.add_argument("--store", help=STORE_HELP)
    srename.set_defaults(handler="_sessions:rename_session")

    command("models", "_models:list_models", "list providers: base URL, key variable, whether it is set")

    mcp = command(
        "mcp",
        "_mcp:mcp",
        "serve an agent to an MCP host (Claude Desktop, Cursor, ...) over stdio",
        description="Serve the agent as one MCP tool on stdin/stdout (for an MCP host's config). "
        "Conversations are stored like `toolwire run`'s (--store), as the local user.",
    )
    mcp.add_argument(
        "agent_ref",
        nargs="?",
        help="module:attribute naming an Agent, from the current directory (default: demo)",
    )
    mcp.add_argument("--model", help="local | scripted:FILE.json | openai:MODEL | anthropic:MODEL | ...")
    mcp.add_argument("--store", help=STORE_HELP)
    mcp.add_argument(
        "--expose-tools", action="store_true", help="also list the agent's own tools, each callable directly"
    )

    serve = command(
        "serve", "_turns:serve", "serve an agent over HTTP (AI SDK UI stream, native events, web page)"
    )
    serve.add_argument(
        "agent_ref",
        nargs="?",
        help="module:attribute naming an Agent, from the current directory (default: demo)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model", action="append", help=MODEL_HELP)
    serve.add_argument("--store", help=STORE_HELP)
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
    return parser


__all__ = ["main"]
