"""SSE framing on bytes: every line-end style, cut anywhere between chunks, gives the same events."""

from __future__ import annotations

import pytest

from toolwire.models._sse import SSEDecoder, SSEEvent

BODY = (
    ": a comment\n"
    'data: {"a": 1}\n\n'
    "event: content_block_delta\n"
    "id: 7\n"
    'data: {"b": 2}\n\n\n'
    "data: first line\n"
    "data:second line\n\n"
    "data: [DONE]\n\n"
    "data: cut without its blank line"
)
EXPECTED = [
    ("message", b'{"a": 1}'),
    ("content_block_delta", b'{"b": 2}'),
    ("message", b"first line\nsecond line"),
    ("message", b"[DONE]"),
    ("message", b"cut without its blank line"),
]


def _decode(body: bytes, size: int) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for start in range(0, len(body), size):
        events.extend(decoder.feed(body[start : start + size]))
    return events + decoder.end()


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096])
def test_events_are_the_same_whatever_the_line_ends_and_chunks(line_end: str, size: int) -> None:
    body = BODY.replace("\n", line_end).encode()
    assert _decode(body, size) == EXPECTED


def test_utf8_split_inside_a_character_stays_whole() -> None:
    body = 'data: {"t": "héllo ✓"}\n\n'.encode()
    assert _decode(body, 1) == [("message", '{"t": "héllo ✓"}'.encode())]


USUAL = (
    'event: message_start\ndata: {"a": 1}\n\n'
    "data: unnamed\n\n"
    "event:  spaced \ndata: x\n\n"
    "event: \ndata: empty name\n\n"
    "event: message_start\ndata:  two spaces\n\n"
)
"""Only events of the usual form (one data line, maybe after a name line): cut by one regex per chunk."""
USUAL_EXPECTED = [
    ("message_start", b'{"a": 1}'),
    ("message", b"unnamed"),
    ("spaced", b"x"),
    ("message", b"empty name"),
    ("message_start", b" two spaces"),
]


@pytest.mark.parametrize("size", [1, 5, 4096])
@pytest.mark.parametrize("unusual", ["", ": a comment\n\n", "id: 1\ndata: y\n\n", "data: a\ndata: b\n\n"])
def test_usual_events_are_read_alike_alone_and_among_others(size: int, unusual: str) -> None:
    extra = {
        "": [],
        "id: 1\ndata: y\n\n": [("message", b"y")],
        "data: a\ndata: b\n\n": [("message", b"a\nb")],
    }
    expected = [*USUAL_EXPECTED, *extra.get(unusual, []), *USUAL_EXPECTED]
    assert _decode((USUAL + unusual + USUAL).encode(), size) == expected


def test_an_event_is_handed_on_by_the_chunk_that_ends_it() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [("message", b"a")]  # the blank line split from its line
    assert decoder.feed(b"event: e\ndata: ") == []
    assert decoder.feed(b"b") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\ndata: c\n\ndata: d") == [("e", b"b"), ("message", b"c")]
    assert decoder.feed(b"\r") == []
    assert decoder.feed(b"\n\r\n") == [("message", b"d")]
    assert decoder.end() == []
