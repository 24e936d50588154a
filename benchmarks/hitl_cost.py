"""What human-in-the-loop support costs per tool step when no tool needs approval: this tree against
other commits, measured in the same run.

    python benchmarks/hitl_cost.py [--rev main] [--rev 3675c37^] [--steps 200] [--calls 1] [--rounds 6]

Each ``--rev``'s ``src/`` is exported with ``git archive`` into a temporary folder; this tree's ``src/`` is
used as it is. The scenario is ``loop_overhead.py``'s: a scripted model, ``--calls`` no-op tool calls per
step, the memory store, no heartbeat. For every tree, in a fresh process:

* Python function calls per step, counted by cProfile over one run (deterministic: the figure to compare);
* CPU seconds per step (``time.process_time``) of ``--runs`` runs; the rounds alternate between the trees
  and the minimum per tree is kept (the least disturbed run on a shared machine).

Prints one JSON line per tree and the ratios to this tree.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def noop() -> str:
    """Do nothing."""
    return "ok"


async def _run(steps: int, calls: int) -> None:
    from toolwire import Agent, TextPart, ToolCallPart
    from toolwire.models.scripted import ScriptedModel

    turns: list[list[TextPart | ToolCallPart]] = [
        [ToolCallPart(tool_call_id=f"c{s}_{i}", tool_name="noop", args={}) for i in range(calls)]
        for s in range(steps - 1)
    ]
    turns.append([TextPart(text="done")])
    model = ScriptedModel(turns, record_requests=False, chunk_size=1 << 20)
    agent = Agent(model, tools=[noop], max_steps=steps + 1, heartbeat_interval=None)
    await agent.run("go")


def _worker(steps: int, calls: int, runs: int) -> None:
    asyncio.run(_run(steps, calls))  # warm imports and caches
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(_run(steps, calls))
    profile.disable()
    total_calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    cpu: list[float] = []
    for _ in range(runs):
        start = time.process_time()
        asyncio.run(_run(steps, calls))
        cpu.append((time.process_time() - start) / steps * 1e6)
    import toolwire

    print(
        json.dumps({"calls_per_step": total_calls / steps, "cpu_us_per_step": cpu, "src": toolwire.__file__})
    )


def _export(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    target = into / rev.replace("/", "_").replace("^", "_parent")
    target.mkdir()
    archive_path = target / "src.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(target, filter="data")
    return target / "src"


def _measure(src: Path, args: argparse.Namespace) -> dict[str, float | list[float]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--calls", str(args.calls)]
    command += ["--runs", str(args.runs)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=src.parent).stdout
    result: dict[str, float | list[float]] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", action="append", default=[], help="a commit to compare with (repeatable)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per process")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.steps, args.calls, args.runs)
        return
    revs = args.rev or ["main"]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT / "src", **{rev: _export(rev, Path(tmp)) for rev in revs}}
        calls: dict[str, float] = {}
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, src in trees.items():
                result = _measure(src, args)
                assert str(result["src"]).startswith(str(src)), (name, result["src"])  # measured that tree
                calls[name] = float(result["calls_per_step"])  # type: ignore[arg-type]
                cpu[name].extend(result["cpu_us_per_step"])  # type: ignore[arg-type]
    base_calls, base_cpu = calls["this tree"], min(cpu["this tree"])
    for name in trees:
        best = min(cpu[name])
        print(
            json.dumps(
                {
                    "tree": name,
                    "calls_per_tool_step": round(calls[name], 1),
                    "cpu_us_per_tool_step_min": round(best, 1),
                    "this_tree_minus_it_calls": round(base_calls - calls[name], 1),
                    "this_tree_over_it_cpu": round(base_cpu / best, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
