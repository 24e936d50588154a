"""Prompt caching (``toolwire.models._cache``): every adapter sends step n's request again, byte for byte, at
the start of step n+1 (the prefix implicit caches need), Anthropic and Bedrock mark it with breakpoints,
OpenAI gets a stable ``prompt_cache_key``, and each can be turned off in ``ModelSettings``.

Requests are captured at the network edge (``httpx.MockTransport``, answered with an error: only what was
sent matters here)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.cassettes import without_cache_marks
from tests.models.test_bedrock import CREDENTIALS
from toolwire.errors import ProviderHTTPError
from toolwire.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.models import collect
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.base import Model, ModelRequest, ModelSettings, ToolDefinition
from toolwire.models.bedrock import BedrockModel
from toolwire.models.bedrock.invoke import BedrockAnthropicModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel

TOOLS = [
    ToolDefinition(
        name="lookup_order",
        description="Find an order by id.",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    ),
    ToolDefinition(
        name="refund",
        description="Refund an order.",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
        },
    ),
]
INSTRUCTIONS = "You are the support desk of an online shop. Be brief."


class Captured:
    """A client that keeps every request body and answers each with an error."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

        def handler(request: httpx.Request) -> httpx.Response:
            self.bodies.append(request.content)
            return httpx.Response(
                400, json={"error": {"message": "captured", "type": "invalid_request_error"}}
            )

        self.client = httpx.AsyncClient(transport=httpx.MockTransport(handler))

    def json(self, index: int) -> Any:
        return json.loads(self.bodies[index])


ADAPTERS: dict[str, tuple[Callable[[httpx.AsyncClient], Model], tuple[str, ...]]] = {
    # adapter -> (model on the client, the body's fields that form the cached prefix, in the provider's order)
    "openai-chat": (lambda c: OpenAIChatModel("gpt-4.1", api_key="k", http_client=c), ("tools", "messages")),
    "openai-responses": (
        lambda c: OpenAIResponsesModel("gpt-4.1", api_key="k", http_client=c),
        ("tools", "instructions", "input"),
    ),
    "anthropic": (
        lambda c: AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=c),
        ("tools", "system", "messages"),
    ),
    "bedrock-invoke": (
        lambda c: BedrockAnthropicModel(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            region="us-east-1",
            credentials=CREDENTIALS,
            http_client=c,
        ),
        ("tools", "system", "messages"),
    ),
    "gemini": (
        lambda c: GeminiModel("gemini-2.5-flash", api_key="k", http_client=c),
        ("tools", "systemInstruction", "contents"),
    ),
    "bedrock": (
        lambda c: BedrockModel(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            region="us-east-1",
            credentials=CREDENTIALS,
            http_client=c,
        ),
        ("toolConfig", "system", "messages"),
    ),
}


def _conversation(provider: str) -> list[list[Message]]:
    """A support session's steps: each entry is what one step adds to the history (its model's answer and
    the tool results, then the user's next message)."""

    def call(i: int) -> ToolCallPart:
        return ToolCallPart("lookup_order", tool_call_id=f"call_{i}", args={"order_id": f"A-{i}"})

    def result(i: int) -> Message:
        output = {"order_id": f"A-{i}", "status": "shipped", "items": ["mug", "tea"] * 20}
        return Message(
            role="tool", parts=(ToolResultPart("lookup_order", tool_call_id=f"call_{i}", output=output),)
        )

    def answer(*parts: Any) -> Message:
        return Message(role="assistant", parts=parts, provider=provider, model="m")

    signed = ReasoningPart("The user wants an order.", signature="c2lnbmF0dXJl")
    return [
        [Message.user("Where is my order A-1?")],
        [answer(signed, TextPart("Let me look."), call(1)), result(1)],
        [answer(TextPart("It shipped.")), Message.user("And A-2 and A-3?")],
        [answer(call(2), call(3)), result(2)],
        [answer(TextPart("Both shipped.")), Message.user("Thanks!")],
    ]


async def _requests(adapter: str, settings: ModelSettings | None = None, **fields: Any) -> list[Any]:
    build, _ = ADAPTERS[adapter]
    captured = Captured()
    model = build(captured.client)
    provider = model.provider
    history: list[Message] = []
    for added in _conversation(provider):
        history.extend(added)
        request = ModelRequest(messages=list(history), tools=TOOLS, instructions=INSTRUCTIONS, **fields)
        if settings is not None:
            request = dataclasses.replace(request, settings=settings)
        with pytest.raises(ProviderHTTPError):
            await collect(model, request)
    return [captured.json(i) for i in range(len(captured.bodies))]


def _is_prefix(earlier: Any, later: Any) -> bool:
    """``earlier`` is ``later``'s beginning: equal, or a list whose items are ``later``'s first items, the last
    of which may have grown (a wire that joins the next message into the same turn), with keys in the same
    order throughout."""
    if isinstance(earlier, dict) and isinstance(later, dict):
        return list(earlier) == list(later) and all(_is_prefix(earlier[k], later[k]) for k in earlier)
    if isinstance(earlier, list) and isinstance(later, list):
        if not earlier:
            return True
        head = len(earlier) - 1
        return (
            len(later) > head
            and _dumps(earlier[:head]) == _dumps(later[:head])
            and _is_prefix(earlier[head], later[head])
        )
    return _dumps(earlier) == _dumps(later)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # key order as sent: no sort_keys


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
async def test_each_step_sends_the_previous_request_again_byte_for_byte(adapter: str) -> None:
    _, prefix_fields = ADAPTERS[adapter]
    bodies = [without_cache_marks(b) for b in await _requests(adapter)]  # a marker is not cached content
    assert len(bodies) == 5
    for earlier, later in itertools.pairwise(bodies):
        for name in prefix_fields:
            assert name in earlier, name
            assert _is_prefix(earlier[name], later[name]), (adapter, name)
        if "messages" in prefix_fields or "contents" in prefix_fields or "input" in prefix_fields:
            history = earlier.get("messages", earlier.get("contents", earlier.get("input")))
            assert len(_dumps(history)) < len(
                _dumps(later.get("messages", later.get("contents", later.get("input"))))
            )


def _marks(body: Any) -> list[str]:
    """Where the ``cache_control`` breakpoints are: ``tools[-1]``, ``system``, ``messages[-1]``."""
    found = []
    if "cache_control" in body["tools"][-1]:
        found.append("tools")
    if isinstance(body["system"], list) and "cache_control" in body["system"][-1]:
        found.append("system")
    if any("cache_control" in block for block in body["messages"][-1]["content"]):
        found.append("messages")
    return found


@pytest.mark.parametrize("adapter", ["anthropic", "bedrock-invoke"])
async def test_anthropic_gets_breakpoints_after_the_tools_the_system_and_the_last_message(
    adapter: str,
) -> None:
    bodies = await _requests(adapter)
    for body in bodies:
        assert _marks(body) == ["tools", "system", "messages"]
        assert json.dumps(body).count('"cache_control"') == 3  # within the API's 4
        assert body["system"][0]["text"] == INSTRUCTIONS
    # The last message's breakpoint is on its last block (the tool result when a step ended with one).
    assert bodies[1]["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert "cache_control" in bodies[1]["messages"][-1]["content"][-1]
    off = await _requests(adapter, ModelSettings(cache_breakpoints=False))
    assert all('"cache_control"' not in json.dumps(body) for body in off)
    assert off[0]["system"] == INSTRUCTIONS


async def test_a_breakpoint_never_lands_on_a_thinking_block_and_the_limit_counts_the_callers_own() -> None:
    captured = Captured()
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=captured.client)
    own = {"type": "text", "text": "pinned", "cache_control": {"type": "ephemeral"}}
    thinking_last = Message(
        role="assistant",
        parts=(TextPart("partial"), ReasoningPart("hm", signature="c2ln")),
        provider="anthropic",
    )
    extra = ModelSettings(extra={"system": [own, own, own]})  # three of the caller's own breakpoints
    with pytest.raises(ProviderHTTPError):
        await collect(
            model, ModelRequest(messages=[Message.user("hi"), thinking_last], tools=TOOLS, settings=extra)
        )
    body = captured.json(0)
    assert json.dumps(body).count('"cache_control"') == 4
    assert "cache_control" in body["tools"][-1]  # the one left goes to the first place: the tools
    assert all("cache_control" not in block for block in body["messages"][-1]["content"])
    with pytest.raises(ProviderHTTPError):
        await collect(model, ModelRequest(messages=[Message.user("hi"), thinking_last]))
    last = captured.json(1)["messages"][-1]["content"]
    assert [("cache_control" in block) for block in last] == [True, False]  # the text, not the thinking


async def test_bedrock_converse_gets_cache_points_on_the_models_that_take_them() -> None:
    bodies = await _requests("bedrock")
    for body in bodies:
        point = {"cachePoint": {"type": "default"}}
        assert body["toolConfig"]["tools"][-1] == point and body["system"][-1] == point
        assert body["messages"][-1]["content"][-1] == point
        assert json.dumps(body).count('"cachePoint"') == 3
    off = await _requests("bedrock", ModelSettings(cache_breakpoints=False))
    assert all('"cachePoint"' not in json.dumps(body) for body in off)

    captured = Captured()
    old = BedrockModel(
        "anthropic.claude-3-haiku-20240307-v1:0",
        region="us-east-1",
        credentials=CREDENTIALS,
        http_client=captured.client,
    )
    with pytest.raises(ProviderHTTPError):
        await collect(
            old, ModelRequest(messages=[Message.user("hi")], tools=TOOLS, instructions=INSTRUCTIONS)
        )
    assert '"cachePoint"' not in json.dumps(
        captured.json(0)
    )  # Claude 3 Haiku has no prompt caching on Bedrock


@pytest.mark.parametrize("adapter", ["openai-chat", "openai-responses"])
async def test_openai_gets_one_prompt_cache_key_per_conversation(adapter: str) -> None:
    derived = await _requests(adapter)
    keys = {body["prompt_cache_key"] for body in derived}
    assert len(keys) == 1 and next(iter(keys)).startswith("tw-")  # stable without a session key
    session = await _requests(adapter, cache_key="sess_0123")
    assert {body["prompt_cache_key"] for body in session} == {"sess_0123"}
    named = await _requests(adapter, ModelSettings(prompt_cache_key="desk"), cache_key="sess_0123")
    assert {body["prompt_cache_key"] for body in named} == {"desk"}
    off = await _requests(adapter, ModelSettings(prompt_cache_key=False), cache_key="sess_0123")
    assert all("prompt_cache_key" not in body for body in off)


async def test_a_compatible_server_gets_no_prompt_cache_key() -> None:
    captured = Captured()
    model = OpenAIChatModel(
        "llama", api_key="k", base_url="http://127.0.0.1:9/v1", http_client=captured.client
    )
    with pytest.raises(ProviderHTTPError):
        await collect(model, ModelRequest(messages=[Message.user("hi")], cache_key="sess_0123"))
    assert "prompt_cache_key" not in captured.json(0)


async def test_anthropic_keeps_a_trimmed_prefix_cached_with_breakpoints_at_the_last_two_block_ends() -> None:
    """Compaction names the ends of the blocks it trimmed (``ModelRequest.cache_marks``): Anthropic gets a
    breakpoint at the last two (the prefix a step after the next move reads from the cache), the system
    prompt's (which caches the tools too) and the last message's: four, the API's limit."""
    captured = Captured()
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=captured.client)
    history: list[Message] = []
    for i in range(4):
        call = ToolCallPart("lookup_order", tool_call_id=f"c{i}", args={"order_id": f"A-{i}"})
        history += [
            Message.user(f"Where is A-{i}?", id=f"u{i}"),
            Message(role="assistant", parts=(call,), id=f"a{i}"),
            Message(
                role="tool",
                parts=(ToolResultPart("lookup_order", tool_call_id=f"c{i}", output="shipped"),),
                id=f"t{i}",
            ),
        ]
    history.append(Message.user("And the last one?", id="u4"))
    request = ModelRequest(
        messages=history, tools=TOOLS, instructions=INSTRUCTIONS, cache_marks=("t0", "t1", "t2")
    )
    with pytest.raises(ProviderHTTPError):
        await collect(model, request)
    body = captured.json(0)
    assert json.dumps(body).count('"cache_control"') == 4
    assert "cache_control" not in body["tools"][-1] and "cache_control" in body["system"][-1]
    marked = [
        (i, block["type"])
        for i, message in enumerate(body["messages"])
        for block in message["content"]
        if "cache_control" in block
    ]
    # Messages alternate user / assistant: t1 ends turn 4, t2 ends turn 6 (each with the next prompt joined
    # after it in the same user turn), and the last message is turn 8.
    assert marked == [(4, "tool_result"), (6, "tool_result"), (8, "text")]
    assert body["messages"][4]["content"][0]["tool_use_id"] == "c1"
    with pytest.raises(ProviderHTTPError):
        await collect(model, dataclasses.replace(request, cache_marks=()))
    assert _marks(captured.json(1)) == ["tools", "system", "messages"]  # no marks: as before
