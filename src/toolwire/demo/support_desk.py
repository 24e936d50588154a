"""A support-desk agent over a small in-repo data set of card transactions.

It runs on the embedded SmolLM2-135M model by default (no network, no keys): the model has no function
calling, so the agent uses the ReAct driver, whose decision grammar carries each tool's argument
schema. The id patterns below (``^TXN_[0-9]+$``) therefore do most of the work of getting arguments
right: the 135M model only has to copy the digits from the question.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from toolwire.agent.drivers.react import DEFAULT_EXAMPLES, ReActDriver
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart
from toolwire.models.base import Model, ModelSettings

if TYPE_CHECKING:
    from toolwire.agent.agent import Agent
    from toolwire.store.base import Store

DEMO_QUESTIONS = ["What's the status of TXN_123?", "Who authorized it?"]

TransactionId = Annotated[str, Field(pattern=r"^TXN_[0-9]+$")]
CustomerId = Annotated[str, Field(pattern=r"^CUS_[0-9]+$")]
TransactionStatus = Literal["settled", "pending", "declined", "refunded", "disputed"]

INSTRUCTIONS = (
    "You are the support desk of a card payments company. Look facts up with the tools; never invent "
    "transaction details. Answer in one or two short sentences."
)


_INTERNAL_FIELDS = ("customer_id", "card_last4", "channel")


@cache
def _data() -> dict[str, Any]:
    text = resources.files("toolwire.demo").joinpath("transactions.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def get_transaction_status(transaction_id: TransactionId) -> dict[str, Any]:
    """Look up a card transaction: status, amount, currency, merchant, date and who authorized it.

    Args:
        transaction_id: The transaction id, e.g. TXN_100.
    """
    for record in _data()["transactions"]:
        if record["transaction_id"] == transaction_id:
            # Internal fields stay out of the observation: the 135M model weaves every field it sees into
            # its answer (measured: "CUS_001 is now authorized to pay ... at 4242 online").
            return {k: v for k, v in record.items() if k not in _INTERNAL_FIELDS}
    raise LookupError(f"no transaction {transaction_id}")


def get_customer(customer_id: CustomerId) -> dict[str, Any]:
    """Look up a customer: name, email, tier, country and customer since.

    Args:
        customer_id: The customer id, e.g. CUS_100.
    """
    for record in _data()["customers"]:
        if record["customer_id"] == customer_id:
            return dict(record)
    raise LookupError(f"no customer {customer_id}")


def get_refund_policy(transaction_state: TransactionStatus) -> dict[str, str]:
    """Refund rules for transactions in a given state.

    Args:
        transaction_state: The state of the transaction.
    """
    # Not called ``status``: SmolLM2-135M then picks this tool for every "status of TXN_..." question.
    return {"transaction_state": transaction_state, "policy": _data()["refund_policies"][transaction_state]}


TOOLS = (get_transaction_status, get_customer, get_refund_policy)


def _example(question: str, call: ToolCallPart, output: Any, answer: str) -> tuple[Message, ...]:
    return (
        Message.user(question),
        Message(role="assistant", parts=(call,)),
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=output),),
        ),
        Message(role="assistant", parts=(TextPart(text=answer),)),
    )


# Few-shot examples for the ReAct driver, shown as earlier chat turns. Ids and values differ from the data
# set so the model learns the pattern (look up, then answer from the observation), not the answers.
# Measured on SmolLM2-135M over 12 lookup questions (first decision right: tool and argument): this pair
# 9/12; the TXN example alone 4/12; with a third, customer example 2/12; with a follow-up question
# answered from the observation 5/12 (the model then answers everything without looking up).
EXAMPLES: tuple[tuple[Message, ...], ...] = (
    DEFAULT_EXAMPLES[0],
    _example(
        "Is TXN_907 done?",
        ToolCallPart(
            tool_call_id="ex1", tool_name="get_transaction_status", args={"transaction_id": "TXN_907"}
        ),
        {
            "transaction_id": "TXN_907",
            "status": "pending",
            "amount": 12.0,
            "currency": "USD",
            "merchant": "Corner Deli",
            "authorized_by": "Sam Reed",
        },
        "TXN_907 is still pending: 12.00 USD at Corner Deli.",
    ),
)


def build_agent(model: Model | None = None, store: Store | str | None = None) -> Agent[None]:
    """The support-desk agent. ``model=None`` runs the embedded SmolLM2-135M model."""
    from toolwire.agent.agent import Agent

    settings = None
    if model is None:
        from toolwire.models.local import LocalModel

        model = LocalModel()
        # A mild repetition penalty stops the 135M model looping inside long answers (measured: fewer
        # runaway answers, same tool choices); 200 tokens is plenty for "one or two short sentences".
        settings = ModelSettings(max_tokens=200, extra={"repeat_penalty": 1.1})
    driver = None
    if not model.supports_tools:
        # The data set does not change while the demo runs, so a follow-up ("Who authorized it?") is
        # answered from the stored observation: the same lookup again is refused by grammar.
        driver = ReActDriver(
            examples=EXAMPLES, max_calls_per_turn=model.tool_calls_per_turn, reuse_observations=True
        )
    return Agent(
        model,
        tools=TOOLS,
        store=store,
        driver=driver,
        instructions=INSTRUCTIONS,
        name="support-desk",
        model_settings=settings,
    )


__all__ = [
    "DEMO_QUESTIONS",
    "EXAMPLES",
    "INSTRUCTIONS",
    "TOOLS",
    "build_agent",
    "get_customer",
    "get_refund_policy",
    "get_transaction_status",
]
