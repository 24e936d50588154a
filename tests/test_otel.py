"""OpenTelemetry spans from the event stream, checked with the SDK's in-memory exporter."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Usage
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
