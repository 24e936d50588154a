"""The OpenAI Chat parser's fast path for argument fragments gives exactly the general path's parts."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.models import shortcut
from toolwire.models import OpenAIChatModel
from toolwire.models.base import Finish, ToolInputDelta, ToolInputEnd
from toolwire.models.openai_chat._stream import ChatParser


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _args(text: str, index: int = 0, **call: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}, **call}]}


STREAMS = {
    "plain fragments": [
        _chunk(
            {
                "role": "assistant",
                **_args("", id="a", type="function", function={"name": "f", "arguments": ""}),
            }
        ),
        _chunk(_args('{"x": ')),
        _chunk(_args("1}"), usage=None),
        _chunk({}, "tool_calls"),
    ],
    "a fragment with the finish and usage": [
        _chunk(_args('{"x"', id="a", type="function", function={"name": "f", "arguments": '{"x"'})),
        _chunk(_args(": 2}"), "tool_calls", usage={"prompt_tokens": 3, "completion_tokens": 4}),
    ],
    "text between fragments": [
        _chunk(_args("", id="a", type="function", function={"name": "f", "arguments": ""})),
        _chunk(_args("{")),
        _chunk({"content": "so"}),
        _chunk(_args("}")),
        _chunk({}, "tool_calls"),
    ],
    "a second call reusing index 0": [
        _chunk(_args("{}", id="a", type="function", function={"name": "f", "arguments": "{}"})),
        _chunk(_args("", id="b", type="function", function={"name": "g", "arguments": ""})),
        _chunk(_args("{}")),
        _chunk({}, "tool_calls"),
    ],
    "a fragment with extra content": [
        _chunk(_args("", id="a", type="function", function={"name": "f", "arguments": ""})),
        _chunk(_args("{}", extra_content={"google": {"thought_signature": "s"}})),
        _chunk({}, "tool_calls"),
    ],
}


def _parts(chunks: list[dict[str, Any]], *, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    parser = ChatParser(model="gpt-4o", reasoning_field=None)
    if not fast:
        monkeypatch.setattr(parser, "_next_fragment", lambda chunk: None)
    out = [part for chunk in chunks for part in parser.feed(chunk)]
    return out + parser.feed({"type": "[DONE]"})


@pytest.mark.parametrize("name", list(STREAMS))
def test_fast_path_matches_the_general_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = STREAMS[name]
    general = _parts(chunks, fast=False, monkeypatch=monkeypatch)
    assert _parts(chunks, fast=True, monkeypatch=monkeypatch) == general
    assert general[-1].type == "finish"


def test_the_fast_path_is_taken_for_a_bare_fragment() -> None:
    parser = ChatParser(model="gpt-4o", reasoning_field=None)
    for chunk in STREAMS["plain fragments"][:1]:
        parser.feed(chunk)
    assert parser._next_fragment(_chunk(_args('{"x": '))) is not None
    assert parser._next_fragment(_chunk(_args("1}"), "tool_calls")) is None


# ---------------------------------------------------------------------------------------------
# The byte fast path (ChunkTemplate): a chunk read without JSON decoding gives the general path's parts


_BASE = {
    "id": "chatcmpl-Dx0X",
    "object": "chat.completion.chunk",
    "created": 1782955817,
    "model": "gpt-4o-mini-2024-07-18",
    "service_tier": "default",
    "system_fingerprint": "fp_d0469e1700",
}
"""The fields of a recorded OpenAI chunk (tests/recordings/pydantic-ai/.../test_run_stream_sync_streams_real_model.yaml)."""


def _wire(delta: dict[str, Any], finish: str | None = None, padding: str | None = "Qp3", **extra: Any) -> Any:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    chunk: dict[str, Any] = {**_BASE, "choices": [choice], "usage": None, **extra}
    if padding is not None:
        chunk["obfuscation"] = padding
    return chunk


def _opening(call_id: str = "call_a", name: str = "save", index: int = 0) -> Any:
    call = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    return _wire({"role": "assistant", "content": None, "tool_calls": [call], "refusal": None})


def _fragment(text: str, index: int = 0, padding: str | None = "Qp3", **call: Any) -> Any:
    return _wire(_args(text, index, **call), padding=padding)


def _closing() -> list[Any]:
    return [
        _wire({}, "tool_calls"),
        {**_BASE, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}},
    ]


_ESCAPES = ['{"a":\n\t"', 'say \\"hi\\" ', "\\\\ ", "\\n\\t/ ", "é \\u00e9 ", "😀 \\ud83d\\ude00", '"}']
"""Fragments of argument text (JSON itself) whose wire form holds escapes (\\", \\\\, \\n, \\t, \\u; on the
ASCII wire also the non-ASCII characters, 😀 as a surrogate pair)."""

BYTE_STREAMS: dict[str, list[Any]] = {
    "escapes and \\u sequences": [_opening(), *[_fragment(f) for f in _ESCAPES], *_closing()],
    "non-ASCII text": [
        _opening(),
        *[_fragment(f) for f in ['{"t": "', "déjà vu ", "日本語 😀", '"}']],
        *_closing(),
    ],
    "padding that changes length": [
        _opening(),
        *[_fragment(f, padding="x" * n) for n, f in enumerate(['{"n": ', "12", "34", "}"], start=1)],
        *_closing(),
    ],
    "no padding": [_opening(), *[_fragment(f, padding=None) for f in ['{"n": ', "1", "2", "}"]], *_closing()],
    "padding that is not alphanumeric": [
        _opening(),
        *[_fragment(f, padding=p) for f, p in [('{"n": ', "a-b"), ("1", "c_d"), ("}", "")]],
        *_closing(),
    ],
    "fragments that look like the chunk's own bytes": [
        _opening(),
        _fragment('{"x": "'),
        _fragment('"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"'),
        _fragment('\\"}}]}\\\\'),
        _fragment('"}'),
        *_closing(),
    ],
    "an empty fragment after the first ones": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1"),
        _fragment(""),
        _fragment("}"),
        *_closing(),
    ],
    "a chunk with two tool calls": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1"),
        _wire(
            {
                "tool_calls": [
                    {"index": 0, "function": {"arguments": "}"}},
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "g", "arguments": "{"},
                    },
                ]
            }
        ),
        _fragment("}", index=1),
        _fragment("}", index=1),
        *_closing(),
    ],
    "a chunk with content and arguments": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1"),
        _wire({"content": "and", **_args("2")}),
        _fragment("3"),
        _fragment("}"),
        *_closing(),
    ],
    "a fragment with the finish reason": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1"),
        _wire(_args("}"), "tool_calls"),
        *_closing()[1:],
    ],
    "a usage chunk between fragments": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1"),
        {**_BASE, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}},
        _fragment("}"),
        *_closing(),
    ],
    "a new call id on the same index": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1}"),
        _opening(call_id="call_b", name="g"),
        _fragment("{"),
        _fragment("}"),
        *_closing(),
    ],
    "an id on a fragment": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1}", id="call_c", function={"name": "g", "arguments": "1}"}),
        _fragment("["),
        _fragment("]"),
        *_closing(),
    ],
    "another index": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1", index=1),
        _fragment("2"),
        _fragment("}"),
        *_closing(),
    ],
    "a type on a fragment": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1", type="function"),
        _fragment("2"),
        _fragment("}"),
        *_closing(),
    ],
    "a key after the padding": [
        _opening(),
        _fragment('{"x": '),
        _fragment("1"),
        {**_fragment("2"), "type": "error"},  # ends in '"}' like the padding: an error event all the same
    ],
    "another value with the arguments key": [
        _opening(),
        _fragment('{"x": '),
        {**_fragment("1"), "model": {"arguments": "1"}},  # the fragment's key twice: never learned
        {**_fragment("1"), "model": {"arguments": "2"}},
        _fragment(" "),
        _fragment("}"),
        *_closing(),
    ],
}

_NEVER_FAST = {"padding that is not alphanumeric"}
_ENDS_IN_ERROR = {"a key after the padding"}


def _body(chunks: list[Any], *, ascii_only: bool, spaced: bool = False) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    events = [json.dumps(c, separators=separators, ensure_ascii=ascii_only) for c in chunks]
    return "".join(f"data: {e}\n\n" for e in [*events, "[DONE]"]).encode()


def _model(client: httpx.AsyncClient) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o", api_key="k", http_client=client)


def _general(body: bytes, size: int, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The same bytes through the general path: every chunk decoded and read field by field."""
    with monkeypatch.context() as patch:
        patch.setattr(ChatParser, "_next_fragment", lambda self, chunk: None)
        return shortcut.general(_model, body, size, patch)


def _fast(body: bytes, size: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int]:
    return shortcut.fast(_model, body, size, monkeypatch)


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "utf-8"])
@pytest.mark.parametrize("size", [5, 4096], ids=["5-byte network chunks", "4 KB network chunks"])
@pytest.mark.parametrize("name", list(BYTE_STREAMS))
def test_byte_fast_path_matches_the_general_path(
    name: str, size: int, ascii_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _body(BYTE_STREAMS[name], ascii_only=ascii_only)
    general = _general(body, size, monkeypatch)
    fast, hits = _fast(body, size, monkeypatch)
    assert fast == general
    assert isinstance(general[-1], tuple if name in _ENDS_IN_ERROR else Finish)
    # Taken wherever two fragment chunks in a row share their bytes around the fragment.
    assert (hits > 0) == (name not in _NEVER_FAST)


def test_the_byte_fast_path_reads_bare_fragments_with_escapes_and_partial_arguments_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _body(BYTE_STREAMS["escapes and \\u sequences"], ascii_only=True)
    fast, hits = _fast(body, 7, monkeypatch)
    # The first fragment teaches the template; every later one is read from the bytes.
    assert hits == len(_ESCAPES) - 1
    deltas = [p.delta for p in fast if isinstance(p, ToolInputDelta)]
    assert deltas == _ESCAPES
    end = next(p for p in fast if isinstance(p, ToolInputEnd))
    assert end.args == {"a": 'say "hi" \\ \n\t/ é é 😀 😀'}


def test_spaced_json_is_read_by_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    body = _body(BYTE_STREAMS["non-ASCII text"], ascii_only=False, spaced=True)
    fast, hits = _fast(body, 4096, monkeypatch)
    assert hits == 0
    assert fast == _general(body, 4096, monkeypatch)


@pytest.mark.parametrize(
    "bad",
    [b"a\x01b", b"\\x", b"\\ud800", b"\xff\xfe", b"ab\\"],
    ids=["control character", "invalid escape", "lone surrogate", "invalid UTF-8", "escaped closing quote"],
)
def test_an_invalid_fragment_fails_as_on_the_general_path(
    bad: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _body([_opening(), _fragment('{"x": '), _fragment("1")], ascii_only=True)
    fragment = _body([_fragment("1")], ascii_only=True).split(b"\n\n")[0]
    body = good.replace(
        b"data: [DONE]\n\n", fragment.replace(b'"arguments":"1"', b'"arguments":"' + bad + b'"')
    )
    general = _general(body + b"\n\n", 4096, monkeypatch)
    assert isinstance(general[-1], tuple) and general[-1][0] == "ProviderProtocolError"
    assert _fast(body + b"\n\n", 4096, monkeypatch)[0] == general
