"""Event bus overhead per tool call: the same scripted run with no subscriber, one, and OpenTelemetry.

    python benchmarks/event_bus.py [--steps 400] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel


async def noop() -> str:
    """Do nothing."""
    return "ok"


def agent(steps: int) -> Agent[None]:
    turns = [[ToolCallPart(tool_call_id=f"c{i}", tool_name="noop", args={})] for i in range(steps)]
    model = ScriptedModel([*turns, [TextPart(text="done")]], record_requests=False)
    return Agent(model, tools=[noop], max_steps=steps + 1, heartbeat_interval=None)


async def per_call(steps: int, mode: str) -> float:
    a = agent(steps)
    if mode == "one subscriber":
        a.on("tool:end", lambda event: None)
    elif mode == "otel":
        from opentelemetry.sdk.trace import TracerProvider

        from toolwire.otel import instrument

        instrument(a, tracer_provider=TracerProvider())
    start = time.perf_counter()
    await a.run("go")
    return (time.perf_counter() - start) / steps * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    modes = ["no subscriber", "one subscriber", "otel"]
    samples: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.repeat):  # interleaved so drift hits every mode alike
        for mode in modes:
            samples[mode].append(await per_call(args.steps, mode))
    base = statistics.median(samples["no subscriber"])
    print(f"{args.steps} tool steps per run, median of {args.repeat} runs")
    print(f"{'mode':<16} {'µs/tool step':>13} {'overhead µs':>12}")
    for mode in modes:
        value = statistics.median(samples[mode])
        print(f"{mode:<16} {value:>13.1f} {value - base:>12.1f}")


if __name__ == "__main__":
    asyncio.run(main())
