"""Section 2, continued: where toolwire's time goes when it streams a 1 MB tool call (the bodies of
stream_parse.py), layer by layer, each timed alone on the previous layer's output:

1. transport: httpx's in-process transport, `Response.aiter_bytes()`;
2. SSE framing: `toolwire.models._sse.SSEDecoder` over the same response's chunks (transport included,
   so its own cost is this row minus row 1);
3. JSON per event: `pydantic_core.from_json` of every event's data, as `_http.parse_json` does (and, for
   reference, `json.loads` of the same bytes);
4. the adapter's parser: `parser.feed(event)` over the decoded events, building the stream parts
   (`ToolInputDelta` per fragment, the arguments accumulated and parsed once at the end);
4'. what the pipeline does instead of 3 + 4: `parser.feed_data(name, data)` on the undecoded events
   (`toolwire.models._delta_shortcut`: a bare argument fragment read from its bytes), decoding and
   feeding only the events it hands back;
5. the whole `model.stream()`, as section 2 measures it; "the rest" is the whole minus rows 2 + 4':
   the async generators between the layers and the request set-up.

Medians of `--repeat` runs, in ms and µs per event (16,384 argument fragments of 64 characters per MB).
Uses private toolwire modules: a benchmark of internals, not an API.

    .venv/bin/python benchmarks/stream_layers.py [--quick] [--repeat 7]
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
import pydantic_core
import stream_parse

from toolwire.messages import Message
from toolwire.models._sse import SSEDecoder, SSEEvent
from toolwire.models.base import ModelRequest, ToolDefinition

PROVIDERS = ["openai-chat", "anthropic", "openai-responses"]


def _response(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


async def _chunks(body: bytes) -> int:
    return sum([1 async for _ in _response(body).aiter_bytes()])


async def _sse(body: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event async for chunk in _response(body).aiter_bytes() for event in decoder.feed(chunk)]
    return events + decoder.end()


async def _sse_count(body: bytes) -> int:
    """As the pipeline reads them: every batch dropped once read (keeping them all would time the GC)."""
    count = 0
    decoder = SSEDecoder()
    async for chunk in _response(body).aiter_bytes():
        count += len(decoder.feed(chunk))
    return count + len(decoder.end())


def _model(provider: str, client: httpx.AsyncClient) -> Any:
    from toolwire.models import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel

    if provider == "openai-chat":
        return OpenAIChatModel("gpt-4o", api_key="k", http_client=client)
    if provider == "anthropic":
        return AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=client)
    return OpenAIResponsesModel("gpt-4o", api_key="k", http_client=client)


def _request() -> ModelRequest:
    return ModelRequest(
        messages=[Message.user("go")], tools=[ToolDefinition(name="save", parameters=stream_parse.TOOL)]
    )


async def _parser(provider: str) -> Any:
    async with httpx.AsyncClient() as client:
        exchange = await _model(provider, client)._exchange(_request())
    return exchange.parser


def _decode(name: str, data: bytes) -> dict[str, Any]:
    event: dict[str, Any] = pydantic_core.from_json(data)
    if name != "message":
        event.setdefault("type", name)
    return event


def _median_ms(fn: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def measure(provider: str, size: int, repeats: int) -> dict[str, Any]:
    args = stream_parse._arguments(size)
    body = stream_parse.BODIES[provider](args)
    events = asyncio.run(_sse(body))
    gc.collect()
    gc.freeze()  # the inputs kept for the isolated layers are not garbage collection's work in the pipeline
    named = [(name, data.strip()) for name, data in events if data.strip() != b"[DONE]"]
    datas = [data for _, data in named]
    decoded = [_decode(name, data) for name, data in named]

    parsers = [asyncio.run(_parser(provider)) for _ in range(2 * repeats)]  # built before, not timed
    gc.freeze()

    def shortcut_all() -> None:
        parser = parsers.pop()
        for name, data in named:
            if parser.feed_data(name, data) is None:
                parser.feed(_decode(name, data))
        parser.end()

    def feed_all() -> None:
        parser = parsers.pop()
        for event in decoded:
            parser.feed(event)
        parser.end()

    def loads_all() -> None:
        for data in datas:
            json.loads(data)

    def from_json_all() -> None:
        for data in datas:
            pydantic_core.from_json(data)

    rows = {
        "1. transport + aiter_bytes": _median_ms(lambda: asyncio.run(_chunks(body)), repeats),
        "2. + SSE framing (SSEDecoder)": _median_ms(lambda: asyncio.run(_sse_count(body)), repeats),
        "3. pydantic_core.from_json per event": _median_ms(from_json_all, repeats),
        "3'. json.loads per event (reference)": _median_ms(loads_all, repeats),
        "4. adapter parser.feed per event": _median_ms(feed_all, repeats),
        "4'. parser.feed_data per event, 3 + 4 on a miss (the pipeline)": _median_ms(shortcut_all, repeats),
        "5. whole model.stream()": _median_ms(
            lambda: asyncio.run(stream_parse.toolwire_parse(provider, body)), repeats
        ),
    }
    shortcut = rows["4'. parser.feed_data per event, 3 + 4 on a miss (the pipeline)"]
    gc.unfreeze()
    rows["the rest (5 − 2 − 4')"] = (
        rows["5. whole model.stream()"] - rows["2. + SSE framing (SSEDecoder)"] - shortcut
    )
    return {
        "provider": provider,
        "events": len(datas),
        "bytes": len(args),
        "body_bytes": len(body),
        "ms": rows,
    }


def run(quick: bool = False, repeats: int | None = None) -> list[dict[str, Any]]:
    repeats = repeats or (3 if quick else 7)
    return [measure(provider, 1024 * 1024, repeats) for provider in PROVIDERS]


def table(results: list[dict[str, Any]]) -> str:
    header = "| layer | " + " | ".join(f"{r['provider']} ms (µs/event)" for r in results) + " |"
    lines = [header, "|---|" + "---:|" * len(results)]
    for layer in results[0]["ms"]:
        cells = [f"{r['ms'][layer]:.1f} ({r['ms'][layer] / r['events'] * 1000:.2f})" for r in results]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    whole = "5. whole model.stream()"
    lines.append(
        "| MB/s of arguments (whole) | "
        + " | ".join(f"{r['bytes'] / r['ms'][whole] / 1000:.1f}" for r in results)
        + " |"
    )
    lines.append(
        "| events; SSE body bytes per argument byte | "
        + " | ".join(f"{r['events']}; {r['body_bytes'] / r['bytes']:.1f}" for r in results)
        + " |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    from _cli import bench_main

    bench_main(__doc__, run, table)
