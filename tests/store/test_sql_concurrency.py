"""SQLStore under real concurrency: several OS processes share one database file / server.

Each worker is a fresh Python process running ``_WORKER``; workers import first, report ``ready``, and
start together on ``go`` so schema creation, position allocation and locks really race.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import pytest
import sqlalchemy as sa

from tests.store.conftest import Target
from toolwire.errors import SessionBusyError
from toolwire.messages import Usage
from toolwire.store import SessionInfo
from toolwire.store._locks import lock_owner
from toolwire.store.schema import messages as messages_table
from toolwire.store.sql import SQLStore

_WORKER = r"""
import asyncio, json, os, sys

from toolwire.errors import SessionBusyError
from toolwire.messages import Message, ToolCallPart, ToolResultPart, Usage
from toolwire.store import SessionInfo, StepRecord, ToolCallRecord
from toolwire.store._locks import lock_owner
from toolwire.store.sql import SQLStore


async def write_steps(store, job):
    sid = job["session_id"]
    await store.ensure_session(SessionInfo(id=sid, user_id=job["user_id"]))
    for k in range(job["steps"]):
        await store.append_message(sid, Message.user(f"step {k}", id=f"{sid}-u{k}", session_id=sid), interaction_id="i")
        calls = tuple(
            ToolCallPart(tool_call_id=f"{sid}-c{k}{x}", tool_name="echo", args={"k": k, "x": x}) for x in "ab"
        )
        assistant = Message(role="assistant", id=f"{sid}-a{k}", session_id=sid, parts=calls)
        records = tuple(
            ToolCallRecord(session_id=sid, tool_call_id=c.tool_call_id, tool_name="echo", message_id=assistant.id,
                           step=k, args=c.args)
            for c in calls
        )
        usage = Usage(input_tokens=1, output_tokens=2, requests=1)
        await store.begin_step(StepRecord(session_id=sid, interaction_id="i", step=k, message=assistant,
                                          tool_calls=records, usage=usage))
        for c in calls:
            await store.complete_tool_call(sid, c.tool_call_id, status="ok", output=c.args, is_error=False,
                                           started_at=None, finished_at=None)
        results = tuple(ToolResultPart(tool_call_id=c.tool_call_id, tool_name="echo", output=c.args) for c in calls)
        tool = Message(role="tool", id=f"{sid}-t{k}", session_id=sid, parts=results)
        await store.finish_step(sid, step=k, interaction_id="i", tool_message=tool, usage=usage, last_seq=k + 1)


async def append(store, job):
    for i in range(job["count"]):
        message = Message.user(f"{job['name']} {i}", id=f"{job['name']}-{i}", session_id=job["session_id"])
        await store.append_message(job["session_id"], message, interaction_id=job["name"])


async def hold_lock(store, job):
    # "tagged" owners name this host and pid (as the agent loop makes them); plain ones are opaque.
    owner = lock_owner(job["owner"]) if job["tagged"] else job["owner"]
    try:
        await store.lock_session(job["session_id"], owner, ttl=job["ttl"])
    except SessionBusyError:
        print("busy", flush=True)
        return
    print("locked", flush=True)
    command = sys.stdin.readline().strip()
    if command == "crash":
        os._exit(0)  # die holding the lock, as a killed server would
    await store.unlock_session(job["session_id"], owner)


async def open_fresh_files(job):
    # One "go" per file: every worker opens the same new file at the same instant.
    for url in job["urls"]:
        sys.stdin.readline()
        store = await SQLStore.open(url)
        await store.close()
        print("opened", flush=True)


async def main(job):
    print("ready", flush=True)
    if job["mode"] == "open":
        await open_fresh_files(job)
        print("done", flush=True)
        return
    sys.stdin.readline()
    store = await SQLStore.open(job["url"], **job["options"])
    try:
        await {"steps": write_steps, "append": append, "lock": hold_lock}[job["mode"]](store, job)
    finally:
        await store.close()
    print("done", flush=True)


asyncio.run(main(json.loads(sys.argv[1])))
"""


class _Worker:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, target: Target, **job: Any) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WORKER,
            json.dumps({**target.spec(), **job}),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(process)

    async def expect(self, line: str) -> None:
        assert self.process.stdout is not None
        got = (await asyncio.wait_for(self.process.stdout.readline(), 30)).decode().strip()
        if got != line:
            raise AssertionError(f"worker said {got!r}, expected {line!r}; stderr:\n{await self._stderr()}")

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())

    async def finish(self, last: str = "done") -> None:
        if last:
            await self.expect(last)
        code = await asyncio.wait_for(self.process.wait(), 30)
        assert code == 0, await self._stderr()

    async def _stderr(self) -> str:
        assert self.process.stderr is not None
        return (await asyncio.wait_for(self.process.stderr.read(), 30)).decode()


async def _start_together(workers: list[_Worker]) -> None:
    for worker in workers:
        await worker.expect("ready")
    for worker in workers:
        worker.send("go")


async def test_processes_writing_different_sessions(target: Target) -> None:
    # The database is empty: the workers also race to create the schema.
    sessions, steps = [f"proc{n}" for n in range(3)], 6
    workers = [
        await _Worker.start(target, mode="steps", session_id=sid, user_id=f"user{n % 2}", steps=steps)
        for n, sid in enumerate(sessions)
    ]
    await _start_together(workers)
    await asyncio.gather(*(w.finish() for w in workers))

    store = await target.open()
    try:
        for sid in sessions:
            expected_ids = [f"{sid}-{kind}{k}" for k in range(steps) for kind in "uat"]
            assert await _positions(store, sid) == list(enumerate(expected_ids))
            history = await store.load_history(sid)
            assert [m.id for m in history] == expected_ids  # complete: nothing needed repair
            calls = await store.tool_calls(sid)
            assert [c.tool_call_id for c in calls] == [f"{sid}-c{k}{x}" for k in range(steps) for x in "ab"]
            assert {c.status for c in calls} == {"ok"}
            info = await store.get_session(sid)
            assert info is not None
            assert info.usage == Usage(input_tokens=steps, output_tokens=2 * steps, requests=steps)
            assert info.last_seq == steps
        assert {s.id for s in await store.list_sessions(user_id="user0")} == {"proc0", "proc2"}
    finally:
        await store.close()


async def test_processes_opening_a_new_sqlite_file_together(tmp_path: Any) -> None:
    # Switching a new file to WAL takes an exclusive lock for which SQLite skips the busy handler: racing
    # processes got "database is locked" at once (seen in CI, 1 run in ~30). 30 fresh files per run.
    urls = [f"sqlite:///{tmp_path / f'fresh{n}.db'}" for n in range(30)]
    target = Target(engine="sqlite", url=urls[0])
    workers = [await _Worker.start(target, mode="open", urls=urls) for _ in range(5)]
    for worker in workers:
        await worker.expect("ready")
    for _ in urls:
        for worker in workers:
            worker.send("go")
        for worker in workers:
            await worker.expect("opened")
    await asyncio.gather(*(w.finish() for w in workers))
    for url in urls:
        store = await SQLStore.open(url)
        try:
            async with store.engine.connect() as connection:
                mode = (await connection.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
            assert mode == "wal"
        finally:
            await store.close()


async def test_processes_appending_to_one_session_get_dense_positions(target: Target) -> None:
    store = await target.open()
    try:
        await store.ensure_session(SessionInfo(id="shared"))
        names, count = ["w0", "w1", "w2"], 12
        workers = [
            await _Worker.start(target, mode="append", session_id="shared", name=name, count=count)
            for name in names
        ]
        await _start_together(workers)
        await asyncio.gather(*(w.finish() for w in workers))

        positions = await _positions(store, "shared")
        assert [p for p, _ in positions] == list(range(len(names) * count))
        for name in names:  # each writer's messages keep its own order
            assert [m for _, m in positions if m.startswith(f"{name}-")] == [
                f"{name}-{i}" for i in range(count)
            ]
    finally:
        await store.close()


async def test_session_lock_across_processes(target: Target) -> None:
    store = await target.open()
    main = lock_owner("main")
    try:
        await store.ensure_session(SessionInfo(id="locked"))
        job = {"mode": "lock", "session_id": "locked"}
        blocked, holder, killed, opaque = [
            await _Worker.start(target, owner=owner, tagged=tagged, ttl=ttl, **job)
            for owner, tagged, ttl in (
                ("proc_blocked", True, 60),
                ("proc_holder", True, 60),
                ("proc_killed", True, 60),
                ("proc_opaque", False, 1.0),
            )
        ]
        for worker in (blocked, holder, killed, opaque):
            await worker.expect("ready")

        # This process holds the lock: another process cannot take it.
        await store.lock_session("locked", main)
        blocked.send("go")
        await blocked.expect("busy")
        await blocked.finish()

        # Another process holds it: this one cannot take it until that one unlocks.
        await store.unlock_session("locked", main)
        holder.send("go")
        await holder.expect("locked")
        with pytest.raises(SessionBusyError):
            await store.lock_session("locked", main)
        holder.send("unlock")
        await holder.finish()
        await store.lock_session("locked", main)
        await store.unlock_session("locked", main)

        # A process of this host dies holding the lock (ttl 60 s): its lock is taken over at once.
        killed.send("go")
        await killed.expect("locked")
        killed.send("crash")
        await killed.finish(last="")
        await store.lock_session("locked", main)
        await store.unlock_session("locked", main)

        # An owner that does not name its process: busy until its ttl runs out, then free.
        opaque.send("go")
        await opaque.expect("locked")
        locked_at = time.monotonic()
        opaque.send("crash")
        await opaque.finish(last="")
        with pytest.raises(SessionBusyError):
            await store.lock_session("locked", main)
        await asyncio.sleep(max(0.0, 1.05 - (time.monotonic() - locked_at)))
        await store.lock_session("locked", main)
    finally:
        await store.close()


async def _positions(store: SQLStore, session_id: str) -> list[tuple[int, str]]:
    query = (
        sa.select(messages_table.c.position, messages_table.c.id)
        .where(messages_table.c.session_id == session_id)
        .order_by(messages_table.c.position)
    )
    async with store.engine.connect() as conn:
        return [(row.position, row.id) for row in await conn.execute(query)]
