"""Structured output alongside tools, on the scripted model."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.errors import NoObjectGenerated
from toolwire.events import OutputAvailable, OutputPartial
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore


class Weather(BaseModel):
    city: str
    temperature_c: float
    conditions: list[str]


def get_temperature(city: str) -> float:
    """Current temperature in a city."""
    return 21.5


def final(cid: str, args: dict[str, Any]) -> ToolCallPart:
    return ToolCallPart(tool_call_id=cid, tool_name="final_result", args=args)


async def test_tools_then_final_result_tool_gives_a_validated_instance() -> None:
    store = MemoryStore()
    model = ScriptedModel(
        [
            [ToolCallPart(tool_call_id="t1", tool_name="get_temperature", args={"city": "Oslo"})],
            [final("f1", {"city": "Oslo", "temperature_c": 21.5, "conditions": ["sunny"]})],
        ]
    )
    agent = Agent(model, tools=[get_temperature], output_type=Weather, store=store)
    result = await agent.run("weather in Oslo?", session_id="s")
    assert result.output == Weather(city="Oslo", temperature_c=21.5, conditions=["sunny"])
    request = model.requests[0].request
    assert [t.name for t in request.tools] == ["get_temperature", "final_result"]
    assert request.tool_choice == "required" and request.output_schema is None
    assert request.tools[1].parameters["required"] == ["city", "temperature_c", "conditions"]
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "tool"]
    assert history[-1].tool_results[0].output == "Final result accepted."


async def test_invalid_final_result_is_fed_back_and_retried() -> None:
    model = ScriptedModel(
        [
            [final("f1", {"city": "Oslo", "temperature_c": "warm", "conditions": []})],
            [final("f2", {"city": "Oslo", "temperature_c": 20, "conditions": []})],
        ]
    )
    result = await Agent(model, output_type=Weather).run("weather?")
    assert result.output.temperature_c == 20
    fed_back = model.requests[1].messages[-1].tool_results[0]
    assert fed_back.is_error and "temperature_c" in fed_back.output


async def test_text_instead_of_an_object_is_reprompted_and_the_attempt_is_stored() -> None:
    store = MemoryStore()
    model = ScriptedModel(
        [
            [TextPart(text="It is sunny in Oslo.")],
            [final("f", {"city": "Oslo", "temperature_c": 1, "conditions": []})],
        ]
    )
    result = await Agent(model, output_type=Weather, store=store).run("weather?", session_id="s")
    assert result.output.city == "Oslo"
    roles = [m.role for m in await store.load_history("s")]
    assert roles == ["user", "assistant", "user", "assistant", "tool"]
    retry = model.requests[1].messages[-1]
    assert retry.role == "user" and "final_result" in retry.text


async def test_retries_exhausted_raise_no_object_generated_with_the_last_raw_output() -> None:
    store = MemoryStore()
    model = ScriptedModel([[final("f", {"city": 3})]], repeat_last=True)
    with pytest.raises(NoObjectGenerated) as info:
        await Agent(model, output_type=Weather, output_retries=2, store=store).run("weather?", session_id="s")
    assert info.value.raw_output == '{"city":3}'
    assert any("temperature_c" in e for e in info.value.errors)
    assert len(model.requests) == 3  # first attempt + 2 retries
    history = await store.load_history("s")
    assert [m.role for m in history] == ["user"] + ["assistant", "tool"] * 3  # every attempt stored, valid


async def test_native_mode_parses_text_and_streams_partial_objects() -> None:
    text = '{"city": "Bergen", "temperature_c": 12.5, "conditions": ["rain", "wind"]}'
    model = ScriptedModel([[TextPart(text=text)]], chunk_size=5)
    agent = Agent(model, output_type=Weather, output_mode="native")
    events = [e async for e in agent.stream("weather?")]
    assert model.requests[0].request.output_schema == Weather.model_json_schema()
    partials = [e.partial for e in events if isinstance(e, OutputPartial)]
    assert len(partials) >= 3
    assert partials[0] in ({}, {"city": "B"}, {"city": "Be"}, {"city": "Ber"}) or "city" in partials[0]
    assert partials[-1] == {"city": "Bergen", "temperature_c": 12.5, "conditions": ["rain", "wind"]}
    cities = [p.get("city", "") for p in partials]
    assert all(a == b[: len(a)] for a, b in itertools.pairwise(cities))  # grows monotonically
    (available,) = [e for e in events if isinstance(e, OutputAvailable)]
    assert available.output == partials[-1]
    run = agent.stream("again")
    model.turns.append([TextPart(text=text)])
    async for _ in run:
        pass
    assert run.result is not None and run.result.output == Weather(
        city="Bergen", temperature_c=12.5, conditions=["rain", "wind"]
    )


async def test_native_mode_accepts_fenced_json_and_retries_bad_json() -> None:
    model = ScriptedModel(
        [
            [TextPart(text="{not json")],
            [TextPart(text='```json\n{"city": "A", "temperature_c": 1, "conditions": []}\n```')],
        ]
    )
    result = await Agent(model, output_type=Weather, output_mode="native").run("w?")
    assert result.output.city == "A"
    assert "not valid JSON" in model.requests[1].messages[-1].text


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Label:
    text: str


@pytest.mark.parametrize(
    ("output_type", "args", "expected"),
    [
        (Point, {"x": 1, "y": 2}, {"x": 1, "y": 2}),
        (Label, {"text": "hi"}, Label(text="hi")),
        ([Point, Label], {"result": {"text": "hi"}}, Label(text="hi")),
        (int, {"result": 7}, 7),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            {"n": 3},
            {"n": 3},
        ),
    ],
)
async def test_every_kind_of_output_type(output_type: Any, args: dict[str, Any], expected: Any) -> None:
    model = ScriptedModel([[final("f", args)]])
    result = await Agent(model, output_type=output_type).run("go")
    assert result.output == expected


def test_an_unusable_output_type_is_a_config_error() -> None:
    from typing import TypedDict as PlainTypedDict

    from toolwire.errors import ConfigError

    class Old(PlainTypedDict):  # typing.TypedDict is not supported by pydantic on Python < 3.12
        a: int

    with pytest.raises(ConfigError):
        Agent(ScriptedModel([]), output_type=Old if __import__("sys").version_info < (3, 12) else object())


async def test_raw_json_schema_violations_are_reported() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    model = ScriptedModel([[final("f", {"n": "x"})], [final("g", {"n": 1})]])
    result = await Agent(model, output_type=schema).run("go")
    assert result.output == {"n": 1}
    assert "'x' is not of type 'integer'" in model.requests[1].messages[-1].tool_results[0].output


class Row(BaseModel):
    id: int
    name: str
    tags: list[str]


class Table(BaseModel):
    rows: list[Row]


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_partial_objects_of_a_long_answer_cost_a_bounded_multiple_of_its_length(mode: str) -> None:
    """Each snapshot is validated and serialised whole: one per 20-character delta made a 64 KB object
    cost ~100 MB of snapshots (quadratic). Now their total size stays a small multiple of the object's,
    the partials still grow monotonically, and the last one is the whole object."""
    table = Table(rows=[Row(id=i, name=f"item-{i}", tags=["alpha", "beta"]) for i in range(1300)])
    text = table.model_dump_json()
    assert len(text) > 60_000
    answer = TextPart(text) if mode == "native" else final("f", table.model_dump())
    model = ScriptedModel([[answer]], chunk_size=20)
    events = [e async for e in Agent(model, output_type=Table, output_mode=mode).stream("go")]  # type: ignore[arg-type]
    partials = [e.partial for e in events if isinstance(e, OutputPartial)]
    assert partials[-1] == table.model_dump()
    sizes = [len(p.get("rows", [])) for p in partials]
    assert sizes == sorted(sizes) and len(partials) > 20  # small objects still stream delta by delta
    emitted = sum(len(json.dumps(p)) for p in partials)
    assert emitted < 12 * len(text), (len(partials), emitted)
