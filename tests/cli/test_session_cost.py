"""``toolwire sessions show`` prices every model request of a session, an empty answer's included."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from tests.cli.helpers import toolwire
from toolwire import Agent
from toolwire.models.openai_chat import OpenAIChatModel

USAGES = [(100, 20), (130, 0)]
"""(prompt, completion) tokens of the two requests: a tool call, then an empty answer (billed all the same)."""


def _answers() -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "a"}'}}
    messages: list[tuple[dict[str, Any], str]] = [
        ({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"),
        ({"role": "assistant", "content": ""}, "stop"),
    ]
    return [
        {
            "id": f"chatcmpl-{i}",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }
        for i, ((message, finish), (p, c)) in enumerate(zip(messages, USAGES, strict=True))
    ]


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


async def test_sessions_show_prices_a_step_that_answered_empty(tmp_path: Path) -> None:
    answers = _answers()

    def handle(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        assert all(m.get("content") or m.get("tool_calls") or m["role"] == "tool" for m in sent["messages"])
        return httpx.Response(200, json=answers.pop(0))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    model = OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=client)
    store = f"sqlite+aiosqlite:///{tmp_path / 'cost.db'}"
    agent = Agent(model, tools=[lookup], store=store)
    result = await agent.run("look a up", session_id="s1")
    assert result.status == "completed" and result.output == "" and result.steps == 2
    await agent.aclose()

    expected = sum(
        (
            Decimal(
                calc_price(
                    PriceUsage(input_tokens=p, output_tokens=c), "gpt-4o", provider_id="openai"
                ).total_price
            )
            for p, c in USAGES
        ),
        Decimal(0),
    )
    shown = toolwire("sessions", "show", "s1", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "230 input + 20 output tokens, 2 request(s)" in shown.stdout
    assert f"cost ${expected:.6f}" in shown.stdout, shown.stdout

    # The empty answer is kept for its usage but never sent again: a second turn's request is valid.
    answers.extend(_answers()[1:])
    again = Agent(
        OpenAIChatModel(
            "gpt-4o",
            api_key="k",
            stream=False,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        ),
        tools=[lookup],
        store=store,
    )
    await again.run("and b?", session_id="s1")
    await again.aclose()


def _price(model: str, usages: list[tuple[int, int]]) -> Decimal:
    return sum(
        (
            Decimal(
                calc_price(
                    PriceUsage(input_tokens=p, output_tokens=c), model, provider_id="openai"
                ).total_price
            )
            for p, c in usages
        ),
        Decimal(0),
    )


def _scripted_openai(
    model_name: str, turns: list[tuple[dict[str, Any], str, tuple[int, int]]]
) -> OpenAIChatModel:
    answers = [
        {
            "id": f"chatcmpl-{i}",
            "object": "chat.completion",
            "created": 1,
            "model": model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }
        for i, (message, finish, (p, c)) in enumerate(turns)
    ]
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(200, json=answers.pop(0)))
    )
    return OpenAIChatModel(model_name, api_key="k", stream=False, http_client=client)


async def test_a_sub_agents_usage_and_cost_roll_up_into_its_parents_result_and_session(
    tmp_path: Path,
) -> None:
    parent_usages, child_usages = [(100, 20), (150, 10)], [(40, 5)]
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "research", "arguments": '{"task": "dig"}'},
    }
    child = Agent(
        _scripted_openai(
            "gpt-4o-mini", [({"role": "assistant", "content": "found it"}, "stop", child_usages[0])]
        ),
        name="researcher",
    )
    parent_model = _scripted_openai(
        "gpt-4o",
        [
            ({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", parent_usages[0]),
            ({"role": "assistant", "content": "done"}, "stop", parent_usages[1]),
        ],
    )
    store = f"sqlite+aiosqlite:///{tmp_path / 'tree.db'}"
    parent = Agent(parent_model, tools=[child.as_tool("research", "Research a topic.")], store=store)
    result = await parent.run("go", session_id="root")
    await parent.aclose()

    own, sub = _price("gpt-4o", parent_usages), _price("gpt-4o-mini", child_usages)
    assert (result.usage.input_tokens, result.usage.requests) == (250, 2)  # its own steps, as before
    assert (result.sub_agent_usage.input_tokens, result.sub_agent_usage.output_tokens) == (40, 5)
    assert result.total_usage.requests == 3 and result.total_usage.input_tokens == 290
    assert (result.cost, result.sub_agent_cost, result.total_cost) == (own, sub, own + sub)

    shown = toolwire("sessions", "show", "root", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert f"usage: 250 input + 30 output tokens, 2 request(s), cost ${own:.6f}" in shown.stdout
    assert f"sub-agents: 40 input + 5 output tokens, 1 request(s), cost ${sub:.6f}" in shown.stdout
    assert f"total: 290 input + 35 output tokens, 3 request(s), cost ${own + sub:.6f}" in shown.stdout
