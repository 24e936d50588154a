"""What a ReAct model reads: the system prompt (tool catalog, reply format) and the history as text.

Tool calls in the history become the decision JSON the model would have written and tool results become
user observations, so a model without function calling sees its own protocol throughout.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, assert_never

from toolwire.agent.drivers._react_parse import FINAL_ANSWER
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from toolwire.models.base import ToolDefinition

DEFAULT_FORMAT = """\
Reply with one JSON object: {"action": "<tool name>", "args": {...}} to call a tool, or \
{"action": "final_answer", "answer": "..."} to answer the user from the observations."""

DEFAULT_EXAMPLES: tuple[tuple[Message, ...], ...] = (
    (
        Message.user("What is the weather in Oslo?"),
        Message(
            role="assistant",
            parts=(ToolCallPart(tool_call_id="ex1", tool_name="get_weather", args={"city": "Oslo"}),),
        ),
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id="ex1", tool_name="get_weather", output={"temp_c": 4}),),
        ),
        Message(role="assistant", parts=(TextPart(text="It is 4 °C in Oslo."),)),
    ),
)
"""A fixed example (a fictitious tool: the pattern is what matters) for hand-made example sets such as the
demo's; without ``examples`` the driver generates them from the agent's own tools (``_react_examples``)."""


def system_prompt(
    instructions: str | None,
    tools: Sequence[ToolDefinition],
    *,
    allow_final: bool,
    reply_format: str,
    answer_schema: dict[str, Any] | None = None,
) -> str:
    """The text-only system prompt: agent instructions, tool catalog, reply format, and the JSON schema of
    the final answer when it is structured (the agent's ``output_type``)."""
    sections = [instructions.strip()] if instructions else []
    if tools:
        sections.append("Tools:\n" + "\n".join(_catalog_line(t) for t in tools))
    sections.append(reply_format)
    if not allow_final:
        sections.append("Call a tool now; do not answer yet.")
    elif not tools:
        sections.append('No tools are available now: reply with {"action": "final_answer", "answer": "..."}.')
    if answer_schema is not None and allow_final:
        sections.append(
            'The final answer is not text: give {"action": "final_answer", "answer": <JSON value>} '
            f"where the value matches this JSON schema: {json.dumps(answer_schema, separators=(',', ':'))}"
        )
    return "\n\n".join(sections)


def render_history(messages: Sequence[Message]) -> list[Message]:
    """Canonical history as text-only messages: tool calls become the decision JSON the model would have
    written, tool results become user observations, final answers become ``final_answer`` decisions."""
    out: list[Message] = []
    for message in messages:
        match message.role:
            case "tool":
                lines = [_observation(p) for p in message.parts if isinstance(p, ToolResultPart)]
                out.append(Message.user("\n".join(lines)))
            case "assistant":
                out.append(Message(role="assistant", parts=(TextPart(text=_assistant_text(message.parts)),)))
            case "user" | "system":
                text = "\n".join(t for t in (_plain(p) for p in message.parts) if t)
                out.append(Message(role=message.role, parts=(TextPart(text=text),)))
            case _:
                assert_never(message.role)
    return out


def _assistant_text(parts: Sequence[Part]) -> str:
    calls = [p for p in parts if isinstance(p, ToolCallPart) and not p.provider_executed]
    if calls:  # one decision per line; prose beside native calls (another model's history) is dropped
        return "\n".join(_compact({"action": c.tool_name, "args": c.args}) for c in calls)
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    return _compact({"action": FINAL_ANSWER, "answer": text})


def _observation(part: ToolResultPart) -> str:
    label = "Error from" if part.is_error else "Observation from"
    return f"{label} {part.tool_name}: {part.output_text()}"


def _plain(part: Part) -> str:
    match part:
        case TextPart():
            return str(part.text)
        case ReasoningPart():
            return ""
        case ToolCallPart():
            return _compact({"action": part.tool_name, "args": part.args})
        case ToolResultPart():
            return _observation(part)
        case FilePart():
            return f"[file {part.filename or part.url or part.media_type}]"
        case _:
            assert_never(part)


def _catalog_line(tool: ToolDefinition) -> str:
    properties: dict[str, Any] = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required", ()))
    args = ", ".join(_arg_signature(name, spec, name in required) for name, spec in properties.items())
    description = " ".join(tool.description.split())
    return f"- {tool.name}({args}): {description}" if description else f"- {tool.name}({args})"


def _arg_signature(name: str, spec: Any, required: bool) -> str:
    if not isinstance(spec, dict):
        return name
    kind = _type_text(spec)
    if "enum" in spec:
        kind = " | ".join(json.dumps(v) for v in spec["enum"])
    elif "pattern" in spec:
        kind = f"{kind} like {spec['pattern'].strip('^$')}"
    return f"{name}: {kind}" + ("" if required else "?")


def _type_text(spec: dict[str, Any]) -> str:
    """``string``, ``string | null`` for ``str | None`` (``anyOf`` of a type and null), else ``any``."""
    declared = spec.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        return " | ".join(str(k) for k in declared)
    options = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(options, list) and options and all(isinstance(o, dict) and "type" in o for o in options):
        return " | ".join(_type_text(o) for o in options)
    return "any"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
