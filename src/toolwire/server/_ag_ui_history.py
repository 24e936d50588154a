"""The stored conversation as AG-UI messages (``MESSAGES_SNAPSHOT``), and the message id of a tool call's
result, which the live stream (:mod:`toolwire.server._ag_ui_encoder`) shares with the snapshot. Apart
because it reads stored messages, not events."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart


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
