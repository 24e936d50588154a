"""OpenTelemetry spans for agent runs, model requests and tool executions (optional extra ``otel``).

Spans are derived from the event stream by an event-bus subscriber, so they describe exactly what
clients saw; there is no second code path. Attribute names follow the OpenTelemetry GenAI semantic
conventions. Layout::

    invoke_agent {agent}                 (gen_ai.operation.name=invoke_agent, gen_ai.conversation.id,
    │                                     gen_ai.provider.name, gen_ai.request.model)
    ├── chat {model}                     (one per model request: provider, request/response model, tokens,
    │                                     gen_ai.output.type=json when the run asks for a JSON answer)
    └── execute_tool {tool}              (gen_ai.tool.name, gen_ai.tool.call.id; error status on failure)
        └── invoke_agent {sub-agent}     (a sub-agent run nests under the tool call that delegated to it)

A step that fails over (``FallbackModel``) has one chat span per model asked: the failed attempt's ends with
ERROR status, ``error.type`` (the provider error's class) and ``toolwire.failover.to``.

Sub-agent events reach the parent's stream, so instrumenting the top agent covers the whole tree. A failed
span (the run, its open model request, a tool call) has ERROR status and ``error.type``: the exception's
class name, else the run's or the call's status (``cancelled``, ``blocked``, ``denied``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import MissingExtraError
from toolwire.events import (
    AgentEvent,
    ErrorEvent,
    FailoverEvent,
    InteractionEnd,
    InteractionStart,
    MessagePersisted,
    StepFinish,
    StepStart,
    ToolCallActive,
    ToolCallComplete,
)

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("otel", "OpenTelemetry support", missing=exc.name) from exc


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


@dataclass
class _StepSpan:
    span: Span
    model_done_at: float | None = None


@dataclass(frozen=True, slots=True)
class _RunSpan:
    span: Span
    start: InteractionStart
    """What the run asks of its model: every chat span of the run names the same provider and model."""


def _failed(span: Span, error_type: str, description: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description[:500]))


@dataclass
class _Instrumentation:
    tracer: trace.Tracer
    runs: dict[str, _RunSpan] = field(default_factory=dict)
    steps: dict[str, _StepSpan] = field(default_factory=dict)
    tools: dict[tuple[str, str], Span] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """The exception class that ended a session's run (from its ``error`` event)."""

    def __call__(self, event: AgentEvent) -> None:
        match event:
            case InteractionStart():
                self._run_start(event)
            case StepStart():
                self._step_start(event)
            case ErrorEvent():
                self.errors[event.session_id] = event.error_type
            case FailoverEvent():
                self._failover(event)
            case MessagePersisted() | ToolCallActive():
                # the model request is over once its message is stored or a tool starts
                step = self.steps.get(event.session_id)
                if step is not None and step.model_done_at is None:
                    step.model_done_at = event.timestamp
            case StepFinish():
                self._step_finish(event)
            case InteractionEnd():
                self._run_end(event)
            case _:
                pass
        if isinstance(event, ToolCallActive):
            self._tool_start(event)
        elif isinstance(event, ToolCallComplete) and not event.provider_executed:
            self._tool_end(event)

    def _run_start(self, event: InteractionStart) -> None:
        parent: Span | None = None
        if event.parent_session_id and event.parent_tool_call_id:
            parent = self.tools.get((event.parent_session_id, event.parent_tool_call_id))
        if parent is None and event.parent_session_id and event.parent_session_id in self.runs:
            parent = self.runs[event.parent_session_id].span
        name = event.agent_name or "agent"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": event.session_id,
            "toolwire.interaction_id": event.interaction_id,
            "toolwire.user_session_id": event.user_session_id,
        }
        if event.provider_name:
            attributes["gen_ai.provider.name"] = event.provider_name
        if event.model:
            attributes["gen_ai.request.model"] = event.model
        self.errors.pop(event.session_id, None)
        span = self.tracer.start_span(
            f"invoke_agent {name}",
            context=trace.set_span_in_context(parent) if parent else None,
            kind=SpanKind.INTERNAL,
            start_time=_ns(event.timestamp),
            attributes=attributes,
        )
        self.runs[event.session_id] = _RunSpan(span, event)

    def _step_start(self, event: StepStart | FailoverEvent) -> None:
        run = self.runs.get(event.session_id)
        start = run.start if run is not None else None
        if isinstance(event, FailoverEvent):  # the next model's attempt at the step
            model, provider_name = event.to_model, event.to_provider
        else:
            model = event.model or (start.model if start else None) or ""
            provider_name = (start.provider_name if start else None) or event.provider or ""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": event.session_id,
        }
        if start is not None and start.output_type:
            attributes["gen_ai.output.type"] = start.output_type
        span = self.tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(run.span) if run else None,
            kind=SpanKind.CLIENT,
            start_time=_ns(event.timestamp),
            attributes=attributes,
        )
        self.steps[event.session_id] = _StepSpan(span)

    def _failover(self, event: FailoverEvent) -> None:
        """The step's request failed and goes to another model: its span ends as an error, and the next
        model's attempt gets a chat span of its own."""
        step = self.steps.pop(event.session_id, None)
        if step is not None:
            step.span.set_attribute("toolwire.failover.to", f"{event.to_provider}:{event.to_model}")
            _failed(step.span, event.error_type, event.reason)
            step.span.end(end_time=_ns(event.timestamp))
        self._step_start(event)

    def _step_finish(self, event: StepFinish) -> None:
        step = self.steps.pop(event.session_id, None)
        if step is None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.usage.input_tokens": event.usage.input_tokens,
            "gen_ai.usage.output_tokens": event.usage.output_tokens,
            "gen_ai.response.finish_reasons": [event.finish_reason],
        }
        if event.model:
            attributes["gen_ai.response.model"] = event.model
        if event.response_id:
            attributes["gen_ai.response.id"] = event.response_id
        step.span.set_attributes(attributes)
        step.span.end(end_time=_ns(step.model_done_at or event.timestamp))

    def _tool_start(self, event: ToolCallActive) -> None:
        run = self.runs.get(event.session_id)
        self.tools[(event.session_id, event.tool_call_id)] = self.tracer.start_span(
            f"execute_tool {event.tool_name}",
            context=trace.set_span_in_context(run.span) if run else None,
            kind=SpanKind.INTERNAL,
            start_time=_ns(event.started_at or event.timestamp),
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool_name,
                "gen_ai.tool.call.id": event.tool_call_id,
                "gen_ai.tool.type": "function",
                "gen_ai.conversation.id": event.session_id,
            },
        )

    def _tool_end(self, event: ToolCallComplete) -> None:
        span = self.tools.pop((event.session_id, event.tool_call_id), None)
        if span is None:
            return
        span.set_attribute("toolwire.tool.status", event.status)
        if event.is_error:
            _failed(span, event.status if event.status != "ok" else "_OTHER", str(event.output))
        span.end(end_time=_ns(event.timestamp))

    def _run_end(self, event: InteractionEnd) -> None:
        for key in [k for k in self.tools if k[0] == event.session_id]:  # never leave a span open
            self.tools.pop(key).end(end_time=_ns(event.timestamp))
        error_type = self.errors.pop(event.session_id, None)
        failed = event.status not in ("completed", "paused")  # a paused run waits for a person: no error
        step = self.steps.pop(event.session_id, None)
        if step is not None:
            if failed and step.model_done_at is None:  # the run ended during the model request
                _failed(step.span, error_type or event.status, event.error or event.status)
            step.span.end(end_time=_ns(step.model_done_at or event.timestamp))
        run = self.runs.pop(event.session_id, None)
        if run is None:
            return
        span = run.span
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": event.usage.input_tokens,
                "gen_ai.usage.output_tokens": event.usage.output_tokens,
                "toolwire.status": event.status,
            }
        )
        if failed:
            _failed(span, error_type or event.status, event.error or event.status)
        span.end(end_time=_ns(event.timestamp))


def instrument(agent: Any, tracer_provider: TracerProvider | None = None) -> Any:
    """Emit OpenTelemetry spans for every run of ``agent`` (and its sub-agents). Returns the unsubscriber."""
    tracer = trace.get_tracer("toolwire", tracer_provider=tracer_provider)
    return agent.on("*", _Instrumentation(tracer))
