"""Crash recovery and cross-process continuation, with real processes and a real SQLite file."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from toolwire import Agent, TextPart, open_store
from toolwire.models.scripted import ScriptedModel
from toolwire.store import INTERRUPTED_OUTPUT

CHILD = Path(__file__).with_name("_child_run.py")


def _spawn(url: str, session_id: str, mode: str, marker: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    return subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, mode, str(marker)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def test_sigkill_during_a_tool_run_leaves_a_repairable_history(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'crash.db'}"
    marker = tmp_path / "tool-running"
    child = _spawn(url, "crash-session", "hang", marker)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else "child exited"
        assert time.monotonic() < deadline, "the child never started its tool"
        await asyncio.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL

    store = await open_store(url)
    try:
        rows = await store.tool_calls("crash-session")
        assert [(r.tool_call_id, r.status) for r in rows] == [("call_42", "pending")]
        history = await store.load_history("crash-session", mark_interrupted=True)
        assert [m.role for m in history] == ["user", "assistant", "tool"]
        (result,) = history[2].tool_results
        assert (result.tool_call_id, result.output, result.is_error) == ("call_42", INTERRUPTED_OUTPUT, True)
        assert [r.status for r in await store.tool_calls("crash-session")] == ["interrupted"]

        model = ScriptedModel([[TextPart(text="The lookup was interrupted; let me know if I should retry.")]])
        await Agent(model, store=store).run("Did it work?", session_id="crash-session")
        sent = model.requests[0].messages
        assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
        assert sent[1].tool_calls[0].provider_metadata == {
            "google": {"thoughtSignature": "c2lnLWZyb20tY2hpbGQ="}
        }
        assert sent[2].tool_results[0].is_error
    finally:
        await store.close()


async def test_a_new_process_continues_the_conversation_with_tool_calls_and_results(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'follow.db'}"
    child = _spawn(url, "follow-session", "turn", tmp_path / "unused")
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err.decode()
    assert out.decode().strip() == "It shipped with Nordpost."

    store = await open_store(url)
    try:
        model = ScriptedModel([[TextPart(text="Nordpost.")]])
        await Agent(model, store=store).run("Which carrier was it?", session_id="follow-session")
        sent = model.requests[0].messages
        assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
        call = sent[1].tool_calls[0]
        assert (call.tool_call_id, call.tool_name, call.args) == ("call_42", "lookup", {"order_id": "A-1"})
        assert call.provider_metadata == {"google": {"thoughtSignature": "c2lnLWZyb20tY2hpbGQ="}}
        assert sent[2].tool_results[0].output == {
            "order_id": "A-1",
            "status": "shipped",
            "carrier": "Nordpost",
        }
    finally:
        await store.close()
