"""The floor of section 1: the least work an agent loop must do per tool step, with no framework.

Per step: stream one model turn (a text part and the step's calls) from an async generator; build a
small event record with a per-session seq for every part, call start and result; run each no-op async
tool as a task; and, with a store, commit two transactions per step (the assistant message with its
calls recorded pending before they run, then the results with the tool message) in SQLite (WAL,
synchronous=NORMAL) on a writer thread, so the event loop never blocks on the disk. The last turn is a
text answer. No toolwire import: this is what any loop has to pay, the reference toolwire's per-step
cost is divided by.

It has the same interface as the modules in peers/ (`run(calls, steps, store, tmp) -> executed`), so
`_loop_worker.py` times it like the frameworks (through peers/floor_loop.py).

    .venv/bin/python benchmarks/floor.py [--calls 1] [--steps 200] [--store none|sqlite] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

NAME = "floor (no framework)"
STORES = ("none", "sqlite")

SCHEMA = """
create table if not exists messages (session text, position integer, role text, body text);
create table if not exists tool_calls (session text, call_id text, name text, args text, status text, result text,
                                       primary key (session, call_id));
"""


class Writer:
    """One SQLite connection on its own thread; ``await writer.run(fn)`` runs ``fn(connection)`` in one
    transaction there, the event loop free meanwhile."""

    def __init__(self, path: Path) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._serve, args=(path,), daemon=True)
        self._thread.start()

    def _serve(self, path: Path) -> None:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("pragma journal_mode=wal")
        db.execute("pragma synchronous=normal")
        db.executescript(SCHEMA)
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                db.execute("begin")
                result = fn(db)
                db.execute("commit")
            except BaseException as exc:
                db.execute("rollback")
                self._loop.call_soon_threadsafe(future.set_exception, exc)
            else:
                self._loop.call_soon_threadsafe(future.set_result, result)
        db.close()

    def run(self, fn: Callable[[sqlite3.Connection], Any]) -> asyncio.Future[Any]:
        future = self._loop.create_future()
        self._jobs.put((fn, future))
        return future

    async def close(self) -> None:
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)


async def model_turn(step: int, calls: int, last: bool) -> AsyncIterator[tuple[str, Any]]:
    """One streamed turn: a text part, then the step's calls (none on the last turn)."""
    yield ("text-start", None)
    yield ("text-delta", "done" if last else "calling")
    yield ("text-end", None)
    if not last:
        for i in range(calls):
            call_id = f"c{step}_{i}"
            yield ("tool-input-start", (call_id, "noop"))
            yield ("tool-input-delta", (call_id, json.dumps({"i": i})))
            yield ("tool-input-end", (call_id, "noop", {"i": i}))
    yield ("finish", "tool-calls" if not last else "stop")


async def run_session(
    calls: int, steps: int, writer: Writer | None, tools: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    session = "s1"
    seq = 0
    position = 0
    for step in range(steps + 1):
        last = step == steps
        text: list[str] = []
        pending: list[tuple[str, str, dict[str, Any]]] = []
        async for kind, data in model_turn(step, calls, last):
            seq += 1
            yield {"session": session, "seq": seq, "type": kind, "data": data}
            if kind == "text-delta":
                text.append(data)
            elif kind == "tool-input-end":
                pending.append(data)
        if writer is not None:
            body = json.dumps({"text": "".join(text), "calls": [[c, n, a] for c, n, a in pending]})
            rows = [(session, c, n, json.dumps(a), "pending") for c, n, a in pending]

            def record_step(
                db: sqlite3.Connection, body: str = body, rows: list[Any] = rows, at: int = position
            ) -> None:
                db.execute("insert into messages values (?, ?, 'assistant', ?)", (session, at, body))
                db.executemany("insert into tool_calls values (?, ?, ?, ?, ?, null)", rows)

            await writer.run(record_step)
        position += 1
        if last:
            break
        tasks = []
        for call_id, name, args in pending:
            seq += 1
            yield {"session": session, "seq": seq, "type": "tool-call-active", "data": call_id}
            tasks.append(asyncio.create_task(tools[name](**args)))
        results = [
            await task for task in tasks
        ]  # all started before the first is awaited: they run concurrently
        for (call_id, _, _), result in zip(pending, results, strict=True):
            seq += 1
            yield {"session": session, "seq": seq, "type": "tool-call-complete", "data": (call_id, result)}
        if writer is not None:
            done = [
                ("done", json.dumps(r), session, c) for (c, _, _), r in zip(pending, results, strict=True)
            ]
            body = json.dumps([[c, r] for (c, _, _), r in zip(pending, results, strict=True)])

            def record_results(
                db: sqlite3.Connection, done: list[Any] = done, body: str = body, at: int = position
            ) -> None:
                db.executemany(
                    "update tool_calls set status = ?, result = ? where session = ? and call_id = ?", done
                )
                db.execute("insert into messages values (?, ?, 'tool', ?)", (session, at, body))

            await writer.run(record_results)
        position += 1


async def run(calls: int, steps: int, store: str, tmp: Path) -> int:
    """Run the scenario; returns how many tool calls ran (checked by the worker)."""
    ran: list[int] = []

    async def noop(i: int) -> str:
        ran.append(i)
        return "ok"

    writer = Writer(tmp / "floor.db") if store == "sqlite" else None
    try:
        async for _event in run_session(calls, steps, writer, {"noop": noop}):
            pass
    finally:
        if writer is not None:
            await writer.close()
    return len(ran)


async def _main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--store", choices=STORES, default="none")
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    samples = []
    for attempt in range(options.repeat + 1):  # the first run warms up and is not counted
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            executed = await run(options.calls, options.steps, options.store, Path(tmp))
            elapsed = time.perf_counter() - start
        assert executed == options.calls * options.steps
        if attempt:
            samples.append(elapsed / options.steps * 1e6)
    print(f"{NAME}: {statistics.median(samples):.1f} µs per step (median of {options.repeat})")


if __name__ == "__main__":
    asyncio.run(_main())
