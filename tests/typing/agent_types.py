"""Type-checked, never run: ``tests/test_typing.py`` runs ``mypy --strict`` on this file.

Each ``assert_type`` pins what a user's type checker infers without annotations; a regression in the
public types makes mypy (and so the test) fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_type

from pydantic import BaseModel

import toolwire
from toolwire import Agent, AgentRun, RunContext, RunResult, ScriptedModel, TextPart
from toolwire.events import AgentEvent


class Weather(BaseModel):
    city: str
    temperature_c: float


@dataclass
class Db:
    url: str


def lookup(ctx: RunContext[Db], key: str) -> str:
    """A tool with typed deps."""
    return f"{ctx.deps.url}/{key}"


def untyped_deps(ctx: RunContext, key: str) -> str:  # a bare RunContext means any deps
    """A tool that ignores its deps."""
    return key


model = ScriptedModel([[TextPart("hi")]])

# No annotation needed: the output is text.
agent = Agent(model)
assert_type(agent, Agent[Any, str])
assert_type(agent.run_sync("x"), RunResult[str])
assert_type(agent.run_sync("x").output, str)

# output_type decides the output's type.
weather_agent = Agent(model, output_type=Weather, max_steps=3)
assert_type(weather_agent, Agent[Any, Weather])
assert_type(weather_agent.run_sync("x").output, Weather)
assert_type(Agent(model, output_type=list[Weather]).run_sync("x").output, list[Weather])
assert_type(Agent(model, output_type=None), Agent[Any, str])
# A JSON schema dict (or a list of alternatives) cannot be typed: the output is Any.
assert_type(Agent(model, output_type={"type": "object"}), Agent[Any, Any])

# deps_type types the deps a run takes.
db_agent = Agent(model, [lookup, untyped_deps], deps_type=Db, output_type=Weather)
assert_type(db_agent, Agent[Db, Weather])
db_agent.run_sync("x", deps=Db("sqlite://"))
assert_type(db_agent.override(model="openai:gpt-4o"), Agent[Db, Weather])


async def stream() -> None:
    run = weather_agent.stream("x")
    assert_type(run, AgentRun[Weather])
    # Iterate it directly, or close it early by leaving the block: no aclosing(), no type: ignore.
    async with weather_agent.stream("x") as run:
        async for event in run:
            assert_type(event, AgentEvent)
            break
    assert_type(run.result, RunResult[Weather] | None)
    result = await weather_agent.run("x")
    assert_type(result.output, Weather)
    async for event in agent.stream("x"):
        assert_type(event, AgentEvent)


# Everything in toolwire.__all__ is typed (no name falls back to Any through a module __getattr__).
assert_type(toolwire.TextPart("hi").text, str)
assert_type(toolwire.__version__, str)
