"""ReActDriver: JSON decisions from a model without function calling, turned into canonical stream parts.

The model is the scripted adapter emitting the text a real model would write; expected outputs are written
by hand (inline, or tests/golden/react/ for the rendered prompt).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.agent.agent import Agent
from toolwire.agent.drivers._react_parse import AnswerStreamer as _AnswerStreamer
from toolwire.agent.drivers._react_parse import bounded, decision_schema, ends_in_a_loop, extract_json
from toolwire.agent.drivers.react import ReActDriver
from toolwire.errors import (
    ConfigError,
    DecisionExtractionFailed,
    DecisionTimeout,
    DecisionValidationFailed,
)
from toolwire.events import SystemMessageEvent, event_from_dict, event_to_dict
from toolwire.messages import (
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolwire.models.base import (
    DecisionRetry,
    Finish,
    Model,
    ModelRequest,
    ModelSettings,
    ModelStreamPart,
    ReasoningDelta,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from toolwire.models.scripted import ScriptedModel
from toolwire.transcript import Transcript

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "react"

STATUS = ToolDefinition(
    name="get_transaction_status",
    description="Look up a transaction.",
    parameters={
        "type": "object",
        "properties": {"transaction_id": {"type": "string", "pattern": "^TXN_[0-9]+$"}},
        "required": ["transaction_id"],
        "additionalProperties": False,
    },
)
POLICY = ToolDefinition(
    name="get_refund_policy",
    description="Refund rules.",
    parameters={
        "type": "object",
        "properties": {
            "transaction_state": {"type": "string", "enum": ["settled", "pending"]},
            "currency": {"type": "string"},
        },
        "required": ["transaction_state"],
    },
)
TOOLS = (STATUS, POLICY)
USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


def text_turns(*texts: str) -> list[list[TextPart]]:
    return [[TextPart(text=t)] for t in texts]


async def run_step(
    model: ScriptedModel,
    *,
    driver: ReActDriver | None = None,
    tools: Sequence[ToolDefinition] = TOOLS,
    tool_choice: str = "auto",
    messages: Sequence[Message] = (Message.user("What's the status of TXN_1?"),),
) -> list[ModelStreamPart]:
    driver = driver or ReActDriver(examples=())
    request = ModelRequest(messages=list(messages), tools=list(tools), tool_choice=tool_choice)
    return [part async for part in driver.stream_step(model, request)]


def kinds(parts: Sequence[ModelStreamPart]) -> list[str]:
    return [p.type for p in parts]


# -- decisions -----------------------------------------------------------------------------------


async def test_tool_decision_becomes_tool_input_parts() -> None:
    model = ScriptedModel(
        text_turns('{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'), chunk_size=7
    )
    parts = await run_step(model)
    assert kinds(parts) == [
        "stream-start",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-end",
        "finish",
    ]
    start, delta, end, finish = parts[1:]
    assert isinstance(start, ToolInputStart) and isinstance(delta, ToolInputDelta)
    assert isinstance(end, ToolInputEnd) and isinstance(finish, Finish)
    assert start.tool_call_id.startswith("call_") and len(start.tool_call_id) == len("call_") + 24
    assert start.tool_call_id == delta.tool_call_id == end.tool_call_id
    assert start.tool_name == end.tool_name == "get_transaction_status"
    assert end.args == {"transaction_id": "TXN_1"}
    assert json.loads(delta.delta) == {"transaction_id": "TXN_1"} and end.args_json == delta.delta
    assert end.args_error is None
    assert finish.reason == "tool-calls" and finish.usage == USAGE


async def test_each_call_gets_a_fresh_id() -> None:
    decision = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    model = ScriptedModel(text_turns(decision, decision))
    first = await run_step(model)
    second = await run_step(model)
    assert first[1].tool_call_id != second[1].tool_call_id  # type: ignore[union-attr]


async def test_final_answer_is_streamed_while_generated() -> None:
    answer = 'He said \\"hi\\" \\u00e9\\n\\ud83d\\ude00 done\\\\'
    model = ScriptedModel(text_turns('{"action": "final_answer", "answer": "' + answer + '"}'), chunk_size=3)
    parts = await run_step(model)
    assert kinds(parts)[:2] == ["stream-start", "text-start"]
    assert kinds(parts)[-2:] == ["text-end", "finish"]
    deltas = [p.delta for p in parts if isinstance(p, TextDelta)]
    assert len(deltas) > 5  # incremental, not one delta at the end
    assert "".join(deltas) == 'He said "hi" é\n😀 done\\'
    finish = parts[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"


async def test_final_answer_in_other_shape_is_emitted_at_the_end() -> None:
    model = ScriptedModel(text_turns('Sure thing!\n```json\n{"final_answer": "It is settled."}\n```'))
    parts = await run_step(model)
    assert kinds(parts) == ["stream-start", "text-start", "text-delta", "text-end", "finish"]
    assert isinstance(parts[2], TextDelta) and parts[2].delta == "It is settled."


async def test_tool_decision_inside_code_fence_and_alias_keys() -> None:
    model = ScriptedModel(
        text_turns(
            '```json\n{"tool": "get_refund_policy", "arguments": {"transaction_state": "pending"}}\n```'
        )
    )
    parts = await run_step(model)
    end = next(p for p in parts if isinstance(p, ToolInputEnd))
    assert (end.tool_name, end.args) == ("get_refund_policy", {"transaction_state": "pending"})


async def test_double_encoded_arguments() -> None:
    model = ScriptedModel(
        text_turns('{"action": "get_refund_policy", "args": "{\\"transaction_state\\": \\"settled\\"}"}')
    )
    parts = await run_step(model)
    end = next(p for p in parts if isinstance(p, ToolInputEnd))
    assert end.args == {"transaction_state": "settled"}
    model = ScriptedModel(text_turns('{"action": "get_refund_policy", "args": "{broken"}'))
    with pytest.raises(DecisionValidationFailed) as info:
        await run_step(model, driver=ReActDriver(examples=(), max_retries=0))
    assert "must be a JSON object" in info.value.message


async def test_truncated_streamed_answer_stands() -> None:
    model = ScriptedModel(text_turns('{"action": "final_answer", "answer": "It is sett'))
    parts = await run_step(model)
    assert "".join(p.delta for p in parts if isinstance(p, TextDelta)) == "It is sett"
    assert kinds(parts)[-2:] == ["text-end", "finish"]
    assert len(model.requests) == 1  # visible text is never retried


# -- retries and typed errors ---------------------------------------------------------------------


async def test_junk_then_retry_success_feeds_the_error_back() -> None:
    junk = "I will look that up for you."
    good = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    model = ScriptedModel(text_turns(junk, good))
    parts = await run_step(model)
    assert kinds(parts) == [
        "stream-start",
        "decision-retry",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-end",
        "finish",
    ]
    finish, retried = parts[-1], parts[1]
    assert isinstance(finish, Finish) and finish.usage == USAGE + USAGE
    assert isinstance(retried, DecisionRetry) and (retried.attempt, retried.error) == (
        1,
        "no JSON object found",
    )
    retry = model.requests[1].messages
    assert [(m.role, m.text) for m in retry[-2:]] == [
        ("assistant", junk),
        ("user", "That reply was not valid: no JSON object found. Reply with one JSON object only."),
    ]
    assert [m.text for m in retry[:-2]] == [m.text for m in model.requests[0].messages]


async def test_extraction_failure_after_retries() -> None:
    model = ScriptedModel(text_turns("no", "still no", "never"))
    with pytest.raises(DecisionExtractionFailed) as info:
        await run_step(model, driver=ReActDriver(examples=(), max_retries=2))
    assert info.value.attempts == 3 and info.value.raw_output == "never"
    assert len(model.requests) == 3


async def test_validation_failure_after_retries() -> None:
    bad = '{"action": "delete_everything", "args": {}}'
    model = ScriptedModel(text_turns(bad, bad))
    with pytest.raises(DecisionValidationFailed) as info:
        await run_step(model, driver=ReActDriver(examples=(), max_retries=1))
    assert info.value.attempts == 2 and info.value.raw_output == bad
    assert "unknown action 'delete_everything'" in info.value.message
    assert "That reply was not valid: unknown action" in model.requests[1].messages[-1].text


@pytest.mark.parametrize(
    ("decision", "reason"),
    [
        ('{"action": "get_transaction_status", "args": {}}', "missing transaction_id"),
        (
            '{"action": "get_transaction_status", "args": {"transaction_id": 7}}',
            "transaction_id must be a string",
        ),
        (
            '{"action": "get_transaction_status", "args": {"transaction_id": "X_7"}}',
            "must match ^TXN_[0-9]+$",
        ),
        (
            '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_7", "x": 1}}',
            "unknown argument x",
        ),
        ('{"action": "get_refund_policy", "args": {"transaction_state": "lost"}}', "must be one of"),
        ('{"action": "get_refund_policy", "args": [1]}', "must be a JSON object"),
        ('{"action": "final_answer", "answer": 42}', '"answer" must be a string'),
        ('{"thought": "hmm"}', "expected {"),
    ],
)
async def test_invalid_decisions_are_rejected(decision: str, reason: str) -> None:
    model = ScriptedModel(text_turns(decision))
    with pytest.raises(DecisionValidationFailed) as info:
        await run_step(model, driver=ReActDriver(examples=(), max_retries=0))
    assert reason in info.value.message
    assert info.value.attempts == 1


def test_negative_retries_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        ReActDriver(max_retries=-1)


# -- tool_choice ---------------------------------------------------------------------------------


def option_actions(schema: dict[str, Any]) -> list[str]:
    options = schema.get("anyOf", [schema])
    return [o["properties"]["action"]["const"] for o in options]


async def test_tool_choice_none_allows_only_the_answer() -> None:
    model = ScriptedModel(
        text_turns(
            '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}',
            '{"action": "final_answer", "answer": "ok"}',
        )
    )
    parts = await run_step(model, tool_choice="none")
    request = model.requests[0].request
    assert option_actions(request.output_schema or {}) == ["final_answer"]
    assert request.instructions is not None and "Tools:" not in request.instructions
    assert "unknown action 'get_transaction_status'" in model.requests[1].messages[-1].text
    assert "".join(p.delta for p in parts if isinstance(p, TextDelta)) == "ok"


async def test_tool_choice_required_allows_only_tools() -> None:
    model = ScriptedModel(
        text_turns(
            '{"action": "final_answer", "answer": "I know"}',
            '{"action": "get_refund_policy", "args": {"transaction_state": "settled"}}',
        )
    )
    parts = await run_step(model, tool_choice="required")
    assert option_actions(model.requests[0].request.output_schema or {}) == [
        "get_transaction_status",
        "get_refund_policy",
    ]
    assert "a tool call is required now" in model.requests[1].messages[-1].text
    assert not any(isinstance(p, TextStart) for p in parts)  # the refused answer was never shown
    assert kinds(parts)[-1] == "finish" and parts[-1].reason == "tool-calls"  # type: ignore[union-attr]


async def test_tool_choice_by_name_allows_only_that_tool() -> None:
    model = ScriptedModel(
        text_turns(
            '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}',
            '{"action": "get_refund_policy", "args": {"transaction_state": "settled"}}',
        )
    )
    await run_step(model, tool_choice="get_refund_policy")
    schema = model.requests[0].request.output_schema or {}
    assert option_actions(schema) == ["get_refund_policy"]
    assert schema["properties"]["args"] == POLICY_BOUNDED
    instructions = model.requests[0].request.instructions or ""
    assert "get_transaction_status" not in instructions


async def test_tool_choice_errors() -> None:
    with pytest.raises(ConfigError):
        await run_step(ScriptedModel([]), tool_choice="missing_tool")
    with pytest.raises(ConfigError):
        await run_step(ScriptedModel([]), tools=(), tool_choice="required")


# -- schema and rendering --------------------------------------------------------------------------


# The tools' schemas as the grammar sees them: every string, array and object bounded (pattern and enum
# strings are bounded by themselves).
POLICY_BOUNDED = {
    "type": "object",
    "properties": {
        "transaction_state": {"type": "string", "enum": ["settled", "pending"]},
        "currency": {"type": "string", "maxLength": 100},
    },
    "required": ["transaction_state"],
    "additionalProperties": False,
}


def test_decision_schema_shape() -> None:
    schema = decision_schema(TOOLS, allow_final=True)
    assert schema == {
        "anyOf": [
            {
                "type": "object",
                "properties": {"action": {"const": "get_transaction_status"}, "args": STATUS.parameters},
                "required": ["action", "args"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"action": {"const": "get_refund_policy"}, "args": POLICY_BOUNDED},
                "required": ["action", "args"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {
                    "action": {"const": "final_answer"},
                    "answer": {"type": "string", "maxLength": 1200},
                },
                "required": ["action", "answer"],
                "additionalProperties": False,
            },
        ]
    }


def test_decision_schema_hoists_defs_per_tool() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = ToolDefinition(
        name="ship",
        parameters={
            "type": "object",
            "$defs": {"Address": address},
            "properties": {"to": {"$ref": "#/$defs/Address"}},
            "required": ["to"],
        },
    )
    schema = decision_schema([tool], allow_final=False)
    assert schema["$defs"] == {
        "ship__Address": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 100}},
            "additionalProperties": False,
        }
    }
    assert schema["properties"]["args"] == {
        "type": "object",
        "properties": {"to": {"$ref": "#/$defs/ship__Address"}},
        "required": ["to"],
        "additionalProperties": False,
    }


def test_a_tool_named_final_answer_is_refused() -> None:
    with pytest.raises(ConfigError):
        decision_schema([ToolDefinition(name="final_answer")], allow_final=True)


async def test_history_rendering_matches_golden() -> None:
    history = [
        Message.user("Is TXN_7 done?"),
        Message(
            role="assistant",
            parts=(
                ReasoningPart(text="private"),
                ToolCallPart(
                    tool_call_id="c1", tool_name="get_transaction_status", args={"transaction_id": "TXN_7"}
                ),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(
                    tool_call_id="c1",
                    tool_name="get_transaction_status",
                    output={"status": "settled", "amount": 5},
                ),
            ),
        ),
        Message(role="assistant", parts=(ReasoningPart(text="x"), TextPart(text="TXN_7 is settled."))),
        Message.user("And TXN_8? And what is the policy?"),
        Message(
            role="assistant",
            parts=(
                TextPart(text="Let me check both."),
                ToolCallPart(
                    tool_call_id="c2", tool_name="get_transaction_status", args={"transaction_id": "TXN_8"}
                ),
                ToolCallPart(
                    tool_call_id="c3", tool_name="get_refund_policy", args={"transaction_state": "settled"}
                ),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(
                    tool_call_id="c2",
                    tool_name="get_transaction_status",
                    output="no transaction TXN_8",
                    is_error=True,
                ),
                ToolResultPart(
                    tool_call_id="c3", tool_name="get_refund_policy", output="Refundable for 30 days."
                ),
            ),
        ),
        Message(
            role="user",
            parts=(
                TextPart(text="Thanks. Here is the receipt:"),
                FilePart(media_type="image/png", data="AAAA", filename="receipt.png"),
            ),
        ),
    ]
    model = ScriptedModel(text_turns('{"action": "final_answer", "answer": "done"}'))
    request = ModelRequest(messages=history, tools=list(TOOLS), instructions="You are a payments help desk.")
    driver = ReActDriver(examples=())
    _ = [p async for p in driver.stream_step(model, request)]
    sent = model.requests[0].request
    golden = json.loads((GOLDEN / "history_rendering.json").read_text())
    assert sent.instructions == golden["instructions"]
    assert [[m.role, m.text] for m in sent.messages] == golden["messages"]
    assert all(len(m.parts) == 1 and isinstance(m.parts[0], TextPart) for m in sent.messages)
    assert not sent.tools and sent.output_schema == decision_schema(TOOLS, allow_final=True)


async def test_examples_come_first_as_chat_turns() -> None:
    example = (
        Message.user("Weather in Oslo?"),
        Message(
            role="assistant",
            parts=(ToolCallPart(tool_call_id="e", tool_name="get_weather", args={"city": "Oslo"}),),
        ),
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id="e", tool_name="get_weather", output={"temp_c": 4}),),
        ),
        Message(role="assistant", parts=(TextPart(text="4 °C."),)),
    )
    model = ScriptedModel(text_turns('{"action": "final_answer", "answer": "ok"}'))
    await run_step(model, driver=ReActDriver(examples=[example]))
    assert [(m.role, m.text) for m in model.requests[0].messages] == [
        ("user", "Weather in Oslo?"),
        ("assistant", '{"action": "get_weather", "args": {"city": "Oslo"}}'),
        ("user", 'Observation from get_weather: {"temp_c": 4}'),
        ("assistant", '{"action": "final_answer", "answer": "4 °C."}'),
        ("user", "What's the status of TXN_1?"),
    ]


def test_custom_format_instructions_replace_the_default() -> None:
    driver = ReActDriver(instructions="Answer in JSON, please.")
    prompt = driver.system_prompt(None, [STATUS], True)
    assert prompt.endswith("Answer in JSON, please.") and "Reply with one JSON object" not in prompt


def test_extract_json_skips_non_objects() -> None:
    assert extract_json('[1, 2] then {"a": {"b": 1}} and {"c": 2}') == {"a": {"b": 1}}
    assert extract_json("{not json} {}") == {}
    assert extract_json("nothing") is None
    assert extract_json('{"answer": "line\nbreak"}') == {"answer": "line\nbreak"}  # raw newline, as llama.cpp


@settings(max_examples=200, deadline=None)
@given(text=st.text(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_answer_streamer_decodes_any_chunking(text: str, cuts: list[int]) -> None:
    for ensure_ascii in (True, False):
        raw = '{"action": "final_answer", "answer": ' + json.dumps(text, ensure_ascii=ensure_ascii) + "}"
        points = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
        streamer = _AnswerStreamer("a")
        out: list[ModelStreamPart] = []
        for start, end in itertools.pairwise(points):
            out += streamer.feed(raw[start:end])
        assert streamer.started and streamer.closed
        assert isinstance(out[0], TextStart)
        assert "".join(p.delta for p in out if isinstance(p, TextDelta)) == text


def test_answer_streamer_ignores_tool_decisions() -> None:
    streamer = _AnswerStreamer("a")
    for chunk in ['{"', 'action": "get', '_x", "args": {"answer": "no"}}']:
        assert streamer.feed(chunk) == []
    assert not streamer.started


# -- with the agent loop ---------------------------------------------------------------------------


def lookup(transaction_id: str) -> dict[str, str]:
    """Look up a transaction.

    Args:
        transaction_id: The id.
    """
    return {"transaction_id": transaction_id, "status": "settled"}


async def test_agent_runs_the_react_loop() -> None:
    model = ScriptedModel(
        text_turns(
            '{"action": "lookup", "args": {"transaction_id": "TXN_9"}}',
            '{"action": "final_answer", "answer": "TXN_9 is settled."}',
        )
    )
    model.supports_tools = False
    agent: Agent[None] = Agent(model, tools=[lookup])
    assert isinstance(agent.driver, ReActDriver)
    result = await agent.run("Status of TXN_9?")
    assert result.output == "TXN_9 is settled."
    assert [(e.call.tool_name, e.call.args, e.result.output) for e in result.tool_executions] == [
        ("lookup", {"transaction_id": "TXN_9"}, {"transaction_id": "TXN_9", "status": "settled"})
    ]
    second = model.requests[1].messages
    assert second[-1].text == 'Observation from lookup: {"transaction_id": "TXN_9", "status": "settled"}'
    assert second[-2].text == '{"action": "lookup", "args": {"transaction_id": "TXN_9"}}'


async def test_reused_observations_refuse_a_call_answered_in_an_earlier_turn() -> None:
    repeat = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    history = [*turn_with_lookup("c1", "Status of TXN_1?"), Message.user("Who authorized it?")]
    model = ScriptedModel(text_turns(repeat, '{"action": "final_answer", "answer": "Dana"}'))
    driver = ReActDriver(examples=(), reuse_observations=True)
    parts = await run_step(model, driver=driver, messages=history)
    assert "".join(p.delta for p in parts if isinstance(p, TextDelta)) == "Dana"
    assert option_actions(model.requests[1].request.output_schema or {}) == ["final_answer"]
    # Other arguments are a new question: allowed.
    other = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_2"}}'
    parts = await run_step(ScriptedModel(text_turns(other)), driver=driver, messages=history)
    assert parts[-1].reason == "tool-calls"  # type: ignore[union-attr]


async def test_stream_start_is_sent_once_per_step() -> None:
    model = ScriptedModel(text_turns("junk", '{"action": "final_answer", "answer": "x"}'))
    parts = await run_step(model)
    assert sum(isinstance(p, StreamStart) for p in parts) == 1
    assert sum(isinstance(p, TextEnd) for p in parts) == 1


def turn_with_lookup(call_id: str, question: str) -> list[Message]:
    return [
        Message.user(question),
        Message(
            role="assistant",
            parts=(
                ToolCallPart(
                    tool_call_id=call_id, tool_name="get_transaction_status", args={"transaction_id": "TXN_1"}
                ),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(tool_call_id=call_id, tool_name="get_transaction_status", output={"s": "ok"}),
            ),
        ),
    ]


async def test_repeating_an_answered_call_in_the_same_turn_is_refused() -> None:
    repeat = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    model = ScriptedModel(text_turns(repeat, '{"action": "final_answer", "answer": "ok"}'))
    parts = await run_step(model, messages=turn_with_lookup("c1", "Status of TXN_1?"))
    assert "".join(p.delta for p in parts if isinstance(p, TextDelta)) == "ok"
    assert (
        "get_transaction_status was already called with these arguments"
        in model.requests[1].messages[-1].text
    )


async def test_calls_of_earlier_turns_may_be_repeated() -> None:
    repeat = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    history = [*turn_with_lookup("c1", "Status of TXN_1?"), Message.user("And now?")]
    parts = await run_step(ScriptedModel(text_turns(repeat)), messages=history)
    assert kinds(parts)[-1] == "finish" and parts[-1].reason == "tool-calls"  # type: ignore[union-attr]
    # ... and so may any call when refusing is turned off (tools meant to be polled).
    driver = ReActDriver(examples=(), refuse_repeats=False)
    parts = await run_step(
        ScriptedModel(text_turns(repeat)), driver=driver, messages=turn_with_lookup("c1", "Poll")
    )
    assert parts[-1].reason == "tool-calls"  # type: ignore[union-attr]


# -- bounds: what keeps a small model from running on ---------------------------------------------


def test_bounded_limits_strings_arrays_and_objects_only_where_unbounded() -> None:
    schema = {
        "type": "object",
        "properties": {
            "type": {"type": "string"},  # a parameter named like a keyword
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "code": {"type": "string", "pattern": "^X[0-9]+$"},
            "few": {"type": "array", "items": {"type": ["string", "null"]}, "maxItems": 2},
            "any": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    assert bounded(schema) == {
        "type": "object",
        "properties": {
            "type": {"type": "string", "maxLength": 100},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 16},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "code": {"type": "string", "pattern": "^X[0-9]+$"},
            "few": {"type": "array", "items": {"type": ["string", "null"], "maxLength": 100}, "maxItems": 2},
            "any": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "additionalProperties": False,
    }


async def test_decisions_get_a_token_budget_unless_one_is_set() -> None:
    answer = '{"action": "final_answer", "answer": "ok"}'
    model = ScriptedModel(text_turns(answer, answer))
    await run_step(model, driver=ReActDriver(examples=(), max_decision_tokens=77))
    assert model.requests[0].request.settings.max_tokens == 77
    request = ModelRequest(
        messages=[Message.user("hi")], tools=list(TOOLS), settings=ModelSettings(max_tokens=500)
    )
    _ = [p async for p in ReActDriver(examples=()).stream_step(model, request)]
    assert model.requests[1].request.settings.max_tokens == 500


async def test_the_answer_string_is_bounded() -> None:
    model = ScriptedModel(text_turns('{"action": "final_answer", "answer": "ok"}'))
    await run_step(model, driver=ReActDriver(examples=(), max_answer_chars=40))
    schema = model.requests[0].request.output_schema or {}
    final = next(o for o in schema["anyOf"] if o["properties"]["action"]["const"] == "final_answer")
    assert final["properties"]["answer"] == {"type": "string", "maxLength": 40}


async def test_spent_call_budget_leaves_only_the_answer_but_the_same_prompt() -> None:
    lookup = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    model = ScriptedModel(text_turns(lookup, '{"action": "final_answer", "answer": "settled"}'))
    driver = ReActDriver(max_calls_per_turn=1)
    first = await run_step(model, driver=driver)
    assert first[-1].reason == "tool-calls"  # type: ignore[union-attr]
    parts = await run_step(
        model, driver=driver, messages=turn_with_lookup("c1", "What's the status of TXN_1?")
    )
    assert "".join(p.delta for p in parts if isinstance(p, TextDelta)) == "settled"
    before, after = (r.request for r in model.requests)
    assert option_actions(before.output_schema or {}) == [
        "get_transaction_status",
        "get_refund_policy",
        "final_answer",
    ]
    assert option_actions(after.output_schema or {}) == ["final_answer"]
    # The catalog and the examples stay: the model reads the same text before its history each step.
    assert after.instructions == before.instructions
    examples = len(before.messages) - 1
    assert [m.text for m in after.messages[:examples]] == [m.text for m in before.messages[:examples]]
    # A new user message starts a new budget.
    history = [*turn_with_lookup("c1", "Status of TXN_1?"), Message.user("And TXN_2?")]
    model = ScriptedModel(text_turns(lookup))
    await run_step(model, driver=driver, messages=history)
    assert "get_transaction_status" in option_actions(model.requests[0].request.output_schema or {})


async def test_no_call_budget_by_default_but_the_local_model_asks_for_one() -> None:
    assert ReActDriver().max_calls_per_turn is None
    agent = Agent(ScriptedModel([]), tools=[])
    assert agent.driver.__class__.__name__ == "NativeToolDriver"

    class NoTools(ScriptedModel):
        supports_tools = False
        tool_calls_per_turn = 1

    driver = Agent(NoTools([]), tools=[]).driver
    assert isinstance(driver, ReActDriver) and driver.max_calls_per_turn == 1


async def test_repeated_call_is_retried_with_an_answer_only_grammar() -> None:
    repeat = '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    model = ScriptedModel(text_turns(repeat, '{"action": "final_answer", "answer": "ok"}'))
    await run_step(model, messages=turn_with_lookup("c1", "Status of TXN_1?"))
    first, retry = (r.request for r in model.requests)
    assert "get_transaction_status" in option_actions(first.output_schema or {})
    assert option_actions(retry.output_schema or {}) == ["final_answer"]


class StallingModel(Model):
    """Starts a reply and then never sends another part, like a model stuck on an overloaded CPU."""

    supports_tools = False

    def __init__(self, first: str) -> None:
        self.first = first
        self.closed = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        try:
            yield StreamStart()
            yield TextStart(id="t")
            yield TextDelta(id="t", delta=self.first)
            await asyncio.Event().wait()
        finally:
            self.closed.set()


async def test_a_decision_past_its_time_bound_is_stopped_and_raises() -> None:
    model = StallingModel('{"action": "get_transaction_status", "args": {"transaction_id": "TX')
    driver = ReActDriver(examples=(), decision_timeout=0.2)
    with pytest.raises(DecisionTimeout) as caught:
        await run_step(model, driver=driver)  # type: ignore[arg-type]
    assert caught.value.raw_output.startswith('{"action": "get_transaction_status"')
    assert model.closed.is_set()  # the model's stream was closed, so a local model stops generating


async def test_an_answer_cut_by_the_time_bound_stands() -> None:
    model = StallingModel('{"action": "final_answer", "answer": "TXN_1 is sett')
    parts = await run_step(model, driver=ReActDriver(examples=(), decision_timeout=0.2))  # type: ignore[arg-type]
    assert "".join(p.delta for p in parts if isinstance(p, TextDelta)) == "TXN_1 is sett"
    assert kinds(parts)[-2:] == ["text-end", "finish"] and parts[-1].reason == "other"  # type: ignore[union-attr]
    assert model.closed.is_set()


def test_bad_limits_are_config_errors() -> None:
    for kwargs in (
        {"max_calls_per_turn": 0},
        {"max_decision_tokens": 0},
        {"max_answer_chars": 0},
        {"decision_timeout": 0},
    ):
        with pytest.raises(ConfigError):
            ReActDriver(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "looping"),
    [
        ("It is settled, authorized by Dana Kim. " + "2023-02-20 " * 8, True),
        ("ha" * 40, True),
        (";" * 80, True),
        (";" * 79, False),
        ("| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |", False),
        (
            "2023-02-20 " * 3 + "and then something else entirely, written once, as prose goes on and on.",
            False,
        ),
        ("The transaction id is TXN_123 and the status is settled and authorized by Dana Kim.", False),
    ],
)
def test_ends_in_a_loop(text: str, looping: bool) -> None:
    assert ends_in_a_loop(text) is looping


async def test_an_answer_stuck_in_a_loop_is_cut() -> None:
    answer = "Authorized by Dana Kim on " + "2023-02-20 " * 40
    model = ScriptedModel(text_turns('{"action": "final_answer", "answer": "' + answer + '"}'), chunk_size=4)
    parts = await run_step(model)
    shown = "".join(p.delta for p in parts if isinstance(p, TextDelta))
    assert shown.startswith("Authorized by Dana Kim on 2023-02-20 2023-02-20")
    assert ends_in_a_loop(shown) and len(shown) < 26 + 11 * 9 + 4  # stopped right after the 80th char
    assert kinds(parts)[-2:] == ["text-end", "finish"] and parts[-1].reason == "length"  # type: ignore[union-attr]


def test_a_structured_answer_is_bounded_too() -> None:
    answer = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    schema = decision_schema([], allow_final=True, answer_schema=answer, max_answer_chars=500)
    assert schema["properties"]["answer"] == {  # strings of an answer get the answer's bound
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 500}},
        "required": ["city"],
        "additionalProperties": False,
    }


async def test_a_reprompted_decision_is_an_event_the_stream_and_the_transcript_show() -> None:
    model = ScriptedModel(
        text_turns(
            "I will look that up.",
            '{"action": "lookup", "args": {"transaction_id": "TXN_9"}}',
            '{"action": "final_answer", "answer": "TXN_9 is settled."}',
        )
    )
    model.supports_tools = False
    agent: Agent[None] = Agent(model, tools=[lookup])
    events = [event async for event in agent.stream("Status of TXN_9?")]
    [retry] = [e for e in events if isinstance(e, SystemMessageEvent)]
    assert (retry.code, retry.attempt, retry.level) == ("decision-retry", 1, "warning")
    assert "no JSON object found" in retry.text and retry.seq > 0
    assert event_from_dict(event_to_dict(retry)) == retry  # as the native stream carries it
    transcript = Transcript()
    transcript.apply_all(events)
    [note] = [m for m in transcript.messages if m.role == "system"]
    assert note.text == retry.text


async def test_an_optional_thought_precedes_the_choice_and_is_shown_as_reasoning() -> None:
    driver = ReActDriver(examples=(), thought=True)
    thought = '{"thought": "The user named TXN_1.", "action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}'
    model = ScriptedModel(text_turns(thought))
    parts = await run_step(model, driver=driver)
    assert kinds(parts)[1:5] == ["reasoning-start", "reasoning-delta", "reasoning-end", "tool-input-start"]
    assert "".join(p.delta for p in parts if isinstance(p, ReasoningDelta)) == "The user named TXN_1."
    schema = model.requests[0].request.output_schema or {}
    for option in schema["anyOf"]:
        assert next(iter(option["properties"])) == "thought" and "thought" not in option["required"]
    # Without thought=True the schema is as before, and a decision without a thought has no reasoning.
    plain = ScriptedModel(
        text_turns('{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}')
    )
    assert "reasoning-start" not in kinds(await run_step(plain))
    assert all(
        "thought" not in o["properties"] for o in (plain.requests[0].request.output_schema or {})["anyOf"]
    )


async def test_the_decision_schema_is_a_hook() -> None:
    class OnlyStatus(ReActDriver):
        def decision_schema(
            self,
            tools: Sequence[ToolDefinition],
            allow_final: bool,
            answer_schema: dict[str, Any] | None,
            history: Sequence[Message],
        ) -> dict[str, Any]:
            return super().decision_schema([t for t in tools if t.name == STATUS.name], False, None, history)

    model = ScriptedModel(
        text_turns('{"action": "get_transaction_status", "args": {"transaction_id": "TXN_1"}}')
    )
    await run_step(model, driver=OnlyStatus(examples=()))
    assert option_actions(model.requests[0].request.output_schema or {}) == [STATUS.name]
