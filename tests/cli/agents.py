"""Agents for the CLI tests, loaded by the command with ``--agent tests.cli.agents:NAME``."""

from __future__ import annotations

import asyncio
from typing import Any

from toolwire import Agent, RunContext, ScriptedModel


async def slow_count(ctx: RunContext[Any], steps: int) -> str:
    """Counts slowly, reporting progress at each step."""
    for i in range(steps):
        ctx.progress((i + 1) / steps, f"counting {i + 1} of {steps}")
        await asyncio.sleep(0.2)
    return f"counted to {steps}"


async def hold(ctx: RunContext[Any]) -> str:
    """Says it started, then holds until the run is stopped (the test decides when, not a timer)."""
    ctx.progress(0.0, "holding until stopped")
    await asyncio.Event().wait()  # nothing sets it: only cancelling the run ends this call
    return "stopped holding"


def slow() -> Agent[None]:
    """An agent with slow tools; the tests give it a scripted model with ``--model scripted:FILE``."""
    return Agent(ScriptedModel([]), tools=[slow_count, hold], name="slow")


def refund(txn: str) -> str:
    """Refunds a transaction."""
    return f"refunded {txn}"


def pick_colour() -> str:
    """Asks the person at the client to pick a colour."""
    raise AssertionError("a client-side tool never runs in the process")


def approving() -> Agent[None]:
    """An agent whose refund needs a person's approval, and a client-side tool whose output a person gives."""
    from toolwire import tool

    tools = [tool(refund, requires_approval=True), tool(pick_colour, external=True)]
    return Agent(ScriptedModel([]), tools=tools, name="approving")


class _SlowToAnswer(ScriptedModel):
    """Waits a second before it streams each scripted turn, like a model deciding on a slow CPU."""

    async def stream(self, request: Any) -> Any:
        await asyncio.sleep(1.0)
        async for part in super().stream(request):
            yield part


def thinking() -> Agent[None]:
    """An agent whose model takes a second to answer (the CLI shows a spinner meanwhile)."""
    from toolwire.messages import TextPart

    return Agent(_SlowToAnswer([[TextPart(text="Done thinking.")]]), name="thinking")
