"""Loopback servers for ``long_session.py``: one per wire family, each enforcing a context window and applying
its provider's documented prompt-caching rules to decide what each request's usage reports.

Both answer a support-desk session the same way: a user message gets a ``lookup_order`` tool call, a tool
result gets a short answer. Tokens are counted as 4 characters of the request's JSON each (one tokenizer for
every family, so the rows compare; absolute counts are not any real model's).

- **OpenAI** (https://platform.openai.com/docs/guides/prompt-caching): requests of 1024 tokens or more are
  cached automatically; a later request whose prompt shares a prefix with an earlier one reads that prefix
  from the cache in 128-token steps (tools first, then the messages in order), per ``prompt_cache_key``
  routing. Window exceeded: HTTP 400 ``context_length_exceeded``.
- **Anthropic** (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): only prefixes ending
  at a ``cache_control`` breakpoint are written (tools, then system, then messages, block by block); at each
  breakpoint the cache is looked up there and up to 20 blocks before it; the longest hit is read, the rest up
  to the last breakpoint is written, what follows is plain input. Minimum 1024 tokens. Window exceeded:
  HTTP 400 "prompt is too long: N tokens > W maximum".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

CHARS_PER_TOKEN = 4
MIN_CACHED = 1024
OPENAI_STEP = 128
ANTHROPIC_LOOKBACK = 20


def tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _canonical(value: Any) -> str:
    """A block as the cache sees it: its content, without the breakpoint marker."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return json.dumps(value, separators=(",", ":"))


@dataclass
class Served:
    """One request's accounting, as its usage reported it."""

    input_tokens: int
    cache_read: int = 0
    cache_write: int = 0
    refused: bool = False
    summary: bool = False
    """A request without tools: toolwire's compaction asking for a summary (its cost is the summary's)."""


@dataclass
class LongSessionServer:
    """Base: a window, the requests served, a loopback socket."""

    window: int
    served: list[Served] = field(default_factory=list)
    port: int = 0

    def app(self) -> Starlette:
        raise NotImplementedError

    async def __aenter__(self) -> LongSessionServer:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:  # poll the server's own state, not the clock
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        await self._task

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


SUMMARY = (
    "The customer asked about the status of a series of tea orders (A-1 onwards); every lookup showed the "
    "order shipped with La Poste, eighteen items of Darjeeling first flush each, arriving within three days."
)


def _answer_kind(
    last_is_tool_result: bool, turn_marker: str, tools: bool = True
) -> tuple[str, dict[str, Any]]:
    if not tools:  # a request without tools (toolwire's compaction asking for a summary): a summary
        return "text", {"text": SUMMARY}
    if last_is_tool_result:
        return "text", {"text": "Your order has shipped and will arrive within three working days."}
    return "call", {"order_id": turn_marker}


# ---------------------------------------------------------------------------------------------
# OpenAI Chat Completions


@dataclass
class OpenAIServer(LongSessionServer):
    _prompts: dict[str, list[str]] = field(default_factory=dict)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])

    async def _complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        prompt = _canonical(body.get("tools", [])) + "".join(_canonical(m) for m in body["messages"])
        total = tokens(prompt)
        if total > self.window:
            self.served.append(Served(input_tokens=total, refused=True))
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your messages "
                f"resulted in {total} tokens. Please reduce the length of the messages."
            )
            error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
            return JSONResponse({"error": error}, status_code=400)
        earlier = self._prompts.setdefault(str(body.get("prompt_cache_key")), [])
        common = max((_common_prefix(prompt, e) for e in earlier), default=0)
        cached = (tokens(prompt[:common]) // OPENAI_STEP) * OPENAI_STEP if total >= MIN_CACHED else 0
        cached = cached if cached >= MIN_CACHED else 0
        earlier.append(prompt)
        del earlier[:-4]  # entries live minutes; the session's last few requests are what it can hit
        self.served.append(Served(input_tokens=total, cache_read=cached, summary=not body.get("tools")))
        last = body["messages"][-1]
        kind, content = _answer_kind(
            last.get("role") == "tool", f"A-{len(body['messages'])}", bool(body.get("tools"))
        )
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if kind == "text":
            message["content"] = content["text"]
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_{len(self.served)}",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": json.dumps(content)},
                }
            ]
        usage = {
            "prompt_tokens": total,
            "completion_tokens": 20,
            "total_tokens": total + 20,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        finish = "stop" if kind == "text" else "tool_calls"
        return JSONResponse(
            {
                "id": f"r{len(self.served)}",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    low, high = 0, limit  # binary search on slices: C-speed comparisons of long prompts
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


# ---------------------------------------------------------------------------------------------
# Anthropic Messages


@dataclass
class AnthropicServer(LongSessionServer):
    _cache: set[str] = field(default_factory=set)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    async def _messages(self, request: Request) -> JSONResponse:
        body = await request.json()
        blocks, marks = _anthropic_blocks(body)
        sizes = [tokens(b) for b in blocks]
        total = sum(sizes)
        if total > self.window:
            self.served.append(Served(input_tokens=total, refused=True))
            error = {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {total} tokens > {self.window} maximum",
            }
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        prefix_hashes = _running_hashes(blocks)
        read_end = 0  # blocks [0, read_end) come from the cache
        for mark in marks:
            for end in range(mark + 1, max(mark + 1 - ANTHROPIC_LOOKBACK, 0), -1):
                if prefix_hashes[end - 1] in self._cache:
                    read_end = max(read_end, end)
                    break
        write_end = marks[-1] + 1 if marks else 0
        cache_read = sum(sizes[:read_end])
        cache_write = sum(sizes[read_end:write_end]) if write_end > read_end else 0
        if sum(sizes[:write_end]) < MIN_CACHED:  # too short to cache: all plain input
            cache_read = cache_write = 0
            read_end = write_end = 0
        for mark in marks:
            if sum(sizes[: mark + 1]) >= MIN_CACHED:
                self._cache.add(prefix_hashes[mark])
        summary = not body.get("tools")
        self.served.append(
            Served(input_tokens=total, cache_read=cache_read, cache_write=cache_write, summary=summary)
        )
        last = body["messages"][-1]["content"]
        last_is_result = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        kind, content = _answer_kind(last_is_result, f"A-{len(body['messages'])}", bool(body.get("tools")))
        if kind == "text":
            answer = [{"type": "text", "text": content["text"]}]
        else:
            answer = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{len(self.served)}",
                    "name": "lookup_order",
                    "input": content,
                }
            ]
        usage = {
            "input_tokens": total - cache_read - cache_write,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
            "output_tokens": 20,
        }
        return JSONResponse(
            {
                "id": f"msg_{len(self.served)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": answer,
                "stop_reason": "end_turn" if kind == "text" else "tool_use",
                "stop_sequence": None,
                "usage": usage,
            }
        )


def _anthropic_blocks(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The prompt as the cache sees it, block by block (tools, system, each message's blocks), and the
    indexes of the blocks that carry a breakpoint."""
    blocks: list[str] = []
    marks: list[int] = []

    def add(block: Any, role: str = "") -> None:
        if isinstance(block, dict) and "cache_control" in block:
            marks.append(len(blocks))
        blocks.append(role + _canonical(block))

    for tool in body.get("tools", []):
        add(tool)
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        add(block)
    for message in body["messages"]:
        content = message["content"]
        for i, block in enumerate([content] if isinstance(content, str) else content):
            add(block, message["role"] if i == 0 else "")
    return blocks, marks


def _running_hashes(blocks: list[str]) -> list[str]:
    digest = hashlib.sha256()
    out = []
    for block in blocks:
        digest.update(block.encode())
        out.append(digest.copy().hexdigest())
    return out


__all__ = ["AnthropicServer", "OpenAIServer", "Served", "tokens"]
