"""A byte-level HTTP server on 127.0.0.1 that misbehaves on purpose (OpenAI Chat Completions wire).

Each request takes the next scripted behaviour: a normal SSE answer, an HTTP error, a stream cut at a
chosen point (chunked encoding without its terminating chunk, as a dropped connection looks), an error
event inside a 200 stream, or a stall. Everything is bounded: stalls end when the test's client times out
or the server closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "model": "fault-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


def text_frames(text: str, size: int = 4) -> list[str]:
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    return frames


def tool_frames(call_id: str, name: str, args: str, size: int = 5) -> list[str]:
    frames = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
    ]
    frames += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + size]}}]})
        for i in range(0, len(args), size)
    ]
    return frames


def finish_frames(reason: str) -> list[str]:
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    tail = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "model": "fault-model",
        "choices": [],
        "usage": usage,
    }
    return [chunk({}, reason), f"data: {json.dumps(tail)}\n\n", "data: [DONE]\n\n"]


@dataclass
class Behaviour:
    """What to do with one request."""

    status: int = 200
    frames: list[str] = field(default_factory=list)
    cut_after: int | None = None
    """Close the connection after this many frames, without ending the chunked body."""
    cut_inside: bool = False
    """Cut in the middle of the frame at ``cut_after`` (half its bytes), not at a frame boundary."""
    stall_after: int | None = None
    """Stop sending (connection kept open) after this many frames."""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    refuse: bool = False
    """Close the connection at once without answering."""


class FaultServer:
    def __init__(self, behaviours: list[Behaviour]) -> None:
        self.behaviours = behaviours
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        """Each request's ``time.monotonic()`` when its body was read."""
        self.port = 0
        self._server: asyncio.Server | None = None
        self._release = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FaultServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _read_request(self, reader: asyncio.StreamReader) -> dict[str, Any] | None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = await reader.readexactly(length) if length else b""
        return json.loads(body) if body else None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await self._read_request(reader)
            self.requests.append(request or {})
            self.arrivals.append(time.monotonic())
            index = len(self.requests) - 1
            behaviour = self.behaviours[min(index, len(self.behaviours) - 1)]
            if behaviour.refuse:
                return
            if behaviour.status != 200:
                headers = "".join(f"{k}: {v}\r\n" for k, v in behaviour.headers.items())
                writer.write(
                    f"HTTP/1.1 {behaviour.status} Error\r\ncontent-type: application/json\r\n{headers}"
                    f"content-length: {len(behaviour.body)}\r\nconnection: close\r\n\r\n".encode()
                    + behaviour.body
                )
                await writer.drain()
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                b"connection: close\r\n\r\n"
            )
            async for data in self._frames(behaviour):
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
                await asyncio.sleep(0)
            if behaviour.stall_after is not None:
                await asyncio.wait_for(self._release.wait(), 30)
                return
            if behaviour.cut_after is None:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _frames(self, behaviour: Behaviour) -> AsyncIterator[bytes]:
        for i, frame in enumerate(behaviour.frames):
            data = frame.encode()
            if behaviour.cut_after is not None and i == behaviour.cut_after:
                if behaviour.cut_inside:
                    yield data[: len(data) // 2]
                return
            if behaviour.stall_after is not None and i == behaviour.stall_after:
                return
            yield data
