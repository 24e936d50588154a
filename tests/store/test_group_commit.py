"""Completions of parallel tool calls share transactions (group commit) and each is durable on return."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolwire import Agent, RunResult, TextPart, ToolCallPart
from toolwire.errors import StoreError
from toolwire.events import ToolCallComplete
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.store._sql_engine import ThreadRunner, configure_sqlite
from toolwire.store.sql import SQLStore


def _count_writes(store: SQLStore) -> list[str]:
    """The names of the write transactions ``store`` runs from now on."""
    writes: list[str] = []
    original = store._write

    async def counting(what: str, op, **options):  # type: ignore[no-untyped-def]
        writes.append(what)
        return await original(what, op, **options)

    store._write = counting  # type: ignore[method-assign]
    return writes


async def _eight_squares(
    store: SQLStore, session_id: str, work: Callable[[int], Any], *gates: asyncio.Event
) -> RunResult[str]:
    """A step of eight calls of ``work(i)`` (returning ``i * i``), the gates opened one after another;
    checks that every result is stored."""
    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="work", args={"i": i}) for i in range(8)]
    agent = Agent(ScriptedModel([calls, [TextPart(text="done")]]), tools=[work], store=store)
    run = asyncio.create_task(agent.run("go", session_id=session_id))
    for gate in gates:
        await asyncio.sleep(0.2)
        gate.set()
    result = await asyncio.wait_for(run, 30)
    rows = {r.tool_call_id: r for r in await store.tool_calls(session_id)}
    assert {cid: (r.status, r.output) for cid, r in rows.items()} == {
        f"c{i}": ("ok", i * i) for i in range(8)
    }
    return result


async def test_parallel_completions_are_batched_and_all_stored(store: SQLStore) -> None:
    writes = _count_writes(store)
    release, straggler = asyncio.Event(), asyncio.Event()

    async def work(i: int) -> int:
        """Seven wait for each other and finish together; the eighth finishes later."""
        await (straggler if i == 7 else release).wait()
        return i * i

    await _eight_squares(store, "g", work, release, straggler)
    # seven completions while a call still runs, fewer transactions: finishing together, they share a
    # commit (the straggler is written with the step's end)
    assert 1 <= writes.count("complete a tool call") < 7, writes


async def test_calls_finishing_with_the_last_are_stored_with_the_steps_end(store: SQLStore) -> None:
    writes = _count_writes(store)
    release = asyncio.Event()

    async def work(i: int) -> int:
        """Waits for the others, then finishes with them."""
        await release.wait()
        return i * i

    result = await _eight_squares(store, "t", work, release)
    assert [e.result.output for e in result.tool_executions] == [i * i for i in range(8)]
    # all eight finished in one event-loop turn: no transaction of their own, the step's end stores them
    assert writes.count("complete a tool call") == 0, writes
    assert writes.count("finish a step") >= 2, writes


async def test_a_completion_is_stored_before_it_is_announced(store: SQLStore) -> None:
    release = asyncio.Event()

    async def slow(i: int) -> str:
        """The first call finishes later than the second."""
        if i == 0:
            await release.wait()
        return f"stored {i}"

    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="slow", args={"i": i}) for i in range(2)]
    agent = Agent(ScriptedModel([calls, [TextPart(text="ok")]]), tools=[slow], store=store)
    seen: list[tuple[str, str, object]] = []
    async with agent.stream("go", session_id="d") as run:
        async for event in run:
            if isinstance(event, ToolCallComplete):
                # Whoever hears of a result finds it stored: the first call to finish through its own
                # transaction, the last one through the step's end.
                rows = {r.tool_call_id: r for r in await store.tool_calls("d")}
                seen.append(
                    (event.tool_call_id, rows[event.tool_call_id].status, rows[event.tool_call_id].output)
                )
                release.set()
    assert seen == [("c1", "ok", "stored 1"), ("c0", "ok", "stored 0")]


async def test_a_step_with_one_call_commits_twice(store: SQLStore) -> None:
    writes = _count_writes(store)

    def one() -> str:
        """One call."""
        return "stored"

    turns = [[ToolCallPart(tool_call_id=f"c{s}", tool_name="one", args={})] for s in range(3)]
    agent = Agent(ScriptedModel([*turns, [TextPart(text="ok")]]), tools=[one], store=store)
    await agent.run("go", session_id="t")
    # the assistant message with its pending call, then the result with the tool message: 2 per step
    assert [w for w in writes if w in ("begin a step", "complete a tool call", "finish a step")] == [
        "begin a step",
        "finish a step",
    ] * 4 + ["finish a step"], writes  # and the run's end: the seq of its last events
    assert {r.tool_call_id: (r.status, r.output) for r in await store.tool_calls("t")} == {
        f"c{s}": ("ok", "stored") for s in range(3)
    }


async def test_queued_writes_share_a_commit_and_a_failing_one_fails_alone(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'g.db'}", connect_args={"check_same_thread": False})
    configure_sqlite(engine, engine.url)
    runner = ThreadRunner(engine)
    commits: list[int] = []
    sa.event.listen(engine, "commit", lambda conn: commits.append(1))
    try:
        await runner.run(lambda c: c.exec_driver_sql("create table t (k text primary key)"), write=True)
        gate = threading.Event()
        blocker = asyncio.ensure_future(runner.run(lambda c: gate.wait(10), write=False))
        await asyncio.sleep(0.05)  # the thread is busy: what follows queues up
        commits.clear()

        def insert(key: str) -> Callable[[sa.Connection], str]:
            def op(conn: sa.Connection) -> str:
                conn.exec_driver_sql("insert into t values (?)", (key,))
                return key

            return op

        ok = [asyncio.ensure_future(runner.run(insert(k), write=True)) for k in ("a", "b", "c")]
        await asyncio.sleep(0.05)
        gate.set()
        await blocker
        assert [await f for f in ok] == ["a", "b", "c"]
        assert len(commits) == 1  # three transactions, one commit

        commits.clear()
        gate.clear()
        blocker = asyncio.ensure_future(runner.run(lambda c: gate.wait(10), write=False))
        await asyncio.sleep(0.05)
        mixed = [asyncio.ensure_future(runner.run(insert(k), write=True)) for k in ("d", "a", "e")]
        await asyncio.sleep(0.05)
        gate.set()
        await blocker
        results = await asyncio.gather(*mixed, return_exceptions=True)
        assert results[0] == "d" and results[2] == "e"
        assert isinstance(results[1], sa.exc.IntegrityError)  # "a" exists: only that one fails
        rows = await runner.run(
            lambda c: [r[0] for r in c.exec_driver_sql("select k from t order by k")], write=False
        )
        assert rows == ["a", "b", "c", "d", "e"]
    finally:
        await runner.dispose()


async def test_a_result_whose_step_end_failed_is_stored_and_announced_with_the_run_end() -> None:
    class FailingOnce(MemoryStore):
        failed = False

        async def finish_step(self, session_id: str, **kwargs: Any) -> None:
            if kwargs.get("completed") and not self.failed:
                self.failed = True
                raise StoreError("disk full")
            await super().finish_step(session_id, **kwargs)

    def one() -> str:
        """One call."""
        return "done"

    store = FailingOnce()
    calls = [ToolCallPart(tool_call_id="c1", tool_name="one", args={})]
    agent = Agent(ScriptedModel([calls, [TextPart(text="ok")]]), tools=[one], store=store)
    seen: list[ToolCallComplete] = []
    with pytest.raises(StoreError):
        async with agent.stream("go", session_id="f") as run:
            async for event in run:
                if isinstance(event, ToolCallComplete):
                    seen.append(event)
    assert [(e.tool_call_id, e.status, e.output) for e in seen] == [("c1", "ok", "done")]
    assert [(r.status, r.output) for r in await store.tool_calls("f")] == [("ok", "done")]


async def test_the_writer_commits_bodies_on_the_driver_or_through_sqlalchemy_and_rolls_back_failures(
    tmp_path: Path,
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}", connect_args={"check_same_thread": False})
    configure_sqlite(engine, engine.url)
    runner = ThreadRunner(engine)

    def raw(key: str, fail: bool = False) -> Callable[[sa.Connection], None]:
        def op(conn: sa.Connection) -> None:  # the per-step writes' way: the driver's own cursor
            conn.connection.driver_connection.execute("insert into t values (?)", (key,))  # type: ignore[union-attr]
            if fail:
                raise RuntimeError("body failed")

        return op

    def via_sqlalchemy(key: str, fail: bool = False) -> Callable[[sa.Connection], None]:
        def op(conn: sa.Connection) -> None:
            conn.execute(sa.text("insert into t values (:k)"), {"k": key})
            if fail:
                raise RuntimeError("body failed")

        return op

    try:
        await runner.run(lambda c: c.exec_driver_sql("create table t (k text primary key)"), write=True)
        await runner.run(raw("a"), write=True)
        await runner.run(via_sqlalchemy("b"), write=True)
        for failing in (raw("x", fail=True), via_sqlalchemy("y", fail=True)):
            with pytest.raises(RuntimeError):
                await runner.run(failing, write=True)
        with pytest.raises(sqlite3.IntegrityError):  # a body's own error reaches its caller as it is
            await runner.run(raw("a"), write=True)
        with pytest.raises(sa.exc.IntegrityError):
            await runner.run(via_sqlalchemy("b"), write=True)
        await runner.run(raw("c"), write=True)  # the writer's connection is usable after all of these
        rows = await runner.run(lambda c: c.exec_driver_sql("select k from t order by k").all(), write=False)
        assert [k for (k,) in rows] == ["a", "b", "c"]
    finally:
        await runner.dispose()
