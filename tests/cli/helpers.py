"""Running the ``toolwire`` command as a real subprocess (pipes or a pseudo-terminal) and reading its store."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pexpect

from toolwire.store import Store, open_store

REPO = Path(__file__).parents[2]
T = TypeVar("T")


def command_env(**extra: str) -> dict[str, str]:
    """The environment of a command under test: wide, colourless, the repository importable (test agents)."""
    # The tree under test first (its ``src`` too): an installed toolwire must not stand in for it.
    path = os.pathsep.join((str(REPO), str(REPO / "src")))
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", PYTHONPATH=path, **extra)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def toolwire(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=cwd,
        env=env or command_env(),
        timeout=120,
    )


def script(tmp_path: Path, turns: list[list[dict[str, Any]]], name: str = "script.json") -> str:
    """A scripted model file; returns the ``--model`` value."""
    path = tmp_path / name
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def call(tool_name: str, args: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "tool-call", "tool_call_id": call_id, "tool_name": tool_name, "args": args}


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def read_store(url: str, read: Callable[[Store], Awaitable[T]]) -> T:
    """Open the store the command wrote, read it, close it."""

    async def go() -> T:
        store = await open_store(url)
        try:
            return await read(store)
        finally:
            await store.close()

    return asyncio.run(go())


def spawn(*args: str, cwd: Path | None = None) -> pexpect.spawn:
    """The command on a real pseudo-terminal (a terminal stdin and stdout, Ctrl-C as SIGINT)."""
    env = command_env(TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "toolwire", *args],
        cwd=str(cwd) if cwd else None,
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
    )
    return child


def unreachable_base_url() -> str:
    """An OpenAI-compatible base URL on a loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]
