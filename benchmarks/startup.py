"""Section 7: start-up time of `import toolwire` and `toolwire --help`, each in fresh processes.

Every command runs `--runs` times (default 21) in a new interpreter, the commands taking turns so that
load from other work on the machine falls on all of them alike, after two untimed warm-up runs each
(they also write the bytecode caches). The floor is `python -c pass` in the same run: an interpreter
that imports nothing of its own. Reported: the median and the 90th percentile of wall time, and the
median minus the floor. The breakdown is `python -X importtime`: the modules with the most time of
their own (median of `--importtime-runs` runs), with their cumulative time (own + what they import).

    .venv/bin/python benchmarks/startup.py [--runs 21] [--top 10]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 150.0


def commands() -> dict[str, list[str]]:
    python = sys.executable
    script = Path(python).parent / "toolwire"
    cli = [str(script), "--help"] if script.exists() else [python, "-m", "toolwire", "--help"]
    return {
        "python -c pass (floor)": [python, "-c", "pass"],
        "import toolwire": [python, "-c", "import toolwire"],
        "from toolwire import Agent": [python, "-c", "from toolwire import Agent"],
        "toolwire --help": cli,
    }


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE", "PYTHONSTARTUP"):
        env.pop(name, None)
    return env


def _once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    return (time.perf_counter() - start) * 1000


def timings(runs: int) -> dict[str, list[float]]:
    env = _env()
    argvs = commands()
    for argv in argvs.values():
        for _ in range(2):
            _once(argv, env)
    samples: dict[str, list[float]] = {name: [] for name in argvs}
    for _ in range(runs):
        for name, argv in argvs.items():
            samples[name].append(_once(argv, env))
    return samples


_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def importtime(argv: list[str], runs: int) -> dict[str, tuple[float, float]]:
    """Module -> (median own ms, median cumulative ms) over ``runs`` runs of ``argv``."""
    env = {**_env(), "PYTHONPROFILEIMPORTTIME": "1"}
    own: dict[str, list[float]] = {}
    total: dict[str, list[float]] = {}
    for _ in range(runs):
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
        for match in _LINE.finditer(done.stderr):
            name = match.group(4)
            own.setdefault(name, []).append(int(match.group(1)) / 1000)
            total.setdefault(name, []).append(int(match.group(2)) / 1000)
    return {name: (statistics.median(own[name]), statistics.median(total[name])) for name in own}


def run(quick: bool = False, runs: int | None = None, top: int = 10) -> dict[str, Any]:
    runs = runs or (7 if quick else 21)
    samples = timings(runs)
    floor = statistics.median(samples["python -c pass (floor)"])
    rows = []
    for name, values in samples.items():
        values = sorted(values)
        median = statistics.median(values)
        p90 = values[min(len(values) - 1, round(0.9 * (len(values) - 1)))]
        rows.append({"command": name, "median_ms": median, "p90_ms": p90, "over_floor_ms": median - floor})
    argvs = commands()
    breakdown = {}
    for name in ("import toolwire", "toolwire --help"):
        modules = importtime(argvs[name], 3 if quick else 5)
        ranked = sorted(modules.items(), key=lambda item: -item[1][0])[:top]
        breakdown[name] = [{"module": m, "own_ms": o, "cumulative_ms": c} for m, (o, c) in ranked]
    return {"runs": runs, "rows": rows, "importtime": breakdown}


def table(result: dict[str, Any]) -> str:
    lines = [
        f"| command (fresh process, {result['runs']} runs) | median (ms) | p90 (ms) | median − floor (ms) | goal |",
        "|---|---:|---:|---:|---|",
    ]
    for r in result["rows"]:
        floor = r["command"].endswith("(floor)")
        goal = "" if floor or r["command"].startswith("from") else f"≤ {GOAL_MS:.0f} ms"
        over = "—" if floor else f"{r['over_floor_ms']:.1f}"
        lines.append(f"| `{r['command']}` | {r['median_ms']:.1f} | {r['p90_ms']:.1f} | {over} | {goal} |")
    for name, modules in result["importtime"].items():
        lines += [
            "",
            f"`python -X importtime`, `{name}`: the {len(modules)} modules with the most time of their own",
            "",
            "| module | own (ms) | cumulative (ms) |",
            "|---|---:|---:|",
        ]
        lines += [f"| `{m['module']}` | {m['own_ms']:.1f} | {m['cumulative_ms']:.1f} |" for m in modules]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per command (default 21)")
    parser.add_argument("--top", type=int, default=10)
    options = parser.parse_args()
    print(table(run(quick=options.quick, runs=options.runs, top=options.top)))
