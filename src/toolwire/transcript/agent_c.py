"""Agent C event stream -> toolwire agent events, so one :class:`~toolwire.transcript.Transcript` drives both.

Agent C (centricconsulting/agent_c_framework) sends session events over a WebSocket: ``interaction``
(``started``, ``id``), ``text_delta`` / ``thought_delta`` (``content``), ``completion`` (``running``,
``stop_reason``, token counts), ``tool_select_delta`` and ``tool_call`` (``active``, vendor-shaped
``tool_calls`` / ``tool_results``), ``system_message`` (``content``, ``severity``), ``render_media``
(``content_type``, ``content``, ``url``), user-message events, ``user_turn_start``, ``subsession_*``,
each with ``session_id`` / ``parent_session_id`` / ``user_session_id``. The full mapping table is in
docs/transcript.md. The mapping is stateless: Agent C has no message ids and no sequence numbers, so
text is mapped with an empty ``message_id`` and the transcript groups it per session until the step
finishes (``completion`` with ``running: false``).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from toolwire.events import (
    AgentEvent,
    ErrorEvent,
    InteractionEnd,
    InteractionStart,
    MediaEvent,
    ReasoningDeltaEvent,
    StepFinish,
    StepStart,
    SystemMessageEvent,
    TextDeltaEvent,
    ToolCallActive,
    ToolCallComplete,
    ToolInputStartEvent,
    UserTurnStart,
)
from toolwire.messages import Message, TextPart, Usage

__all__ = ["from_agent_c"]

_LEVELS: dict[str, Literal["info", "warning", "error"]] = {
    "info": "info",
    "warning": "warning",
    "error": "error",
}

_Env = dict[str, Any]
_Handler = Callable[[Mapping[str, Any], _Env], list[AgentEvent]]


def from_agent_c(event: Mapping[str, Any], *, timestamp: float | None = None) -> list[AgentEvent]:
    """The toolwire events one Agent C event maps to (often one, sometimes several, ``[]`` when none).

    ``timestamp`` stamps the events; by default the event's own numeric ``timestamp`` field, else now.
    """
    handler = _HANDLERS.get(str(event.get("type") or ""))
    # subsession_ended (the sub-session's own interaction end closes it), system_prompt,
    # complete_thought, audio and connection events carry nothing the transcript shows; history and
    # history_delta repeat what the stream showed: a resumed client rebuilds from a history event with
    # Transcript.from_agent_c instead.
    return handler(event, _envelope(event, timestamp)) if handler is not None else []


def _interaction(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    env["interaction_id"] = str(event.get("id") or "")
    if event.get("started"):
        return [InteractionStart(**env)]
    return [InteractionEnd(status="completed", **env)]


def _turn_back(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    # The turn is back with the user: no message, but leftover notifications go away.
    return [UserTurnStart(message=Message(role="user", parts=(), id="", session_id=env["session_id"]), **env)]


def _user_message(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    text = _user_text(event)
    message = Message(role="user", parts=(TextPart(text=text),), id="", session_id=env["session_id"])
    return [UserTurnStart(message=message, **env)]


def _text_delta(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    return [TextDeltaEvent(id="", delta=str(event.get("content") or ""), **env)]


def _thought_delta(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    return [ReasoningDeltaEvent(id="", delta=str(event.get("content") or ""), **env)]


def _whole_message(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    return [*_text_delta(event, env), StepFinish(step=0, finish_reason="stop", **env)]


def _completion(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    if event.get("running"):
        return [StepStart(step=0, **env)]
    usage = Usage(
        input_tokens=_int(event.get("input_tokens")), output_tokens=_int(event.get("output_tokens"))
    )
    return [StepFinish(step=0, finish_reason=str(event.get("stop_reason") or "stop"), usage=usage, **env)]


def _tool_select(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    return [
        ToolInputStartEvent(tool_call_id=call_id, tool_name=name, **env)
        for call_id, name, _ in _calls(event.get("tool_calls"))
    ]


def _system_message(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    level = _LEVELS.get(str(event.get("severity") or "error"), "info")  # Agent C's default severity is error
    return [SystemMessageEvent(level=level, text=str(event.get("content") or ""), **env)]


def _subsession_started(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    # Registers the session (and its parent) early; the sub-session's own interaction events follow.
    return [InteractionStart(agent_name=_str_or_none(event.get("sub_agent_key")), **env)]


def _error(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    error_type = str(event.get("source") or "error")
    return [ErrorEvent(error_type=error_type, message=str(event.get("message") or ""), **env)]


def _envelope(event: Mapping[str, Any], timestamp: float | None) -> _Env:
    session_id = str(event.get("session_id") or "")
    parent = event.get("parent_session_id") or None
    if timestamp is None:
        raw = event.get("timestamp")
        timestamp = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else time.time()
    return {
        "session_id": session_id,
        "parent_session_id": str(parent) if parent is not None and parent != session_id else None,
        "user_session_id": str(event.get("user_session_id") or ""),
        "timestamp": timestamp,
    }


def _tool_call(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    calls = _calls(event.get("tool_calls"))
    if event.get("active"):
        return [
            ToolCallActive(
                tool_call_id=call_id, tool_name=name, args=args, started_at=env["timestamp"], **env
            )
            for call_id, name, args in calls
        ]
    results = _results(event.get("tool_results"))
    out: list[AgentEvent] = []
    for call_id, name, args in calls:
        output, is_error = results.get(call_id, (None, False))
        out.append(
            ToolCallComplete(
                tool_call_id=call_id,
                tool_name=name,
                args=args,
                output=output,
                is_error=is_error,
                status="error" if is_error else "ok",
                **env,
            )
        )
    return out


def _calls(raw: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, name, args) of Anthropic (``id``/``input``), OpenAI Chat (``function``) or Responses calls."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for call in raw if isinstance(raw, Sequence) and not isinstance(raw, str) else ():
        if isinstance(call, Mapping) and (fields := call_fields(call))[0]:
            out.append(fields)
    return out


def call_fields(call: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(id, name, args) of one vendor-shaped call; the id is empty when the call names none."""
    function = call.get("function")
    source = function if isinstance(function, Mapping) else call
    # Responses items carry both an item ``id`` and the ``call_id`` their output refers to.
    call_id = str(call.get("call_id") or call.get("id") or "")
    return call_id, str(source.get("name") or ""), _args(source.get("input", source.get("arguments")))


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        return _json_object(raw)
    return {}


def _json_object(text: str) -> dict[str, Any]:
    """OpenAI ``arguments`` JSON text as an object; blank, invalid or non-object JSON gives ``{}``."""
    text = text.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _results(raw: Any) -> dict[str, tuple[Any, bool]]:
    """Results by call id: Anthropic ``tool_result`` blocks, OpenAI ``tool`` messages, Responses outputs."""
    out: dict[str, tuple[Any, bool]] = {}
    for result in raw if isinstance(raw, Sequence) and not isinstance(raw, str) else ():
        if not isinstance(result, Mapping):
            continue
        call_id = result.get("tool_use_id") or result.get("tool_call_id") or result.get("call_id")
        if not call_id:
            continue
        content = result["content"] if "content" in result else result.get("output")
        out[str(call_id)] = (result_content(content), bool(result.get("is_error", False)))
    return out


def result_content(content: Any) -> Any:
    """Anthropic content may be a list of blocks; text-only lists become one string, as a string result."""
    if isinstance(content, list) and all(isinstance(b, Mapping) and b.get("type") == "text" for b in content):
        return "".join(str(b.get("text") or "") for b in content)
    return content


def _media(event: Mapping[str, Any], env: _Env) -> list[AgentEvent]:
    content_type = str(event.get("content_type") or event.get("content-type") or "application/octet-stream")
    content = event.get("content")
    data: str | None = None
    if isinstance(content, str) and content:
        binary = content_type.startswith(("image/", "audio/", "video/")) and content_type != "image/svg+xml"
        # Agent C sends markup (HTML, SVG, markdown) as text and binary media as base64 already;
        # MediaEvent.data is always base64.
        data = content if binary else base64.b64encode(content.encode()).decode()
    return [MediaEvent(content_type=content_type, url=_str_or_none(event.get("url")), data=data, **env)]


def _user_text(event: Mapping[str, Any]) -> str:
    message = event.get("message")
    if message is None and isinstance(event.get("data"), Mapping):
        message = event["data"].get("message")  # user_request: {"data": {"message": ...}}
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        content = result_content(message.get("content"))
        return content if isinstance(content, str) else ""
    return ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str_or_none(value: Any) -> str | None:
    return str(value) if value else None


_HANDLERS: dict[str, _Handler] = {
    "interaction": _interaction,
    "user_turn_start": _turn_back,
    "cancelled": _turn_back,
    "user_message": _user_message,
    "openai_user_message": _user_message,
    "anthropic_user_message": _user_message,
    "user_request": _user_message,
    "text_delta": _text_delta,
    "thought_delta": _thought_delta,
    "message": _whole_message,
    "completion": _completion,
    "tool_select_delta": _tool_select,
    "tool_call": _tool_call,
    "system_message": _system_message,
    "render_media": _media,
    "subsession_started": _subsession_started,
    "error": _error,
}
