"""The agent's MCP tool, apart from the transports (:mod:`toolwire.server.mcp_server`): its definition,
its arguments checked, the turn's tool activity as progress messages, and its result (the answer, the
session id, and what a paused run waits for with how to answer it)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolwire.agent.agent import Agent
from toolwire.events import AgentEvent, ToolCallActive, ToolCallAwaiting, ToolCallComplete, ToolProgress
from toolwire.server._input import SESSION_ID, check_prompt, parse_answers
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError
from toolwire.tools.pending import Approval, DecisionKey, PendingCall

_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.-]")
APPROVAL_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "Run this tool call"},
        "reason": {"type": "string", "title": "Reason", "description": "Why not (when denying)"},
    },
    "required": ["approve"],
}
_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": True,
    "description": "tool_call_id -> answer, for the calls a paused run waits for",
}
_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "status": {"type": "string"},
        "answer": {"type": "string"},
        "awaiting": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["session_id", "status", "answer", "awaiting"],
}


def agent_tool_name(name: str | None) -> str:
    """The MCP tool that runs the agent: the agent's name in MCP's tool-name alphabet (``agent`` unnamed)."""
    cleaned = _TOOL_NAME.sub("_", name or "").strip("_")[:64]
    return cleaned or "agent"


@dataclass(slots=True)
class AgentCall:
    """The checked arguments of a call of the agent's tool."""

    session_id: str | None
    prompt: str | None
    approvals: dict[DecisionKey, Approval] = field(default_factory=dict)
    tool_outputs: dict[DecisionKey, Any] = field(default_factory=dict)


def parse_agent_call(arguments: Mapping[str, Any] | None, server: ToolwireServer) -> AgentCall:
    """The agent tool's arguments; anything malformed is an :class:`MCPError` (invalid params)."""
    args = dict(arguments or {})
    unknown = set(args) - {"prompt", "session_id", "approvals", "tool_outputs"}
    if unknown:
        raise invalid(f"unknown argument(s): {', '.join(sorted(unknown))}")
    session_id = args.get("session_id")
    if session_id is not None and (not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id)):
        raise invalid("'session_id' is 1-200 characters of letters, digits and . _ : ~ -")
    try:
        approvals, outputs = parse_answers(args)
        prompt = check_prompt(args["prompt"], server.limits) if args.get("prompt") is not None else None
    except RequestError as exc:
        raise invalid(str(exc).replace("'text'", "'prompt'")) from None
    if prompt is None and not approvals and not outputs:
        raise invalid("give a 'prompt', or 'approvals' / 'tool_outputs' for the calls a session waits for")
    if (approvals or outputs) and session_id is None:
        raise invalid("answers need the 'session_id' of the waiting calls")
    return AgentCall(session_id=session_id, prompt=prompt, approvals=approvals, tool_outputs=outputs)


class Progress:
    """``notifications/progress`` for one call (nothing when the caller sent no progress token)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx
        self._count = 0

    async def say(self, message: str) -> None:
        self._count += 1  # progress must grow with every notification; the total is unknown
        await self._ctx.session.report_progress(self._count, None, message)

    async def event(self, event: AgentEvent) -> None:
        """Tool activity of the turn (its sub-agents' included) as a progress message."""
        if isinstance(event, ToolCallActive):
            await self.say(f"running {event.tool_name}({args_text(event.args)})")
        elif isinstance(event, ToolProgress):
            await self.say(event.message or f"{event.tool_call_id}: {event.fraction or 0:.0%}")
        elif isinstance(event, ToolCallComplete) and not event.provider_executed:
            await self.say(f"{event.tool_name} {event.status}")
        elif isinstance(event, ToolCallAwaiting) and event.kind != "subagent":
            wanted = {"approval": "approval", "input": "an answer"}.get(event.kind, "its output")
            await self.say(f"{event.tool_name}({args_text(event.args)}) waits for {wanted}")


@dataclass(slots=True)
class Turn:
    status: str = "unknown"
    answer: str = ""
    error: str | None = None


def agent_tool(tool_name: str, agent: Agent[Any, Any]) -> types.Tool:
    """The tool that runs ``agent``: a prompt, or answers, in a session."""
    name = agent.name or "the agent"
    return types.Tool(
        name=tool_name,
        description=(
            f"Ask {name}. {agent.instructions or ''}".strip()
            + " Give session_id (from a previous answer) to continue that conversation."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "What to ask"},
                "session_id": {
                    "type": "string",
                    "description": "Continue this conversation (the session_id of an earlier answer)",
                },
                "approvals": {
                    **_ANSWER_SCHEMA,
                    "description": 'Answers to calls waiting for approval: {"call_id": true | false '
                    '| {"denied": "reason"}}',
                },
                "tool_outputs": {
                    **_ANSWER_SCHEMA,
                    "description": 'Outputs of waiting client-side tools: {"call_id": value}',
                },
            },
            "additionalProperties": False,
        },
        output_schema=_OUTPUT_SCHEMA,
    )


def agent_result(
    tool_name: str, session_id: str, turn: Turn, pending: list[PendingCall]
) -> types.CallToolResult:
    """The answer as text and as structured content; a paused run's waiting calls and how to answer them."""
    awaiting = [
        {
            "tool_call_id": p.tool_call_id,
            "tool_name": p.tool_name,
            "args": p.args,
            "kind": p.kind,
            "session_id": p.session_id,
            **({"question": p.question.to_dict()} if p.question is not None else {}),
        }
        for p in pending
    ]
    text = turn.answer
    if turn.status == "error":
        text = turn.error or "the run failed"
    if pending:
        text = (text + "\n\n" if text else "") + how_to_answer(tool_name, session_id, pending)
    structured = {
        "session_id": session_id,
        "status": turn.status,
        "answer": turn.answer,
        "awaiting": awaiting,
    }
    return types.CallToolResult(
        content=[types.TextContent(text=text or "(no answer)")],
        structured_content=structured,
        is_error=turn.status == "error",
    )


# -- the agent's own tools (--expose-tools) ----------------------------------------------------


def can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the host declared form elicitation and this request's channel can carry a request (stateless
    and 2026-07-28 HTTP cannot)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or not ctx.session.can_send_request:
        return False
    return elicitation.form is not None or elicitation.url is None  # an empty object means form


def how_to_answer(tool_name: str, session_id: str, pending: list[PendingCall]) -> str:
    lines = ["The run is waiting for:"]
    approvals: dict[str, bool] = {}
    outputs: dict[str, Any] = {}
    for p in pending:
        if p.kind == "approval":
            lines.append(f"- {p.tool_call_id}: {p.tool_name}({args_text(p.args)}) needs approval")
            approvals[p.tool_call_id] = True
        elif p.question is not None:
            fields = p.question.requested_schema.get("properties")
            lines.append(f"- {p.tool_call_id}: {p.tool_name}({args_text(p.args)}) asks: {p.question.message}")
            outputs[p.tool_call_id] = {name: "..." for name in fields} if isinstance(fields, dict) else "..."
        else:
            lines.append(f"- {p.tool_call_id}: {p.tool_name}({args_text(p.args)}) needs its output")
            outputs[p.tool_call_id] = "..."
    example: dict[str, Any] = {"session_id": session_id}
    if approvals:
        example["approvals"] = approvals
    if outputs:
        example["tool_outputs"] = outputs
    lines.append(
        f"To answer, call {tool_name} again with {json.dumps(example)} "
        '(false or {"denied": "reason"} denies a call).'
    )
    return "\n".join(lines)


def args_text(args: Mapping[str, Any]) -> str:
    text = json.dumps(args, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:199] + "…"


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def invalid(message: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, message)
