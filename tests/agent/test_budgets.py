"""Budgets and the step hook (issue 26 item 5): ``UsageLimits`` end a run with ``UsageLimitExceeded``
*before* what would pass them, per run or per session; ``prepare_step`` changes what one step sends."""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal

import httpx
import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, StepInfo, StepOverrides, TextPart, ToolCallPart, UsageLimits
from toolwire.errors import ProviderError, UsageLimitExceeded
from toolwire.messages import Part, Usage
from toolwire.models.base import ModelRequest
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel
from toolwire.store.memory import MemoryStore


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def forever(request: ModelRequest) -> Sequence[Part]:
    """A model that always asks for one more lookup (each request's usage: 10 in, 5 out)."""
    n = sum(1 for m in request.messages if m.role == "assistant")
    return [ToolCallPart(tool_call_id=f"c{n}", tool_name="lookup", args={"key": f"k{n}"})]


async def test_a_request_limit_ends_the_run_before_the_request_that_would_pass_it() -> None:
    model = ScriptedModel(forever)
    store = MemoryStore()
    agent = Agent(model, tools=[lookup], store=store, usage_limits=UsageLimits(requests=3), max_steps=10)
    with pytest.raises(UsageLimitExceeded) as raised:
        await agent.run("go", session_id="s")
    assert raised.value.limit == "requests" and raised.value.allowed == 3 and raised.value.per == "run"
    assert len(model.requests) == 3  # the fourth was never sent
    history = await store.load_history("s")
    assert [m.role for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    sent: list[object] = []
    with pytest.raises(ProviderError):  # what the session holds is valid to send on
        async for _ in adapters(sent)["anthropic"]().stream(ModelRequest(messages=tuple(history))):
            pass
    assert unanswered_calls("anthropic", sent[0]) == []  # type: ignore[arg-type]


async def test_a_tool_call_limit_runs_none_of_a_step_that_would_pass_it() -> None:
    ran: list[str] = []

    def note(key: str) -> str:
        """Note a key."""
        ran.append(key)
        return "ok"

    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="note", args={"key": str(i)}) for i in range(3)]
    agent = Agent(
        ScriptedModel([calls, [TextPart(text="done")]]), tools=[note], usage_limits=UsageLimits(tool_calls=2)
    )
    with pytest.raises(UsageLimitExceeded) as raised:
        await agent.run("go", session_id="s")
    assert raised.value.limit == "tool_calls" and ran == []
    store = await agent.get_store()
    assert {r.status for r in await store.tool_calls("s")} == {"cancelled"}  # recorded, history valid


async def test_a_session_limit_counts_the_earlier_runs_of_the_session() -> None:
    model = ScriptedModel(
        lambda r: [TextPart(text="hi")], usage_per_turn=Usage(input_tokens=100, output_tokens=5, requests=1)
    )
    store = MemoryStore()
    per_session = UsageLimits(requests=2, per="session")
    agent = Agent(model, store=store, usage_limits=per_session)
    await agent.run("one", session_id="s")
    await agent.run("two", session_id="s")
    with pytest.raises(UsageLimitExceeded) as raised:
        await agent.run("three", session_id="s")
    assert raised.value.per == "session" and len(model.requests) == 2
    # Per run, the same agent's limit would have let the third through; a new session starts from zero.
    assert (await agent.run("one", session_id="other")).status == "completed"


async def test_a_per_run_limit_and_an_input_token_limit() -> None:
    model = ScriptedModel(forever, usage_per_turn=Usage(input_tokens=1_000, output_tokens=5, requests=1))
    agent = Agent(model, tools=[lookup])
    with pytest.raises(UsageLimitExceeded) as raised:
        await agent.run("go", session_id="s", usage_limits=UsageLimits(input_tokens=1_000))
    # The first request (estimated well under 1,000 tokens) went; the second, after the 1,000 the first used,
    # would pass the limit with its own estimate.
    assert raised.value.limit == "input_tokens" and len(model.requests) == 1


async def test_prepare_step_changes_what_one_step_sends_and_which_model_answers() -> None:
    main = ScriptedModel(forever)
    cheap = ScriptedModel([[TextPart(text="summed up")]], model_name="cheap")
    seen: list[StepInfo] = []

    def prepare(info: StepInfo) -> StepOverrides | None:
        seen.append(info)
        if info.step == 2:  # the second step: another model, no tools, other instructions
            return StepOverrides(
                model=cheap, tools=[], instructions="Answer in one line.", tool_choice="none"
            )
        return None

    store = MemoryStore()
    agent = Agent(main, tools=[lookup], store=store, prepare_step=prepare)
    result = await agent.run("go", session_id="s")
    assert result.output == "summed up" and [i.step for i in seen] == [1, 2]
    assert seen[1].usage.requests == 1 and [t.name for t in seen[0].tools] == ["lookup"]
    sent = result.step_details[1].request  # what the step actually sent, kept with its detail
    assert sent.tools == [] and sent.instructions == "Answer in one line." and sent.tool_choice == "none"
    assert cheap.requests[0].request.instructions == "Answer in one line."
    stored = await store.raw_messages("s")
    assert stored[-1].model == "cheap" and result.step_models[-1][1] == "cheap"


async def test_a_cost_limit_prices_the_run_at_list_prices() -> None:
    """gpt-4o at list prices: each answer reports 100,000 input tokens ($0.25); a $0.40 budget lets two
    requests through and refuses the third."""
    sent: list[dict[str, object]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        n = len(sent)
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"key": "a"}'},
        }
        return httpx.Response(
            200,
            json={
                "id": f"r{n}",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-2024-08-06",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "tool_calls": [call]},
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 100_000, "completion_tokens": 10, "total_tokens": 100_010},
            },
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    model = OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=client)
    agent = Agent(model, tools=[lookup], usage_limits=UsageLimits(cost=0.40), compaction=False)
    with pytest.raises(UsageLimitExceeded) as raised:
        await agent.run("go", session_id="s")
    assert raised.value.limit == "cost" and len(sent) == 2
    assert raised.value.would_be > Decimal("0.40")
    await agent.aclose()
