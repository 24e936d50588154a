"""Process faults with real processes and a real SQLite file: SIGKILL during a tool run and at random
moments (store writes included); on restart every session loads, interrupted calls are marked, and the
next turn builds a valid request on every adapter. Concurrent runs on one session are rejected."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, TextPart, open_store
from toolwire.errors import ProviderHTTPError, SessionBusyError
from toolwire.models.scripted import ScriptedModel
from toolwire.store import INTERRUPTED_OUTPUT

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def spawn(script: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def wait_for(path: Path, child: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert child.poll() is None, child.stderr.read() if child.stderr else "child exited"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        await asyncio.sleep(0.02)


async def next_turn_on_every_adapter(
    db: Path, session_id: str, tmp_path: Path
) -> dict[str, dict[str, object]]:
    """Copy the store per adapter, run the next turn, and return the request each adapter built."""
    built: dict[str, dict[str, object]] = {}
    for provider, factory in adapters(sent := []).items():
        copy = tmp_path / f"next-{provider}.db"
        for suffix in ("", "-wal", "-shm"):  # committed data may still sit in the WAL file
            if Path(f"{db}{suffix}").exists():
                shutil.copy(f"{db}{suffix}", f"{copy}{suffix}")
        store = await open_store(f"sqlite+aiosqlite:///{copy}")
        try:
            with pytest.raises(ProviderHTTPError):  # the capturing transport answers 400 once it has the body
                await Agent(factory(), store=store).run("Did it work?", session_id=session_id)
        finally:
            await store.close()
        built[provider] = sent[-1]
    return built


async def test_sigkill_during_a_tool_run_then_every_adapter_builds_a_valid_next_request(
    tmp_path: Path,
) -> None:
    db = tmp_path / "killed.db"
    marker = tmp_path / "tool-running"
    child = spawn(
        ROOT / "tests" / "agent" / "_child_run.py", f"sqlite+aiosqlite:///{db}", "k", "hang", str(marker)
    )
    await wait_for(marker, child)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)

    built = await next_turn_on_every_adapter(db, "k", tmp_path)
    for provider, body in built.items():
        assert unanswered_calls(provider, body) == [], provider
        assert "interrupted" in str(body), f"{provider}: the model must be told the call was interrupted"
        assert "call_42" in str(body) or provider == "gemini", (
            provider
        )  # Gemini may re-key ids; pairing is checked
    store = await open_store(f"sqlite+aiosqlite:///{db}")
    try:
        assert [r.status for r in await store.tool_calls("k")] == ["pending"]  # only the lock holder marks
        history = await store.load_history("k", mark_interrupted=True)
        assert history[-1].tool_results[0].output == INTERRUPTED_OUTPUT
        assert [r.status for r in await store.tool_calls("k")] == ["interrupted"]
    finally:
        await store.close()


async def test_sigkill_at_random_moments_never_leaves_a_session_unusable(tmp_path: Path) -> None:
    db = tmp_path / "churn.db"
    url = f"sqlite+aiosqlite:///{db}"
    rng = random.Random(1234)
    kills = 0
    for _ in range(4):  # bounded: four crash/restart cycles
        child = spawn(HERE / "_worker.py", url, "churn")
        assert child.stdout is not None
        first = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
        assert first.strip().isdigit(), child.stderr.read() if child.stderr else first
        await asyncio.sleep(rng.uniform(0.0, 0.25))  # anywhere: model step, tool run, store transaction
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        kills += 1
        store = await open_store(url)
        try:
            for n in range(4):
                history = await store.load_history(f"churn-{n}", mark_interrupted=True)
                for i, message in enumerate(history):
                    if message.role == "assistant" and message.tool_calls:
                        results = history[i + 1].tool_results
                        assert [r.tool_call_id for r in results] == [
                            c.tool_call_id for c in message.tool_calls
                        ]
                assert all(r.status != "pending" for r in await store.tool_calls(f"churn-{n}"))
            # a killed run's lock never blocks the next run
            model = ScriptedModel([[TextPart(text="still here")]])
            assert (await Agent(model, store=store).run("ping", session_id="churn-0")).output == "still here"
        finally:
            await store.close()
    assert kills == 4
    built = await next_turn_on_every_adapter(db, "churn-1", tmp_path)
    for provider, body in built.items():
        assert unanswered_calls(provider, body) == [], provider


async def test_concurrent_runs_on_the_same_session_from_two_processes_are_rejected(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    url = f"sqlite+aiosqlite:///{db}"
    marker = tmp_path / "hold"
    child = spawn(HERE / "_worker.py", url, "hold", str(marker))
    try:
        await wait_for(Path(str(marker) + ".started"), child)
        store = await open_store(url)
        try:
            agent = Agent(ScriptedModel([[TextPart(text="second")]]), store=store)
            with pytest.raises(SessionBusyError, match="busy"):
                await agent.run("me too", session_id="shared")
            Path(str(marker) + ".go").write_text("go")
            out, err = await asyncio.to_thread(child.communicate, timeout=60)
            assert child.returncode == 0, err
            assert out.strip() == "held"
            assert (await agent.run("me too", session_id="shared")).output == "second"
            roles = [m.role for m in await store.raw_messages("shared")]
            assert roles == [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
            ]  # never interleaved
        finally:
            await store.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
