"""Server-sent events parsing shared by every SSE-speaking adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    """The ``event:`` field, ``"message"`` when absent."""
    data: str
    id: str | None = None


async def iter_sse(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """Yield SSE events from a streaming response. Handles LF and CRLF framing, comments and multi-line data."""
    async for event in iter_sse_lines(response.aiter_lines()):
        yield event


async def iter_sse_lines(lines: AsyncIterator[str]) -> AsyncIterator[SSEEvent]:
    event = ""
    data: list[str] = []
    event_id: str | None = None
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data), event_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value.strip()
        elif name == "id":
            event_id = value
    if data:  # a stream cut without the final blank line still delivers its last event
        yield SSEEvent(event or "message", "\n".join(data), event_id)
