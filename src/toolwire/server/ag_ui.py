"""``POST /api/ag-ui``: the AG-UI protocol (CopilotKit and the ``@ag-ui/client`` ``HttpAgent``).

The body is AG-UI's ``RunAgentInput``; the answer is its event stream as SSE, one JSON event per ``data:``
frame: ``RUN_STARTED``, then the run's ``STEP_*``, ``TEXT_MESSAGE_*``, ``REASONING_*``, ``TOOL_CALL_*``,
``STATE_SNAPSHOT`` / ``STATE_DELTA`` / ``CUSTOM`` (from a tool's ``ctx.data``), a ``MESSAGES_SNAPSHOT`` of
the stored conversation, and ``RUN_FINISHED`` (or ``RUN_ERROR``). ``threadId`` is the session id; the run
is started like every other turn (:meth:`~toolwire.server.runs.RunManager.start`), so it is stored,
survives the client going away, and is followed on any replica.

The store is authoritative: of the client's messages only the last one is read (a new user turn, or the
``tool`` messages answering its front-end tools); the ``MESSAGES_SNAPSHOT`` before each ``RUN_FINISHED``
hands the client the stored conversation, ids included.

Pauses map onto the protocol's own:

- the input's ``tools`` are front-end tools: for this run the agent also knows them as client-side
  (``external``) tools. A call of one ends the run with ``outcome: {type: "success",
  pendingToolCallIds}``; the next ``RunAgentInput`` carrying a ``tool`` message for it answers it.
- a call waiting for approval ends the run with ``outcome: {type: "interrupt"}``, one interrupt per call
  (``reason: "tool_call"``, ``id`` = ``toolCallId``); the next input's ``resume`` entry answers it:
  ``{"interruptId": id, "status": "resolved", "payload": {"approved": true}}`` (``false`` and an optional
  ``reason`` deny it; ``status: "cancelled"`` denies it too).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from toolwire.agent.agent import Agent
from toolwire.errors import ResumeError
from toolwire.events import (
    AgentEvent,
    CompactionEvent,
    CustomDataEvent,
    ErrorEvent,
    FailoverEvent,
    InteractionEnd,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    StepFinish,
    StepStart,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
    UserTurnStart,
)
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart
from toolwire.server._input import check_prompt, check_session_id, read_json
from toolwire.server._sse import PING, SSE_HEADERS, data_frame, with_pings
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError
from toolwire.server.hub import Subscription
from toolwire.tools.function import Tool
from toolwire.tools.pending import Approval, DecisionKey, Denied, ToolFailed, pending_of_rows
from toolwire.tools.registry import ToolRegistry

MAX_FRONTEND_TOOLS = 128
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
STATE_SNAPSHOT_DATA = "ag-ui:state"
"""``ctx.data(STATE_SNAPSHOT_DATA, state)`` in a tool becomes a ``STATE_SNAPSHOT`` event."""
STATE_DELTA_DATA = "ag-ui:state-delta"
"""``ctx.data(STATE_DELTA_DATA, [json patch operations])`` becomes a ``STATE_DELTA`` event."""
_APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


@dataclass(slots=True)
class RunInput:
    """What toolwire reads of a ``RunAgentInput``."""

    thread_id: str
    run_id: str
    prompt: str | None
    """The last message's text when it is the user's."""
    tool_messages: dict[str, Any] = field(default_factory=dict)
    """``toolCallId`` -> the trailing ``tool`` messages' content (a front-end tool's output)."""
    tool_errors: dict[str, str] = field(default_factory=dict)
    resume: list[dict[str, Any]] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)


def parse_run_input(body: Any, server: ToolwireServer) -> RunInput:
    """A ``RunAgentInput``, checked; anything malformed is a 400 naming the field."""
    limits = server.limits
    if not isinstance(body, dict):
        raise RequestError("the body must be AG-UI's RunAgentInput object {threadId, runId, messages, ...}")
    thread_id = check_session_id(body.get("threadId"))
    run_id = body.get("runId")
    if not isinstance(run_id, str) or not 0 < len(run_id) <= 200:
        raise RequestError("'runId' must be a non-empty string of at most 200 characters")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise RequestError("'messages' must be an array of AG-UI messages")
    if len(messages) > limits.max_messages:
        raise RequestError(f"more than {limits.max_messages} messages", status=413, kind="too_large")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"messages[{i}] must be an object with a 'role'")
    parsed = RunInput(thread_id=thread_id, run_id=run_id, prompt=None)
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user":
        parsed.prompt = check_prompt(_content_text(last.get("content")), limits)
    # The trailing tool messages answer the front-end tool calls of the previous run.
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            raise RequestError("a tool message needs its 'toolCallId'")
        if isinstance(message.get("error"), str):
            parsed.tool_errors[call_id] = message["error"]
        else:
            parsed.tool_messages[call_id] = _tool_output(message.get("content"))
    resume = body.get("resume")
    if resume is not None:
        if not isinstance(resume, list) or not all(
            isinstance(r, dict) and isinstance(r.get("interruptId"), str) for r in resume
        ):
            raise RequestError("'resume' must be an array of {interruptId, status, payload}")
        parsed.resume = resume
    parsed.tools = _frontend_tools(body.get("tools"), {t.name for t in server.agent.tools})
    if body.get("context") is not None and not isinstance(body["context"], list):
        raise RequestError("'context' must be an array of {description, value}")
    return parsed


def _content_text(content: Any) -> Any:
    """A user message's text: its string content, or its text parts joined (other parts are refused)."""
    if isinstance(content, list):
        texts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise RequestError("only text parts are supported in user messages")
            texts.append(part["text"])
        return "\n".join(texts)
    return content


def _tool_output(content: Any) -> Any:
    """A front-end tool's output: JSON when its content is JSON text (what ``HttpAgent`` sends), else as is."""
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _frontend_tools(raw: Any, server_tools: set[str]) -> list[Tool]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RequestError("'tools' must be an array of {name, description, parameters}")
    if len(raw) > MAX_FRONTEND_TOOLS:
        raise RequestError(f"more than {MAX_FRONTEND_TOOLS} tools", status=413, kind="too_large")
    import jsonschema

    tools: list[Tool] = []
    for i, spec in enumerate(raw):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RequestError(f"tools[{i}] must be an object with a 'name'")
        name = spec["name"]
        if not _TOOL_NAME.fullmatch(name):
            raise RequestError(f"tools[{i}]: a tool name is letters, digits, '_' and '-' (at most 64)")
        if name in server_tools or any(t.name == name for t in tools):
            raise RequestError(f"tools[{i}]: {name!r} is already a tool of this agent")
        description = spec.get("description", "")
        parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(description, str) or not isinstance(parameters, dict):
            raise RequestError(f"tools[{i}]: 'description' must be a string, 'parameters' a JSON Schema")
        try:
            jsonschema.Draft202012Validator.check_schema(parameters)
        except jsonschema.SchemaError as exc:
            raise RequestError(f"tools[{i}]: 'parameters' is no JSON Schema: {exc.message}") from None
        tools.append(
            Tool(
                name=name,
                description=description,
                parameters=parameters,
                function=_runs_on_the_client,
                external=True,
                source="ag-ui",
            )
        )
    return tools


def _runs_on_the_client(**_: Any) -> Any:  # pragma: no cover - the loop never runs an external tool
    raise RuntimeError("a front-end tool runs on the AG-UI client")


class FrontendToolRegistry(ToolRegistry):
    """The agent's tools plus one run's front-end tools (the agent's own win: a clash is refused first)."""

    def __init__(self, base: ToolRegistry, frontend: Sequence[Tool]) -> None:
        super().__init__()
        self._base = base
        self._frontend = list(frontend)
        self._merge()

    def _merge(self) -> None:
        self._tools = {**{t.name: t for t in self._frontend}, **{t.name: t for t in self._base}}

    async def prepare(self) -> None:
        await self._base.prepare()
        self._merge()

    @property
    def sources(self) -> list[Any]:
        return self._base.sources

    async def aclose(self) -> None:
        """The agent's own registry owns its sources."""


def with_frontend_tools(agent: Agent[Any, Any], tools: Sequence[Tool]) -> Agent[Any, Any] | None:
    """A copy of ``agent`` that also knows ``tools`` (``None`` when there are none: run the agent itself)."""
    if not tools:
        return None
    twin = agent.override()
    twin.registry = FrontendToolRegistry(agent.registry, tools)
    return twin


@dataclass(slots=True)
class AGUIEncoder:
    """One thread's agent events -> AG-UI events (dicts), for one AG-UI run."""

    thread_id: str
    run_id: str
    _steps: list[str] = field(default_factory=list)
    _texts: set[str] = field(default_factory=set)
    _reasoning: set[str] = field(default_factory=set)
    """Reasoning messages started and not yet ended (a failover ends them)."""
    _calls: set[str] = field(default_factory=set)
    """Tool calls started (``TOOL_CALL_START`` sent) and not yet ended."""
    _ended_calls: set[str] = field(default_factory=set)
    _held: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Events of calls started before their message id was known (see :meth:`encode`)."""
    _message_id: str | None = None
    """The assistant message of the current step (tool calls name it as their parent)."""
    _interrupts: list[dict[str, Any]] = field(default_factory=list)
    _pending: list[str] = field(default_factory=list)
    _error: str | None = None

    def start(self) -> dict[str, Any]:
        return {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}

    def encode(self, event: AgentEvent) -> Iterator[dict[str, Any]]:  # noqa: C901 - one flat dispatch
        if event.session_id != self.thread_id:
            return  # sub-agents' events stay on the native event stream
        if isinstance(event, StepStart):
            name = f"step {event.step}"
            self._steps.append(name)
            self._message_id = None
            yield {"type": "STEP_STARTED", "stepName": name}
        elif isinstance(event, StepFinish):
            yield from self._close_step()
        elif isinstance(event, TextStartEvent):
            message_id = event.message_id or event.id
            self._message_id = message_id
            self._texts.add(message_id)
            yield {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
        elif isinstance(event, TextDeltaEvent):
            if event.delta:
                yield {
                    "type": "TEXT_MESSAGE_CONTENT",
                    "messageId": event.message_id or event.id,
                    "delta": event.delta,
                }
        elif isinstance(event, TextEndEvent):
            message_id = event.message_id or event.id
            if message_id in self._texts:
                self._texts.discard(message_id)
                yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
        elif isinstance(event, ReasoningStartEvent):
            # Reasoning is its own message in AG-UI (role "reasoning"): its id must differ from the text's.
            self._reasoning.add(event.id)
            yield {"type": "REASONING_START", "messageId": event.id}
            yield {"type": "REASONING_MESSAGE_START", "messageId": event.id, "role": "reasoning"}
        elif isinstance(event, ReasoningDeltaEvent):
            if event.delta:
                yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": event.id, "delta": event.delta}
        elif isinstance(event, ReasoningEndEvent):
            self._reasoning.discard(event.id)
            yield {"type": "REASONING_MESSAGE_END", "messageId": event.id}
            yield {"type": "REASONING_END", "messageId": event.id}
        elif isinstance(event, FailoverEvent):
            yield from self._failover(event)
        elif isinstance(event, CompactionEvent):
            yield {
                "type": "CUSTOM",
                "name": "compaction",
                "value": {
                    "summary": event.summary,
                    "tokensBefore": event.tokens_before,
                    "tokensAfter": event.tokens_after,
                },
            }
        elif isinstance(event, ToolInputStartEvent):
            start = self._call_start(event.tool_call_id, event.tool_name)
            if self._message_id is None:
                # Its assistant message's id comes with the whole call: held until then, so the client
                # files the call under the id the stored conversation (MESSAGES_SNAPSHOT) gives it.
                self._held[event.tool_call_id] = [start]
            else:
                yield start
        elif isinstance(event, ToolInputDeltaEvent):
            if event.delta and (event.tool_call_id in self._calls or event.tool_call_id in self._held):
                args = {"type": "TOOL_CALL_ARGS", "toolCallId": event.tool_call_id, "delta": event.delta}
                if event.tool_call_id in self._held:
                    self._held[event.tool_call_id].append(args)
                else:
                    yield args
        elif isinstance(event, ToolInputAvailableEvent):
            yield from self._call_available(event)
        elif isinstance(event, ToolCallComplete):
            yield {
                "type": "TOOL_CALL_RESULT",
                "messageId": result_message_id(event.tool_call_id),
                "toolCallId": event.tool_call_id,
                "content": _result_text(event),
                "role": "tool",
            }
        elif isinstance(event, ToolCallAwaiting):
            yield from self._awaiting(event)
        elif isinstance(event, CustomDataEvent):
            yield _custom(event)
        elif isinstance(event, ErrorEvent):
            self._error = f"{event.error_type}: {event.message}"

    def finish(self, end: InteractionEnd, snapshot: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
        """Close what is open, then ``snapshot`` (``MESSAGES_SNAPSHOT``: the protocol wants the state to
        resume from before an interrupt) and ``RUN_FINISHED`` with the run's outcome, or ``RUN_ERROR``."""
        for message_id in sorted(self._texts):
            yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
        self._texts.clear()
        for call_id in sorted(self._calls - set(self._held)):
            yield {"type": "TOOL_CALL_END", "toolCallId": call_id}
        self._calls.clear()
        self._held.clear()  # never shown: the run ended before the call was whole
        while self._steps:
            yield from self._close_step()
        if snapshot is not None:
            yield snapshot
        if end.status == "error":
            yield {
                "type": "RUN_ERROR",
                "message": end.error or self._error or "the run failed",
                "code": "run_error",
            }
            return
        outcome: dict[str, Any]
        if end.status == "cancelled":
            outcome = {"type": "cancelled"}
        elif self._interrupts:
            outcome = {"type": "interrupt", "interrupts": self._interrupts}
        else:
            outcome = {"type": "success"}
            if self._pending:
                outcome["pendingToolCallIds"] = self._pending
        event: dict[str, Any] = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "outcome": outcome,
        }
        if end.status == "completed" and end.output:
            event["result"] = end.output
        yield event

    def _failover(self, event: FailoverEvent) -> Iterator[dict[str, Any]]:
        """The step goes to another model: what the failed one opened is ended (the run's closing
        ``MESSAGES_SNAPSHOT``, the stored conversation, does not have it), its held calls are never shown,
        and a ``CUSTOM`` event named ``failover`` says what happened."""
        for message_id in sorted(self._texts):
            yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
        for message_id in sorted(self._reasoning):
            yield {"type": "REASONING_MESSAGE_END", "messageId": message_id}
            yield {"type": "REASONING_END", "messageId": message_id}
        for call_id in sorted(self._calls - set(self._held)):
            yield {"type": "TOOL_CALL_END", "toolCallId": call_id}
        self._texts.clear()
        self._reasoning.clear()
        self._calls.clear()
        self._held.clear()
        self._message_id = None
        yield {
            "type": "CUSTOM",
            "name": "failover",
            "value": {
                "step": event.step,
                "from": f"{event.from_provider}:{event.from_model}",
                "to": f"{event.to_provider}:{event.to_model}",
                "reason": event.reason,
                "errorType": event.error_type,
                "droppedOutput": event.dropped_output,
            },
        }

    def _close_step(self) -> Iterator[dict[str, Any]]:
        if self._steps:
            yield {"type": "STEP_FINISHED", "stepName": self._steps.pop()}

    def _call_start(self, call_id: str, name: str) -> dict[str, Any]:
        self._calls.add(call_id)
        event: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
        if self._message_id is not None:
            event["parentMessageId"] = self._message_id
        return event

    def _call_available(self, event: ToolInputAvailableEvent) -> Iterator[dict[str, Any]]:
        if event.tool_call_id in self._ended_calls:
            return
        if event.message_id and self._message_id is None:
            self._message_id = event.message_id
        if (held := self._held.pop(event.tool_call_id, None)) is not None:
            if self._message_id is not None:
                held[0]["parentMessageId"] = self._message_id
            yield from held
        elif event.tool_call_id not in self._calls:  # a model that sends the call whole
            yield self._call_start(event.tool_call_id, event.tool_name)
            yield {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": event.tool_call_id,
                "delta": json.dumps(event.args, ensure_ascii=False),
            }
        self._calls.discard(event.tool_call_id)
        self._ended_calls.add(event.tool_call_id)
        yield {"type": "TOOL_CALL_END", "toolCallId": event.tool_call_id}

    def _awaiting(self, event: ToolCallAwaiting) -> Iterator[dict[str, Any]]:
        if event.tool_call_id not in self._ended_calls:  # announced again by a later run: show the call
            yield from self._call_available(
                ToolInputAvailableEvent(
                    session_id=event.session_id,
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    args=event.args,
                    message_id=event.message_id,
                )
            )
        if event.kind == "approval":
            if all(i["id"] != event.tool_call_id for i in self._interrupts):
                self._interrupts.append(
                    {
                        "id": event.tool_call_id,
                        "reason": "tool_call",
                        "toolCallId": event.tool_call_id,
                        "message": f"Approve {event.tool_name}({json.dumps(event.args, ensure_ascii=False)})?",
                        "responseSchema": _APPROVAL_SCHEMA,
                    }
                )
        elif event.kind == "input" and event.question is not None:
            # The tool's question is an interrupt whose response is the form the server asked for.
            if all(i["id"] != event.tool_call_id for i in self._interrupts):
                question = event.question
                self._interrupts.append(
                    {
                        "id": event.tool_call_id,
                        "reason": "input",
                        "toolCallId": event.tool_call_id,
                        "message": question.get("message", ""),
                        "responseSchema": question.get("requested_schema") or {"type": "object"},
                        **({"url": question["url"]} if question.get("url") else {}),
                    }
                )
        elif event.kind == "output" and event.tool_call_id not in self._pending:
            self._pending.append(event.tool_call_id)


def _custom(event: CustomDataEvent) -> dict[str, Any]:
    if event.name == STATE_SNAPSHOT_DATA:
        return {"type": "STATE_SNAPSHOT", "snapshot": event.data}
    if event.name == STATE_DELTA_DATA and isinstance(event.data, list):
        return {"type": "STATE_DELTA", "delta": event.data}
    return {"type": "CUSTOM", "name": event.name, "value": event.data}


def _result_text(event: ToolCallComplete) -> str:
    if event.status == "denied":
        return f"denied: {event.output}" if event.output else "denied"
    if isinstance(event.output, str):
        return event.output
    return json.dumps(event.output, ensure_ascii=False, default=str)


def result_message_id(tool_call_id: str) -> str:
    """The AG-UI message id of a call's result: the same streamed and in ``MESSAGES_SNAPSHOT``."""
    return f"result-{tool_call_id}"


def history_to_ag_ui(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Stored messages as AG-UI messages (for ``MESSAGES_SNAPSHOT``); system messages stay server-side."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for message in messages:
        if message.role == "user":
            out.append({"id": message.id, "role": "user", "content": message.text})
        elif message.role == "assistant":
            item: dict[str, Any] = {"id": message.id, "role": "assistant"}
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
            if text:
                item["content"] = text
            calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            if calls:
                item["toolCalls"] = [
                    {
                        "id": c.tool_call_id,
                        "type": "function",
                        "function": {
                            "name": c.tool_name,
                            "arguments": json.dumps(c.args, ensure_ascii=False),
                        },
                    }
                    for c in calls
                ]
            out.append(item)
        elif message.role == "tool":
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    result_id = result_message_id(part.tool_call_id)
                    if result_id in seen:  # a model reused a call id: the later result gets another id
                        result_id = f"{result_id}-{message.id}"
                    seen.add(result_id)
                    output = part.output
                    content = (
                        output
                        if isinstance(output, str)
                        else json.dumps(output, ensure_ascii=False, default=str)
                    )
                    out.append(
                        {
                            "id": result_id,
                            "role": "tool",
                            "toolCallId": part.tool_call_id,
                            "content": content,
                        }
                    )
    return out


class AGUIEndpoint:
    """``POST /api/ag-ui`` over one :class:`ToolwireServer`."""

    def __init__(self, server: ToolwireServer) -> None:
        self.server = server

    async def post(self, request: Request) -> Response:
        """Start (or resume) the thread's turn; answer with its AG-UI event stream."""
        server = self.server
        user = server.user(request)
        run_input = parse_run_input(await read_json(request, server.limits), server)
        session_id = run_input.thread_id
        approvals: dict[DecisionKey, Approval] = {}
        outputs: dict[DecisionKey, Any] = {}
        if run_input.resume or run_input.tool_messages or run_input.tool_errors:
            # Answers are read only for calls the caller's thread awaits; the others are history.
            info = await server.authorize(session_id, user)
            if info.parent_session_id:
                raise RequestError("sub-agent sessions take no user messages", status=403, kind="forbidden")
            approvals, outputs = await self._answers(session_id, run_input)
        if run_input.prompt is None and not approvals and not outputs:
            if run_input.resume or run_input.tool_messages:
                raise ResumeError(
                    "the input answers no tool call this thread awaits (send a new user message, or "
                    "resume its interrupts / the outputs of its pending tool calls)"
                )
            raise RequestError("nothing to run: the last message must be the user's")
        await server.claim(session_id, user)
        agent = with_frontend_tools(server.agent, run_input.tools)
        subscription = await server.start_watched(
            session_id, run_input.prompt, user=user, approvals=approvals, tool_outputs=outputs, agent=agent
        )
        encoder = AGUIEncoder(session_id, run_input.run_id)
        return StreamingResponse(
            self._stream(encoder, subscription), headers={**SSE_HEADERS, "connection": "keep-alive"}
        )

    async def _answers(
        self, session_id: str, run_input: RunInput
    ) -> tuple[dict[DecisionKey, Approval], dict[DecisionKey, Any]]:
        store = await self.server.store()
        kinds = {
            p.tool_call_id: p.kind
            for p in pending_of_rows(await store.tool_calls(session_id), session_id)
            if p.session_id == session_id
        }
        approvals: dict[DecisionKey, Approval] = {}
        outputs: dict[DecisionKey, Any] = {}
        for entry in run_input.resume:
            call_id = entry["interruptId"]
            if kinds.get(call_id) == "input":
                outputs[call_id] = _answer(entry)
            elif kinds.get(call_id) == "approval":
                approvals[call_id] = _approval(entry)
        for call_id, value in run_input.tool_messages.items():
            if kinds.get(call_id) == "output":
                outputs[call_id] = value
        for call_id, error in run_input.tool_errors.items():
            if kinds.get(call_id) == "output":
                outputs[call_id] = ToolFailed(error)
        return approvals, outputs

    async def _stream(self, encoder: AGUIEncoder, subscription: Subscription) -> AsyncIterator[bytes]:
        frames: list[bytes] = [data_frame(encoder.start())]
        try:
            async for item in with_pings(subscription, self.server.limits.ping_interval):
                if item is None:
                    frames.append(PING)
                elif (event := item.event) is None:  # a stream-reset: this client fell too far behind
                    frames.append(data_frame(_fell_behind()))
                    break
                elif isinstance(event, InteractionEnd) and event.session_id == encoder.thread_id:
                    snapshot = await self._snapshot(encoder.thread_id) if event.status != "error" else None
                    frames.extend(data_frame(e) for e in encoder.finish(event, snapshot))
                    break
                elif isinstance(event, UserTurnStart) and event.session_id == encoder.thread_id:
                    # The client holds the user message under its own id: the store's history, this
                    # message included, replaces it now, so the answer streamed next is placed after it.
                    frames.append(data_frame(await self._snapshot(encoder.thread_id, event.message)))
                else:
                    frames.extend(data_frame(e) for e in encoder.encode(event))
                if frames and not subscription.has_queued():
                    yield b"".join(frames)
                    frames.clear()
            else:
                frames.append(data_frame(_fell_behind()))  # the server shut down before the run ended
            yield b"".join(frames)
        finally:
            subscription.close()

    async def _snapshot(self, session_id: str, new: Message | None = None) -> dict[str, Any]:
        """``MESSAGES_SNAPSHOT`` of the stored conversation (and ``new``, when not stored yet)."""
        messages = await (await self.server.store()).raw_messages(session_id)
        if new is not None and all(m.id != new.id for m in messages):
            messages = [*messages, new]
        return {"type": "MESSAGES_SNAPSHOT", "messages": history_to_ag_ui(messages)}


def _answer(entry: dict[str, Any]) -> Any:
    """A resume entry answering a tool's question: its payload is the form's content (a cancelled
    interrupt cancels); the run checks it against the form."""
    if entry.get("status") == "cancelled":
        return {"action": "cancel"}
    if entry.get("status") != "resolved":
        raise RequestError("a resume entry's 'status' must be 'resolved' or 'cancelled'")
    return entry.get("payload")


def _approval(entry: dict[str, Any]) -> Approval:
    if entry.get("status") == "cancelled":
        return Denied("the user cancelled")
    if entry.get("status") != "resolved":
        raise RequestError("a resume entry's 'status' must be 'resolved' or 'cancelled'")
    payload = entry.get("payload")
    if isinstance(payload, bool):
        return payload
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise RequestError('a tool call\'s resume payload must be {"approved": true|false, "reason"?: str}')
    reason = payload.get("reason")
    if payload["approved"]:
        return True
    return Denied(reason) if isinstance(reason, str) and reason else False


def _fell_behind() -> dict[str, Any]:
    return {
        "type": "RUN_ERROR",
        "message": "the stream ended before the run did; reload the thread",
        "code": "stream_reset",
    }
