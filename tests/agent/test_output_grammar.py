"""Structured output through the ReAct driver: the answer schema goes into the decision grammar."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel

from toolwire import Agent, TextPart
from toolwire.agent.drivers.react import ReActDriver
from toolwire.demo.support_desk import get_transaction_status
from toolwire.models.base import Model
from toolwire.models.scripted import ScriptedModel


class TxnSummary(BaseModel):
    transaction_id: str
    status: Literal["settled", "pending", "refunded", "declined", "disputed", "failed"]


class TextOnlyScripted(ScriptedModel):
    supports_tools = False


async def test_grammar_mode_puts_the_output_schema_into_the_decision_schema() -> None:
    decision = {"action": "final_answer", "answer": {"transaction_id": "TXN_123", "status": "settled"}}
    model = TextOnlyScripted([[TextPart(text=json.dumps(decision))]])
    agent = Agent(model, tools=[get_transaction_status], output_type=TxnSummary)
    assert isinstance(agent.driver, ReActDriver) and agent.output_spec is not None
    assert agent.output_spec.mode == "grammar"
    result = await agent.run("Status of TXN_123?")
    assert result.output == TxnSummary(transaction_id="TXN_123", status="settled")
    sent = model.requests[0].request
    answer_options = [
        o for o in sent.output_schema["anyOf"] if o["properties"]["action"].get("const") == "final_answer"
    ]
    answer_schema = answer_options[0]["properties"]["answer"]
    assert set(answer_schema["properties"]) == {"transaction_id", "status"}
    assert "TxnSummary" not in json.dumps(sent.output_schema) or "$defs" in sent.output_schema


async def test_grammar_mode_invalid_object_is_reprompted() -> None:
    bad = {"action": "final_answer", "answer": {"transaction_id": "TXN_123", "status": "lost"}}
    good = {"action": "final_answer", "answer": {"transaction_id": "TXN_123", "status": "pending"}}
    model = TextOnlyScripted([[TextPart(text=json.dumps(bad))], [TextPart(text=json.dumps(good))]])
    result = await Agent(model, output_type=TxnSummary).run("Status?")
    assert result.output.status == "pending"
    assert "status" in model.requests[1].messages[-1].text


@pytest.mark.live
async def test_live_embedded_model_produces_a_validated_object() -> None:
    from toolwire.models.local import LocalModel

    local: Model = LocalModel()
    agent = Agent(local, tools=[get_transaction_status], output_type=TxnSummary, max_steps=4)
    result = await agent.run("What's the status of TXN_123?")
    # the grammar guarantees the shape; the tiny model's choice of values is not asserted
    assert isinstance(result.output, TxnSummary)
    assert result.output.status in {"settled", "pending", "refunded", "declined", "disputed", "failed"}
    await agent.aclose()
