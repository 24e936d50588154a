"""The run API as a user first meets it: typed results, and a stream closed early by ``async with``."""

from __future__ import annotations

import inspect

from pydantic import BaseModel

from toolwire import Agent, ScriptedModel, TextDeltaEvent, TextPart, ToolCallPart
from toolwire.store import MemoryStore


class Weather(BaseModel):
    city: str
    temperature_c: float


def test_run_sync_gives_text_without_output_type_and_the_object_with_one() -> None:
    assert Agent(ScriptedModel([[TextPart("hello")]])).run_sync("hi").output == "hello"
    answer = ToolCallPart("final_result", tool_call_id="f", args={"city": "Oslo", "temperature_c": 4})
    result = Agent(ScriptedModel([[answer]]), output_type=Weather).run_sync("weather?")
    assert result.output == Weather(city="Oslo", temperature_c=4)


async def test_leaving_async_with_closes_the_run_mid_answer() -> None:
    store = MemoryStore()
    model = ScriptedModel(
        [[TextPart("a long answer, streamed in chunks")], [TextPart("after")]], chunk_size=4
    )
    agent = Agent(model, store=store)
    async with agent.stream("go", session_id="s") as run:
        async for event in run:
            if isinstance(event, TextDeltaEvent):
                break
    assert run.result is not None and run.result.status == "cancelled"
    assert (await agent.run("next", session_id="s")).output == "after"  # the session is free again


async def test_a_run_iterated_to_the_end_has_its_result() -> None:
    async with Agent(ScriptedModel([[TextPart("done")]])).stream("go") as run:
        types = [event.type async for event in run]
    assert types[0] == "interaction-start" and types[-1] == "interaction-end"
    assert run.result is not None and run.result.status == "completed" and run.result.output == "done"


def test_the_typed_constructor_options_are_the_constructor_keywords() -> None:
    """The ``__init__`` overloads take the options as ``**Unpack[_AgentOptions]``: a keyword added to the
    constructor but not to the TypedDict would be refused by type checkers."""
    from toolwire.agent.agent import _AgentOptions

    keywords = {
        name
        for name, param in inspect.signature(Agent.__init__).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords - {"deps_type", "output_type"} == set(_AgentOptions.__annotations__)
