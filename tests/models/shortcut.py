"""Run the same response bytes through an adapter twice: the real way (argument fragments may be read from
their bytes by the parser's DeltaShortcut) and the general way (every event decoded and fed), to compare."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from toolwire.messages import Message
from toolwire.models._delta_shortcut import DeltaShortcut
from toolwire.models._http import HTTPModel
from toolwire.models.base import ModelRequest, ModelStreamPart, StreamError

ModelFactory = Callable[[httpx.AsyncClient], HTTPModel]


def chunked_client(body: bytes, size: int) -> httpx.AsyncClient:
    """A client whose server sends ``body`` as server-sent events, ``size`` bytes per network chunk."""

    class _Chunks(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for start in range(0, len(body), size):
                yield body[start : start + size]

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks())

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def _comparable(part: Any) -> Any:
    # A StreamError holds an exception, equal only to itself: compared by type and message.
    return (type(part.error).__name__, str(part.error)) if isinstance(part, StreamError) else part


async def _stream(model: ModelFactory, body: bytes, size: int) -> list[Any]:
    request = ModelRequest(messages=[Message.user("go")])
    return [_comparable(part) async for part in model(chunked_client(body, size)).stream(request)]


def general(model: ModelFactory, body: bytes, size: int, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The parts of ``body`` with every event decoded and fed (no parser's ``feed_data`` used)."""
    with monkeypatch.context() as patch:
        patch.setattr(HTTPModel, "_sse_body", False)
        return asyncio.run(_stream(model, body, size))


def fast(
    model: ModelFactory, body: bytes, size: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Any], int]:
    """The parts of ``body`` the real way, and how many events were read from their bytes."""
    hits = [0]
    read = DeltaShortcut.read

    def counting(self: DeltaShortcut, name: str, data: bytes) -> list[ModelStreamPart] | None:
        parts = read(self, name, data)
        hits[0] += parts is not None
        return parts

    with monkeypatch.context() as patch:
        patch.setattr(DeltaShortcut, "read", counting)
        return asyncio.run(_stream(model, body, size)), hits[0]
