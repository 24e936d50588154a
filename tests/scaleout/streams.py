"""Reading a session's native SSE stream from one replica, as (cursor, event) pairs."""

from __future__ import annotations

import json
from typing import Any

import httpx
import websockets

Frame = tuple[int, dict[str, Any]]


async def follow(
    http: httpx.AsyncClient, base: str, session_id: str, *, after: int | None, ends: int = 1
) -> list[Frame]:
    """The stream after cursor ``after`` (sent as ``Last-Event-ID``) until ``ends`` top-level
    interaction ends were received."""
    headers = {"last-event-id": str(after)} if after is not None else {}
    frames: list[Frame] = []
    seen_ends = 0
    async with http.stream("GET", f"{base}/api/sessions/{session_id}/events", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        cursor: int | None = None
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                cursor = int(line[4:])
            elif line.startswith("data: ") and cursor is not None:
                event = json.loads(line[6:])
                frames.append((cursor, event))
                cursor = None
                if event["type"] == "interaction-end" and event["session_id"] == session_id:
                    seen_ends += 1
                    if seen_ends == ends:
                        return frames
    return frames


async def follow_ws(base: str, session_id: str, *, after: int) -> list[Frame]:
    """The same over the session's WebSocket (``?after=``), until its interaction ends."""
    url = base.replace("http://", "ws://") + f"/api/sessions/{session_id}/ws?after={after}"
    frames: list[Frame] = []
    async with websockets.connect(url) as ws:
        while True:
            frame = json.loads(await ws.recv())
            if "event" not in frame:
                continue
            frames.append((frame["cursor"], frame["event"]))
            event = frame["event"]
            if event["type"] == "interaction-end" and event["session_id"] == session_id:
                return frames


def check_stream(frames: list[Frame], first_seq: int = 1) -> None:
    """Cursors strictly increase; seqs run from ``first_seq`` with no gap and no repeat."""
    cursors = [c for c, _ in frames]
    assert cursors == sorted(set(cursors)), cursors
    seqs = [e["seq"] for _, e in frames]
    assert seqs == list(range(first_seq, first_seq + len(frames))), seqs
