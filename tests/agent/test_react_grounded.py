"""Grounded decisions (``_react_grounded``): what the decision grammar leaves a tiny model to choose from,
through the driver (scripted model, recorded requests) and on the real embedded model."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolwire
from toolwire.agent.drivers._default import default_driver
from toolwire.agent.drivers._react_grounded import (
    COURTESY_REPLIES,
    NOT_AVAILABLE,
    answer_options,
    closest_tools,
    grounded_decision_schema,
    text_spans,
)
from toolwire.agent.drivers._react_parse import ends_in_a_loop
from toolwire.agent.drivers._react_prompt import system_prompt
from toolwire.agent.drivers.react import ReActDriver
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart
from toolwire.models.base import ModelRequest, ToolDefinition
from toolwire.models.scripted import ScriptedModel

FORECAST = ToolDefinition(
    name="get_forecast",
    description="Weather forecast for a city: high and low in °C and sky.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "day": {"type": "string", "enum": ["today", "tomorrow"], "default": "today"},
        },
        "required": ["city"],
    },
)
CONVERT = ToolDefinition(
    name="convert_currency",
    description="Convert an amount of money between currencies.",
    parameters={
        "type": "object",
        "properties": {
            "amount": {"type": "number"},
            "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        },
        "required": ["amount", "currency"],
    },
)
ORDER = ToolDefinition(
    name="get_order",
    description="Look up a customer order: status and carrier.",
    parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)


def options_of(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The decision schema's options by action name."""
    options = schema.get("anyOf", [schema])
    return {o["properties"]["action"]["const"]: o["properties"] for o in options}


def after_a_lookup(question: str) -> list[Message]:
    call = ToolCallPart(tool_call_id="c1", tool_name="get_forecast", args={"city": "Lisbon"})
    result = ToolResultPart(
        tool_call_id="c1", tool_name="get_forecast", output={"city": "Lisbon", "high_c": 21, "sky": "sunny"}
    )
    return [
        Message.user("Forecast for Lisbon?"),
        Message(role="assistant", parts=(call,)),
        Message(role="tool", parts=(result,)),
        Message(role="assistant", parts=(TextPart(text="The city is Lisbon."),)),
        Message.user(question),
    ]


def test_spans_are_the_users_words_without_filler() -> None:
    assert text_spans("Is it going to be sunny in Lisbon today?") == [
        "sunny",
        "sunny in Lisbon",
        "Lisbon",
    ]
    assert "where is the station" in text_spans("Say 'where is the station' in French")
    assert "A-10482" in text_spans("Where is my order A-10482?")
    assert text_spans("Thanks, bye!") == [] and text_spans("Hello!") == []


def test_arguments_are_spans_enums_named_or_numbers_written() -> None:
    history = [Message.user("Convert 250 EUR for my trip to Lisbon")]
    forecast = grounded_decision_schema([FORECAST], history, allow_final=True)
    convert = grounded_decision_schema([CONVERT], history, allow_final=True)
    assert forecast is not None and convert is not None
    forecast_args = options_of(forecast)["get_forecast"]["args"]["properties"]
    assert "Lisbon" in forecast_args["city"]["enum"] and "EUR" in forecast_args["city"]["enum"]
    assert forecast_args["day"] == FORECAST.parameters["properties"]["day"]  # no day named: the whole enum
    convert_args = options_of(convert)["convert_currency"]["args"]["properties"]
    assert convert_args["amount"] == {"enum": [250]}  # the one number written
    assert convert_args["currency"] == {"enum": ["EUR"]}  # the enum value named, not all three


def test_a_tool_whose_value_is_not_in_the_text_cannot_be_called() -> None:
    schema = grounded_decision_schema(
        [CONVERT], [Message.user("What is the weather in Lisbon?")], allow_final=True
    )
    assert schema is not None and set(options_of(schema)) == {"final_answer"}  # no number to convert


def test_a_greeting_calls_nothing_and_gets_a_courtesy_reply() -> None:
    schema = grounded_decision_schema([FORECAST, ORDER], [Message.user("Hello!")], allow_final=True)
    assert schema is not None
    options = options_of(schema)
    assert set(options) == {"final_answer"}
    assert options["final_answer"]["answer"]["enum"] == list(COURTESY_REPLIES)


def test_without_a_stored_result_a_question_can_only_be_not_available() -> None:
    assert answer_options([Message.user("What is the UV index in Nairobi?")]) == [NOT_AVAILABLE]


def test_answers_state_only_stored_results() -> None:
    options = answer_options(after_a_lookup("And the low?"))
    assert options[0] == "The city is Lisbon, the high c is 21 and the sky is sunny."
    assert "The sky is sunny." in options and NOT_AVAILABLE in options
    facts = {"Lisbon", "21", "sunny"}
    for option in options:
        assert option == NOT_AVAILABLE or any(fact in option for fact in facts)


def test_a_question_in_a_tools_words_is_looked_up_before_it_is_answered() -> None:
    looked_up = grounded_decision_schema(
        [ORDER], [Message.user("Where is my order A-10482?")], allow_final=True
    )
    assert looked_up is not None and set(options_of(looked_up)) == {"get_order"}
    # No shared word ("Middlemarch"): the model may still answer instead.
    free = grounded_decision_schema([ORDER], [Message.user("Who wrote Middlemarch?")], allow_final=True)
    assert free is not None and set(options_of(free)) == {"get_order", "final_answer"}


def test_tools_are_narrowed_to_those_sharing_words_with_the_question() -> None:
    assert [t.name for t in closest_tools([FORECAST, ORDER], "Where is my order A-10482?")] == ["get_order"]
    assert len(closest_tools([FORECAST, ORDER], "Who wrote Middlemarch?")) == 2  # no word shared: both


async def test_the_driver_sends_the_grounded_schema_and_examples() -> None:
    model = ScriptedModel([[TextPart(text='{"action": "final_answer", "answer": "' + NOT_AVAILABLE + '"}')]])
    driver = ReActDriver(grounded=True)
    request = ModelRequest(messages=[Message.user("What is the UV index in Nairobi?")], tools=[FORECAST])
    parts = [part async for part in driver.stream_step(model, request)]
    assert "".join(getattr(p, "delta", "") for p in parts if p.type == "text-delta") == NOT_AVAILABLE
    sent = model.requests[0].request
    assert sent.output_schema is not None
    assert options_of(sent.output_schema)["get_forecast"]["args"]["properties"]["city"]["enum"] == [
        "UV",
        "UV index",
        "UV index in Nairobi",
        "index",
        "index in Nairobi",
        "Nairobi",
    ]
    prompt = "\n".join(m.text for m in sent.messages)
    assert "Hello! How can I help you?" in prompt and "Lyon" in prompt  # courtesy and call examples


def test_the_default_driver_grounds_only_the_embedded_model() -> None:
    assert not ReActDriver().grounded
    scripted = default_driver(ScriptedModel([]))
    assert not isinstance(scripted, ReActDriver) or not scripted.grounded


def test_an_optional_str_or_none_is_shown_as_such() -> None:
    tool = ToolDefinition(
        name="track_parcel",
        description="Track a parcel.",
        parameters={
            "type": "object",
            "properties": {
                "tracking_number": {"type": "string"},
                "carrier": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["tracking_number"],
        },
    )
    prompt = system_prompt(None, [tool], allow_final=True, reply_format="")
    assert "carrier: string | null?" in prompt and "any" not in prompt


def test_the_loop_guard_catches_a_long_repeated_sentence() -> None:
    sentence = "The city is Lisbon, the day is tomorrow, the high c is 19 and the sky is showers. "
    assert len(sentence) > 60
    assert ends_in_a_loop(sentence * 3)
    assert not ends_in_a_loop(sentence * 2)


# -- the real embedded model -------------------------------------------------------------------------------


@toolwire.tool
def get_forecast(city: str) -> dict[str, Any]:
    """Weather forecast for a city: high in °C and sky.

    Args:
        city: City name.
    """
    return {"city": city, "high_c": 21, "sky": "sunny"}


@pytest.mark.live
async def test_the_embedded_model_cannot_invent_an_answer() -> None:
    agent = toolwire.Agent("local", tools=[get_forecast])
    greeting = await agent.run("Hello!")
    assert greeting.tool_executions == [] and greeting.output in COURTESY_REPLIES
    asked = await agent.run("How strong is the wind in Lisbon?", session_id=greeting.session_id)
    # Whether it looks the forecast up or not, the answer states the stored result or says it has none.
    allowed = {NOT_AVAILABLE, "The city is Lisbon, the high c is 21 and the sky is sunny."}
    assert asked.output in allowed, json.dumps(asked.output)
