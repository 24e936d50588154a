"""``--agent module:attr`` and ``serve module:attr`` from the current directory, as the installed ``toolwire``
script runs them; an application's agent on a keyed provider imports without the key, so ``--model`` swaps it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.cli.helpers import command_env, sqlite_url

SCRIPT = Path(sys.executable).parent / "toolwire"
"""The console script pip installs: unlike ``python -m``, it does not put the current directory on the path."""

APP = '''
import toolwire

@toolwire.tool(requires_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"

agent = toolwire.Agent("openai:gpt-4o", tools=[refund], name="shop")
'''
"""An application module: its agent names OpenAI, whose key the tests never set."""


def script_env() -> dict[str, str]:
    env = command_env()
    env.pop("OPENAI_API_KEY", None)
    return env


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=script_env(), capture_output=True, text=True, timeout=120
    )


def test_run_imports_the_agent_from_the_current_directory_without_its_key(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(APP)
    (tmp_path / "hello.json").write_text('[[{"type": "text", "text": "Hello from the script."}]]')
    store = sqlite_url(tmp_path / "t.db")
    done = run_script(
        "run", "hi", "--agent", "shop:agent", "--model", "scripted:hello.json", "--store", store, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the script.\n"
    # Without --model the agent's own model is built when the run starts: the missing key is one clear line.
    unused = sqlite_url(tmp_path / "unused.db")
    keyless = run_script("run", "hi", "--agent", "shop:agent", "--store", unused, cwd=tmp_path)
    assert keyless.returncode == 1 and not (tmp_path / "unused.db").exists()
    assert (
        keyless.stderr.strip()
        == "error: no OpenAI API key: set OPENAI_API_KEY (in the environment or ./.env)"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_imports_the_agent_from_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(APP)
    (tmp_path / "hello.json").write_text('[[{"type": "text", "text": "Served."}]]')
    port = _free_port()
    log = tmp_path / "serve.log"
    command = [str(SCRIPT), "serve", "shop:agent", "--port", str(port), "--model", "scripted:hello.json"]
    command += ["--store", sqlite_url(tmp_path / "t.db")]
    with log.open("wb") as sink:
        server = subprocess.Popen(
            command, cwd=tmp_path, env=script_env(), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while True:  # wait for the server to answer (or to die: a failed import exits at once)
            assert server.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the server did not start"
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert health.status_code == 200
        started = httpx.post(f"http://127.0.0.1:{port}/api/sessions", json={}, timeout=10)
        assert started.status_code in (200, 201), started.text
    finally:
        server.terminate()
        server.wait(30)
    assert os.path.exists(tmp_path / "t.db")
