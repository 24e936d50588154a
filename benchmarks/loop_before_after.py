"""The "Loop per tool step" table of BENCHMARKS.md (issue 19): the floor, toolwire before and after, interleaved.

Each round runs `_loop_worker.py` once per row (floor, before, after) in fresh processes, one after the
other, so a change in the machine's load touches all three alike; the figure per row is the median over
rounds of each process's median of 9 runs. "Before" is toolwire's `src/` of another commit (extract it with
`git archive <commit> src | tar -x -C /tmp/base`), "after" this checkout's.

    cd benchmarks && ../.venv/bin/python loop_before_after.py /tmp/base/src [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
SCENARIOS = (("1", "200", "none"), ("1", "200", "sqlite"), ("8", "50", "none"), ("8", "50", "sqlite"))


def _median_us(module: str, scenario: tuple[str, ...], clock: str, src: Path) -> float:
    args = [sys.executable, "_loop_worker.py", module, *scenario, "9", "--no-memory"]
    if clock == "cpu":
        args.append("--cpu")
    out = subprocess.run(
        args, cwd=HERE, env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True, check=True
    ).stdout
    return float(json.loads(out)["us_per_step"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before_src", type=Path, help="the src/ directory of the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    after_src = (HERE.parent / "src").resolve()
    rows = (("floor", "floor_loop", after_src), ("before", "toolwire_loop", options.before_src.resolve()),
            ("after", "toolwire_loop", after_src))  # fmt: skip
    print("| scenario | store | clock | floor | before | after | before × floor | after × floor |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for scenario in SCENARIOS:
        for clock in ("cpu", "wall"):
            samples: dict[str, list[float]] = {name: [] for name, _, _ in rows}
            for _ in range(options.rounds):
                for name, module, src in rows:
                    samples[name].append(_median_us(module, scenario, clock, src))
            floor, before, after = (statistics.median(samples[name]) for name, _, _ in rows)
            calls, steps, store = scenario
            print(
                f"| {calls} call/step × {steps} steps | {store} | {clock} | {floor:.1f} | {before:.1f} | "
                f"{after:.1f} | {before / floor:.1f} | {after / floor:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
