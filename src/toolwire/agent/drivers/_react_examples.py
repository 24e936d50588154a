"""Few-shot examples for the ReAct driver, generated from the agent's own tools.

A small model copies the shape of what it has just seen more than it follows instructions, so the
examples use the agent's real tool names and parameters: one short conversation per tool (a request
naming example values, the call copying them, an observation, an answer taken from it), and at the end a
follow-up question answered from that observation without a new call. Example values come from the
schema (``examples``, ``default``, ``enum``), from a hint in the parameter's description ("like TXN_123",
"e.g. Oslo") with its digits changed (so the model learns to copy from the question, not from the
example), or from the type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart
from toolwire.models.base import ToolDefinition

MAX_EXAMPLE_TOOLS = 4
"""Examples for at most this many tools (the first ones): each costs ~60 prompt tokens per step."""

_HINT = re.compile(r"\b(?:like|e\.g\.,?|eg\.?|for example|such as)\s+[\"'`]?([^\s\"'`,;)]+)", re.IGNORECASE)
_SIMPLE_PATTERN = re.compile(r"^\^?([A-Za-z_\-]*)\[0-9\](?:\+|\*|\{\d+(?:,\d*)?\})\$?$")
_BY_NAME = {
    "city": "Lyon",
    "location": "Lyon",
    "country": "Peru",
    "name": "Alex Morgan",
    "query": "opening hours",
    "email": "alex@example.com",
    "date": "2024-05-01",
    "timezone": "Europe/Paris",
    "language": "French",
    "url": "https://example.com",
}
_BY_WORD = {
    "title": "Moby Dick",
    "dish": "risotto",
    "text": "see you soon",
    "phrase": "see you soon",
    "assignee": "Alex Morgan",
    "user": "alex.morgan",
    "room": "Atlas",
    "category": "garden",
    "product": "desk lamp",
    "address": "12 Harbour Street",
    "color": "teal",
    "topic": "parking",
}
"""Example values by a word of the parameter's name (after :data:`_BY_NAME`); ids and numbers get the
fallback, a code with digits."""
_GETTERS = ("get", "lookup", "look", "fetch", "find", "search", "check", "read", "query", "show")
_RESULTS = (
    (("state", "ready"), ("code", 17)),
    (("state", "open"), ("code", 29)),
    (("state", "late"), ("code", 8)),
)


def generated_examples(tools: Sequence[ToolDefinition]) -> tuple[tuple[Message, ...], ...]:
    """One conversation per tool (at most :data:`MAX_EXAMPLE_TOOLS`): a request, the call copying its
    values, an observation, and an answer that restates the observation's fields. The first one goes on
    with a follow-up answered from its observation without a new call; it is not the last, because the
    model copies the closest example most."""
    chosen = list(tools)[:MAX_EXAMPLE_TOOLS]
    if len(chosen) == 1:  # a second request with other values: the follow-up must not come last
        chosen.append(chosen[0])
    return tuple(_conversation(tool, index, follow_up=index == 0) for index, tool in enumerate(chosen))


def _conversation(tool: ToolDefinition, index: int, *, follow_up: bool) -> tuple[Message, ...]:
    args = example_args(tool.parameters, seed=index)
    call = ToolCallPart(tool_call_id=f"example_{index}", tool_name=tool.name, args=args)
    fields = dict(_RESULTS[index % len(_RESULTS)])
    output: dict[str, Any] = {**args, **fields}
    turns: list[Message] = [
        Message.user(example_request(tool.name, args)),
        Message(role="assistant", parts=(call,)),
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id=call.tool_call_id, tool_name=tool.name, output=output),),
        ),
        Message(role="assistant", parts=(TextPart(text=_restate(output)),)),
    ]
    if follow_up:
        turns += [
            Message.user("And the code?"),
            Message(role="assistant", parts=(TextPart(text=f"The code is {fields['code']}."),)),
        ]
    return tuple(turns)


def example_request(tool_name: str, args: dict[str, Any]) -> str:
    """A user request for one call: "What is the weather of Lyon?" for ``get_weather``, "Add 3 and 7."
    for ``add``."""
    words = _words(tool_name).split()
    values = " and ".join(_scalar_text(v) for v in args.values())
    if words and words[0] in _GETTERS:
        rest = [w for w in words[1:] if w not in ("up", "by")] or ["result"]
        return f"What is the {' '.join(rest)} of {values}?" if values else f"What is the {' '.join(rest)}?"
    return f"{' '.join(words).capitalize()} {values}.".replace(" .", ".")


def _restate(output: dict[str, Any]) -> str:
    return "The " + " and the ".join(f"{_words(k)} is {_scalar_text(v)}" for k, v in output.items()) + "."


def example_args(parameters: dict[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Example arguments: every required parameter (all of them when none is marked required)."""
    properties: dict[str, Any] = parameters.get("properties") or {}
    required = [k for k in parameters.get("required", ()) if k in properties] or list(properties)
    return {name: example_value(name, properties[name], seed=seed + i) for i, name in enumerate(required)}


def example_value(name: str, spec: Any, *, seed: int = 0) -> Any:
    """A plausible value for one parameter (see the module docstring for the order of sources)."""
    if not isinstance(spec, dict):
        return "x"
    for key in ("examples", "enum"):
        values = spec.get(key)
        if isinstance(values, list) and values:
            return values[seed % len(values)] if key == "enum" else values[0]
    if "const" in spec:
        return spec["const"]
    if "default" in spec and spec["default"] is not None:
        return spec["default"]
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    match kind:
        case "integer":
            return 3 + 4 * seed
        case "number":
            return 2.5 + 4 * seed
        case "boolean":
            return True
        case "array":
            return [example_value(name, spec.get("items", {}), seed=seed)]
        case "object":
            return example_args(spec, seed=seed)
        case _:
            return _example_string(name, spec, seed)


def _example_string(name: str, spec: dict[str, Any], seed: int) -> str:
    hint = _HINT.search(str(spec.get("description", "")))
    if hint:
        return _shift_digits(hint.group(1).rstrip("."), seed)
    pattern = _SIMPLE_PATTERN.match(str(spec.get("pattern", "")))
    if pattern:
        return f"{pattern.group(1)}{456 + seed}"
    lowered = name.lower()
    for key, value in _BY_NAME.items():
        if key in lowered:
            return value
    for word in reversed(_words(name).split()):
        if word in _BY_WORD:
            return _shift_digits(_BY_WORD[word], seed)
    # Realistic, and never in a real question: "tracking number 1" was copied into real calls.
    return _shift_digits("QX-5512", seed)


def _shift_digits(text: str, seed: int) -> str:
    # Changed digits, same shape: "TXN_123" -> "TXN_456"; a value without digits stays as it is.
    return re.sub(r"\d", lambda m: str((int(m.group()) + 3 + seed) % 10), text)


def _words(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return " ".join(spaced.replace("_", " ").replace("-", " ").split()).lower()


def _scalar_text(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else repr(value)
        if not isinstance(value, bool)
        else str(value).lower()
    )
