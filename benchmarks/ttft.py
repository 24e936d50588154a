"""Section 3: time to first text token with tools, on a loopback server emitting tokens at a fixed rate.

Three ways to get the same turn to the application:
* live streaming with tools: `agent.stream()` on a streaming model, tools offered (the model answers text,
  then calls a tool, then answers more text after the result);
* pure text streaming: the same, no tools offered;
* synthetic streaming: the model request is made without streaming (the server generates the whole answer
  first), and its parts are replayed as events afterwards, the approach some libraries use for tools.

Reported: the median time from `agent.stream()` to the first text-delta event, over N runs each.

    benchmarks/.venv/bin/python benchmarks/ttft.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from toolwire import Agent
from toolwire.models import OpenAIChatModel

HERE = Path(__file__).parent


def lookup(q: str) -> str:
    """Looks something up."""
    return "found"


async def first_token(url: str, *, tools: bool, stream: bool) -> float:
    model = OpenAIChatModel("m", api_key="k", base_url=url, stream=stream)
    agent = Agent(model, tools=[lookup] if tools else [], heartbeat_interval=None)
    started = time.perf_counter()
    first = None
    async for event in agent.stream("go"):
        if event.type == "text-delta" and first is None:
            first = time.perf_counter() - started
    await agent.aclose()
    assert first is not None
    return first * 1000


def run(quick: bool = False, tokens: int = 20, interval_ms: float = 10.0) -> list[dict[str, Any]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(HERE / "_ttft_server.py"), str(port), str(tokens), str(interval_ms)])
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        repeats = 7 if quick else 30
        modes = {
            "live streaming with tools": {"tools": True, "stream": True},
            "pure text streaming (no tools)": {"tools": False, "stream": True},
            "synthetic streaming (generate, then replay)": {"tools": True, "stream": False},
        }
        rows = []
        for label, kwargs in modes.items():
            asyncio.run(first_token(url, **kwargs))  # warm-up
            samples = [asyncio.run(first_token(url, **kwargs)) for _ in range(repeats)]
            rows.append({"mode": label, "ttft_ms_median": statistics.median(samples), "ttft_ms_p90": sorted(samples)[int(len(samples) * 0.9) - 1]})
        base = rows[1]["ttft_ms_median"]
        for row in rows:
            row["vs_pure_streaming"] = row["ttft_ms_median"] / base
        return rows
    finally:
        server.terminate()
        server.wait(10)


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| mode | TTFT median (ms) | p90 (ms) | vs pure text streaming |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['ttft_ms_median']:.1f} | {r['ttft_ms_p90']:.1f} | {r['vs_pure_streaming']:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    print(table(run(quick=parser.parse_args().quick)))
