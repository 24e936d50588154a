"""Section 2: streaming parse throughput of a tool call with large arguments, replayed in-process.

Provider streams shaped like the recorded ones in tests/recordings (OpenAI Chat chunk deltas keyed by
`index`, Anthropic `input_json_delta` blocks, Responses `function_call_arguments.delta` items, a Gemini
`functionCall` part), scaled up: arguments of 64 KB to 1 MB, cut into 64-character fragments (16,384
fragments for 1 MB). Each framework gets the bytes through an in-process HTTP transport and must hand
back the parsed arguments (checked). Reported: MB of arguments per second (median), and the growth from
the smallest to the largest size (16x bytes: linear = ~16x time). The "pydantic_core (reference)" row is
no framework: the least any Python reader of these streams does (see pydantic_core_parse).

    benchmarks/.venv/bin/python benchmarks/stream_parse.py [--quick] [--cpu] [--only toolwire,pydantic_core] [--chunk 4096]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

FRAGMENT = 64
TOOL = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}


def _arguments(size: int) -> str:
    return json.dumps({"content": ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]})


def _fragments(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


def openai_chat_body(args: str) -> bytes:
    base = {"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "save", "arguments": ""}}
    events: list[tuple[str | None, Any]] = [
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [first]}, "finish_reason": None}]})
    ]
    for piece in _fragments(args):
        delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        events.append((None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
    events.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    usage = {"prompt_tokens": 10, "completion_tokens": 100, "total_tokens": 110}
    events.append((None, {**base, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return _sse(events)


def anthropic_body(args: str) -> bytes:
    message = {
        "id": "msg_b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "tool_use", "id": "toolu_1", "name": "save", "input": {}}}),
    ]
    for piece in _fragments(args):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta", "partial_json": piece}}))
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 100}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return _sse(events)


def responses_body(args: str) -> bytes:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "save", "arguments": "", "status": "in_progress"}
    response = {"id": "resp_b", "object": "response", "created_at": 1, "status": "in_progress", "model": "gpt-4o",
                "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    seq = 0

    def ev(name: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        nonlocal seq
        seq += 1
        return (name, {"type": name, "sequence_number": seq, **data})

    events: list[tuple[str | None, Any]] = [
        ev("response.created", {"response": response}),
        ev("response.output_item.added", {"output_index": 0, "item": item}),
    ]
    for piece in _fragments(args):
        events.append(ev("response.function_call_arguments.delta", {"item_id": "fc_1", "output_index": 0, "delta": piece}))
    done_item = {**item, "arguments": args, "status": "completed"}
    usage = {"input_tokens": 10, "output_tokens": 100, "total_tokens": 110,
             "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
    events += [
        ev("response.function_call_arguments.done", {"item_id": "fc_1", "output_index": 0, "arguments": args}),
        ev("response.output_item.done", {"output_index": 0, "item": done_item}),
        ev("response.completed", {"response": {**response, "status": "completed", "output": [done_item], "usage": usage}}),
    ]
    return _sse(events)


def gemini_body(args: str) -> bytes:
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "save", "args": json.loads(args)}}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 100, "totalTokenCount": 110},
        "modelVersion": "gemini-2.5-flash",
    }
    return _sse([(None, chunk)])


BODIES: dict[str, Callable[[str], bytes]] = {
    "openai-chat": openai_chat_body,
    "anthropic": anthropic_body,
    "openai-responses": responses_body,
    "gemini": gemini_body,
}

# -- the frameworks ----------------------------------------------------------------------------------------


CHUNK = [0]
"""``--chunk N``: the httpx transport (toolwire's and the reference's) sends the body N bytes at a time, as
network reads would deliver it (0: the whole body in one chunk)."""


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size = body, size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), self.size):
            yield self.body[start : start + self.size]


def _httpx_client(body: bytes) -> httpx.AsyncClient:
    headers = {"content-type": "text/event-stream"}
    if CHUNK[0]:
        return httpx.AsyncClient(
            transport=httpx.MockTransport(lambda r: httpx.Response(200, headers=headers, stream=_Chunks(body, CHUNK[0])))
        )
    return httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=body, headers=headers)))


def _httpx2_client(body: bytes) -> Any:
    import httpx2

    return httpx2.AsyncClient(
        transport=httpx2.MockTransport(lambda r: httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"}))
    )


async def toolwire_parse(provider: str, body: bytes) -> dict[str, Any]:
    from toolwire.messages import Message
    from toolwire.models.base import ModelRequest, ToolDefinition, ToolInputEnd

    client = _httpx_client(body)
    if provider == "openai-chat":
        from toolwire.models import OpenAIChatModel

        model: Any = OpenAIChatModel("gpt-4o", api_key="k", http_client=client)
    elif provider == "anthropic":
        from toolwire.models import AnthropicModel

        model = AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=client)
    elif provider == "openai-responses":
        from toolwire.models import OpenAIResponsesModel

        model = OpenAIResponsesModel("gpt-4o", api_key="k", http_client=client)
    else:
        from toolwire.models import GeminiModel

        model = GeminiModel("gemini-2.5-flash", api_key="k", http_client=client)
    request = ModelRequest(messages=[Message.user("go")], tools=[ToolDefinition(name="save", parameters=TOOL)])
    args: dict[str, Any] = {}
    async for part in model.stream(request):
        if isinstance(part, ToolInputEnd):
            args = part.args
    await client.aclose()
    return args


async def pydantic_ai_parse(provider: str, body: bytes) -> dict[str, Any]:
    from pydantic_ai import ModelRequest
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    client = _httpx2_client(body)
    if provider == "openai-chat":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model: Any = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="k", http_client=client))
    elif provider == "openai-responses":
        from pydantic_ai.models.openai import OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(api_key="k", http_client=client))
    elif provider == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        model = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(api_key="k", http_client=client))
    else:
        raise NotImplementedError("pydantic-ai's Google model goes through the google-genai SDK, not an injectable transport")
    params = ModelRequestParameters(function_tools=[ToolDefinition(name="save", parameters_json_schema=TOOL)])
    async with model_request_stream(model, [ModelRequest.user_text_prompt("go")], model_request_parameters=params) as stream:
        async for _ in stream:
            pass
        response = stream.get()
    part = next(p for p in response.parts if getattr(p, "part_kind", "") == "tool-call")
    return part.args_as_dict()


async def litellm_parse(provider: str, body: bytes) -> dict[str, Any]:
    if provider != "openai-chat":
        raise NotImplementedError("measured on the OpenAI Chat stream only")
    import litellm
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="k", http_client=_httpx2_client(body))
    tools = [{"type": "function", "function": {"name": "save", "parameters": TOOL}}]
    stream = await litellm.acompletion(
        model="openai/gpt-4o", messages=[{"role": "user", "content": "go"}], tools=tools, stream=True, client=client
    )
    chunks = [chunk async for chunk in stream]
    built = litellm.stream_chunk_builder(chunks)
    arguments = built.choices[0].message.tool_calls[0].function.arguments
    return dict(json.loads(arguments))


def _fragment(provider: str, event: Any) -> str:
    """The argument fragment in one decoded event of the benchmark's streams ("" for the others)."""
    if provider == "openai-chat":
        choices = event.get("choices")
        calls = choices[0]["delta"].get("tool_calls") if choices else None
        return calls[0]["function"].get("arguments") or "" if calls else ""
    if provider == "anthropic":
        return event["delta"].get("partial_json", "") if event.get("type") == "content_block_delta" else ""
    if provider == "openai-responses":
        return event["delta"] if event.get("type") == "response.function_call_arguments.delta" else ""
    if "candidates" in event:
        return json.dumps(event["candidates"][0]["content"]["parts"][0]["functionCall"]["args"])
    return ""


async def pydantic_core_parse(provider: str, body: bytes) -> dict[str, Any]:
    """Reference, not a framework: the least a Python reader of these streams does. The same transport,
    SSE events cut from the raw bytes (one data line each, as here), every event decoded by
    pydantic_core.from_json, the fragments picked by the stream's known shape, joined, decoded once."""
    import pydantic_core

    client = _httpx_client(body)
    fragments = []
    async with client.stream("POST", "http://test/") as response:
        pending = b""
        async for chunk in response.aiter_bytes():
            blocks = (pending + chunk).split(b"\n\n")
            pending = blocks.pop()
            for block in blocks:
                data = block[block.index(b"data: ") + 6 :]
                if data != b"[DONE]":
                    fragments.append(_fragment(provider, pydantic_core.from_json(data)))
    await client.aclose()
    return dict(pydantic_core.from_json("".join(fragments)))


FRAMEWORKS: dict[str, Callable[[str, bytes], Awaitable[dict[str, Any]]]] = {
    "toolwire": toolwire_parse,
    "pydantic-ai": pydantic_ai_parse,
    "litellm": litellm_parse,
    "pydantic_core (reference)": pydantic_core_parse,
}


async def measure(framework: str, provider: str, size: int, repeats: int) -> float | str:
    """Median MB/s of argument bytes, or the reason it cannot be measured."""
    args = _arguments(size)
    body = BODIES[provider](args)
    parse = FRAMEWORKS[framework]
    try:
        parsed = await parse(provider, body)  # warm-up, and a correctness check
    except NotImplementedError as exc:
        return f"n/a: {exc}"
    except Exception as exc:  # a peer that cannot parse the stream is reported, not hidden
        return f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    if parsed != json.loads(args):
        return "failed: wrong arguments"
    samples = []
    for _ in range(repeats):
        start = CLOCK[0]()
        await parse(provider, body)
        samples.append(CLOCK[0]() - start)
    return len(args) / statistics.median(samples) / 1e6


CLOCK: list[Callable[[], float]] = [time.perf_counter]
"""``--cpu``: ``time.process_time`` (steadier on a shared machine; these readers never wait for I/O)."""


def run(quick: bool = False, only: str = "") -> list[dict[str, Any]]:
    sizes = [64 * 1024, 1024 * 1024] if quick else [64 * 1024, 256 * 1024, 1024 * 1024]
    repeats = 3 if quick else 5
    rows = []
    chosen = [f for f in FRAMEWORKS if not only or any(f.startswith(o) for o in only.split(","))]
    for provider in BODIES:
        for framework in chosen:
            row: dict[str, Any] = {"provider": provider, "framework": framework}
            for size in sizes:
                row[f"{size // 1024}K"] = asyncio.run(measure(framework, provider, size, repeats))
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    sizes = [k for k in rows[0] if k.endswith("K")]
    lines = [
        "| stream | framework | " + " | ".join(f"MB/s @ {s}" for s in sizes) + " | time growth (16x bytes) | vs toolwire @ 1 MB |",
        "|---|---|" + "---:|" * (len(sizes) + 2),
    ]
    best: dict[str, float] = {}
    for r in rows:
        if r["framework"] == "toolwire" and isinstance(r[sizes[-1]], float):
            best[r["provider"]] = r[sizes[-1]]
    for r in rows:
        values = [r[s] for s in sizes]
        cells = [f"{v:.1f}" if isinstance(v, float) else str(v) for v in values]
        if all(isinstance(v, float) for v in (values[0], values[-1])):
            growth = f"{(values[0] / values[-1]) * (int(sizes[-1][:-1]) / int(sizes[0][:-1])):.1f}x"
            ratio = best.get(r["provider"])
            if not ratio or r["framework"] == "toolwire":
                versus = "1.0"
            else:
                versus = f"{ratio / values[-1]:.1f}x slower" if values[-1] < ratio else f"{values[-1] / ratio:.1f}x faster"
        else:
            growth, versus = "", ""
        lines.append(f"| {r['provider']} | {r['framework']} | " + " | ".join(cells) + f" | {growth} | {versus} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--only", default="", help="frameworks whose names start so, comma-separated")
    parser.add_argument("--chunk", type=int, default=0, help="network chunk size in bytes (toolwire, pydantic_core)")
    options = parser.parse_args()
    CHUNK[0] = options.chunk
    if options.cpu:
        CLOCK[0] = time.process_time
    print(table(run(quick=options.quick, only=options.only)))
