"""A loopback OpenAI-Chat-compatible server for the TTFT benchmark: text tokens at a fixed rate, then a
tool call (when tools are offered and no tool result is in the conversation yet), then more text.

    python benchmarks/_ttft_server.py PORT TOKENS INTERVAL_MS
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

PORT, TOKENS, INTERVAL = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000


def chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def plan(request: dict) -> tuple[list[str], bool]:
    answered = any(m.get("role") == "tool" for m in request["messages"])
    wants_tool = bool(request.get("tools")) and not answered
    return [f"tok{i} " for i in range(TOKENS)], wants_tool


async def completions(request: Request) -> Response:
    body = await request.json()
    tokens, wants_tool = plan(body)
    if not body.get("stream"):
        await asyncio.sleep(INTERVAL * len(tokens))  # the whole answer is generated before anything is sent
        message: dict = {"role": "assistant", "content": "".join(tokens)}
        if wants_tool:
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}]
        return JSONResponse({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                             "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if wants_tool else "stop"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    async def stream() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": ""})
        for i, token in enumerate(tokens):
            if i:
                await asyncio.sleep(INTERVAL)
            yield chunk({"content": token})
        if wants_tool:
            call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}
            yield chunk({"tool_calls": [call]})
            yield chunk({}, "tool_calls")
        else:
            yield chunk({}, "stop")
        yield b"data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                        Route("/ready", lambda r: JSONResponse({"ok": time.time()}))])
uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
