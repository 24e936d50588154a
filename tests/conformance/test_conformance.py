"""One scenario through every adapter over real HTTP on 127.0.0.1: identical canonical events (modulo
ids), identical stored rows, and a follow-up turn — in a NEW agent with a fresh store object — whose
request carries both tool calls, both results and the provider's metadata where that provider expects it.

This is the proof that "the agent forgot the tool result on provider X" cannot happen: no adapter can
skip the one loop or the one store hook."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.credentials import Credentials

from tests.conformance.wire import SIGNATURE, WireServer
from toolwire import Agent, open_store, tool
from toolwire.events import AgentEvent
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.anthropic.vertex import AnthropicVertexModel
from toolwire.models.base import Model
from toolwire.models.bedrock import BedrockModel
from toolwire.models.bedrock.invoke import BedrockAnthropicModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "conformance" / "events.json").read_text())


async def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city."""
    return {"city": city, "temp_c": 21}


async def get_time(city: str) -> dict[str, Any]:
    """Local time in a city."""
    return {"city": city, "time": "14:00"}


MODELS: dict[str, Callable[[str], Model]] = {
    "openai-chat": lambda base: OpenAIChatModel("conf-model", api_key="k", base_url=f"{base}/v1"),
    "openai-responses": lambda base: OpenAIResponsesModel("conf-model", api_key="k", base_url=f"{base}/v1"),
    "anthropic": lambda base: AnthropicModel("conf-model", api_key="k", base_url=base),
    "gemini": lambda base: GeminiModel("conf-model", api_key="k", base_url=f"{base}/v1beta"),
    "bedrock": lambda base: BedrockModel(
        "conf-model", region="us-east-1", base_url=base, credentials=Credentials("AKIDEXAMPLE", "secret")
    ),
    # Claude on Vertex AI (streamRawPredict) and on Bedrock (InvokeModelWithResponseStream): the Anthropic wire.
    "anthropic-vertex": lambda base: AnthropicVertexModel(
        "conf-model",
        base_url=f"{base}/v1/projects/p/locations/us-east5/publishers/anthropic",
        access_token="t",
    ),
    "anthropic-bedrock": lambda base: BedrockAnthropicModel(
        "conf-model", region="us-east-1", base_url=base, credentials=Credentials("AKIDEXAMPLE", "secret")
    ),
}
WIRE = {"anthropic-vertex": "anthropic", "anthropic-bedrock": "anthropic"}
"""The wire family whose follow-up checks apply to a platform preset."""


def normalise(events: list[AgentEvent]) -> list[dict[str, Any]]:
    calls: dict[str, str] = {}

    def call(tool_call_id: str) -> str:
        return calls.setdefault(tool_call_id, f"#{len(calls) + 1}")

    out: list[dict[str, Any]] = []
    block: list[dict[str, Any]] | None = None
    inputs: list[dict[str, Any]] | None = None
    for e in events:
        d: dict[str, Any] = {"type": e.type}
        match e.type:
            case "interaction-start":
                d["prompt"] = e.prompt  # type: ignore[union-attr]
            case "user-turn-start":
                d["text"] = e.message.text  # type: ignore[union-attr]
            case "step-start":
                d["step"] = e.step  # type: ignore[union-attr]
            case "step-finish":
                d |= {"step": e.step, "finish_reason": e.finish_reason}  # type: ignore[union-attr]
            case "text-delta" | "reasoning-delta":
                if out and out[-1]["type"] == e.type:
                    out[-1]["text"] += e.delta  # type: ignore[union-attr]
                    continue
                d["text"] = e.delta  # type: ignore[union-attr]
            case "tool-input-start":
                d |= {"call": call(e.tool_call_id), "tool_name": e.tool_name}  # type: ignore[union-attr]
            case "tool-input-delta":
                ref = call(e.tool_call_id)  # type: ignore[union-attr]
                same = [x for x in inputs or [] if x["type"] == e.type and x["call"] == ref]
                if same:
                    same[0]["raw"] += e.delta  # type: ignore[union-attr]
                    continue
                d |= {"call": ref, "raw": e.delta}  # type: ignore[union-attr]
            case "tool-input-available":
                d |= {"call": call(e.tool_call_id), "tool_name": e.tool_name, "args": e.args}  # type: ignore[union-attr]
            case "tool-call-active":
                d |= {"call": call(e.tool_call_id), "tool_name": e.tool_name}  # type: ignore[union-attr]
            case "tool-call-complete":
                d |= {
                    "call": call(e.tool_call_id),
                    "tool_name": e.tool_name,
                    "output": e.output,
                    "is_error": e.is_error,
                }  # type: ignore[union-attr]
            case "message-persisted":
                d["role"] = e.role  # type: ignore[union-attr]
            case "interaction-end":
                d |= {"status": e.status, "output": e.output}  # type: ignore[union-attr]
            case "tool-call-heartbeat":
                continue
        if e.type in ("tool-call-active", "tool-call-complete"):
            if block is None:
                block = []
                out.append({"tool_block": block})
            block.append(d)
            continue
        if e.type.startswith("tool-input-"):
            # Chat Completions has no per-call end marker, so its calls become available only at the finish
            # chunk; each call's own start -> delta -> available order is what every wire guarantees.
            if inputs is None:
                inputs = []
                out.append({"tool_inputs": inputs})
            inputs.append(d)
            continue
        out.append(d)
    phase = {"tool-input-start": 0, "tool-input-delta": 1, "tool-input-available": 2}
    for d in out:
        for x in d.get("tool_inputs", []):
            if x["type"] == "tool-input-delta":
                x["json"] = json.loads(x.pop("raw"))
        if "tool_inputs" in d:
            d["tool_inputs"].sort(key=lambda x: (x["call"], phase[x["type"]]))
        if "tool_block" in d:
            d["tool_block"].sort(key=lambda x: (x["type"], x["call"]))
    return out


def stored_shape(messages: list[Any]) -> list[Any]:
    shape = []
    for m in messages:
        parts = []
        for p in m.parts:
            if p.type == "text" and not p.text:
                continue  # an empty text part (e.g. Gemini's finish chunk) carries no conversation
            if p.type in ("text", "reasoning"):
                parts.append([p.type, p.text])
            elif p.type == "tool-call":
                parts.append([p.type, p.tool_name, p.args])
            elif p.type == "tool-result":
                parts.append([p.type, p.tool_name, p.output])
        shape.append([m.role, parts])
    return shape


def same_signature(value: str) -> bool:
    # Gemini signatures are bytes; an adapter may re-encode the base64 (standard vs URL-safe)
    return base64.urlsafe_b64decode(value.replace("+", "-").replace("/", "_")) == base64.b64decode(SIGNATURE)


def followup_carries_everything(provider: str, body: dict[str, Any]) -> None:
    provider = WIRE.get(provider, provider)
    text = json.dumps(body)
    assert text.count("get_weather") >= 2 and text.count("get_time") >= 2, "tool definitions + both calls"
    for output in ('"temp_c": 21', '"time": "14:00"', 'temp_c\\": 21', 'time\\": \\"14:00'):
        if output in text:
            break
    else:
        raise AssertionError(f"{provider}: tool results missing from the follow-up")
    if provider == "openai-chat":
        assistant = next(m for m in body["messages"] if m.get("tool_calls"))
        assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_weather", "get_time"]
        assert assistant["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": SIGNATURE}}
        tools = [m for m in body["messages"] if m["role"] == "tool"]
        assert [t["tool_call_id"] for t in tools] == [c["id"] for c in assistant["tool_calls"]]
    elif provider == "openai-responses":
        items = body["input"]
        reasoning = next(i for i in items if i.get("type") == "reasoning")
        assert reasoning["encrypted_content"] == "ENC-final"  # the .done value, not the .added one
        calls = [i for i in items if i.get("type") == "function_call"]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert (
            [c["call_id"] for c in calls]
            == [o["call_id"] for o in outputs]
            == ["call_get_weather", "call_get_time"]
        )
        assert items.index(reasoning) < items.index(calls[0])
    elif provider == "anthropic":
        assistant = next(
            m
            for m in body["messages"]
            if m["role"] == "assistant" and isinstance(m["content"], list) and len(m["content"]) > 1
        )
        kinds = [b["type"] for b in assistant["content"]]
        assert kinds == [
            "thinking",
            "text",
            "tool_use",
            "tool_use",
        ]  # the signed thinking BEFORE the tool_use
        assert assistant["content"][0]["signature"] == SIGNATURE
        results = body["messages"][body["messages"].index(assistant) + 1]["content"]
        assert [r["tool_use_id"] for r in results if r["type"] == "tool_result"] == [
            "toolu_get_weather",
            "toolu_get_time",
        ]
    elif provider == "gemini":
        model_turn = next(c for c in body["contents"] if any("functionCall" in p for p in c["parts"]))
        calls = [p for p in model_turn["parts"] if "functionCall" in p]
        assert same_signature(calls[0]["thoughtSignature"]) and "thoughtSignature" not in calls[1]
        responses = body["contents"][body["contents"].index(model_turn) + 1]["parts"]
        assert [r["functionResponse"]["id"] for r in responses] == [c["functionCall"]["id"] for c in calls]
    elif provider == "bedrock":
        assistant = next(m for m in body["messages"] if any("toolUse" in b for b in m["content"]))
        assert assistant["content"][0]["reasoningContent"]["reasoningText"]["signature"] == SIGNATURE
        results = body["messages"][body["messages"].index(assistant) + 1]["content"]
        assert [r["toolResult"]["toolUseId"] for r in results] == ["tooluse_get_weather", "tooluse_get_time"]


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_same_events_same_rows_and_a_complete_follow_up_on_every_adapter(
    provider: str, tmp_path: Path
) -> None:
    db = tmp_path / f"{provider}.db"
    async with WireServer() as server:
        store = await open_store(f"sqlite+aiosqlite:///{db}")
        agent = Agent(MODELS[provider](server.base), tools=[get_weather, get_time], store=store)
        run = agent.stream("Weather and time in Paris?")
        events = [e async for e in run]
        session_id = run.session_id
        await agent.aclose()
        await store.close()

        assert normalise(events) == GOLDEN["first_turn"], provider

        fresh_store = await open_store(f"sqlite+aiosqlite:///{db}")  # a new agent, a new store object
        follow = Agent(MODELS[provider](server.base), tools=[get_weather, get_time], store=fresh_store)
        result = await follow.run("What was the temperature?", session_id=session_id)
        assert result.output == "It was 21°C."
        assert stored_shape(await fresh_store.raw_messages(session_id)) == GOLDEN["stored_messages"], provider
        rows = [[r.tool_name, r.args, r.status, r.output] for r in await fresh_store.tool_calls(session_id)]
        assert rows == GOLDEN["stored_tool_calls"], provider
        await follow.aclose()
        await fresh_store.close()

    assert len(server.requests[provider]) == 3
    followup_carries_everything(provider, server.requests[provider][2])


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_paused_call_resumed_from_a_fresh_store_sends_the_uninterrupted_continuation(
    provider: str, tmp_path: Path
) -> None:
    """The first call (the one carrying the provider's metadata) needs approval: the step runs the other,
    pauses, and a new agent on a new store object resumes it. The continuation request must be, field by
    field, the one the same conversation sends when nothing waits."""
    async with WireServer() as server:
        store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'reference.db'}")
        agent = Agent(MODELS[provider](server.base), tools=[get_weather, get_time], store=store)
        await agent.run("Weather and time in Paris?")
        await agent.aclose()
        await store.close()
        reference = server.requests[provider][1]

    db = f"sqlite+aiosqlite:///{tmp_path / 'paused.db'}"
    gated = tool(get_weather, requires_approval=True)
    async with WireServer() as server:
        store = await open_store(db)
        agent = Agent(MODELS[provider](server.base), tools=[gated, get_time], store=store)
        paused = await agent.run("Weather and time in Paris?")
        await agent.aclose()
        await store.close()
        assert paused.status == "paused"
        (pending,) = paused.pending
        assert (pending.tool_name, pending.args, pending.kind) == (
            "get_weather",
            {"city": "Paris"},
            "approval",
        )
        assert [x.call.tool_name for x in paused.tool_executions] == ["get_time"]
        assert len(server.requests[provider]) == 1

        fresh = await open_store(db)
        resumed_agent = Agent(MODELS[provider](server.base), tools=[gated, get_time], store=fresh)
        result = await resumed_agent.run(session_id=paused.session_id, approvals={pending.tool_call_id: True})
        await resumed_agent.aclose()
        await fresh.close()
        assert result.status == "completed" and result.output == "Paris: 21°C, 14:00."
        continuation = server.requests[provider][1]

    assert continuation == reference, provider
    followup_carries_everything(provider, continuation)
