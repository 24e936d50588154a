"""Section 4: tool interactions per second stored through the one store hook, SQLite and PostgreSQL,
with 1, 8 and 64 concurrent sessions.

A tool interaction = one model step that calls a no-op tool, the call recorded pending, executed,
completed, and the step written (assistant message, tool message, usage) — everything the loop persists.
Each session runs `steps` interactions, then a final text step. PostgreSQL uses
TOOLWIRE_TEST_POSTGRES_URL (scripts/postgres.sh starts a local server and prints it); without it the
PostgreSQL rows are skipped with the reason printed.

    benchmarks/.venv/bin/python benchmarks/persistence.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from toolwire import Agent
from toolwire.messages import Usage
from toolwire.models.base import (
    Finish,
    Model,
    ModelRequest,
    ModelStreamPart,
    StreamStart,
    ToolInputEnd,
    ToolInputStart,
)
from toolwire.store.sql import SQLStore


class ToolThenText(Model):
    """Calls the tool until the conversation holds `steps` results, then answers: safe under concurrency."""

    provider = "bench"
    model_name = "tool-then-text"

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        done = sum(len(m.tool_results) for m in request.messages)
        yield StreamStart()
        if done < self.steps:
            call_id = f"c{done}"
            yield ToolInputStart(tool_call_id=call_id, tool_name="noop")
            yield ToolInputEnd(tool_call_id=call_id, tool_name="noop", args={}, args_json="{}")
            yield Finish(reason="tool-calls", usage=Usage(input_tokens=10, output_tokens=5, requests=1))
        else:
            yield Finish(reason="stop", usage=Usage(input_tokens=10, output_tokens=1, requests=1))


async def noop() -> str:
    """Does nothing."""
    return "ok"


async def measure(url: str, sessions: int, steps: int, **store_options: Any) -> float:
    store = await SQLStore.open(url, **store_options)
    agent = Agent(ToolThenText(steps), tools=[noop], store=store, max_steps=steps + 2, heartbeat_interval=None)
    prefix = uuid.uuid4().hex[:8]
    try:
        started = time.perf_counter()
        results = await asyncio.gather(*(agent.run("go", session_id=f"{prefix}-{i}") for i in range(sessions)))
        elapsed = time.perf_counter() - started
    finally:
        await store.close()
    stored = sum(len(r.tool_executions) for r in results)
    assert stored == sessions * steps, stored
    return stored / elapsed


def run(quick: bool = False) -> list[dict[str, Any]]:
    levels = [1, 8, 64]
    total = 128 if quick else 1024  # interactions per measurement, split over the sessions
    rows: list[dict[str, Any]] = []
    pg_url = os.environ.get("TOOLWIRE_TEST_POSTGRES_URL")
    with tempfile.TemporaryDirectory() as tmp:
        for sessions in levels:
            steps = max(1, total // sessions)
            sqlite = asyncio.run(measure(f"sqlite+aiosqlite:///{Path(tmp) / f's{sessions}.db'}", sessions, steps))
            row: dict[str, Any] = {"sessions": sessions, "steps_per_session": steps, "sqlite": sqlite}
            if pg_url:
                row["postgresql"] = asyncio.run(measure(pg_url, sessions, steps, pool_size=min(sessions, 20), max_overflow=0))
            else:
                row["postgresql"] = "skipped: TOOLWIRE_TEST_POSTGRES_URL not set (scripts/postgres.sh)"
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| concurrent sessions | interactions per session | SQLite (interactions/s) | PostgreSQL (interactions/s) |",
             "|---:|---:|---:|---:|"]
    for r in rows:
        pg = f"{r['postgresql']:.0f}" if isinstance(r["postgresql"], float) else r["postgresql"]
        lines.append(f"| {r['sessions']} | {r['steps_per_session']} | {r['sqlite']:.0f} | {pg} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    print(table(run(quick=parser.parse_args().quick)))
