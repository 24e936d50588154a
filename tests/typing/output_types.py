"""Type-checked, never run (``tests/test_typing.py``): structured output, usage and cost as a user's type
checker sees them, without annotations."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, assert_type

from pydantic import BaseModel
from typing_extensions import TypedDict

import toolwire
from toolwire import Agent, RunResult, ScriptedModel, TextPart
from toolwire.messages import Usage


class Invoice(BaseModel):
    number: str
    total: float | None = None


class Point(TypedDict):
    x: int
    y: int


model = ScriptedModel([[TextPart("{}")]])

# The output type follows output_type, whatever kind of type it is; no annotation anywhere.
invoice_agent = Agent(model, output_type=Invoice)
assert_type(invoice_agent, Agent[Any, Invoice])
invoice = invoice_agent.run_sync("x")
assert_type(invoice, RunResult[Invoice])
assert_type(invoice.output.number, str)
assert_type(invoice.output.total, float | None)
assert_type(Agent(model, output_type=str).run_sync("x").output, str)  # plain text
assert_type(Agent(model, output_type=int).run_sync("x").output, int)
assert_type(Agent(model, output_type=list[int]).run_sync("x").output, list[int])
assert_type(Agent(model, output_type=Point).run_sync("x").output["x"], int)
assert_type(Agent(model, output_type=dict[str, Invoice]).run_sync("x").output, dict[str, Invoice])


def summarise(result: RunResult[Invoice]) -> str:  # RunResult[Output] in a user's own signatures
    return result.output.number


summarise(invoice)

# Usage and cost, the caller's own and its sub-agents', typed.
assert_type(invoice.usage, Usage)
assert_type(invoice.total_usage, Usage)
assert_type(invoice.sub_agent_usage, Usage)
assert_type(invoice.cost, Decimal | None)
assert_type(invoice.total_cost, Decimal | None)

# What a failed structured output carries.
try:
    invoice_agent.run_sync("x")
except toolwire.NoObjectGenerated as exc:
    assert_type(exc.errors, list[str])
    assert_type(exc.usage, Usage | None)
    assert_type(exc.finish_reason, str | None)
    assert_type(exc.raw_output, str)
