"""What failover costs: time to the first token after a primary failure, and the wrapper when nothing fails.

    python benchmarks/failover.py [--runs 30] [--steps 200] [--rounds 6]

1. **Added time to first token.** The fallback is a Chat Completions model on a loopback server (the
   reliability fault server) answering at once. Its own TTFT is measured from ``step-start`` to the first
   text delta with the fallback alone. After a primary failure (HTTP 503, connection refused, a stream cut
   after its first text), the added time is measured from the ``failover`` event (the failure is known) to
   the fallback's first text delta; the goal is within 50 ms of the fallback's own TTFT. Medians and p95.
2. **The wrapper when nothing fails.** ``loop_overhead.py``'s scenario (scripted model, one no-op tool call
   per step, memory store, ``--steps`` steps): the model alone and the same model as the primary of a
   ``FallbackModel``; CPU µs per step (``time.process_time``), rounds alternating, the minimum and the
   median kept, and cProfile's count of Python calls per step.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import pstats
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reliability.fault_server

from tests.reliability.fault_server import (
    Behaviour,
    FaultServer,
    finish_frames,
    text_frames,
)

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.events import FailoverEvent, StepStart, TextDeltaEvent
from toolwire.models.base import Model
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel

GOOD = Behaviour(frames=text_frames("All good, the answer.") + finish_frames("stop"))
FAILURES = {
    "HTTP 503": Behaviour(status=503, body=b'{"error": {"message": "down", "type": "server_error"}}'),
    "stream cut after its first text": Behaviour(frames=GOOD.frames, cut_after=2),
}


def _dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def _chat(url: str) -> OpenAIChatModel:
    return OpenAIChatModel("bench", api_key="k", base_url=url)


async def _first_token(model: Model) -> tuple[float, float | None]:
    """Seconds from the step start (or, after a failover, from the failover event) to the first text."""
    agent = Agent(model, retries=0)
    since: float | None = None
    first: float | None = None
    failed_after: float | None = None
    started = time.perf_counter()
    async for event in agent.stream("hi"):  # to its end: the run finishes as a real one would
        now = time.perf_counter()
        if isinstance(event, StepStart):
            since = now
        elif isinstance(event, FailoverEvent):
            failed_after, since, first = now - started, now, None  # the dropped attempt's text does not count
        elif isinstance(event, TextDeltaEvent) and since is not None and first is None:
            first = now - since
    await agent.aclose()
    if first is None:
        raise RuntimeError("no text")
    return first, failed_after


def _stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered) * 1e3:6.2f} ms, p95 {p95 * 1e3:6.2f} ms"


async def ttft(runs: int) -> None:
    print(f"## time to first token ({runs} runs each; loopback fallback answering at once)")
    async with FaultServer([GOOD]) as fallback_server:
        own = [(await _first_token(_chat(fallback_server.base_url)))[0] for _ in range(runs)]
        print(f"fallback alone, step start -> first text:         {_stats(own)}")
        primaries: dict[str, tuple[list[Behaviour] | None, int]] = {
            "connection refused": (None, 0),
            **{name: ([b], 0) for name, b in FAILURES.items()},
        }
        for name, (behaviours, _) in primaries.items():
            added, known = [], []
            for _ in range(runs):
                if behaviours is None:
                    model = FallbackModel(_chat(_dead_url()), _chat(fallback_server.base_url), breaker=None)
                    first, failed_after = await _first_token(model)
                else:
                    async with FaultServer(behaviours) as primary_server:
                        primary = _chat(primary_server.base_url)
                        model = FallbackModel(primary, _chat(fallback_server.base_url), breaker=None)
                        first, failed_after = await _first_token(model)
                assert failed_after is not None, name
                added.append(first)
                known.append(failed_after)
            extra = statistics.median(added) - statistics.median(own)
            print(f"after {name:<31} failover -> first text: {_stats(added)} ({extra * 1e3:+.2f} ms vs alone;"
                  f" failure known after {statistics.median(known) * 1e3:.2f} ms)")  # fmt: skip


def _scripted(steps: int) -> ScriptedModel:
    turns: list[list[TextPart | ToolCallPart]] = [
        [ToolCallPart(tool_call_id=f"c{s}", tool_name="noop", args={})] for s in range(steps - 1)
    ]
    turns.append([TextPart(text="done")])
    return ScriptedModel(turns, record_requests=False, chunk_size=1 << 20)


def noop() -> str:
    """Do nothing."""
    return "ok"


def _agent(steps: int, wrapped: bool) -> Agent[None]:
    model: Model = _scripted(steps)
    if wrapped:
        model = FallbackModel(model, ScriptedModel([[TextPart(text="unused")]]))
    return Agent(model, tools=[noop], max_steps=steps + 1, heartbeat_interval=None)


def wrapper_cost(steps: int, rounds: int) -> None:
    print(f"\n## the wrapper when nothing fails ({steps} steps, {rounds} rounds x 3 runs, alternating)")
    cpu: dict[bool, list[float]] = {False: [], True: []}
    calls: dict[bool, float] = {}
    for wrapped in (False, True):
        asyncio.run(_agent(steps, wrapped).run("go"))  # warm up
        profile = cProfile.Profile()
        agent = _agent(steps, wrapped)
        profile.enable()
        asyncio.run(agent.run("go"))
        profile.disable()
        calls[wrapped] = pstats.Stats(profile).total_calls / steps  # type: ignore[attr-defined]
    for _ in range(rounds):
        for wrapped in (False, True):
            for _ in range(3):
                agent = _agent(steps, wrapped)
                started = time.process_time()
                asyncio.run(agent.run("go"))
                cpu[wrapped].append((time.process_time() - started) / steps * 1e6)
    for wrapped, label in ((False, "model alone"), (True, "FallbackModel(model, other)")):
        samples = cpu[wrapped]
        print(f"{label:<28} CPU µs/step min {min(samples):7.1f}, median {statistics.median(samples):7.1f};"
              f" Python calls/step {calls[wrapped]:.1f}")  # fmt: skip


def main() -> None:
    logging.getLogger("toolwire.agent").setLevel(logging.ERROR)  # one warning per failover otherwise
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(ttft(args.runs))
    wrapper_cost(args.steps, args.rounds)


if __name__ == "__main__":
    main()
