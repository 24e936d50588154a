"""Run a documentation example with a stand-in for OpenAI at the network edge.

``python _fake_openai.py EXAMPLE.py`` sets a dummy ``OPENAI_API_KEY``, makes every ``httpx.AsyncClient``
that talks to ``api.openai.com`` use an in-process transport speaking the Chat Completions streaming
wire, and runs the example as ``__main__``. The real adapter, loop, executor and store run; only the
hosted model is replaced, by a plain rule: with tools and no tool result yet, call the first tool with
arguments built from its JSON Schema; otherwise answer with the tool results it was given.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any

import httpx

_EXAMPLE_VALUES = {"string": "TXN_123", "integer": 1, "number": 1.5, "boolean": True}


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {
        name: _EXAMPLE_VALUES.get(properties[name].get("type", "string"), "TXN_123")
        for name in schema.get("required", list(properties))
    }


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-docs",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _answer(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    messages = body["messages"]
    tools = body.get("tools") or []
    frames = [_chunk({"role": "assistant", "content": ""})]
    if tools and messages[-1]["role"] != "tool":
        function = tools[0]["function"]
        call = {
            "index": 0,
            "id": f"call_{len(messages)}",
            "type": "function",
            "function": {
                "name": function["name"],
                "arguments": json.dumps(_arguments(function["parameters"])),
            },
        }
        frames += [_chunk({"tool_calls": [call]}), _chunk({}, "tool_calls")]
    else:
        results = [str(m["content"]) for m in messages if m["role"] == "tool"]
        frames += [_chunk({"content": "Answer: " + ("; ".join(results) or "hello")}), _chunk({}, "stop")]
    usage = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
    frames.append(
        b"data: " + json.dumps({"id": "chatcmpl-docs", "choices": [], "usage": usage}).encode() + b"\n\n"
    )
    frames.append(b"data: [DONE]\n\n")
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"".join(frames))


class _OpenAIStandIn(httpx.AsyncBaseTransport):
    def __init__(self, real: httpx.AsyncBaseTransport) -> None:
        self._real = real

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "api.openai.com":
            assert request.headers["authorization"] == "Bearer sk-docs-example"
            return _answer(request)
        return await self._real.handle_async_request(request)


_original_init = httpx.AsyncClient.__init__


def _init(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> None:
    transport = kwargs.pop("transport", None) or httpx.AsyncHTTPTransport()
    _original_init(self, *args, transport=_OpenAIStandIn(transport), **kwargs)


if __name__ == "__main__":
    os.environ["OPENAI_API_KEY"] = "sk-docs-example"
    httpx.AsyncClient.__init__ = _init  # type: ignore[method-assign]
    example = sys.argv[1]
    sys.argv = [example]
    runpy.run_path(example, run_name="__main__")
