"""Sampling (``sampling/createMessage``) asked by a real MCP server (the SDK's, over stdio and streamable
HTTP) while it serves a tool call: denied by default with a clear error, served by a configured model or the
run's own, behind a policy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store import MemoryStore
from toolwire.tools import RunContext
from toolwire.tools.mcp import MCPServerHTTP, MCPServerStdio, SamplingRequest

SERVER = Path(__file__).parent / "_mcp_server.py"


def plain(output: Any) -> str:
    return str(output["result"] if isinstance(output, dict) else output)


async def summarize_through_the_loop(source: MCPServerStdio | MCPServerHTTP, text: str) -> tuple[str, Agent]:
    agent = Agent(
        ScriptedModel(
            [[ToolCallPart(tool_call_id="c1", tool_name="summarize", args={"text": text})], [TextPart("ok")]]
        ),
        tools=[source],
        store=MemoryStore(),
    )
    result = await agent.run("summarize", session_id="s")
    [call] = result.tool_executions
    assert not call.is_error
    return plain(call.result.output), agent


async def test_sampling_is_denied_by_default_with_a_clear_error(servers: Any) -> None:
    output, _ = await summarize_through_the_loop(servers(), "a long text")
    assert output.startswith("sampling error: toolwire: sampling is not allowed for mcp:")
    assert "sampling_policy" in output


async def test_a_configured_model_answers_when_allowed(servers: Any) -> None:
    sampler = ScriptedModel([[TextPart("five words and no more")]], model_name="small-model")
    source = servers(sampling_model=sampler, sampling_policy="allow")
    output, agent = await summarize_through_the_loop(source, "a long text")
    assert output == "small-model said: five words and no more"
    [recorded] = sampler.requests
    request = recorded.request
    assert request.instructions == "Answer in five words."
    assert [m.text for m in request.messages] == ["Summarize: a long text"]
    assert request.settings.max_tokens == 64 and request.settings.stop == ("STOP",)
    assert len(agent.model.requests) == 2  # type: ignore[attr-defined]  # the agent's model: its own steps only


async def test_a_policy_sees_the_request_and_the_call_it_serves(servers: Any) -> None:
    seen: list[SamplingRequest] = []

    async def policy(request: SamplingRequest) -> bool:
        seen.append(request)
        return "secret" not in request.messages[0].text

    sampler = ScriptedModel([[TextPart("fine")]])
    source = servers(sampling_model=sampler, sampling_policy=policy)
    allowed, _ = await summarize_through_the_loop(source, "the weather")
    refused, _ = await summarize_through_the_loop(source, "the secret plan")
    assert allowed == "scripted said: fine"
    assert refused.startswith("sampling error: toolwire: the client's sampling_policy refused")
    assert len(sampler.requests) == 1  # the refused request never reached the model
    assert [r.server for r in seen] == [source.source_name] * 2
    assert seen[0].max_tokens == 64 and seen[0].system_prompt == "Answer in five words."
    assert seen[0].context is not None and seen[0].context.tool_call_id == "c1"


async def test_the_runs_own_model_answers_without_a_configured_one(servers: Any) -> None:
    own = ScriptedModel([[TextPart("from the run's model")]], model_name="agent-model")
    source = servers(sampling_policy="allow")
    ctx: RunContext[None] = RunContext(
        deps=None,
        session_id="s",
        user_session_id="s",
        interaction_id="i",
        model=own,
        call=ToolCallPart(tool_call_id="c9", tool_name="summarize", args={"text": "x"}),
    )
    assert (
        plain(await source.call("summarize", {"text": "x"}, ctx)) == "agent-model said: from the run's model"
    )
    # outside a run's call, and with no sampling_model, there is no model to ask
    output = plain(await source.call("summarize", {"text": "x"}))
    assert output.startswith("sampling error: toolwire: no model to sample with")


def test_a_bad_policy_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="sampling_policy"):
        MCPServerStdio(sys.executable, [str(SERVER), "stdio"], sampling_policy="maybe")  # type: ignore[arg-type]
