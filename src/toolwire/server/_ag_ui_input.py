"""What toolwire reads of AG-UI's ``RunAgentInput``: the body checked into :class:`RunInput` (a 400 naming
the field otherwise), and a ``resume`` entry read as a question's answer or an approval. Apart from the
endpoint (:mod:`toolwire.server.ag_ui`) because it is pure request parsing: no store, no run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolwire.server._ag_ui_tools import frontend_tools
from toolwire.server._input import check_prompt, check_session_id
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError
from toolwire.tools.function import Tool
from toolwire.tools.pending import Approval, Denied


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
    parsed.tools = frontend_tools(body.get("tools"), {t.name for t in server.agent.tools})
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


def resume_answer(entry: dict[str, Any]) -> Any:
    """A resume entry answering a tool's question: its payload is the form's content (a cancelled
    interrupt cancels); the run checks it against the form."""
    if entry.get("status") == "cancelled":
        return {"action": "cancel"}
    if entry.get("status") != "resolved":
        raise RequestError("a resume entry's 'status' must be 'resolved' or 'cancelled'")
    return entry.get("payload")


def resume_approval(entry: dict[str, Any]) -> Approval:
    """A resume entry answering an approval interrupt (a cancelled interrupt denies)."""
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
