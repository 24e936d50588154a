"""AI SDK ``UIMessage`` lists (what ``useChat`` sends) <-> canonical messages.

The server keeps the conversation in its store, which stays authoritative. The client's messages
matter when the store does not know the session yet (a conversation started elsewhere, a fresh
replica, an imported chat): they are converted here, keeping each tool part's
``callProviderMetadata`` (a Gemini ``thoughtSignature``, say) on the canonical call, so the next
model request carries it.

The body comes from the network: everything is checked, and anything malformed is a
:class:`~toolwire.server.errors.RequestError` naming the offending message and part. A client history gains
no privileges:

* a ``system`` message is refused (400 ``bad_request`` naming it), not demoted: it would otherwise be
  stored and sent as a system prompt next to the operator's instructions, and silently turning it into
  a user message would hide the refusal. ``useChat`` never sends one unless the application adds it;
* provider metadata (``providerMetadata``, ``callProviderMetadata``) keeps only the keys an adapter
  really reads back from history, with JSON values of bounded size
  (:func:`toolwire.models._metadata.client_metadata_filter`); the rest is dropped. The adapters use
  what is kept as data only, never as a field name, URL, header or option of a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire._text import clean_text
from toolwire.errors import ResumeError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    new_id,
)
from toolwire.models._metadata import client_metadata_filter
from toolwire.server.errors import RequestError
from toolwire.server.ui_stream import SUB_CALL_SEPARATOR, sub_call_id
from toolwire.store.records import ToolCallRecord
from toolwire.tools.pending import Approval, DecisionKey, Denied, PendingCall, ToolFailed, pending_of_rows

NO_RESULT = "No result was recorded for this tool call (the client sent the call without its output)."


def ui_messages_to_history(ui_messages: Any, *, session_id: str | None = None) -> list[Message]:
    """Convert a ``messages`` array of the chat request into canonical history (user/assistant/tool)."""
    if not isinstance(ui_messages, list):
        raise RequestError("'messages' must be an array of UI messages")
    history: list[Message] = []
    for index, raw in enumerate(ui_messages):
        if not isinstance(raw, dict):
            raise RequestError(f"messages[{index}] must be an object")
        role = raw.get("role")
        parts = raw.get("parts")
        if role == "system":
            raise RequestError(
                f"messages[{index}] is a system message: only the server's instructions are a system "
                "prompt; send it as a user message"
            )
        if role not in ("user", "assistant"):
            raise RequestError(f"messages[{index}].role must be user or assistant, not {role!r}")
        if not isinstance(parts, list):
            raise RequestError(f"messages[{index}].parts must be an array")
        message_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        if message_id is not None and "\x00" in message_id:  # stored as text: PostgreSQL cannot hold it
            raise RequestError(f"messages[{index}].id must not contain U+0000")
        where = f"messages[{index}]"
        if role == "assistant":
            history.extend(_assistant(parts, message_id, session_id, where))
        else:
            converted = [p for i, part in enumerate(parts) if (p := _user_part(part, f"{where}.parts[{i}]"))]
            if converted:
                history.append(
                    Message(
                        role="user",
                        parts=tuple(converted),
                        session_id=session_id,
                        id=message_id or new_id("msg_"),
                    )
                )
    return history


def last_user_text(ui_messages: list[Any]) -> str:
    """The text of the last message, which must be the user's new turn."""
    if not ui_messages:
        raise RequestError("'messages' is empty: nothing to answer")
    last = ui_messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        raise RequestError("the last message must be the user's new message")
    text = _user_text(last, "the last message")
    if not text.strip():
        raise RequestError("the last user message has no text")
    return text


def _user_text(message: dict[str, Any], where: str) -> str:
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise RequestError(f"{where} has no parts")
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    if not all(isinstance(t, str) for t in texts):
        raise RequestError(f"a text part of {where} has no string 'text'")
    return "".join(t for t in texts if isinstance(t, str))


def shows_turns(earlier: list[Any]) -> bool:
    """Whether the client's earlier messages hold a user turn: without one, and unless the request
    replaces a turn, :func:`turn_to_replace` cuts nothing whatever the store holds."""
    return any(isinstance(m, dict) and m.get("role") == "user" for m in earlier)


def turn_to_replace(earlier: list[Any], stored: Sequence[Message], *, replaces: bool) -> str | None:
    """Where a known conversation is cut before the new turn, following the client's view of it.

    ``earlier`` are the client's messages before its new (last) user message; ``stored`` the session's
    messages. Their user turns are compared in order, by text (the store keeps each turn's text; the
    client's copies of answers are never read: the store stays authoritative). When the client shows
    fewer turns than the store — ``regenerate-message`` re-asks the last one, an edit (``sendMessage``
    with a ``messageId``) or a truncation (``setMessages``) drops the later ones — the id of the first
    stored turn the client no longer shows is returned: the store drops it and everything after it.
    ``None``: nothing to cut (the client shows every stored turn, or shows none and ``replaces`` is false:
    a client that sends only its new message keeps the conversation). A client turn that differs from
    the stored one at the same place (an earlier message edited in place while the later ones are kept)
    matches no flow of ``useChat``: 409 ``history_conflict``, nothing written.
    """
    texts = [
        _user_text(m, f"messages[{i}]")
        for i, m in enumerate(earlier)
        if isinstance(m, dict) and m.get("role") == "user"
    ]
    turns = [m for m in stored if m.role == "user" and not _is_output_retry(m)]
    for number, (text, turn) in enumerate(zip(texts, turns, strict=False), start=1):
        if turn.text not in (text, clean_text(text)):
            raise RequestError(
                f"user message {number} differs from the stored conversation: edit the last message "
                "(everything after it is replaced), or start a new conversation",
                status=409,
                kind="history_conflict",
            )
    if len(texts) >= len(turns) or (not texts and not replaces):
        return None
    return turns[len(texts)].id


def _is_output_retry(message: Message) -> bool:
    """A user message the loop wrote itself (asking the model to fix its structured output): no turn."""
    return any(p.provider_metadata.get("toolwire", {}).get("output_retry") for p in message.parts)


ANSWERED_STATES = ("approval-responded", "output-available", "output-error")


def answers_calls(message: Any) -> bool:
    """Whether a last message is the client's answer to tool calls: an assistant message with a tool part
    in an answered state (anything else is expected to be the user's new message)."""
    parts = message.get("parts") if isinstance(message, dict) and message.get("role") == "assistant" else None
    return isinstance(parts, list) and any(
        isinstance(p, dict)
        and isinstance(p.get("type"), str)
        and (p["type"].startswith("tool-") or p["type"] == "dynamic-tool")
        and p.get("state") in ANSWERED_STATES
        for p in parts
    )


def client_answers(
    message: Any, awaited: Sequence[ToolCallRecord], session_id: str
) -> tuple[dict[DecisionKey, Approval], dict[DecisionKey, Any]]:
    """The answers an assistant message re-submitted by the client carries for the calls the store awaits.

    ``useChat`` re-submits the conversation when the last assistant message's calls are answered
    (``sendAutomaticallyWhen``): a part in state ``approval-responded`` (``approval: {id, approved,
    reason}``, ai@6 ``addToolApprovalResponse``) answers a call awaiting approval; ``output-available`` /
    ``output-error`` (``addToolOutput``) answers a client tool. Only calls the store holds as awaiting that
    kind of answer are read (the store stays authoritative: a part already answered is a replay, a part
    of any other call is ignored); everything else about the part, its arguments and provider metadata
    included, is taken from the store. A sub-agent's waiting call is the ``dynamic-tool`` part
    ``"{sub_session_id}/{tool_call_id}"`` (:func:`~toolwire.server.ui_stream.sub_call_id`); only the
    sub-agent calls the session's own rows list as pending (``awaited`` are ``session_id``'s rows) count.
    """
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise RequestError("the last message has no parts")
    kinds: dict[str, tuple[DecisionKey, PendingCall]] = {}
    for pending in pending_of_rows(awaited, session_id):
        if pending.session_id == session_id:
            kinds[pending.tool_call_id] = (pending.tool_call_id, pending)
        else:
            kinds[sub_call_id(*pending.key)] = (pending.key, pending)
    approvals: dict[DecisionKey, Approval] = {}
    outputs: dict[DecisionKey, Any] = {}
    for i, part in enumerate(message["parts"]):
        if not isinstance(part, dict):
            raise RequestError(f"the last message's parts[{i}] must be an object")
        kind = part.get("type")
        call_id = part.get("toolCallId")
        if not (isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")):
            continue
        if not isinstance(call_id, str) or call_id not in kinds:
            continue
        state = part.get("state")
        key, pending = kinds[call_id]
        awaits = pending.kind
        if state in ANSWERED_STATES and _shows_another_call(part, kind, pending):
            # A stale tab answering a call whose id the model reused after an edit: the client's part
            # shows the call it was answered for (name and input), bound to it like a native message id.
            raise ResumeError(
                f"{call_id} was answered as a call of {kind.removeprefix('tool-')} with other input than "
                f"the call awaiting an answer under that id ({pending.tool_name}): reload the conversation",
                tool_call_ids=[pending.tool_call_id],
            )
        if awaits == "approval" and state == "approval-responded":
            approval = part.get("approval")
            approved = approval.get("approved") if isinstance(approval, dict) else None
            if not isinstance(approved, bool):
                raise RequestError(f"parts[{i}].approval.approved must be true or false")
            reason = approval.get("reason") if isinstance(approval, dict) else None
            approvals[key] = True if approved else Denied(reason if isinstance(reason, str) else "")
        elif awaits in ("output", "input") and state == "output-available":
            outputs[key] = part.get("output")  # a question's answer: the form's fields (checked by the run)
        elif awaits == "input" and state == "output-error":
            outputs[key] = {"action": "cancel"}
        elif awaits == "output" and state == "output-error":
            error = part.get("errorText")
            outputs[key] = ToolFailed(error if isinstance(error, str) else "the client tool failed")
    return approvals, outputs


def _shows_another_call(part: dict[str, Any], kind: str, pending: PendingCall) -> bool:
    name = part.get("toolName") if kind == "dynamic-tool" else kind.removeprefix("tool-")
    return name != pending.tool_name or part.get("input", {}) != pending.args


def _is_sub_agent_call(part: dict[str, Any], session_id: str | None) -> bool:
    call_id = part.get("toolCallId")
    return (
        isinstance(call_id, str)
        and SUB_CALL_SEPARATOR in call_id
        and (session_id is None or call_id.startswith(f"{session_id}."))
    )


def _user_part(part: Any, where: str) -> Part | None:
    if not isinstance(part, dict):
        raise RequestError(f"{where} must be an object")
    kind = part.get("type")
    if kind == "text":
        return TextPart(text=_string(part, "text", where))
    if kind == "file":
        url = _string(part, "url", where)
        media_type = _string(part, "mediaType", where)
        filename = part.get("filename") if isinstance(part.get("filename"), str) else None
        return FilePart(media_type=media_type, url=url, filename=filename)
    return None  # step-start, data-*, sources: UI-only


def _assistant(parts: list[Any], message_id: str | None, session_id: str | None, where: str) -> list[Message]:
    """One UI assistant message is a whole multi-step answer: split it at ``step-start``."""
    steps: list[list[tuple[int, dict[str, Any]]]] = [[]]
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise RequestError(f"{where}.parts[{i}] must be an object")
        if part.get("type") == "step-start":
            if steps[-1]:
                steps.append([])
            continue
        steps[-1].append((i, part))
    out: list[Message] = []
    for number, step in enumerate(s for s in steps if s):
        step_id = f"{message_id}-{number}" if message_id else None
        out.extend(_assistant_step(step, step_id, session_id, where))
    return out


def _assistant_step(
    step: list[tuple[int, dict[str, Any]]], step_id: str | None, session_id: str | None, where: str
) -> list[Message]:
    content: list[Part] = []
    results: list[ToolResultPart] = []
    for i, part in step:
        at = f"{where}.parts[{i}]"
        kind = part.get("type")
        if kind == "text":
            text = _string(part, "text", at)
            if text:
                content.append(TextPart(text=text))
        elif kind == "reasoning":
            text = _string(part, "text", at)
            metadata = _metadata(part.get("providerMetadata"), at)
            if text or metadata:
                content.append(ReasoningPart(text=text, provider_metadata=metadata))
        elif kind == "dynamic-tool" and _is_sub_agent_call(part, session_id):
            continue  # a sub-agent's call surfaced on the chat stream: its session holds it, not this one
        elif isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool"):
            call, result = _tool(part, kind, at)
            if call is None:
                continue
            content.append(call)
            if result is not None:
                if call.provider_executed:
                    content.append(result)  # the provider's own result lives in the assistant message
                else:
                    results.append(result)
    if not content:
        return []
    messages = [
        Message(role="assistant", parts=tuple(content), session_id=session_id, id=step_id or new_id("msg_"))
    ]
    if results:
        messages.append(Message(role="tool", parts=tuple(results), session_id=session_id))
    return messages


def _tool(part: dict[str, Any], kind: str, where: str) -> tuple[ToolCallPart | None, ToolResultPart | None]:
    name = _string(part, "toolName", where) if kind == "dynamic-tool" else kind[len("tool-") :]
    if not name:
        raise RequestError(f"{where}: a tool part needs a tool name")
    call_id = _string(part, "toolCallId", where)
    state = part.get("state")
    if state == "input-streaming":
        return None, None  # arguments still arriving when the client sent it: nothing a model can use
    raw_input = part.get("input", {})
    args = raw_input if isinstance(raw_input, dict) else {"input": raw_input}
    provider_executed = part.get("providerExecuted") is True
    title = part.get("title") if isinstance(part.get("title"), str) else None
    call = ToolCallPart(
        tool_call_id=call_id,
        tool_name=name,
        args=args,
        provider_metadata=_metadata(part.get("callProviderMetadata"), where),
        provider_executed=provider_executed,
        title=title,
    )
    if state == "output-available":
        output = part.get("output")
        return call, ToolResultPart(
            tool_call_id=call_id, tool_name=name, output=output, provider_executed=provider_executed
        )
    if state in ("output-error", "output-denied"):
        error = part.get("errorText") if isinstance(part.get("errorText"), str) else "the tool call failed"
        if state == "output-denied":
            error = "the user denied this tool call"
        return call, ToolResultPart(
            tool_call_id=call_id,
            tool_name=name,
            output=error,
            is_error=True,
            provider_executed=provider_executed,
        )
    # input-available / approval states: the call never got a result; give it one so history stays valid.
    return call, ToolResultPart(
        tool_call_id=call_id,
        tool_name=name,
        output=NO_RESULT,
        is_error=True,
        provider_executed=provider_executed,
    )


def _string(part: dict[str, Any], key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise RequestError(f"{where}.{key} must be a string")
    return value


def _metadata(value: Any, where: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(f"{where}: provider metadata must be an object keyed by provider")
    return client_metadata_filter(value)
