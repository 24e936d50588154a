"""An Agent C ``history`` event (the whole chat in the model vendor's own message format) as stored messages.

Agent C sends ``history`` (``vendor``, ``messages``: every message of the session as it is sent to the
model) when a client joins or resumes a session. Its tool calls exist nowhere else after a reconnect: the
live ``tool_call`` events are gone. :meth:`toolwire.transcript.Transcript.from_agent_c` turns these
messages into toolwire :class:`~toolwire.messages.Message` objects and rebuilds the transcript from them
as it does from a toolwire store.

Shapes understood, per message (a history may mix them; ``vendor`` is not needed):

- Anthropic Messages: ``content`` a string or blocks: ``text``, ``thinking``, ``tool_use`` (``id``,
  ``name``, ``input``); a user message's ``tool_result`` blocks (``tool_use_id``, ``content``,
  ``is_error``) are the results of the previous assistant message's calls.
- OpenAI Chat: ``content`` a string or ``text`` parts, ``tool_calls`` (``function``: ``name``,
  ``arguments`` JSON text); ``role: "tool"`` messages (``tool_call_id``, ``content``).
- OpenAI Responses items: ``function_call`` (``call_id``, ``name``, ``arguments``) and
  ``function_call_output`` (``call_id``, ``output``).

System and developer messages are left out (the live stream never shows the system prompt). Messages get
ids ``"{session_id}:history:{index}"``: distinct from the names the transcript gives live Agent C text
(``{session}.m{k}``), so the events that follow a resume never land on a restored bubble.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.messages import Message, Part, ReasoningPart, Role, TextPart, ToolCallPart, ToolResultPart
from toolwire.transcript.agent_c import call_fields, result_content

_HIDDEN_ROLES = frozenset({"system", "developer"})


def history_messages(event: Mapping[str, Any]) -> list[Message]:
    """The messages of an Agent C ``history`` (or ``history_delta``) event, tool results in ``tool``
    messages right after their calls' assistant message, as the store keeps them."""
    session_id = str(event.get("session_id") or "")
    raw = event.get("messages")
    builder = _HistoryBuilder(session_id)
    for item in raw if isinstance(raw, Sequence) and not isinstance(raw, str) else ():
        if isinstance(item, Mapping):
            builder.add(item)
    return builder.messages


class _HistoryBuilder:
    """Appends vendor messages as toolwire messages; consecutive results merge into one tool message."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.messages: list[Message] = []
        self._names: dict[str, str] = {}
        """Tool name by call id: a vendor result names only its call."""

    def add(self, item: Mapping[str, Any]) -> None:
        kind = item.get("type")
        if kind == "function_call":  # a Responses item: one call, its own assistant turn unless one is open
            self._assistant([self._call(item)], join=True)
            return
        if kind == "function_call_output":
            self._results([self._result(item.get("call_id"), item.get("output"), False)])
            return
        role = item.get("role")
        if role in _HIDDEN_ROLES or not isinstance(role, str):
            return
        if role == "tool":
            self._results([self._result(item.get("tool_call_id"), item.get("content"), False)])
        elif role == "assistant":
            self._assistant(self._assistant_parts(item), join=False)
        elif role == "user":
            self._user(item.get("content"))

    def _assistant_parts(self, item: Mapping[str, Any]) -> list[Part]:
        parts: list[Part] = []
        content = item.get("content")
        if isinstance(content, str):
            if content:
                parts.append(TextPart(text=content))
        elif isinstance(content, Sequence):
            for block in content:
                if not isinstance(block, Mapping):
                    continue
                match block.get("type"):
                    case "text" | "output_text" if isinstance(block.get("text"), str) and block["text"]:
                        parts.append(TextPart(text=block["text"]))
                    case "thinking" if isinstance(block.get("thinking"), str):
                        parts.append(ReasoningPart(text=block["thinking"]))
                    case "tool_use":
                        parts.append(self._call(block))
                    case _:
                        pass  # redacted thinking, server tools' blocks, images: nothing the transcript shows
        calls = item.get("tool_calls")
        for call in calls if isinstance(calls, Sequence) and not isinstance(calls, str) else ():
            if isinstance(call, Mapping):
                parts.append(self._call(call))
        return [p for p in parts if not isinstance(p, ToolCallPart) or p.tool_call_id]

    def _call(self, raw: Mapping[str, Any]) -> ToolCallPart:
        call_id, name, args = call_fields(raw)
        self._names[call_id] = name
        return ToolCallPart(tool_call_id=call_id, tool_name=name, args=args)

    def _result(self, call_id: Any, content: Any, is_error: bool) -> ToolResultPart:
        key = str(call_id or "")
        return ToolResultPart(
            tool_call_id=key,
            tool_name=self._names.get(key, ""),
            output=result_content(content),
            is_error=is_error,
        )

    def _user(self, content: Any) -> None:
        if isinstance(content, str):
            self._append("user", [TextPart(text=content)])
            return
        results: list[ToolResultPart] = []
        texts: list[Part] = []
        for block in content if isinstance(content, Sequence) else ():
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "tool_result":  # Anthropic: results ride in the next user message
                results.append(
                    self._result(block.get("tool_use_id"), block.get("content"), bool(block.get("is_error")))
                )
            elif block.get("type") in ("text", "input_text") and isinstance(block.get("text"), str):
                texts.append(TextPart(text=block["text"]))
        if results:
            self._results(results)
        if texts:
            self._append("user", texts)

    def _assistant(self, parts: list[Part], *, join: bool) -> None:
        last = self.messages[-1] if self.messages else None
        if join and last is not None and last.role == "assistant":
            self.messages[-1] = Message(
                role="assistant", parts=(*last.parts, *parts), id=last.id, session_id=self.session_id
            )
        elif parts:
            self._append("assistant", parts)

    def _results(self, results: list[ToolResultPart]) -> None:
        results = [r for r in results if r.tool_call_id]
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "tool":  # one tool message per step, as the store keeps it
            self.messages[-1] = Message(
                role="tool", parts=(*last.parts, *results), id=last.id, session_id=self.session_id
            )
        elif results:
            self._append("tool", list(results))

    def _append(self, role: Role, parts: Sequence[Part]) -> None:
        index = len(self.messages)
        self.messages.append(
            Message(
                role=role,
                parts=tuple(parts),
                id=f"{self.session_id}:history:{index}",
                session_id=self.session_id,
            )
        )
