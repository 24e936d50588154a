"""One framework, one scenario, in a fresh process: prints JSON with the median µs/step and peak memory.

    python benchmarks/_loop_worker.py MODULE CALLS STEPS STORE REPEATS [--no-memory] [--cpu]

Peak memory is tracemalloc's peak of Python allocations during one extra, untimed run (tracemalloc slows
the run, so it is never timed). ``--cpu`` times the process's CPU (all threads, ``time.process_time``)
instead of the wall clock: steadier when other work shares the machine, but blind to waiting for the
disk.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


async def main() -> None:
    module_name, calls, steps, store, repeats = sys.argv[1], *map(int, sys.argv[2:4]), sys.argv[4], int(sys.argv[5])
    peer = importlib.import_module(f"peers.{module_name}")
    expected = calls * steps
    samples: list[float] = []
    clock = time.process_time if "--cpu" in sys.argv else time.perf_counter
    for attempt in range(repeats + 1):  # the first run warms imports and caches and is not counted
        with tempfile.TemporaryDirectory() as tmp:
            start = clock()
            executed = await peer.run(calls, steps, store, Path(tmp))
            elapsed = clock() - start
        if executed != expected:
            raise SystemExit(f"{peer.NAME}: executed {executed} tool calls, expected {expected}")
        if attempt:
            samples.append(elapsed / steps * 1e6)
    peak_kib = None
    if "--no-memory" not in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            tracemalloc.start()
            await peer.run(calls, steps, store, Path(tmp))
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            peak_kib = peak / 1024
    print(json.dumps({"framework": peer.NAME, "us_per_step": statistics.median(samples),
                      "samples": samples, "peak_kib": peak_kib}))


if __name__ == "__main__":
    asyncio.run(main())
