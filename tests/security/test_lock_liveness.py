"""A session lock left by a killed process must not outlive it when the next process gets the same PID.

Every container entrypoint runs as PID 1 of its own PID namespace, on the same host name and boot id
after a restart: a lock owner naming only host and PID (``host~boot/1/run``) would look alive to the
restarted process (it *is* PID 1), and the session would answer "busy" until the lock's TTL (10 min).
The container restart is reproduced for real with ``unshare --pid --fork --mount-proc``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolwire import open_store
from toolwire.store import INTERRUPTED_OUTPUT
from toolwire.store._locks import lock_owner, owner_is_dead

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).parents[2]
WORKER = Path(__file__).with_name("_lock_worker.py")
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[19]


def _unshare_refusal() -> str | None:
    """Why PID namespaces cannot be made here (a permission error from ``unshare`` itself), or ``None``."""
    if shutil.which("unshare") is None:
        return None  # not a permission problem: let the test fail and say so
    probe = subprocess.run(
        [*UNSHARE, "sh", "-c", "echo $$"], capture_output=True, text=True, timeout=20, check=False
    )
    if probe.returncode != 0 and "permission" in (probe.stderr + probe.stdout).lower():
        return f"unshare is not permitted here: {probe.stderr.strip()}"
    return None


def _lock_row(db: Path) -> tuple[str | None, float | None]:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT lock_owner, lock_expires_at FROM toolwire_sessions WHERE id = 'c1'"
        ).fetchone()
    finally:
        conn.close()
    assert row is not None, "session c1 was not stored"
    return row[0], row[1]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")


def _in_new_namespace(*args: str) -> list[str]:
    return [*UNSHARE, sys.executable, str(WORKER), *args]


def test_a_restarted_pid_1_takes_over_the_lock_of_the_killed_pid_1(tmp_path: Path) -> None:
    refusal = _unshare_refusal()
    if refusal:
        pytest.skip(refusal)
    db = tmp_path / "locks.db"
    marker = tmp_path / "tool-started"

    # 1. the first "container": PID 1, its tool runs (the session lock is held), then it is killed -9
    holder = subprocess.Popen(
        _in_new_namespace(str(db), "hold", str(marker)),
        env=_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            if holder.poll() is not None:
                output = holder.stdout.read().decode(errors="replace") if holder.stdout else ""
                pytest.fail(f"the holder exited ({holder.returncode}) before its tool ran:\n{output}")
            assert time.monotonic() < deadline, "the holder's tool never started"
            time.sleep(0.05)
        time.sleep(0.1)  # the marker's text is written
        assert marker.read_text() == "1", "the holder must be PID 1 of its namespace, as in a container"
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # unshare and everything in the namespace
        holder.wait(10)
        if holder.stdout:
            holder.stdout.close()

    # the lock is still in the store, naming PID 1 (precondition: the kill left it held, unexpired)
    owner, expires = _lock_row(db)
    assert owner is not None and expires > time.time() + 60, (owner, expires)
    host = lock_owner("probe").partition("/")[0]
    assert owner.startswith(f"{host}/1"), f"same host and boot id, PID 1: {owner}"

    # 2. the restarted "container": PID 1 again, same host name and boot id; the next turn must run now
    started = time.monotonic()
    nxt = subprocess.run(
        _in_new_namespace(str(db), "next", str(marker)),
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    print(f"dead holder's lock: {owner}; next turn: {nxt.stdout.strip()} ({elapsed:.2f}s with start-up)")
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    report = json.loads(nxt.stdout.strip().splitlines()[-1])
    assert report["pid"] == 1
    assert report["busy"] is False, f"the dead holder's lock still blocks the session: {report}"
    assert report["output"] == "next turn ok"
    assert report["seconds"] < 10 and elapsed < 30, (report, elapsed)

    # the history shows the interrupted call, answered, before the new turn
    async def read() -> None:
        store = await open_store(f"sqlite+aiosqlite:///{db}")
        try:
            history = await store.load_history("c1")
            calls = await store.tool_calls("c1")
        finally:
            await store.close()
        roles = [m.role for m in history]
        assert roles == ["user", "assistant", "tool", "user", "assistant"], roles
        assert [c.tool_call_id for c in history[1].tool_calls] == ["call_1"]
        result = history[2].tool_results[0]
        assert result.tool_call_id == "call_1" and result.is_error
        assert INTERRUPTED_OUTPUT in str(result.output)
        assert history[4].text == "next turn ok"
        assert [(c.tool_name, c.status) for c in calls] == [("block_forever", "interrupted")]

    asyncio.run(read())
    after, _ = _lock_row(db)
    assert after is None, f"the finished turn released the lock: {after}"


def test_lock_owners_name_a_process_by_pid_and_start_time(tmp_path: Path) -> None:
    mine = lock_owner("run_1")
    host = mine.partition("/")[0]
    assert not owner_is_dead(mine), "this live process"

    # this PID with another start time: a process that had this PID before (a restarted container)
    earlier = int(_start_time(os.getpid())) - 1
    assert owner_is_dead(f"{host}/{os.getpid()}.{earlier}/run_0"), "a PID reused by this process"
    # lock_owner itself names this process by both
    assert mine == f"{host}/{os.getpid()}.{_start_time(os.getpid())}/run_1"

    # another live process, named exactly: alive; named with another start time: dead; killed: dead
    child = subprocess.Popen(["sleep", "60"])
    try:
        exact = f"{host}/{child.pid}.{_start_time(child.pid)}/run_2"
        assert not owner_is_dead(exact)
        assert owner_is_dead(f"{host}/{child.pid}.{int(_start_time(child.pid)) + 7}/run_2")
    finally:
        child.kill()
        child.wait(5)
    assert owner_is_dead(exact)
    # an owner on another host is never judged here (its lock expires by TTL)
    assert not owner_is_dead(f"other-host~00000000/{os.getpid()}.1/run_3")
