"""Few-shot examples the ReAct driver builds from the agent's own tools (expected text written by hand)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.agent.drivers._react_examples import example_request, example_value, generated_examples
from toolwire.agent.drivers._react_prompt import render_history
from toolwire.agent.drivers.react import ReActDriver
from toolwire.messages import Message, TextPart
from toolwire.models.base import ModelRequest, ToolDefinition
from toolwire.models.scripted import ScriptedModel
from toolwire.tools.function import tool


@tool
def get_transaction_status(transaction_id: str) -> dict[str, str]:
    """Look up a payment transaction.

    Args:
        transaction_id: The id, like TXN_123.
    """
    return {}


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


def rendered(tools: list[ToolDefinition]) -> list[tuple[str, str]]:
    return [
        (m.role, m.text) for conversation in generated_examples(tools) for m in render_history(conversation)
    ]


def test_one_tool_gets_two_requests_with_the_follow_up_in_the_first() -> None:
    assert rendered([get_transaction_status.definition()]) == [
        ("user", "What is the transaction status of TXN_456?"),
        ("assistant", '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_456"}}'),
        (
            "user",
            'Observation from get_transaction_status: {"transaction_id": "TXN_456", "state": "ready", "code": 17}',
        ),
        (
            "assistant",
            '{"action": "final_answer", "answer": "The transaction id is TXN_456 and the state is ready '
            'and the code is 17."}',
        ),
        ("user", "And the code?"),
        ("assistant", '{"action": "final_answer", "answer": "The code is 17."}'),
        ("user", "What is the transaction status of TXN_567?"),
        ("assistant", '{"action": "get_transaction_status", "args": {"transaction_id": "TXN_567"}}'),
        (
            "user",
            'Observation from get_transaction_status: {"transaction_id": "TXN_567", "state": "open", "code": 29}',
        ),
        (
            "assistant",
            '{"action": "final_answer", "answer": "The transaction id is TXN_567 and the state is open '
            'and the code is 29."}',
        ),
    ]


def test_each_tool_gets_its_own_request_with_its_own_values() -> None:
    texts = rendered([add.definition(), multiply.definition()])
    assert texts[0] == ("user", "Add 2.5 and 6.5.")
    assert texts[1] == ("assistant", '{"action": "add", "args": {"a": 2.5, "b": 6.5}}')
    assert texts[6] == ("user", "Multiply 6.5 and 10.5.")
    assert texts[7] == ("assistant", '{"action": "multiply", "args": {"a": 6.5, "b": 10.5}}')
    assert len(texts) == 10  # two conversations, the follow-up in the first only


def test_at_most_four_tools_get_examples() -> None:
    tools = [ToolDefinition(name=f"tool_{i}") for i in range(6)]
    assert [c[1].tool_calls[0].tool_name for c in generated_examples(tools)] == [
        "tool_0",
        "tool_1",
        "tool_2",
        "tool_3",
    ]


@pytest.mark.parametrize(
    ("name", "spec", "expected"),
    [
        ("sku", {"type": "string", "description": "The SKU, like SKU-1."}, "SKU-4"),
        ("order", {"type": "string", "description": "e.g. ORD_2024"}, "ORD_5357"),
        ("city", {"type": "string", "description": "The city, for example Oslo."}, "Oslo"),
        ("city", {"type": "string"}, "Lyon"),
        ("ticket", {"type": "string", "pattern": "^TCK-[0-9]+$"}, "TCK-456"),
        ("unit", {"type": "string", "enum": ["c", "f"]}, "c"),
        ("mode", {"const": "fast"}, "fast"),
        ("limit", {"type": "integer", "default": 10}, 10),
        ("limit", {"type": "integer"}, 3),
        ("ratio", {"type": ["number", "null"]}, 2.5),
        ("dry_run", {"type": "boolean"}, True),
        ("ids", {"type": "array", "items": {"type": "integer"}}, [3]),
        ("color", {"type": "string"}, "teal"),
        # Realistic, never a placeholder a model copies into real calls ("tracking number 1", issue 30).
        ("tracking_number", {"type": "string"}, "QX-8845"),
        ("when", {"type": "string", "examples": ["2020-01-01"]}, "2020-01-01"),
    ],
)
def test_example_values(name: str, spec: dict[str, Any], expected: Any) -> None:
    assert example_value(name, spec) == expected


@pytest.mark.parametrize(
    ("tool_name", "args", "expected"),
    [
        ("get_weather", {"city": "Lyon"}, "What is the weather of Lyon?"),
        ("lookupProduct", {"sku": "SKU-4"}, "What is the product of SKU-4?"),
        ("look_up_order", {"id": 3}, "What is the order of 3?"),
        ("refund", {"transaction_id": "TXN_4"}, "Refund TXN_4."),
        ("get_time", {}, "What is the time?"),
        ("ping", {}, "Ping."),
    ],
)
def test_example_requests(tool_name: str, args: dict[str, Any], expected: str) -> None:
    assert example_request(tool_name, args) == expected


async def test_the_driver_uses_them_unless_given_examples() -> None:
    answer = '{"action": "final_answer", "answer": "ok"}'
    model = ScriptedModel([[TextPart(text=answer)], [TextPart(text=answer)]])
    request = ModelRequest(
        messages=[Message.user("Status of TXN_9?")], tools=[get_transaction_status.definition()]
    )
    _ = [p async for p in ReActDriver().stream_step(model, request)]
    _ = [p async for p in ReActDriver(examples=()).stream_step(model, request)]
    generated, given = (r.request.messages for r in model.requests)
    assert [(m.role, m.text) for m in generated[:-1]] == rendered([get_transaction_status.definition()])
    assert [m.text for m in given] == ["Status of TXN_9?"]
