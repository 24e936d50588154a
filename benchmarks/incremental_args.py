"""Benchmark: a 1 MB tool-call argument streamed in 10,000 fragments through OpenAIChatModel.

Compares toolwire's argument handling (fragments appended to a list, joined and parsed once at the end)
with a naive client that re-parses the growing buffer with ``json.loads`` after every fragment, as
"parse partial JSON as it streams" code often does. The naive approach is quadratic, so by default it is
timed on the first ``--baseline-fragments`` fragments only and extrapolated to the full run by
(N / k)^2; pass ``--full-baseline`` to time it on every fragment (tens of seconds).

Run: ``.venv/bin/python benchmarks/incremental_args.py``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Callable

import httpx

from toolwire.messages import Message
from toolwire.models.base import ModelRequest, ToolArgsAccumulator, ToolDefinition, collect
from toolwire.models.openai_chat import OpenAIChatModel

CALL_ID = "call_bench"


def make_arguments(target_bytes: int) -> str:
    """A JSON object of about ``target_bytes`` compact bytes."""
    rows = []
    size = 0
    i = 0
    while size < target_bytes:
        row = {
            "id": i,
            "name": f"item-{i}",
            "tags": ["alpha", "beta", "gamma"],
            "price": i * 1.25,
            "ok": i % 2 == 0,
        }
        rows.append(row)
        size += len(json.dumps(row, separators=(",", ":"))) + 1
        i += 1
    return json.dumps({"rows": rows}, separators=(",", ":"))


def split(text: str, parts: int) -> list[str]:
    """Exactly ``parts`` fragments whose sizes differ by at most one character."""
    size, extra = divmod(len(text), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def sse_body(fragments: list[str]) -> bytes:
    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        payload = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(payload)}\n\n"

    header = {
        "index": 0,
        "id": CALL_ID,
        "type": "function",
        "function": {"name": "store_rows", "arguments": ""},
    }
    out = [chunk({"role": "assistant", "content": None, "tool_calls": [header]})]
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments]
    out.append(chunk({}, "tool_calls"))
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


async def toolwire_end_to_end(body: bytes, expected: str) -> float:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = OpenAIChatModel("bench", api_key="k", http_client=client)
        request = ModelRequest(messages=[Message.user("store")], tools=[ToolDefinition(name="store_rows")])
        start = time.perf_counter()
        response = await collect(model, request)
        elapsed = time.perf_counter() - start
    call = response.tool_calls[0]
    assert call.args_json == expected and len(call.args["rows"]) > 0
    return elapsed


def toolwire_accumulator(fragments: list[str]) -> float:
    start = time.perf_counter()
    acc = ToolArgsAccumulator()
    for fragment in fragments:
        acc.add(fragment)
    end = acc.end(id=CALL_ID, tool_name="store_rows")
    elapsed = time.perf_counter() - start
    assert end.args_error is None
    return elapsed


def naive_reparse(fragments: list[str]) -> float:
    start = time.perf_counter()
    buffer = ""
    for fragment in fragments:
        buffer += fragment
        with contextlib.suppress(ValueError):  # fails until the last fragment closes the object
            json.loads(buffer)
    return time.perf_counter() - start


def best_of(runs: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=1_000_000)
    parser.add_argument("--fragments", type=int, default=10_000)
    parser.add_argument("--baseline-fragments", type=int, default=1_000)
    parser.add_argument("--full-baseline", action="store_true")
    args = parser.parse_args()

    text = make_arguments(args.bytes)
    fragments = split(text, args.fragments)
    n = len(fragments)
    body = sse_body(fragments)

    end_to_end = min(asyncio.run(toolwire_end_to_end(body, text)) for _ in range(3))
    accumulate = best_of(5, lambda: toolwire_accumulator(fragments))
    if args.full_baseline:
        k = n
        naive = naive_reparse(fragments)
        naive_note = "measured"
    else:
        k = min(args.baseline_fragments, n)
        naive_k = best_of(3, lambda: naive_reparse(fragments[:k]))
        naive = naive_k * (n / k) ** 2
        naive_note = f"extrapolated x(N/k)^2 from k={k} fragments ({naive_k * 1000:.1f} ms)"

    print(
        f"argument: {len(text):,} bytes in {n:,} fragments (~{len(text) // n} bytes each); SSE body {len(body):,} bytes"
    )
    print()
    print(f"| {'method':<52} | {'time':>10} | note")
    print(f"|{'-' * 54}|{'-' * 12}|{'-' * 40}")
    rows = [
        ("toolwire OpenAIChatModel, SSE -> parts -> collect()", end_to_end, "whole stream via MockTransport"),
        ("toolwire ToolArgsAccumulator only (add + end)", accumulate, "append fragments, join + parse once"),
        ("naive: json.loads(growing buffer) per fragment", naive, naive_note),
    ]
    for name, seconds, note in rows:
        print(f"| {name:<52} | {seconds * 1000:>7.1f} ms | {note}")
    print()
    print(f"naive / accumulator: {naive / accumulate:,.0f}x   naive / end-to-end: {naive / end_to_end:,.1f}x")


if __name__ == "__main__":
    main()
