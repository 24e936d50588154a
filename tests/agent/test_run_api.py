"""The run API as a user first meets it: typed results, and a stream closed early by ``async with``."""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel

from toolwire import Agent, ScriptedModel, TextDeltaEvent, TextPart, ToolCallPart
from toolwire.errors import MissingKeyError
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


async def test_an_agent_on_a_keyed_provider_builds_without_the_key_and_override_swaps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An application's module-level agent, tested without its provider's key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent("openai:gpt-4o", store=MemoryStore())  # no key: built, the model comes on first use
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        await agent.run("hi")
    scripted = ScriptedModel([[TextPart("scripted answer")]])
    with agent.override(model=scripted):
        result = await agent.run("hi")  # the module's own object, as the application's code calls it
        assert result.output == "scripted answer"
    assert len(scripted.requests) == 1
    with pytest.raises(MissingKeyError):  # the block is over: the agent is as it was
        await agent.run("hi")
    await agent.aclose()  # closes nothing it never built


async def test_run_sync_works_inside_a_running_event_loop_as_in_jupyter() -> None:
    """A notebook cell runs in the kernel's event loop; ``asyncio.run`` refuses to nest there."""
    agent = Agent("openai:gpt-4o")  # the application's agent, its key unset here
    with agent.override(model=ScriptedModel([[TextPart("from a thread")]])):
        result = agent.run_sync("hi")  # blocks this loop until it is done
    assert result.output == "from a thread"


async def test_stream_text_yields_the_answer_as_written() -> None:
    model = ScriptedModel(
        [[ToolCallPart("lookup", tool_call_id="c1", args={})], [TextPart("It is settled.")]], chunk_size=4
    )

    def lookup() -> str:
        """Look it up."""
        return "settled"

    pieces = [piece async for piece in Agent(model, tools=[lookup]).stream_text("status?")]
    assert pieces == ["It i", "s se", "ttle", "d."]


async def test_a_copy_made_inside_an_override_block_keeps_its_own_settings() -> None:
    """The server copies an agent per request (``override()``, then its own tools); a test's
    ``with agent.override(model=...)`` must not redirect that copy's runs to the block's override."""
    agent = Agent(ScriptedModel([[TextPart("original")]]))
    with agent.override(model=ScriptedModel([[TextPart("overridden")]])):
        per_request = agent.override(model=ScriptedModel([[TextPart("per request")]]))
        assert (await per_request.run("hi")).output == "per request"
        assert (await agent.run("hi")).output == "overridden"
