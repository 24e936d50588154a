"""A real toolwire server on a loopback socket, in the test's event loop (so tests can read its store)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette


@dataclass
class LiveServer:
    app: Starlette
    url: str
    server: uvicorn.Server

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30, **kwargs)


@asynccontextmanager
async def live_server(app: Starlette) -> AsyncIterator[LiveServer]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", ws="websockets-sansio")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()
    assert server.started, "the server did not start"
    try:
        yield LiveServer(app=app, url=f"http://127.0.0.1:{port}", server=server)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 20)
        sock.close()


def parse_sse(raw: str) -> list[dict[str, Any]]:
    """Frames of an SSE body: each a dict with ``id`` (if any) and ``data`` (JSON-decoded unless [DONE])."""
    frames: list[dict[str, Any]] = []
    for block in raw.split("\n\n"):
        frame: dict[str, Any] = {}
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("id: "):
                frame["id"] = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            text = "\n".join(data)
            frame["data"] = text if text == "[DONE]" else json.loads(text)
            frames.append(frame)
    return frames


async def read_sse(
    response: httpx.Response, *, until: Any = None, limit: int = 100_000
) -> list[dict[str, Any]]:
    """Read SSE frames from a streaming response until ``until(frame)`` is true (or the body ends)."""
    frames: list[dict[str, Any]] = []
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            parsed = parse_sse(block + "\n\n")
            frames.extend(parsed)
            if until is not None and parsed and any(until(f) for f in parsed):
                return frames
            if len(frames) > limit:
                raise AssertionError("too many frames")
    return frames
