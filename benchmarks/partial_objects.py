"""Structured output streamed as partial objects, and JSON-looking text held to the end of a step.

One agent run on the scripted model answers with a JSON object of SIZE characters, streamed in 20-character
deltas (what providers send), three ways:

* ``native``: the object as text (native structured output): every delta reaches ``OutputPolicy.partial``;
* ``tool``: the object as ``final_result`` arguments (tool mode): likewise, through tool-input deltas;
* ``held text``: no output type and a tool in the run: the answer looks like JSON, so the driver holds it
  to the end of the step (it may echo a tool call's arguments) and releases it then.

Reported per size: seconds for the whole run (median of ``--repeat``), the ``output-partial`` events and
the characters of their snapshots, and the time growth from the smallest size to the largest (the bytes
grow 16x from 64 KB to 1 MB: ~16x is linear).

    .venv/bin/python benchmarks/partial_objects.py [--quick] [--repeat 3] [--sizes 65536,262144,1048576]
                                                   [--ways "native,tool,held text"]

To measure another checkout (e.g. before the change), put its ``src`` first:
``PYTHONPATH=/path/to/old/src .venv/bin/python benchmarks/partial_objects.py --sizes 16384,65536``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from pydantic import BaseModel

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.events import OutputPartial
from toolwire.models.scripted import ScriptedModel

DELTA = 20
SIZES = [64 * 1024, 256 * 1024, 1024 * 1024]


class Row(BaseModel):
    id: int
    name: str
    tags: list[str]
    price: float


class Table(BaseModel):
    rows: list[Row]


def table_of(size: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    total = 0
    while total < size:
        i = len(rows)
        row = {"id": i, "name": f"item-{i}", "tags": ["alpha", "beta"], "price": i * 1.25}
        rows.append(row)
        total += len(json.dumps(row, separators=(",", ":"))) + 1
    return {"rows": rows}


def lookup(key: str) -> str:
    """A tool, so that the run's text answer is held while it looks like JSON."""
    return key


async def run_once(way: str, table: dict[str, Any]) -> tuple[float, int, int]:
    text = json.dumps(table, separators=(",", ":"))
    if way == "tool":
        turn: list[Any] = [ToolCallPart("final_result", tool_call_id="f", args=table)]
    else:
        turn = [TextPart(text)]
    model = ScriptedModel([turn], chunk_size=DELTA, record_requests=False)
    agent: Agent[Any, Any]
    if way == "held text":
        agent = Agent(model, tools=[lookup])
    else:
        agent = Agent(model, output_type=Table, output_mode="native" if way == "native" else "tool")
    events = snapshot_chars = 0
    start = time.perf_counter()
    async with agent.stream("go") as run:
        async for event in run:
            if isinstance(event, OutputPartial):
                events += 1
                snapshot_chars += len(json.dumps(event.partial))
    elapsed = time.perf_counter() - start
    assert run.result is not None and run.result.status == "completed"
    output = run.result.output
    if way == "held text":
        assert output == text
    else:
        assert output.model_dump() == table
    return elapsed, events, snapshot_chars


def measure(way: str, size: int, repeat: int) -> dict[str, Any]:
    table = table_of(size)
    samples = []
    events = chars = 0
    for _ in range(repeat):
        elapsed, events, chars = asyncio.run(run_once(way, table))
        samples.append(elapsed)
    return {"way": way, "size": size, "seconds": statistics.median(samples), "events": events, "chars": chars}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 KB and 256 KB, one run each")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", help="comma-separated sizes in characters")
    parser.add_argument("--ways", default="native,tool,held text", help="comma-separated, of the three")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    if args.quick:
        sizes, args.repeat = SIZES[:2], 1
    print(f"{'way':<10} {'size':>9} {'seconds':>9} {'MB/s':>7} {'partials':>9} {'snapshot chars':>15}")
    results = []
    for way in args.ways.split(","):
        rows = [measure(way, size, args.repeat) for size in sizes]
        results.extend(rows)
        for row in rows:
            rate = row["size"] / row["seconds"] / 1e6
            print(
                f"{way:<10} {row['size']:>9} {row['seconds']:>9.3f} {rate:>7.2f} {row['events']:>9} "
                f"{row['chars']:>15}"
            )
        growth = rows[-1]["seconds"] / rows[0]["seconds"]
        print(
            f"{way:<10} time growth {sizes[0]} -> {sizes[-1]}: {growth:.1f}x for {sizes[-1] / sizes[0]:.0f}x bytes"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
