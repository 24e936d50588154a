"""What a ReAct step leaves behind beyond its decision: a step the driver gave up on is stored as a failure
step, and ``final_via_inference`` has the answer written by a call of its own (issue 28 item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire.agent.agent import Agent
from toolwire.agent.drivers._react_final import ANSWER_INSTRUCTIONS
from toolwire.agent.drivers.react import ReActDriver
from toolwire.errors import DecisionExtractionFailed, DecisionValidationFailed, DriverError, ProviderHTTPError
from toolwire.events import ErrorEvent, StepFinish, TextDeltaEvent
from toolwire.messages import TextPart, Usage
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore

ATTEMPT = Usage(input_tokens=40, output_tokens=7, requests=1)


def lookup(transaction_id: str) -> dict[str, str]:
    """Look up a transaction.

    Args:
        transaction_id: The id.
    """
    return {"transaction_id": transaction_id, "status": "settled"}


def react_model(*replies: str) -> ScriptedModel:
    model = ScriptedModel([[TextPart(text=r)] for r in replies], usage_per_turn=ATTEMPT)
    model.supports_tools = False
    return model


@pytest.mark.parametrize(
    ("replies", "error"),
    [
        (("no", "still no", "never"), DecisionExtractionFailed),
        (('{"action": "drop_tables", "args": {}}',) * 3, DecisionValidationFailed),
    ],
)
async def test_a_step_without_a_valid_decision_is_stored_as_a_failure_step(
    tmp_path: Path, replies: tuple[str, ...], error: type[DriverError]
) -> None:
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path / 's.db'}")
    model = react_model(*replies)
    agent = Agent(model, tools=[lookup], store=store, driver=ReActDriver(examples=(), max_retries=2))
    events = []
    with pytest.raises(error) as raised:  # the run still ends with the error, as before
        async for event in agent.stream("Status of TXN_9?", session_id="s"):
            events.append(event)
    assert raised.value.attempts == 3 and len(model.requests) == 3
    # The step is stored with what its three attempts cost and why it ended.
    [step] = await store.steps("s")
    assert step.finish_reason == "error" and step.usage == ATTEMPT + ATTEMPT + ATTEMPT
    info = await store.get_session("s")
    assert info is not None and info.usage.requests == 3
    [finish] = [e for e in events if isinstance(e, StepFinish)]  # clients see it end, then the error
    assert (finish.finish_reason, finish.usage) == ("error", step.usage)
    assert [e.error_type for e in events if isinstance(e, ErrorEvent)] == [error.__name__]
    # The history stays valid for every provider: the failed step has no answer to send.
    assert [m.role for m in await store.load_history("s")] == ["user"]
    for provider, factory in adapters(sent := []).items():
        with pytest.raises(ProviderHTTPError):
            await Agent(factory(), store=store).run("And TXN_8?", session_id="s")
        body = sent[-1]
        assert unanswered_calls(provider, body) == [], provider
        assert "assistant" not in str(body.get("messages", body.get("contents", ""))), provider
    await store.close()


async def test_the_failure_step_ends_the_run_with_the_usage_it_cost() -> None:
    model = react_model("no", "never")
    agent = Agent(model, tools=[lookup], driver=ReActDriver(examples=(), max_retries=1))
    run = agent.stream("Status of TXN_9?", session_id="s")
    events = []
    with pytest.raises(DecisionExtractionFailed):
        async for event in run:
            events.append(event)
    [error] = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.error_type == "DecisionExtractionFailed"
    assert run.result is not None and run.result.status == "error"
    assert run.result.usage == ATTEMPT + ATTEMPT


async def test_final_via_inference_writes_the_answer_in_a_call_of_its_own() -> None:
    written = "TXN_9 is settled: the money left your account on Monday."
    model = react_model(
        '{"action": "lookup", "args": {"transaction_id": "TXN_9"}}',
        '{"action": "final_answer", "answer": "settled"}',  # decided, never shown
        written,  # the answer's own call: no grammar, plain text
    )
    driver = ReActDriver(examples=(), final_via_inference=True)
    agent = Agent(model, tools=[lookup], driver=driver, instructions="Be brief.")
    run = agent.stream("Status of TXN_9?", session_id="s")
    events = [event async for event in run]
    assert (
        "".join(e.delta for e in events if isinstance(e, TextDeltaEvent)) == written
    )  # streamed as the answer
    assert run.result is not None and run.result.output == written
    assert run.result.usage == ATTEMPT + ATTEMPT + ATTEMPT  # the step cost its decision and the answer's call
    decided, answering = model.requests[1].request, model.requests[2].request
    assert decided.output_schema is not None
    assert answering.output_schema is None and not answering.tools
    assert answering.instructions == f"Be brief.\n\n{ANSWER_INSTRUCTIONS}"
    # The whole conversation, as prose: the call and its observation, no decision JSON to imitate.
    assert [(m.role, m.text) for m in answering.messages] == [
        ("user", "Status of TXN_9?"),
        ("assistant", '(I called lookup with {"transaction_id": "TXN_9"}.)'),
        ("user", 'Observation from lookup: {"transaction_id": "TXN_9", "status": "settled"}'),
    ]
    store = await agent.get_store()
    assert (await store.load_history("s"))[-1].text == written
