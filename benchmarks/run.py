"""toolwire against its peers, side by side, in one run on one machine.

    bash scripts/bench_env.sh                       # once: benchmarks/.venv with toolwire and the peers
    python benchmarks/run.py [--quick] [--only 1 2 3 4 5]

Runs in benchmarks/.venv (re-executes itself there). Prints one table per section and writes
benchmarks/results/latest.json (a full run), quick.json (--quick) or only.json (--only some). Sections:

1. loop overhead per tool step (each framework's own fake model, a no-op tool, fresh process per cell),
   with the floor (benchmarks/floor.py: the least work any loop must do, no framework) as its own row;
2. streaming parse throughput of large tool arguments (in-process transport), and where toolwire's time
   goes per layer (benchmarks/stream_layers.py);
3. time to first token with tools (loopback server);
4. persistence through the store hook (SQLite, PostgreSQL);
5. concurrent streaming chat sessions against `toolwire serve`;
6. the incremental JSON parser behind partial values (benchmarks/partial_parse.py);
7. start-up: `import toolwire` and `toolwire --help` in fresh processes (benchmarks/startup.py).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_PYTHON = HERE / ".venv" / "bin" / "python"

LOOP_PEERS = ["floor_loop", "toolwire_loop", "pydantic_ai_loop", "openai_agents_loop", "langgraph_loop"]


def _ensure_venv() -> None:
    if Path(sys.prefix).resolve() != (HERE / ".venv").resolve():
        if not VENV_PYTHON.exists():
            raise SystemExit("benchmarks/.venv is missing: run `bash scripts/bench_env.sh` first")
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])


def machine() -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
        platform.processor(),
    )
    mem_kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")))
    from importlib.metadata import version

    versions = {}
    for package in ["toolwire", "pydantic-ai-slim", "openai-agents", "langgraph", "langgraph-checkpoint-sqlite", "litellm"]:
        try:
            versions[package] = version(package)
        except Exception:
            versions[package] = "missing"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "versions": versions,
    }


# -- section 1 ------------------------------------------------------------------------------------------


def section_loop(quick: bool) -> list[dict[str, Any]]:
    scenarios = [(1, 200), (8, 50)]
    repeats = 1 if quick else 7
    rows = []
    for calls, steps in scenarios:
        for store in ("none", "sqlite"):
            for module in LOOP_PEERS:
                stores = _peer_stores(module)
                if store not in stores:
                    rows.append({"calls": calls, "steps": steps, "store": store, "framework": _peer_name(module),
                                 "us_per_step": None, "note": "no session store of its own"})
                    continue
                done = subprocess.run(
                    [sys.executable, str(HERE / "_loop_worker.py"), module, str(calls), str(steps), store, str(repeats),
                     *(["--no-memory"] if quick else [])],
                    capture_output=True, text=True, timeout=900, cwd=ROOT,
                )
                if done.returncode != 0:
                    rows.append({"calls": calls, "steps": steps, "store": store, "framework": _peer_name(module),
                                 "us_per_step": None, "note": "failed: " + done.stderr.strip().splitlines()[-1][:120]})
                    continue
                result = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append({"calls": calls, "steps": steps, "store": store, **result})
    return rows


def _peer_name(module: str) -> str:
    return {"floor_loop": "floor (no framework)", "toolwire_loop": "toolwire", "pydantic_ai_loop": "pydantic-ai",
            "openai_agents_loop": "openai-agents", "langgraph_loop": "langgraph"}[module]


def _peer_stores(module: str) -> tuple[str, ...]:
    return {"pydantic_ai_loop": ("none",)}.get(module, ("none", "sqlite"))


def _ratio(value: float, reference: float | None) -> str:
    if not reference:
        return "—"
    ratio = value / reference
    return f"{ratio:.2f}" if ratio < 1 else f"{ratio:.1f}"


def table_loop(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | store | framework | µs per step (median) | × toolwire | × floor | peak Python memory (KiB, tracemalloc) |",
             "|---|---|---|---:|---:|---:|---:|"]

    def per_cell(framework: str) -> dict[tuple[int, str], float]:
        return {(r["calls"], r["store"]): r["us_per_step"] for r in rows if r["framework"] == framework and r.get("us_per_step")}

    base, floor = per_cell("toolwire"), per_cell(_peer_name("floor_loop"))
    for r in rows:
        scenario = f"{r['calls']} call/step × {r['steps']} steps"
        if r.get("us_per_step") is None:
            lines.append(f"| {scenario} | {r['store']} | {r['framework']} | — | — | — | {r.get('note', '')} |")
            continue
        cell = (r["calls"], r["store"])
        ratio = _ratio(r["us_per_step"], base.get(cell))
        over_floor = _ratio(r["us_per_step"], floor.get(cell))
        peak = f"{r['peak_kib']:.0f}" if r.get("peak_kib") is not None else "(full run only)"
        lines.append(f"| {scenario} | {r['store']} | {r['framework']} | {r['us_per_step']:.0f} | {ratio} | {over_floor} | {peak} |")
    return "\n".join(lines)


# -- sections 2-7 ----------------------------------------------------------------------------------------

SECTIONS = {  # number: (module, key in the results, title); each module has run(quick) and table(result)
    3: ("ttft", "ttft", "Time to first token with tools"),
    4: ("persistence", "persistence", "Persistence"),
    5: ("server_load", "server", "Server"),
    6: ("partial_parse", "partial_parse", "Partial JSON values"),
    7: ("startup", "startup", "Start-up"),
}


def main() -> None:
    _ensure_venv()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes (under 3 minutes)")
    parser.add_argument("--only", type=int, nargs="*", default=[1, 2, 3, 4, 5, 6, 7])
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    started = time.perf_counter()
    results: dict[str, Any] = {"machine": machine(), "quick": args.quick}
    print(f"machine: {results['machine']}\n", flush=True)

    if 1 in args.only:
        results["loop"] = section_loop(args.quick)
        print("## 1. Loop overhead per tool step\n\n" + table_loop(results["loop"]) + "\n", flush=True)
    if 2 in args.only:
        import stream_layers
        import stream_parse

        results["stream_parse"] = stream_parse.run(args.quick)
        print("## 2. Streaming parse throughput\n\n" + stream_parse.table(results["stream_parse"]) + "\n", flush=True)
        results["stream_layers"] = stream_layers.run(args.quick)
        print("### Where the time goes (toolwire, 1 MB)\n\n" + stream_layers.table(results["stream_layers"]) + "\n", flush=True)
    for number, (module_name, key, title) in SECTIONS.items():
        if number in args.only:
            module = importlib.import_module(module_name)
            results[key] = module.run(args.quick)
            print(f"## {number}. {title}\n\n" + module.table(results[key]) + "\n", flush=True)

    results["seconds"] = round(time.perf_counter() - started, 1)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    # latest.json is the last full run (what BENCHMARKS.md quotes); a run of some sections goes to only.json.
    name = "quick.json" if args.quick else "latest.json" if set(args.only) >= set(range(1, 8)) else "only.json"
    (out / name).write_text(json.dumps(results, indent=1, default=str))
    print(f"done in {results['seconds']} s; results in {out}")


if __name__ == "__main__":
    main()
