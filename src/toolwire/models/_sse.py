"""Server-sent events framing shared by every SSE-speaking adapter, on the response's bytes.

Framing works on each chunk as it arrives, not line by line through async iterators: a 1 MB tool call
streams ~16,000 events, and three generators and a text decoder per line cost more than the JSON
parse of the event. The data stays bytes (``pydantic_core.from_json`` reads UTF-8 itself).
Handles LF, CRLF and CR line ends (also split across chunks), comments, ``event:``/``id:`` fields and
multi-line data (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
"""

from __future__ import annotations

import re
from itertools import chain
from typing import TypeAlias

SSEEvent: TypeAlias = tuple[str, bytes]
"""An event's ``event:`` field (``"message"`` when absent) and its data. A plain tuple: building a
dataclass per event cost a third of the framing. (``id:`` is read past: no adapter resumes a stream.)"""


_USUAL = re.compile(rb"(event: [^\n]*\n)?data: ([^\n]*)\n\n")
"""The usual event: one data line, maybe after a name line. A run of them is cut by one ``findall``."""


class _Names(dict[bytes, str]):
    """An ``event:`` line -> the event's name, decoded once per distinct line (no line: the default)."""

    def __missing__(self, line: bytes) -> str:
        name = self[line] = line[7:-1].decode("utf-8", "replace").strip() or "message"
        return name


class SSEDecoder:
    """Feed it the body's chunks; it returns the events each one completed."""

    def __init__(self) -> None:
        self._buffer: list[bytes] = []
        """The chunks since the last complete event, none holding its end: joined once, when it ends (a
        1 MB event in 4 KB chunks, joined and searched again on every chunk, took time growing with its
        size squared)."""
        self._cr = False  # the last chunk ended in CR: maybe half of a CRLF
        self._names = _Names()

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._cr:
            chunk, self._cr = b"\r" + chunk, False
        if chunk.endswith(b"\r"):
            chunk, self._cr = chunk[:-1], True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        pending = self._buffer
        if chunk.find(b"\n\n") < 0 and not (
            pending and pending[-1].endswith(b"\n") and chunk.startswith(b"\n")
        ):
            if chunk:
                pending.append(chunk)
            return []
        buffer = b"".join((*pending, chunk)) if pending else chunk
        end = buffer.rfind(b"\n\n")
        rest = buffer[end + 2 :]
        self._buffer = [rest] if rest else []
        names = self._names
        found: list[tuple[bytes, bytes]] = _USUAL.findall(buffer, 0, end + 2)
        # The matches cover the events exactly when their lengths add up (findall skips what does not match).
        if sum(map(len, chain.from_iterable(found))) + 8 * len(found) == end + 2:
            return [(names[line], data) for line, data in found]
        events: list[SSEEvent] = []
        for block in buffer[:end].split(b"\n\n"):
            if block.startswith(b"data: ") and b"\n" not in block:  # the usual event: one data line
                events.append(("message", block[6:]))
                continue
            if block.startswith(b"event: "):  # or a name line, then one data line (Anthropic, Responses)
                line_end = block.find(b"\n")
                if block.startswith(b"data: ", line_end + 1) and block.find(b"\n", line_end + 1) < 0:
                    events.append((names[block[: line_end + 1]], block[line_end + 7 :]))
                    continue
            if block:
                _parse_block(block, events)
        return events

    def end(self) -> list[SSEEvent]:
        """What a stream cut without its final blank line still delivers: its last event."""
        rest, self._buffer, self._cr = b"".join(self._buffer), [], False
        events: list[SSEEvent] = []
        if rest:
            _parse_block(rest, events)
        return events


def _parse_block(block: bytes, events: list[SSEEvent]) -> None:
    event = ""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line:  # a blank line inside the block (three or more line ends in a row): dispatch
            if data:
                events.append((event or "message", b"\n".join(data)))
            event, data = "", []
            continue
        if line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace").strip()
    if data:
        events.append((event or "message", b"\n".join(data)))
