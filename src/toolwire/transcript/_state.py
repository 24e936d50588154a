"""Mutable bookkeeping behind :class:`toolwire.transcript.Transcript`, and its change stream.

The public values live in :mod:`toolwire.transcript.types`; these classes are private, slotted and mutable
because they are updated on every event (a frozen copy per delta would make long messages quadratic).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Any

from toolwire.transcript.types import TranscriptChange, TranscriptMessage, TranscriptRole, TranscriptToolCall

MAX_DEPTH = 256
"""Guard for walks up the session tree (a malformed stream could describe a cycle)."""

Listener = Callable[[TranscriptChange], None]


class Entry:
    """A bubble under construction. Its frozen snapshot is rebuilt lazily, only after it changed."""

    __slots__ = (
        "calls",
        "chunks",
        "content_type",
        "data",
        "ephemeral",
        "id",
        "index",
        "level",
        "role",
        "session_id",
        "snapshot",
        "source_id",
        "tool_call_id",
        "url",
    )

    def __init__(
        self, *, id: str, role: TranscriptRole, session_id: str, text: str = "", source_id: str = ""
    ) -> None:
        self.id = id
        self.index = -1
        self.role: TranscriptRole = role
        self.session_id = session_id
        self.source_id = source_id
        self.chunks: list[str] = [text] if text else []
        self.calls: list[tuple[int, TranscriptToolCall]] = []
        """Attached calls sorted by ordinal (the order the model made them), not by completion order."""
        self.ephemeral = False
        self.level: str | None = None
        self.content_type: str | None = None
        self.url: str | None = None
        self.data: str | None = None
        self.tool_call_id: str | None = None
        self.snapshot: TranscriptMessage | None = None

    def freeze(self) -> TranscriptMessage:
        if self.snapshot is None:
            text = "".join(self.chunks)
            self.chunks = [text] if text else []  # join once; later deltas append to the joined text
            self.snapshot = TranscriptMessage(
                id=self.id,
                role=self.role,
                session_id=self.session_id,
                text=text,
                tool_calls=tuple(call for _, call in self.calls),
                source_id=self.source_id,
                ephemeral=self.ephemeral,
                level=self.level,
                content_type=self.content_type,
                url=self.url,
                data=self.data,
                tool_call_id=self.tool_call_id,
            )
        return self.snapshot


class Source:
    """One model message (``message_id``) of one session: its current segment and how many it has."""

    __slots__ = ("count", "current", "sealed")

    def __init__(self) -> None:
        self.current: Entry | None = None
        self.count = 0
        self.sealed = False
        """Restored from history: live deltas for it are replays and are ignored."""


class CallState:
    """One tool call: ``(session_id, message_id, tool_call_id)``; providers reuse ids across messages."""

    __slots__ = ("args", "done", "message_id", "ordinal", "tool_name")

    def __init__(self, ordinal: int, message_id: str) -> None:
        self.ordinal = ordinal
        self.message_id = message_id
        """The assistant message that made the call; empty until an event or the history names it."""
        self.tool_name = ""
        self.args: dict[str, Any] | None = None
        self.done = False


class SessionState:
    __slots__ = (
        "anon",
        "anon_count",
        "children",
        "flushes",
        "high_seq",
        "id",
        "last_segment",
        "notes",
        "parent",
        "root",
        "root_version",
        "title",
        "user_count",
        "user_session_id",
    )

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.parent: str | None = None
        self.children: list[str] = []
        self.user_session_id = ""
        self.high_seq = 0
        self.last_segment: Entry | None = None
        """The latest assistant/reasoning bubble of the current user turn: where finished calls attach."""
        self.anon: str | None = None
        """Synthetic message id for text without ``message_id`` (Agent C), open until the step finishes."""
        self.anon_count = 0
        self.user_count = 0
        self.notes = 0
        self.flushes = 0
        """Bubbles opened for a turn's calls that found no answer bubble (rule 4): ``{id}:calls:{k}``."""
        self.root = session_id
        self.root_version = -1
        self.title: str | None = None


class ChangeStream:
    """Async iterator over a transcript's changes; ``close()`` (or leaving ``async with``) ends it."""

    def __init__(
        self,
        subscribe: Callable[[Listener], Callable[[], None]],
        on_close: Callable[[ChangeStream], None],
    ) -> None:
        self._queue: asyncio.Queue[TranscriptChange | None] = asyncio.Queue()
        self._closed = False
        self._on_close = on_close
        self._unsubscribe = subscribe(self._queue.put_nowait)

    def __aiter__(self) -> ChangeStream:
        return self

    async def __anext__(self) -> TranscriptChange:
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        self._on_close(self)
        self._queue.put_nowait(None)

    async def __aenter__(self) -> ChangeStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def first(item: tuple[int, TranscriptToolCall]) -> int:
    return item[0]
