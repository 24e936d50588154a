"""The one SSE writer, for the native event stream and the AI SDK stream: keep-alive pings, frames, headers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from toolwire.server.hub import StreamItem, Subscription

SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}
CONNECTED = b": connected\n\n"
"""A comment sent first on the native stream, so the client sees it open before the first event."""
PING = b": ping\n\n"
"""A comment sent while a stream is quiet (a tool is running), so proxies do not close it."""


async def with_pings(subscription: Subscription, interval: float) -> AsyncIterator[StreamItem | None]:
    """The subscription's items, and ``None`` whenever ``interval`` seconds pass without one (time for a
    :data:`PING`); ends when the subscription does (overflow or shutdown).

    The caller closes the subscription (in a ``finally``, so a client that goes away unsubscribes too).
    """
    while True:
        # Items a run published together are taken without a timer each (one per event cost ~4 µs).
        if subscription.has_queued():
            item = await subscription.get()
        else:
            try:
                async with asyncio.timeout(interval):
                    item = await subscription.get()
            except TimeoutError:
                yield None
                continue
        if item is None:
            return
        yield item


def event_frame(item: StreamItem) -> bytes:
    """A native stream frame: the cursor as the SSE ``id`` (for ``Last-Event-ID``), the event as data."""
    return f"id: {item.cursor}\ndata: {_json(item.as_dict())}\n\n".encode()


def data_frame(data: dict[str, Any]) -> bytes:
    """A ``data:`` frame; JSON never holds a raw newline, so one data line suffices."""
    return f"data: {_json(data)}\n\n".encode()


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
