"""A paused run lives in the store only: killed between the pause and the answers (SIGKILL, SQLite), or
answered by another replica (another process, PostgreSQL), the answers resume it where it stopped, and
the continuation request carries the paused calls' provider metadata and every result in call order."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import POSTGRES_ENV
from tests.security.conftest import _schema as create_or_drop
from toolwire import open_store

WORKER = Path(__file__).with_name("_pause_worker.py")
ROOT = Path(__file__).resolve().parents[2]
SIGNATURES = {"c_lookup": "c2lnLWxvb2t1cA==", "c_refund": "c2lnLXJlZnVuZA==", "c_colour": "c2lnLWNvbG91cg=="}


def spawn(url: str, session_id: str, mode: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, session_id, mode, str(log)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def first_line(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 60)
    if not line:
        stderr = process.stderr.read().decode() if process.stderr else ""
        raise AssertionError(f"the worker printed nothing: {stderr[-3000:]}")
    report: dict[str, Any] = json.loads(line)
    return report


async def pause_then_kill(url: str, session_id: str, log: Path) -> dict[str, Any]:
    process = spawn(url, session_id, "pause", log)
    try:
        report = await first_line(process)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    assert process.returncode == -signal.SIGKILL
    return report


async def resume(url: str, session_id: str, log: Path) -> dict[str, Any]:
    process = spawn(url, session_id, "resume", log)
    report = await first_line(process)
    process.wait(30)
    return report


def check_paused(report: dict[str, Any], session_id: str) -> None:
    assert report["status"] == "paused"
    assert [(p["tool_call_id"], p["tool_name"], p["kind"], p["session_id"]) for p in report["pending"]] == [
        ("c_refund", "refund", "approval", session_id),
        ("c_colour", "pick_colour", "output", session_id),
    ]


def check_continuation(report: dict[str, Any]) -> None:
    """The request after the pause, field by field."""
    assert report["status"] == "completed" and report["output"] == "Refunded, wrapped in blue."
    messages = report["continuation"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[0]["parts"] == [
        {"type": "text", "text": "Refund order 42, gift wrapped.", "provider_metadata": {}}
    ]
    assistant = messages[1]
    assert assistant["parts"][0] == {"type": "text", "text": "On it.", "provider_metadata": {}}
    calls = assistant["parts"][1:]
    assert [
        (
            c["type"],
            c["tool_call_id"],
            c["tool_name"],
            c["args"],
            c["provider_metadata"],
            c["provider_executed"],
        )
        for c in calls
    ] == [
        ("tool-call", cid, name, args, {"google": {"thoughtSignature": SIGNATURES[cid]}}, False)
        for cid, name, args in (
            ("c_lookup", "lookup", {"order": "42"}),
            ("c_refund", "refund", {"order": "42"}),
            ("c_colour", "pick_colour", {"question": "Gift wrap colour?"}),
        )
    ]
    assert [json.loads(c["args_json"]) for c in calls] == [c["args"] for c in calls]
    results = messages[2]["parts"]
    assert [(r["type"], r["tool_call_id"], r["tool_name"], r["output"], r["is_error"]) for r in results] == [
        ("tool-result", "c_lookup", "lookup", "order 42: shipped", False),
        ("tool-result", "c_refund", "refund", "refunded 42", False),
        ("tool-result", "c_colour", "pick_colour", "blue", False),
    ]
    assert all(r["provider_metadata"] == {} and not r["provider_executed"] for r in results)


async def test_a_run_killed_while_paused_is_resumed_by_a_new_process(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'paused.db'}"
    log = tmp_path / "refunds.log"
    check_paused(await pause_then_kill(url, "s-kill", log), "s-kill")
    store = await open_store(url)
    try:  # what the killed process left: durable, and nothing running
        rows = {r.tool_call_id: r.status for r in await store.tool_calls("s-kill")}
        assert rows == {"c_lookup": "ok", "c_refund": "awaiting_approval", "c_colour": "awaiting_output"}
        assert not await store.run_in_progress("s-kill")
    finally:
        await store.close()
    assert not log.exists()
    check_continuation(await resume(url, "s-kill", log))
    assert log.read_text() == "refund 42 in resume\n"
    store = await open_store(url)
    try:
        rows = {r.tool_call_id: r.status for r in await store.tool_calls("s-kill")}
        assert rows == {"c_lookup": "ok", "c_refund": "ok", "c_colour": "ok"}
    finally:
        await store.close()


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} is not set in CI")
        pytest.skip(f"{POSTGRES_ENV} not set (scripts/postgres.sh starts a local server)")
    schema = f"pause_{uuid.uuid4().hex[:12]}"  # the ?schema= pattern of tests/security/conftest.py
    await create_or_drop(url, f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{url}?schema={schema}"
    finally:
        await create_or_drop(url, f'DROP SCHEMA "{schema}" CASCADE')


async def test_another_replica_resumes_a_paused_run_on_postgres_exactly_once(
    postgres_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "refunds.log"
    check_paused(await pause_then_kill(postgres_url, "s-replica", log), "s-replica")
    # two replicas get the same answers at once: one resumes the run, the other is refused cleanly
    reports = await asyncio.gather(*(resume(postgres_url, "s-replica", log) for _ in range(2)))
    done = [r for r in reports if "error" not in r]
    refused = [r for r in reports if "error" in r]
    assert len(done) == 1 and len(refused) == 1, reports
    check_continuation(done[0])
    assert refused[0]["error"] in ("SessionBusyError", "ResumeError"), refused
    assert log.read_text() == "refund 42 in resume\n"  # the approved refund ran once, on one replica
