"""Tool use on the embedded model: a dozen tasks over four toolsets, run through the real agent loop.

Each task is a fresh session of one or more turns; every turn says which tool call it expects (or none:
a follow-up answered from an earlier result) and a fact the answer must contain. The model is the real
SmolLM2-135M-Instruct GGUF on the CPU through llama-cpp-python, with the agent's default driver (the
ReAct driver built from the agent's own tools: no hand-written examples). Reported: success per turn,
failures by kind, and seconds per turn (wall time of ``agent.run``, model load excluded).

    .venv/bin/python benchmarks/local_eval.py [--only TASK_PREFIX] [--json PATH] [--verbose]

A turn succeeds when the tool calls are exactly the expected ones (same tool, the expected arguments) and
the answer contains the expected fact (case-insensitive). Failure kinds, first that applies:
``error`` (the run raised), ``no call``, ``wrong tool``, ``wrong args``, ``extra call`` (a follow-up that
looked the fact up again, or a second call), ``fact missing`` (calls right, answer lacks the fact).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import toolwire
from toolwire.agent.agent import Agent

# -- toolsets ------------------------------------------------------------------------------------------

_WEATHER = {
    "oslo": {"temp_c": 4, "conditions": "cloudy"},
    "paris": {"temp_c": 12, "conditions": "rain"},
    "tokyo": {"temp_c": 18, "conditions": "clear"},
    "lima": {"temp_c": 22, "conditions": "sunny"},
}
_TIMES = {"oslo": "14:05", "paris": "14:05", "tokyo": "22:05", "lima": "08:05"}
_PRODUCTS = {
    "SKU-42": {"name": "Steel Kettle", "price_eur": 19.99, "in_stock": 7},
    "SKU-7": {"name": "Desk Lamp", "price_eur": 34.5, "in_stock": 0},
}


@toolwire.tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city: temperature in °C and conditions.

    Args:
        city: The city name, like Oslo.
    """
    return {"city": city, **_WEATHER[city.strip().lower()]}


@toolwire.tool
def get_time(city: str) -> dict[str, str]:
    """Local time in a city (24-hour clock).

    Args:
        city: The city name, like Oslo.
    """
    return {"city": city, "time": _TIMES[city.strip().lower()]}


@toolwire.tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@toolwire.tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


@toolwire.tool
def get_transaction_status(transaction_id: str) -> dict[str, str]:
    """Look up a payment transaction.

    Args:
        transaction_id: The id, like TXN_123.
    """
    # The README's own tool, word for word.
    return {"id": transaction_id, "status": "settled", "authorized_by": "Dana Kim"}


@toolwire.tool
def lookup_product(sku: str) -> dict[str, Any]:
    """Look up a product by its SKU: name, price in euros and units in stock.

    Args:
        sku: The product SKU, like SKU-1.
    """
    return {"sku": sku, **_PRODUCTS[sku.strip().upper()]}


TOOLSETS: dict[str, tuple[Any, ...]] = {
    "weather+time": (get_weather, get_time),
    "calculator": (add, multiply),
    "README agent": (get_transaction_status,),
    "products": (lookup_product,),
}

# -- tasks -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    prompt: str
    call: tuple[str, dict[str, Any]] | None
    """The one tool call expected (arguments compared loosely), or None: answer without a call."""
    fact: str
    """Text the answer must contain (case-insensitive); "" accepts any non-empty answer."""


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    toolset: str
    turns: tuple[Turn, ...]


TASKS: tuple[Task, ...] = (
    Task(
        "weather",
        "weather+time",
        (Turn("What's the weather in Paris?", ("get_weather", {"city": "Paris"}), "12"),),
    ),
    Task(
        "weather, follow-up",
        "weather+time",
        (
            Turn("How warm is it in Tokyo?", ("get_weather", {"city": "Tokyo"}), "18"),
            Turn("And what are the conditions there?", None, "clear"),
        ),
    ),
    Task(
        "time", "weather+time", (Turn("What time is it in Lima?", ("get_time", {"city": "Lima"}), "08:05"),)
    ),
    Task(
        "time, not weather",
        "weather+time",
        (Turn("Tell me the local time in Oslo.", ("get_time", {"city": "Oslo"}), "14:05"),),
    ),
    Task("add", "calculator", (Turn("What is 17 plus 25?", ("add", {"a": 17, "b": 25}), "42"),)),
    Task("multiply", "calculator", (Turn("Multiply 12 by 3.", ("multiply", {"a": 12, "b": 3}), "36"),)),
    Task(
        "add, follow-up",
        "calculator",
        (
            Turn("Add 100 and 23.", ("add", {"a": 100, "b": 23}), "123"),
            Turn("What was the result again?", None, "123"),
        ),
    ),
    Task(
        "README: status, then who authorized it",
        "README agent",
        (
            Turn(
                "What's the status of TXN_123?",
                ("get_transaction_status", {"transaction_id": "TXN_123"}),
                "settled",
            ),
            Turn("Who authorized it?", None, "Dana Kim"),
        ),
    ),
    Task(
        "README: another id",
        "README agent",
        (
            Turn(
                "Check transaction TXN_808 for me.",
                ("get_transaction_status", {"transaction_id": "TXN_808"}),
                "settled",
            ),
        ),
    ),
    Task(
        "product price, then stock",
        "products",
        (
            Turn("How much does SKU-42 cost?", ("lookup_product", {"sku": "SKU-42"}), "19.99"),
            Turn("How many are in stock?", None, "7"),
        ),
    ),
    Task(
        "product name",
        "products",
        (Turn("What product is SKU-7?", ("lookup_product", {"sku": "SKU-7"}), "Desk Lamp"),),
    ),
    Task("greeting, no tool", "products", (Turn("Hello!", None, ""),)),
)


# -- running ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnResult:
    task: str
    prompt: str
    ok: bool
    failure: str
    seconds: float
    calls: list[tuple[str, dict[str, Any]]]
    answer: str


def _same_args(got: dict[str, Any], want: dict[str, Any]) -> bool:
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return value.strip().lower()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return value

    return {k: norm(v) for k, v in got.items()} == {k: norm(v) for k, v in want.items()}


def judge(turn: Turn, calls: Sequence[tuple[str, dict[str, Any]]], answer: str) -> str:
    """The failure kind of a finished turn, or "" when it succeeded."""
    if turn.call is None:
        if calls:
            return "extra call"
    else:
        name, args = turn.call
        if not calls:
            return "no call"
        first_name, first_args = calls[0]
        if first_name != name:
            return "wrong tool"
        if not _same_args(first_args, args):
            return "wrong args"
        if len(calls) > 1:
            return "extra call"
    if not answer.strip() or turn.fact.lower() not in answer.lower():
        return "fact missing"
    return ""


async def run_task(task: Task, make_agent: Callable[[tuple[Any, ...]], Agent[None]]) -> list[TurnResult]:
    agent = make_agent(TOOLSETS[task.toolset])
    session_id: str | None = None
    out: list[TurnResult] = []
    for turn in task.turns:
        started = time.perf_counter()
        try:
            result = await agent.run(turn.prompt, session_id=session_id)
        except Exception as exc:
            out.append(
                TurnResult(
                    task.name,
                    turn.prompt,
                    False,
                    f"error: {type(exc).__name__}",
                    time.perf_counter() - started,
                    [],
                    str(exc)[:200],
                )
            )
            break  # the rest of the task depends on this turn
        seconds = time.perf_counter() - started
        session_id = result.session_id
        calls = [(e.call.tool_name, dict(e.call.args)) for e in result.tool_executions]
        answer = str(result.output)
        failure = judge(turn, calls, answer)
        out.append(TurnResult(task.name, turn.prompt, not failure, failure, seconds, calls, answer))
    return out


def _default_agent(tools: tuple[Any, ...]) -> Agent[None]:
    return toolwire.Agent("local", tools=tools)


async def evaluate(tasks: Sequence[Task], *, verbose: bool = False) -> list[TurnResult]:
    from toolwire.models.local import LocalModel

    load_started = time.perf_counter()
    LocalModel()._llama()  # load once, outside the timed turns
    print(
        f"model loaded in {time.perf_counter() - load_started:.1f} s; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores",
        file=sys.stderr,
    )
    results: list[TurnResult] = []
    for task in tasks:
        for r in await run_task(task, _default_agent):
            results.append(r)
            if verbose:
                mark = "ok " if r.ok else f"FAIL ({r.failure})"
                print(
                    f"{mark} {r.seconds:5.1f}s  {r.task}: {r.prompt!r} -> {r.calls} {r.answer!r}",
                    file=sys.stderr,
                )
    return results


def report(tasks: Sequence[Task], results: Sequence[TurnResult]) -> str:
    expected_turns = sum(len(t.turns) for t in tasks)
    ok = sum(r.ok for r in results)
    follow = [
        r
        for r in results
        if any(t.prompt == r.prompt and t.call is None for task in tasks for t in task.turns)
    ]
    seconds = [r.seconds for r in results]
    kinds = Counter(r.failure for r in results if not r.ok)
    not_run = expected_turns - len(results)
    lines = [
        "| task | toolset | turn | expected call | result | s |",
        "|---|---|---|---|---|---:|",
    ]
    by_prompt = {(r.task, r.prompt): r for r in results}
    for task in tasks:
        for turn in task.turns:
            r = by_prompt.get((task.name, turn.prompt))
            call = (
                "none (answer from history)"
                if turn.call is None
                else f"`{turn.call[0]}({json.dumps(turn.call[1])})`"
            )
            result = "not run" if r is None else ("ok" if r.ok else r.failure)
            secs = "" if r is None else f"{r.seconds:.1f}"
            lines.append(f"| {task.name} | {task.toolset} | {turn.prompt} | {call} | {result} | {secs} |")
    lines += [
        "",
        f"turns succeeded: {ok}/{expected_turns}; follow-ups answered from history: "
        f"{sum(r.ok for r in follow)}/{sum(t.call is None for task in tasks for t in task.turns)}",
        f"seconds per turn: median {statistics.median(seconds):.1f}, max {max(seconds):.1f}, "
        f"total {sum(seconds):.0f}"
        if seconds
        else "no turn ran",
        "failures by kind: "
        + (", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "none")
        + (f", not run (after an error) {not_run}" if not_run else ""),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="run the tasks whose name starts with this")
    parser.add_argument("--json", type=Path, help="also write every turn as JSON here")
    parser.add_argument("--verbose", action="store_true", help="print each turn as it finishes")
    args = parser.parse_args(argv)
    tasks = [t for t in TASKS if t.name.startswith(args.only)]
    results = asyncio.run(evaluate(tasks, verbose=args.verbose))
    print(report(tasks, results))
    if args.json:
        args.json.write_text(
            json.dumps([asdict(r) for r in results], indent=1, ensure_ascii=False), encoding="utf-8"
        )


if __name__ == "__main__":
    main()
