"""ReAct decisions: their JSON schema, parsing and checking model output, and turning a decision into
canonical stream parts (a final answer's string is streamed while the model is still writing it).

A decision is one JSON object: ``{"action": NAME, "args": {...}}`` or ``{"action": "final_answer",
"answer": ...}``. Models that follow the format by instruction only get some leeway: JSON is extracted
from prose and code fences, and common spellings of the keys are accepted.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, assert_never

from toolwire.errors import ConfigError, DecisionExtractionFailed, DecisionValidationFailed
from toolwire.messages import Message, ToolCallPart
from toolwire.models.base import (
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)

FINAL_ANSWER = "final_answer"
"""The ``action`` value that ends the step with an answer instead of a tool call."""

MAX_ARG_CHARS = 100
"""Length bound of a string argument whose schema sets none (in the decision grammar only)."""
MAX_ARG_ITEMS = 16
"""Length bound of an array argument whose schema sets none (in the decision grammar only)."""
MAX_ANSWER_CHARS = 1200
"""Length bound of a text final answer."""
MAX_THOUGHT_CHARS = 300
"""Length bound of a decision's optional ``thought`` (``ReActDriver(thought=True)``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDecision:
    """Call ``tool_name`` with ``args``."""

    tool_name: str
    args: dict[str, Any]
    thought: str = ""
    """What the model wrote in the decision's optional ``thought`` field."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAnswer:
    """Answer the user (a structured answer arrives here as its JSON text)."""

    text: str
    thought: str = ""


Decision = ToolDecision | FinalAnswer


class RepeatedCall(DecisionValidationFailed):
    """The decision repeats a call already answered in this turn (the driver then allows only an answer)."""


def decision_schema(
    tools: Sequence[ToolDefinition],
    *,
    allow_final: bool,
    answer_schema: dict[str, Any] | None = None,
    max_answer_chars: int = MAX_ANSWER_CHARS,
    thought_chars: int | None = None,
) -> dict[str, Any]:
    """JSON schema of one decision: an object per tool with a ``const`` action, or a final answer.

    One ``action`` key for every choice (rather than ``{"tool": ...}`` beside ``{"final_answer": ...}``)
    matters for small models: the choice is made on the tool name itself, right after the question that
    mentions it. With separate keys SmolLM2-135M chose ``final_answer`` for 8 of 8 lookup questions.

    Every string, array and object of the arguments is bounded (:func:`bounded`) and the answer string is
    at most ``max_answer_chars`` long, so a grammar built from this schema always reaches the closing brace:
    a model stuck repeating one character (SmolLM2-135M wrote ``";;;;"`` into a transaction id until its
    token budget ran out) is forced to close the string and the object.
    """
    if any(t.name == FINAL_ANSWER for t in tools):
        raise ConfigError(f"a tool named {FINAL_ANSWER!r} clashes with the ReAct answer action")
    defs: dict[str, Any] = {}
    options: list[dict[str, Any]] = []
    for tool in tools:
        args = _hoist_defs(bounded(tool.parameters), prefix=f"{tool.name}__", into=defs)
        options.append(
            {
                "type": "object",
                "properties": {"action": {"const": tool.name}, "args": args},
                "required": ["action", "args"],
                "additionalProperties": False,
            }
        )
    if allow_final:
        answer = (
            _hoist_defs(bounded(answer_schema, max_chars=max_answer_chars), prefix="answer__", into=defs)
            if answer_schema
            else {"type": "string", "maxLength": max_answer_chars}
        )
        options.append(
            {
                "type": "object",
                "properties": {"action": {"const": FINAL_ANSWER}, "answer": answer},
                "required": ["action", "answer"],
                "additionalProperties": False,
            }
        )
    if thought_chars is not None:  # optional, first: the model may think before it chooses
        thought = {"type": "string", "maxLength": thought_chars}
        options = [{**o, "properties": {"thought": thought, **o["properties"]}} for o in options]
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


def bounded(schema: Any, *, max_chars: int = MAX_ARG_CHARS) -> Any:
    """``schema`` with a length bound on every string and array that has none (``max_chars``,
    ``MAX_ARG_ITEMS``) and ``additionalProperties: false`` on every object that allows any extra key, so
    that a grammar built from it has a finite longest sentence. Only the grammar sees the bounds: the
    executor still validates arguments against the tool's own schema."""
    if isinstance(schema, list):
        return [bounded(v, max_chars=max_chars) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: bounded(v, max_chars=max_chars) if k not in ("const", "enum", "default", "examples") else v
        for k, v in schema.items()
    }
    declared = out.get("type")
    kinds = (
        set(declared) if isinstance(declared, list) else {declared} if isinstance(declared, str) else set()
    )
    if "string" in kinds and "maxLength" not in out and "pattern" not in out and "enum" not in out:
        out["maxLength"] = max_chars
    if "array" in kinds and "maxItems" not in out:
        out["maxItems"] = MAX_ARG_ITEMS
    if "object" in kinds and out.get("additionalProperties", True) is True and "properties" in out:
        out["additionalProperties"] = False
    return out


def _hoist_defs(schema: dict[str, Any], *, prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    """A tool schema's ``$defs`` move to the decision root under prefixed names (their ``$ref`` s with
    them), because inside ``anyOf`` a ``#/$defs/X`` reference resolves against the decision document."""
    local = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    body = {k: v for k, v in schema.items() if k not in ("$defs", "definitions", "title")}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items()}
            ref = out.get("$ref")
            if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
                out["$ref"] = f"#/$defs/{prefix}{ref.rsplit('/', 1)[1]}"
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for name, definition in local.items():
        into[f"{prefix}{name}"] = rewrite(definition)
    result: dict[str, Any] = rewrite(body)
    return result


def parse_decision(
    text: str,
    tools: Sequence[ToolDefinition],
    *,
    allow_final: bool,
    done: Collection[tuple[str, str]] = (),
    structured: bool = False,
) -> Decision:
    """Extract and validate one decision from model output, or raise the typed driver error.

    ``structured``: the final answer is a JSON value (the agent's ``output_type``), not text.

    ``done`` holds ``(tool name, canonical args JSON)`` of calls already answered in this turn; repeating
    one is refused (see :func:`calls_this_turn`).
    """
    value = extract_json(text)
    if value is None:
        raise DecisionExtractionFailed("no JSON object found", raw_output=text, attempts=1)
    problem, decision = _validate(value, {t.name: t for t in tools}, allow_final, structured)
    if decision is None:
        raise DecisionValidationFailed(problem, raw_output=text, attempts=1)
    if isinstance(decision, ToolDecision) and _call_key(decision.tool_name, decision.args) in done:
        raise RepeatedCall(
            f"{decision.tool_name} was already called with these arguments; use its observation above",
            raw_output=text,
            attempts=1,
        )
    thought = value.get("thought")
    if isinstance(thought, str) and thought.strip():
        decision = replace(decision, thought=thought.strip())
    return decision


def calls_this_turn(history: Sequence[Message], *, whole: bool = False) -> list[tuple[str, str]]:
    """Calls made since the last user message (``whole``: in the whole history) that already have a
    result, oldest first, as ``(tool name, canonical args JSON)``.

    A small model that has just read an observation tends to ask for the same call again, forever (until
    the loop's ``max_steps``); refusing the exact repeat makes it answer.
    """
    answered: set[str] = set()
    calls: list[ToolCallPart] = []
    for message in reversed(history):
        if message.role == "user" and not whole:
            break
        answered.update(p.tool_call_id for p in message.tool_results)
        calls = message.tool_calls + calls if message.tool_calls else calls
    return [_call_key(c.tool_name, c.args) for c in calls if c.tool_call_id in answered]


def _call_key(name: str, args: dict[str, Any]) -> tuple[str, str]:
    return name, json.dumps(args, sort_keys=True, ensure_ascii=False)


def extract_json(text: str) -> Any | None:
    """The first JSON object in ``text``, tolerating code fences and prose around it."""
    # strict=False: llama.cpp's JSON grammar lets raw newlines into strings, which strict JSON forbids.
    decoder = json.JSONDecoder(strict=False)
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


_NAME_KEYS = ("action", "tool", "tool_name", "name")
_ARGS_KEYS = ("args", "arguments", "parameters", "input", "action_input")
_ANSWER_KEYS = ("answer", "final_answer", "text")


def _validate(
    value: dict[str, Any], tools: dict[str, ToolDefinition], allow_final: bool, structured: bool = False
) -> tuple[str, Decision | None]:
    # Besides the schema's own shape, accept the spellings models use when they follow the format by
    # instruction only: {"final_answer": ...}, {"tool" | "name": ..., "arguments" | "input": ...}.
    name = next((value[k] for k in _NAME_KEYS if k in value), None)
    if name is None and FINAL_ANSWER in value:
        name = FINAL_ANSWER
    if name == FINAL_ANSWER:
        if not allow_final:
            return "a tool call is required now, not a final answer", None
        answer = next((value[k] for k in _ANSWER_KEYS if k in value), None)
        if answer is None:
            return 'a final answer needs an "answer"', None
        if structured:  # the agent's output_type: handed on as JSON text; the loop validates it
            return "", FinalAnswer(
                text=answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            )
        if not isinstance(answer, str):
            return '"answer" must be a string', None
        return "", FinalAnswer(text=answer)
    if name is None:
        return 'expected {"action": "<tool name>", "args": {...}} or {"action": "final_answer", ...}', None
    if name not in tools:
        known = ", ".join(sorted(tools)) or "none"
        return f"unknown action {name!r} (tools: {known})", None
    args: Any = next((value[k] for k in _ARGS_KEYS if k in value), {})
    if isinstance(args, str):  # some models double-encode the arguments
        try:
            args = json.loads(args)
        except ValueError:
            return f'"args" of {name} must be a JSON object', None
    if not isinstance(args, dict):
        return f'"args" of {name} must be a JSON object', None
    problem = _check_args(args, tools[name].parameters)
    if problem:
        return f"invalid args for {name}: {problem}", None
    return "", ToolDecision(tool_name=name, args=args)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _check_args(args: dict[str, Any], schema: dict[str, Any]) -> str:
    """The shape checks a tiny model gets wrong: missing or unknown keys, wrong scalar types, enums.
    Full validation happens in the executor, which turns errors into results the model can read."""
    properties: dict[str, Any] = schema.get("properties") or {}
    missing = [k for k in schema.get("required", ()) if k not in args]
    if missing:
        return f"missing {', '.join(missing)}"
    if schema.get("additionalProperties") is False:
        unknown = [k for k in args if k not in properties]
        if unknown:
            return f"unknown argument {', '.join(unknown)}"
    for key, value in args.items():
        spec = properties.get(key)
        if not isinstance(spec, dict):
            continue
        expected = spec.get("type")
        if isinstance(expected, str) and expected in _JSON_TYPES:
            ok = isinstance(value, _JSON_TYPES[expected]) and not (
                isinstance(value, bool) and expected in ("integer", "number")
            )
            if not ok:
                return f"{key} must be a {expected}"
        if "enum" in spec and value not in spec["enum"]:
            return f"{key} must be one of {json.dumps(spec['enum'])}"
        pattern = spec.get("pattern")
        if isinstance(pattern, str) and isinstance(value, str) and not re.search(pattern, value):
            return f"{key} must match {pattern}"
    return ""


def decision_parts(decision: Decision) -> list[ModelStreamPart]:
    """A decision as the stream parts a function-calling model would have produced (its thought, if
    any, as reasoning first)."""
    return [*thought_parts(decision.thought), *_choice_parts(decision)]


def thought_parts(thought: str) -> list[ModelStreamPart]:
    """A decision's ``thought`` as reasoning parts (none when it has none)."""
    if not thought:
        return []
    return [
        ReasoningStart(id="thought-0"),
        ReasoningDelta(id="thought-0", delta=thought),
        ReasoningEnd(id="thought-0"),
    ]


def _choice_parts(decision: Decision) -> list[ModelStreamPart]:
    match decision:
        case ToolDecision():
            call_id = f"call_{uuid.uuid4().hex[:24]}"
            args_json = json.dumps(decision.args, ensure_ascii=False)
            return [
                ToolInputStart(tool_call_id=call_id, tool_name=decision.tool_name),
                ToolInputDelta(tool_call_id=call_id, delta=args_json),
                ToolInputEnd(
                    tool_call_id=call_id,
                    tool_name=decision.tool_name,
                    args=decision.args,
                    args_json=args_json,
                ),
            ]
        case FinalAnswer():
            # Only reached when the answer could not be streamed as it was generated (the model put it
            # somewhere other than first in the object, or followed the format by instruction only).
            return [
                TextStart(id="answer-0"),
                TextDelta(id="answer-0", delta=decision.text),
                TextEnd(id="answer-0"),
            ]
        case _:
            assert_never(decision)


class AnswerStreamer:
    """Streams the answer string out of a decision while its JSON is still being generated.

    It engages only when the reply opens like ``{"action": "final_answer", "answer": "`` (the shape the
    grammar produces) or ``{"final_answer": "``, and decodes the string incrementally, holding back an
    escape sequence until it is complete.
    """

    _OPENING = re.compile(
        r'\s*(?:```(?:json)?\s*)?\{\s*(?:"action"\s*:\s*"final_answer"\s*,\s*"answer"|"final_answer")\s*:\s*"'
    )
    _OPENINGS_COMPACT = ('{"action":"final_answer","answer":"', '{"final_answer":"')

    def __init__(self, id: str) -> None:
        self.id = id
        self.started = False
        self.closed = False
        self.looping = False
        """The answer ends in one short piece repeated over and over (see :func:`ends_in_a_loop`)."""
        self._buffer = ""
        self._gave_up = False
        self._tail = ""

    def feed(self, chunk: str) -> list[ModelStreamPart]:
        if self.closed or self._gave_up:
            return []
        self._buffer += chunk
        if self.started:
            return self._string_delta()
        match = self._OPENING.match(self._buffer)
        if match is None:
            compact = re.sub(r"^`{1,3}(?:j(?:s(?:o(?:n)?)?)?)?", "", re.sub(r"\s+", "", self._buffer))
            viable = any(o.startswith(compact) for o in self._OPENINGS_COMPACT)
            self._gave_up = not viable or len(self._buffer) > 80
            return []
        self.started = True
        self._buffer = self._buffer[match.end() :]
        return [TextStart(id=self.id), *self._string_delta()]

    def _string_delta(self) -> list[ModelStreamPart]:
        end, self.closed = _scan_string(self._buffer)
        raw, self._buffer = self._buffer[:end], self._buffer[end:]
        if not raw:
            return []
        try:
            text = json.loads(f'"{raw}"', strict=False)
        except ValueError:  # not valid JSON string content: show it rather than lose it
            text = raw
        self._tail = (self._tail + text)[-_LOOP_WINDOW:]
        self.looping = ends_in_a_loop(self._tail)
        return [TextDelta(id=self.id, delta=text)]


_LOOP = re.compile(r"(.{1,60}?)\1{3,}$", re.DOTALL)
_LONG_PIECE = range(61, 401)
_LOOP_MIN_CHARS = 80
_LOOP_WINDOW = 1200
_SHORT_LOOP_WINDOW = 400


def ends_in_a_loop(text: str) -> bool:
    """Whether ``text`` ends in one piece of at most 60 characters written at least four times in a row,
    over at least 80 characters ("2023-02-20 2023-02-20 ..."), or in a longer piece (up to 400
    characters: a sentence restating a JSON result) written three times in a row: a small model that
    starts such a loop never leaves it, however long it may write (a markdown table rule is shorter)."""
    if len(text) < _LOOP_MIN_CHARS:
        return False
    match = _LOOP.search(text[-_SHORT_LOOP_WINDOW:])
    if match is not None and len(match.group(0)) >= _LOOP_MIN_CHARS:
        return True
    # Compared at the end only (a regex search would try every start: ~0.2 s per delta on 1,200 characters).
    return any(
        text[-size:] == text[-2 * size : -size] == text[-3 * size : -2 * size]
        for size in _LONG_PIECE
        if 3 * size <= len(text)
    )


def _scan_string(raw: str) -> tuple[int, bool]:
    """How much of ``raw`` (JSON string content, opening quote excluded) is complete, and whether the
    closing quote was reached. An escape cut by the chunk boundary (``\\``, ``\\u00``, or the high half
    of a surrogate pair without its low half) is not complete yet."""
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == '"':
            return index, True
        if char != "\\":
            index += 1
            continue
        if index + 1 >= len(raw):
            return index, False
        if raw[index + 1] != "u":
            index += 2
            continue
        if index + 6 > len(raw):
            return index, False
        high_surrogate = raw[index + 2 : index + 4].lower() in ("d8", "d9", "da", "db")
        if high_surrogate and (
            index + 8 > len(raw) or (raw[index + 6 : index + 8] == "\\u" and index + 12 > len(raw))
        ):
            return index, False
        index += 6
    return len(raw), False
