"""The OpenAI Chat parser's fast path for argument fragments gives exactly the general path's parts."""

from __future__ import annotations

from typing import Any

import pytest

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
