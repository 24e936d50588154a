"""Loop overhead per tool step: scripted model + no-op tool, in memory and with SQLite.

    python benchmarks/loop_overhead.py [--steps 200] [--parallel 1] [--repeat 5]

Reports the median microseconds per step (model step + tool execution + persistence + events).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from toolwire import Agent, TextPart, ToolCallPart, open_store
from toolwire.models.scripted import ScriptedModel


def noop() -> str:
    """Do nothing."""
    return "ok"


async def noop_async() -> str:
    """Do nothing, asynchronously."""
    return "ok"


def _model(steps: int, parallel: int, tool_name: str) -> ScriptedModel:
    turns = [
        [ToolCallPart(tool_call_id=f"c{s}_{i}", tool_name=tool_name, args={}) for i in range(parallel)]
        for s in range(steps - 1)
    ]
    turns.append([TextPart(text="done")])
    return ScriptedModel(turns, record_requests=False, chunk_size=1 << 20)


async def one_run(steps: int, parallel: int, store_url: str | None, tool: object, name: str) -> float:
    store = await open_store(store_url) if store_url else None
    agent = Agent(
        _model(steps, parallel, name), tools=[tool], store=store, max_steps=steps + 1, heartbeat_interval=None
    )
    start = time.perf_counter()
    await agent.run("go")
    elapsed = time.perf_counter() - start
    if store is not None:
        await store.close()
    return elapsed / steps * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for label, tool, name in (("async no-op", noop_async, "noop_async"), ("sync no-op", noop, "noop")):
            for store_label in ("memory", "sqlite"):
                samples = []
                for i in range(args.repeat):
                    url = (
                        f"sqlite+aiosqlite:///{Path(tmp) / f'b{label[:2]}{i}.db'}"
                        if store_label == "sqlite"
                        else None
                    )
                    samples.append(await one_run(args.steps, args.parallel, url, tool, name))
                rows.append((label, store_label, statistics.median(samples)))
    print(f"{args.steps} steps x {args.parallel} call(s) per step, median of {args.repeat}")
    print(f"{'tool':<12} {'store':<8} {'µs/step':>10}")
    for label, store_label, value in rows:
        print(f"{label:<12} {store_label:<8} {value:>10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
