"""OpenTelemetry spans from the event stream, checked with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GenAiOutputTypeValues,
    GenAiProviderNameValues,
)
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from tests.reliability.fault_server import Behaviour, FaultServer
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.errors import MaxStepsExceeded, ProviderHTTPError
from toolwire.messages import Usage
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
from toolwire.models.base import Model
from toolwire.models.bedrock import BedrockModel
from toolwire.models.fallback import FallbackModel
from toolwire.models.gemini import GeminiModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel
from toolwire.models.scripted import ScriptedModel
from toolwire.otel import instrument


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_run_model_and_tool_spans_with_genai_attributes_and_nesting() -> None:
    tp, exporter = provider()
    child = Agent(
        ScriptedModel(
            [[ToolCallPart(tool_call_id="c1", tool_name="add", args={"a": 2, "b": 2})], [TextPart(text="4")]]
        ),
        tools=[add],
        name="math",
    )
    model = ScriptedModel(
        [[ToolCallPart(tool_call_id="c1", tool_name="math", args={"task": "2+2"})], [TextPart(text="four")]],
        model_name="planner-1",
        usage_per_turn=Usage(input_tokens=7, output_tokens=3, requests=1),
    )
    parent = Agent(model, tools=[child.as_tool("math", "Ask math.")], name="planner")
    instrument(parent, tracer_provider=tp)
    result = await parent.run("what is 2+2?")
    spans = exporter.get_finished_spans()

    (root,) = by_name(spans, "invoke_agent planner")
    assert root.parent is None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == result.session_id
    assert root.attributes["gen_ai.usage.input_tokens"] == 14

    chats = by_name(spans, "chat planner-1")
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == root.context.span_id
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == "planner-1"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 7
        assert chat.attributes["gen_ai.usage.output_tokens"] == 3

    (delegate,) = by_name(spans, "execute_tool math")
    assert delegate.parent is not None and delegate.parent.span_id == root.context.span_id
    assert delegate.attributes["gen_ai.tool.name"] == "math"
    assert delegate.attributes["gen_ai.tool.call.id"] == "c1"

    (sub,) = by_name(spans, "invoke_agent math")  # nested under the delegating tool span
    assert sub.parent is not None and sub.parent.span_id == delegate.context.span_id
    (inner_tool,) = by_name(spans, "execute_tool add")
    assert inner_tool.parent is not None and inner_tool.parent.span_id == sub.context.span_id
    assert sub.start_time >= delegate.start_time and sub.end_time <= delegate.end_time


async def test_failed_tool_span_has_error_status() -> None:
    def broken() -> None:
        """Break."""
        raise RuntimeError("boom")

    tp, exporter = provider()
    agent = Agent(
        ScriptedModel([[ToolCallPart(tool_call_id="b", tool_name="broken", args={})], [TextPart(text="k")]]),
        tools=[broken],
    )
    instrument(agent, tracer_provider=tp)
    await agent.run("go")
    (span,) = by_name(exporter.get_finished_spans(), "execute_tool broken")
    assert span.status.status_code == StatusCode.ERROR and "boom" in (span.status.description or "")


# -- GenAI semantic conventions: provider names, failures, output type ------------------------------

WELL_KNOWN = {v.value for v in GenAiProviderNameValues}
"""The spec's well-known ``gen_ai.provider.name`` values, from the OpenTelemetry semconv package."""


def _models() -> list[tuple[Model, str]]:
    return [
        (OpenAIChatModel("gpt-4o", api_key="k"), "openai"),
        (OpenAIResponsesModel("gpt-5", api_key="k"), "openai"),
        (AnthropicModel("claude-sonnet-4-5", api_key="k"), "anthropic"),
        (GeminiModel("gemini-2.5-flash", api_key="k"), "gcp.gemini"),
        (GeminiModel("gemini-2.5-flash", vertex=True, project="p", access_token="t"), "gcp.vertex_ai"),
        (BedrockModel("anthropic.claude-3-haiku", region="us-east-1", credentials=_AWS), "aws.bedrock"),
        (AzureOpenAIChatModel("dep", endpoint="https://r.openai.azure.com", api_key="k"), "azure.ai.openai"),
        (
            AzureOpenAIResponsesModel("dep", endpoint="https://r.openai.azure.com", api_key="k"),
            "azure.ai.openai",
        ),
        (OpenAIChatModel("llama", preset="groq", api_key="k"), "groq"),
        (OpenAIChatModel("grok-4", preset="xai", api_key="k"), "x_ai"),
        (OpenAIChatModel("mistral-large", preset="mistral", api_key="k"), "mistral_ai"),
        (OpenAIChatModel("deepseek-chat", preset="deepseek", api_key="k"), "deepseek"),
    ]


_AWS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def test_every_adapter_names_its_provider_by_the_well_known_value() -> None:
    for model, expected in _models():
        assert model.otel_provider_name == expected, type(model).__name__
        assert expected in WELL_KNOWN


def _failing_openai(status: int, body: dict[str, Any]) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(status, json=body)))
    return OpenAIChatModel("gpt-4o", api_key="k", stream=False, http_client=client)


async def test_invoke_agent_names_provider_and_model_and_a_failed_request_is_an_error() -> None:
    tp, exporter = provider()
    bad = {"error": {"message": "Invalid schema", "type": "invalid_request_error", "code": None}}
    agent = Agent(_failing_openai(400, bad), name="desk", retries=0)
    instrument(agent, tracer_provider=tp)
    with pytest.raises(ProviderHTTPError):
        await agent.run("hi")
    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "invoke_agent desk")
    assert run.attributes is not None
    assert run.attributes["gen_ai.provider.name"] == "openai"
    assert run.attributes["gen_ai.request.model"] == "gpt-4o"
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["error.type"] == "ProviderHTTPError"
    (chat,) = by_name(spans, "chat gpt-4o")
    assert chat.attributes is not None
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "ProviderHTTPError"
    assert chat.attributes["gen_ai.provider.name"] == "openai"


async def test_chat_spans_name_the_well_known_provider_of_the_run() -> None:
    tp, exporter = provider()
    answer = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 3},
    }
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(200, json=answer)))
    model = GeminiModel(
        "gemini-2.5-flash", vertex=True, project="p", access_token="t", stream=False, http_client=client
    )
    agent = Agent(model)
    instrument(agent, tracer_provider=tp)
    await agent.run("hi")
    spans = exporter.get_finished_spans()
    (chat,) = by_name(spans, "chat gemini-2.5-flash")
    (run,) = by_name(spans, "invoke_agent agent")
    for span in (chat, run):
        assert span.attributes is not None and span.attributes["gen_ai.provider.name"] == "gcp.vertex_ai"
    assert chat.status.status_code == StatusCode.UNSET and "error.type" not in (chat.attributes or {})


async def test_every_failed_span_has_an_error_type() -> None:
    def broken() -> None:
        """Break."""
        raise RuntimeError("boom")

    tp, exporter = provider()
    model = ScriptedModel([[ToolCallPart("broken", tool_call_id="b", args={})]], repeat_last=True)
    agent = Agent(model, tools=[broken], max_steps=2)
    instrument(agent, tracer_provider=tp)
    with pytest.raises(MaxStepsExceeded):
        await agent.run("go")
    failed = [s for s in exporter.get_finished_spans() if s.status.status_code == StatusCode.ERROR]
    assert {s.name for s in failed} == {"execute_tool broken", "invoke_agent agent"}
    for span in failed:
        assert span.attributes is not None and span.attributes["error.type"], span.name
    (run,) = by_name(exporter.get_finished_spans(), "invoke_agent agent")
    assert run.attributes is not None and run.attributes["error.type"] == "MaxStepsExceeded"


class City(BaseModel):
    name: str


@pytest.mark.parametrize(
    ("mode", "expected"), [("native", "json"), ("prompted", "json"), ("tool", None), (None, None)]
)
async def test_chat_spans_carry_the_output_type_when_the_run_asks_for_json(
    mode: str | None, expected: str | None
) -> None:
    tp, exporter = provider()
    answer: list[Any] = (
        [ToolCallPart("final_result", tool_call_id="f", args={"name": "Oslo"})]
        if mode == "tool"
        else [TextPart('{"name": "Oslo"}')]
    )
    model = ScriptedModel([answer])
    agent: Agent[Any, Any] = (
        Agent(model, output_type=City, output_mode=mode) if mode else Agent(model)  # type: ignore[arg-type]
    )
    instrument(agent, tracer_provider=tp)
    await agent.run("city?")
    (chat,) = by_name(exporter.get_finished_spans(), "chat scripted")
    assert chat.attributes is not None
    assert chat.attributes.get("gen_ai.output.type") == expected
    if expected is not None:
        assert expected in {v.value for v in GenAiOutputTypeValues}


async def test_a_failed_over_attempt_is_a_chat_span_of_its_own_with_an_error_type() -> None:
    tp, exporter = provider()
    broken = Behaviour(status=529, body=b'{"type": "error", "error": {"type": "overloaded_error"}}')
    async with FaultServer([broken]) as server:
        primary = AnthropicModel("claude-x", api_key="k", base_url=server.base_url.removesuffix("/v1"))
        fallback = ScriptedModel([[TextPart(text="hi")]])
        agent = Agent(FallbackModel(primary, fallback, breaker=None), retries=0)
        instrument(agent, tp)
        result = await agent.run("x")
    assert result.output == "hi"
    failed, answered = (
        by_name(exporter.get_finished_spans(), "chat claude-x"),
        by_name(exporter.get_finished_spans(), "chat scripted"),
    )
    assert len(failed) == 1 and len(answered) == 1
    assert failed[0].status.status_code == StatusCode.ERROR
    assert failed[0].attributes is not None and failed[0].attributes["error.type"] == "ProviderHTTPError"
    assert failed[0].attributes["toolwire.failover.to"] == "scripted:scripted"
    assert answered[0].status.status_code != StatusCode.ERROR
