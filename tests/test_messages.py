from __future__ import annotations

import json

import pytest

from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    messages_from_json,
    messages_to_json,
    parts_from_jsonable,
    parts_to_jsonable,
)

EVERY_PART = (
    TextPart(text="héllo", provider_metadata={"google": {"thoughtSignature": "c2ln"}}),
    ReasoningPart(text="think", signature="sig==", provider_metadata={"anthropic": {"x": 1}}),
    ReasoningPart(redacted_data="opaque-bytes"),
    ToolCallPart(
        tool_call_id="call_1",
        tool_name="lookup",
        args={"q": "x", "n": [1, 2, {"deep": None}]},
        args_json='{"q": "x", "n": [1, 2, {"deep": null}]}',
        provider_metadata={"google": {"thoughtSignature": "AAA"}, "openai": {"item_id": "fc_1"}},
        provider_executed=False,
        title="Look it up",
    ),
    ToolCallPart(tool_call_id="srv_1", tool_name="web_search", args={}, provider_executed=True),
    ToolResultPart(tool_call_id="call_1", tool_name="lookup", output={"ok": True, "v": 1.5}, is_error=False),
    ToolResultPart(tool_call_id="call_2", tool_name="lookup", output="boom", is_error=True),
    FilePart(media_type="image/png", data="iVBORw0KGgo=", filename="a.png"),
    FilePart(media_type="image/png", url="https://example.invalid/a.png"),
)


def test_every_part_round_trips_through_json_without_loss() -> None:
    messages = [
        Message(role="user", parts=[EVERY_PART[0]], session_id="s1"),
        Message(role="assistant", parts=EVERY_PART[1:5], provider="google", model="gemini-x"),
        Message(role="tool", parts=EVERY_PART[5:7]),
        Message(role="user", parts=EVERY_PART[7:]),
    ]
    text = messages_to_json(messages)
    assert messages_from_json(text) == messages
    # the provider's raw argument text is kept verbatim, not re-serialised
    assert '{\\"q\\": \\"x\\"' in text


def test_parts_jsonable_round_trip() -> None:
    data = parts_to_jsonable(EVERY_PART)
    json.dumps(data)  # storage form is plain JSON
    assert parts_from_jsonable(data) == EVERY_PART


def test_args_json_defaults_to_compact_args() -> None:
    call = ToolCallPart(tool_call_id="c", tool_name="f", args={"a": 1})
    assert call.args_json == '{"a":1}'


@pytest.mark.parametrize(
    ("raw", "expected"),
    [('{"a": 1}', '{"a": 1}'), ("{not json", '{"a":1}'), ("[1]", '{"a":1}')],
)
def test_wire_args_json_falls_back_to_args_when_raw_is_not_an_object(raw: str, expected: str) -> None:
    call = ToolCallPart(tool_call_id="c", tool_name="f", args={"a": 1}, args_json=raw)
    assert call.wire_args_json() == expected


def test_usage_adds_every_field() -> None:
    a = Usage(
        input_tokens=1,
        output_tokens=2,
        reasoning_tokens=3,
        cache_read_tokens=4,
        cache_write_tokens=5,
        requests=1,
    )
    total = a + a
    assert total == Usage(
        input_tokens=2,
        output_tokens=4,
        reasoning_tokens=6,
        cache_read_tokens=8,
        cache_write_tokens=10,
        requests=2,
    )
    assert total.total_tokens == 6


def test_message_helpers() -> None:
    msg = Message(role="assistant", parts=[EVERY_PART[0], EVERY_PART[3], EVERY_PART[5]])
    assert msg.text == "héllo"
    assert [c.tool_call_id for c in msg.tool_calls] == ["call_1"]
    assert [r.tool_call_id for r in msg.tool_results] == ["call_1"]
    assert isinstance(msg.parts, tuple)


@pytest.mark.parametrize(
    ("part", "field", "value"),
    [
        (TextPart("hi"), "text", "hi"),
        (ReasoningPart("thinking"), "text", "thinking"),
        (ToolCallPart("lookup", tool_call_id="c1", args={"q": 1}), "tool_name", "lookup"),
        (ToolResultPart("lookup", tool_call_id="c1", output=2), "tool_name", "lookup"),
        (FilePart("image/png", url="https://example.invalid/a.png"), "media_type", "image/png"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_each_part_takes_its_one_obvious_field_positionally(part: Part, field: str, value: str) -> None:
    assert getattr(part, field) == value
    assert type(part).__match_args__ == (field,)  # ``case TextPart(text):`` binds that field


def test_only_that_field_is_positional() -> None:
    with pytest.raises(TypeError):
        TextPart("hi", {"google": {}})  # type: ignore[misc]
    with pytest.raises(TypeError):
        ToolCallPart("c1", "lookup")  # type: ignore[misc]
    with pytest.raises(TypeError):
        FilePart("image/png", "aGk=")  # type: ignore[misc]


def test_positional_parts_equal_keyword_parts_and_keep_their_stored_key_order() -> None:
    call = ToolCallPart("lookup", tool_call_id="c1", args={"q": 1})
    assert call == ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": 1})
    assert ReasoningPart() == ReasoningPart(text="")
    stored = parts_to_jsonable([TextPart("hi"), call, ToolResultPart("lookup", tool_call_id="c1")])
    assert [list(d)[:3] for d in stored] == [
        ["type", "text", "provider_metadata"],
        ["type", "tool_call_id", "tool_name"],
        ["type", "tool_call_id", "tool_name"],
    ]
