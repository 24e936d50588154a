"""Anthropic and Responses argument fragments read from their bytes (DeltaShortcut) give exactly the parts
the general path gives on the same bytes, cut into any network chunks."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.models import shortcut
from toolwire.models import AnthropicModel, OpenAIResponsesModel
from toolwire.models.base import Finish, ToolInputDelta, ToolInputEnd

_ESCAPES = ['{"a":\n\t"', 'say \\"hi\\" ', "\\\\ ", "\\n\\t/ ", "é \\u00e9 ", "😀 \\ud83d\\ude00", '"}']
"""Argument text (JSON itself) whose wire form holds escapes; on the ASCII wire also \\u sequences."""

Event = tuple[str, dict[str, Any]]


def _sse(events: list[Event], *, ascii_only: bool) -> bytes:
    return "".join(
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'), ensure_ascii=ascii_only)}\n\n"
        for name, data in events
    ).encode()


# ---------------------------------------------------------------------------------------------
# Anthropic (the event shapes of tests/recordings' Messages streams)


def _a(name: str, **data: Any) -> Event:
    return name, {"type": name, **data}


def _tool_start(index: int, call_id: str) -> Event:
    block = {"type": "tool_use", "id": call_id, "name": "save", "input": {}}
    return _a("content_block_start", index=index, content_block=block)


def _json(text: str, index: int = 0) -> Event:
    return _a("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": text})


def _anthropic(*middle: Event) -> list[Event]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
    }
    return [
        _a("message_start", message={**message, "usage": {"input_tokens": 3, "output_tokens": 1}}),
        *middle,
        _a(
            "message_delta",
            delta={"stop_reason": "tool_use", "stop_sequence": None},
            usage={"output_tokens": 9},
        ),
        _a("message_stop"),
    ]


ANTHROPIC: dict[str, list[Event]] = {
    "escapes and \\u sequences": _anthropic(
        _tool_start(0, "toolu_a"), _json(""), *[_json(f) for f in _ESCAPES], _a("content_block_stop", index=0)
    ),
    "two calls interleaved": _anthropic(
        _tool_start(0, "toolu_a"),
        _tool_start(1, "toolu_b"),
        *[_json(f, i) for i in (0, 1) for f in ['{"x": ', "1", "2"]],
        *[_json("}", i) for i in (0, 1)],
        _a("content_block_stop", index=0),
        _a("content_block_stop", index=1),
    ),
    "a call after text": _anthropic(
        _a("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        _a("content_block_delta", index=0, delta={"type": "text_delta", "text": "so"}),
        _a("content_block_stop", index=0),
        _tool_start(1, "toolu_a"),
        *[_json(f, 1) for f in ['{"x": ', "1", "2", "}"]],
        _a("content_block_stop", index=1),
    ),
    "fragments after the block stopped": _anthropic(
        _tool_start(0, "toolu_a"),
        *[_json(f) for f in ['{"x": ', "1", "2"]],
        _a("content_block_stop", index=0),
        *[_json(f) for f in ["3", "4", "}"]],
    ),
    "a fragment with another key": _anthropic(
        _tool_start(0, "toolu_a"),
        *[_json(f) for f in ['{"x": ', "1", "2"]],
        ("content_block_delta", {**_json("3")[1], "index": 1}),  # the last index wins: no such block
        *[_json(f) for f in ["4", "}"]],
        _a("content_block_stop", index=0),
    ),
    "the type given by the event name alone": _anthropic(
        _tool_start(0, "toolu_a"),
        *[
            ("content_block_delta", {k: v for k, v in _json(f)[1].items() if k != "type"})
            for f in ['{"x": ', "1"]
        ],
        ("ping", {k: v for k, v in _json("2")[1].items() if k != "type"}),  # the same data, not a delta
        *[("content_block_delta", {k: v for k, v in _json(f)[1].items() if k != "type"}) for f in ["3", "}"]],
        _a("content_block_stop", index=0),
    ),
}


def _anthropic_model(client: httpx.AsyncClient) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=client)


# ---------------------------------------------------------------------------------------------
# Responses (sequence numbers change on every event)


def _responses(*middle: dict[str, Any], calls: tuple[str, ...] = ("fc_1",)) -> list[Event]:
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "in_progress",
        "model": "gpt-4o",
        "output": [],
    }
    opened: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": i,
            "item": {
                "type": "function_call",
                "id": c,
                "call_id": f"call_{c}",
                "name": "save",
                "arguments": "",
            },
        }
        for i, c in enumerate(calls)
    ]
    items = [
        {
            **e["item"],
            "status": "completed",
            "arguments": "".join(d["delta"] for d in middle if d.get("item_id") == c),
        }
        for c, e in zip(calls, opened, strict=True)
    ]
    done = {
        **response,
        "status": "completed",
        "output": items,
        "usage": {"input_tokens": 3, "output_tokens": 9},
    }
    events = [
        {"type": "response.created", "response": response},
        *opened,
        *middle,
        *[
            {"type": "response.output_item.done", "output_index": i, "item": item}
            for i, item in enumerate(items)
        ],
        {"type": "response.completed", "response": done},
    ]
    return [
        (e["type"], {"type": e["type"], "sequence_number": n, **e}) for n, e in enumerate(events, start=7)
    ]


def _delta(text: str, item: str = "fc_1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": item,
        "output_index": 0,
        "delta": text,
        **extra,
    }


RESPONSES: dict[str, list[Event]] = {
    "escapes and \\u sequences": _responses(*[_delta(f) for f in _ESCAPES]),
    "sequence numbers gaining digits": _responses(*[_delta(f) for f in ['{"x": "', *("ab" * 60), '"}']]),
    "padding": _responses(
        *[_delta(f, obfuscation="x" * n) for n, f in enumerate(['{"x": ', "1", "2", "}"], 1)]
    ),
    "two calls interleaved": _responses(
        *[_delta(f, item) for item in ("fc_1", "fc_2") for f in ['{"x": ', "1", "2"]],
        *[_delta("}", item) for item in ("fc_1", "fc_2")],
        calls=("fc_1", "fc_2"),
    ),
    "text between fragments": _responses(
        *[_delta(f) for f in ['{"x": ', "1", "2"]],
        {"type": "response.output_text.delta", "item_id": "fc_1", "output_index": 0, "delta": "so"},
        *[_delta(f) for f in ["3", "4", "}"]],
    ),
    "an unknown item": _responses(
        *[_delta(f) for f in ['{"x": ', "1", "2"]], _delta("3", "fc_9"), _delta("}")
    ),
}


def _responses_model(client: httpx.AsyncClient) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-4o", api_key="k", http_client=client)


# ---------------------------------------------------------------------------------------------
# Both wires

WIRES: dict[str, tuple[shortcut.ModelFactory, dict[str, list[Event]]]] = {
    "anthropic": (_anthropic_model, ANTHROPIC),
    "responses": (_responses_model, RESPONSES),
}


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "utf-8"])
@pytest.mark.parametrize("size", [5, 4096], ids=["5-byte network chunks", "4 KB network chunks"])
@pytest.mark.parametrize(("wire", "name"), [(w, n) for w, (_, streams) in WIRES.items() for n in streams])
def test_shortcut_matches_the_general_path(
    wire: str, name: str, size: int, ascii_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, streams = WIRES[wire]
    body = _sse(streams[name], ascii_only=ascii_only)
    general = shortcut.general(model, body, size, monkeypatch)
    fast, hits = shortcut.fast(model, body, size, monkeypatch)
    assert fast == general
    assert isinstance(general[-1], Finish)
    assert hits > 0


@pytest.mark.parametrize("wire", list(WIRES))
def test_fragments_stream_as_they_arrive(wire: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, streams = WIRES[wire]
    body = _sse(streams["escapes and \\u sequences"], ascii_only=True)
    fast, hits = shortcut.fast(model, body, 7, monkeypatch)
    assert hits == len(_ESCAPES) - 1  # the first teaches the shortcut
    assert [p.delta for p in fast if isinstance(p, ToolInputDelta)] == _ESCAPES
    end = next(p for p in fast if isinstance(p, ToolInputEnd))
    assert end.args == {"a": 'say "hi" \\ \n\t/ é é 😀 😀'}


@pytest.mark.parametrize("number", [b"09", b"-9", b"9.5", b'"9"', b"", b"9 "])
def test_responses_sequence_numbers_of_other_forms_go_the_general_way(
    number: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _sse(RESPONSES["sequence numbers gaining digits"], ascii_only=True)
    body = body.replace(b'"sequence_number":20,', b'"sequence_number":' + number + b",")
    general = shortcut.general(_responses_model, body, 4096, monkeypatch)
    fast, hits = shortcut.fast(_responses_model, body, 4096, monkeypatch)
    assert fast == general
    assert hits > 0
