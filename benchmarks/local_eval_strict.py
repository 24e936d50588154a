"""Strict evaluation of the embedded model on toolsets nobody tuned to (issue 30).

Twelve toolsets (``local_eval_toolsets.py``) and 84 turns in two files written before any tuning:
``local_eval_data/dev.json`` (six toolsets, the set the driver is tuned on) and
``local_eval_data/heldout.json`` (six other toolsets, run only for the report). Each task is a fresh
session on ``toolwire.Agent("local", tools=...)`` with a :class:`~toolwire.store.memory.MemoryStore`, and
every turn is scored from what the store holds after it, never from the run's return value:

* ``one_tool`` / ``exact_args``: exactly one tool call, the expected tool, the expected arguments (strings
  compared exactly for ``exact_args``, trimmed and case-folded for ``one_tool``; numbers as numbers; an
  argument equal to its schema default counts as absent), and the answer contains every expected fact;
* ``follow_up``: no call, the answer contains every expected fact (it is in an earlier stored result);
* ``no_tool``: no call and a non-empty answer;
* ``no_data``: the answer says the information is not available (calls are allowed: looking is fine).

Every kind also fails on an invented fact: a number in the answer that appears in no stored user message
and no stored tool result of the session. Facts are compared case-insensitively.

    .venv/bin/python benchmarks/local_eval_strict.py dev|heldout|all [--verbose] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from local_eval_toolsets import TOOLSETS

import toolwire
from toolwire.messages import Message
from toolwire.store.memory import MemoryStore

DATA = Path(__file__).parent / "local_eval_data"
KINDS = ("one_tool", "exact_args", "follow_up", "no_tool", "no_data")
_UNAVAILABLE = re.compile(
    r"not available|unavailable|n[o']t have (?:that|this|the|any)|do not have|don't have|no information|"
    r"not (?:know|sure)|don't know|cannot (?:find|tell|say)|can't (?:find|tell|say)|unable to|no data|"
    r"not (?:provided|listed|included|in the)|isn't (?:listed|available|included)",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"-?\d+(?:[.,:]\d+)*")


@dataclass(frozen=True, slots=True)
class TurnResult:
    set: str
    task: str
    toolset: str
    kind: str
    prompt: str
    ok: bool
    failure: str
    seconds: float
    calls: list[tuple[str, dict[str, Any]]]
    answer: str


def load(name: str) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return tasks


def _defaults(toolset: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool in TOOLSETS[toolset]:
        props = tool.definition().parameters.get("properties", {})
        out[tool.definition().name] = {k: v["default"] for k, v in props.items() if "default" in v}
    return out


def _norm_args(args: dict[str, Any], defaults: dict[str, Any], exact: bool) -> dict[str, Any]:
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return value if exact else value.strip().casefold()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return value

    return {k: norm(v) for k, v in args.items() if v is not None and (k not in defaults or v != defaults[k])}


def _numbers(text: str) -> set[str]:
    out = set()
    for token in _NUMBER.findall(text):
        out.add(token)
        number = _float(token)
        if number is not None:
            out.add(repr(number))
    return out


def invented_numbers(answer: str, evidence: str) -> list[str]:
    """Numbers in ``answer`` that appear nowhere in ``evidence`` (the session's user text and results)."""
    known = _numbers(evidence)
    return [n for n in _NUMBER.findall(answer) if n not in known and repr(_float(n)) not in known]


def _float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def score(
    turn: dict[str, Any], toolset: str, history: Sequence[Message]
) -> tuple[str, list[tuple[str, dict[str, Any]]], str]:
    """(failure or "", the turn's calls, its answer), from the stored history after the turn."""
    last_user = max(i for i, m in enumerate(history) if m.role == "user")
    this_turn = history[last_user + 1 :]
    calls = [(c.tool_name, dict(c.args)) for m in this_turn for c in m.tool_calls]
    final = this_turn[-1] if this_turn and this_turn[-1].role == "assistant" else None
    answer = final.text if final is not None and not final.tool_calls else ""
    evidence = "\n".join(
        [m.text for m in history if m.role == "user"]
        + [r.output_text() for m in history for r in m.tool_results]
    )
    kind = turn["kind"]
    if kind in ("one_tool", "exact_args"):
        name, want = turn["call"]
        if not calls:
            return "no call", calls, answer
        if len(calls) > 1:
            return "extra call", calls, answer
        if calls[0][0] != name:
            return "wrong tool", calls, answer
        defaults = _defaults(toolset).get(name, {})
        exact = kind == "exact_args"
        if _norm_args(calls[0][1], defaults, exact) != _norm_args(want, defaults, exact):
            return "wrong args", calls, answer
    elif kind in ("follow_up", "no_tool") and calls:
        return "extra call", calls, answer
    if not answer.strip():
        return "no answer", calls, answer
    if invented_numbers(answer, evidence):
        return "invented", calls, answer
    if kind == "no_data" and not _UNAVAILABLE.search(answer):
        return "no 'not available'", calls, answer
    missing = [f for f in turn["facts"] if f.casefold() not in answer.casefold()]
    if missing:
        return "fact missing", calls, answer
    return "", calls, answer


async def run_task(set_name: str, task: dict[str, Any], verbose: bool) -> list[TurnResult]:
    store = MemoryStore()
    agent = toolwire.Agent("local", tools=TOOLSETS[task["toolset"]], store=store)
    session_id: str | None = None
    out: list[TurnResult] = []
    for turn in task["turns"]:
        started = time.perf_counter()
        try:
            result = await agent.run(turn["prompt"], session_id=session_id)
            session_id = result.session_id
            seconds = time.perf_counter() - started
            history = await store.load_history(session_id)
            failure, calls, answer = score(turn, task["toolset"], history)
        except Exception as exc:  # a failed run fails its turn, and the task (later turns need it)
            seconds = time.perf_counter() - started
            failure, calls, answer = f"error: {type(exc).__name__}", [], str(exc)[:200]
        r = TurnResult(
            set_name, task["name"], task["toolset"], turn["kind"], turn["prompt"],
            not failure, failure, seconds, calls, answer,
        )  # fmt: skip
        out.append(r)
        if verbose:
            mark = "ok  " if r.ok else f"FAIL ({r.failure})"
            print(
                f"{mark} {r.seconds:5.1f}s [{r.kind}] {r.prompt!r} -> {r.calls} {r.answer!r}", file=sys.stderr
            )
        if failure.startswith("error"):
            break
    return out


async def evaluate(sets: Sequence[str], verbose: bool) -> dict[str, list[TurnResult]]:
    from toolwire.models.local import LocalModel

    LocalModel()._llama()  # load once, outside the timed turns
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
    results: dict[str, list[TurnResult]] = {}
    for name in sets:
        results[name] = []
        for task in load(name):
            results[name] += await run_task(name, task, verbose)
    return results


def summary(name: str, results: Sequence[TurnResult]) -> str:
    expected = sum(len(t["turns"]) for t in load(name))
    ok = sum(r.ok for r in results)
    by_kind = []
    for kind in KINDS:
        of_kind = [r for r in results if r.kind == kind]
        by_kind.append(f"{kind} {sum(r.ok for r in of_kind)}/{len(of_kind)}")
    no_data_bad = sum(1 for r in results if r.kind == "no_data" and not r.ok)
    seconds = [r.seconds for r in results]
    failures = Counter(r.failure for r in results if not r.ok)
    return (
        f"{name}: {ok}/{expected} strict ({100 * ok / expected:.0f} %); {', '.join(by_kind)}; "
        f"no-data turns failed (invented or no 'not available'): {no_data_bad}; "
        f"seconds per turn median {statistics.median(seconds):.2f}, max {max(seconds):.1f}; "
        f"failures: {', '.join(f'{k} {n}' for k, n in failures.most_common()) or 'none'}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("set", choices=("dev", "heldout", "all"))
    parser.add_argument("--json", type=Path, help="also write every turn as JSON here")
    parser.add_argument("--verbose", action="store_true", help="print each turn as it finishes")
    args = parser.parse_args(argv)
    sets = ("dev", "heldout") if args.set == "all" else (args.set,)
    results = asyncio.run(evaluate(sets, args.verbose))
    for name in sets:
        print(summary(name, results[name]))
    if args.json:
        rows = [asdict(r) for name in sets for r in results[name]]
        args.json.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
