"""The ReAct driver: tool use for models without function calling, through JSON decisions.

Each step the model sees the tool catalog and a text-only rendering of the history, and answers with one
JSON object: ``{"action": NAME, "args": {...}}`` or ``{"action": "final_answer", "answer": TEXT}``. The
decision schema goes out as ``request.output_schema``, so a model that can constrain generation (the local
llama.cpp model turns it into a grammar) cannot produce anything else. The reply is still parsed defensively, because other models
follow the format by instruction only: JSON is extracted from prose and code fences, validated, and on
failure the model is re-prompted with the reason, a bounded number of times.

Decisions leave the driver as canonical stream parts, so the loop cannot tell this step from a native
function-calling one: a tool decision becomes ``tool-input-start/delta/end`` with a fresh call id; a final
answer becomes text, streamed while the model is still generating it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, assert_never

from toolwire.agent.drivers import Driver
from toolwire.errors import ConfigError, DecisionExtractionFailed, DecisionValidationFailed, DriverError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolwire.models.base import (
    Finish,
    FinishReason,
    Model,
    ModelRequest,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamError,
    StreamStart,
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
"""Used when the driver gets no examples; the tool is fictitious, the pattern is what matters."""


class ReActDriver(Driver):
    """Drives a model without function calling with schema-constrained JSON decisions.

    ``instructions`` replaces :data:`DEFAULT_FORMAT` (how to reply); the agent's own instructions come with
    each request. ``examples`` are canonical conversations, rendered exactly like the history and placed
    before it as chat turns: measured on SmolLM2-135M, turns teach the format better than the same
    transcript inside the system prompt. ``refuse_repeats`` rejects a call identical to one already
    answered since the user's last message (turn it off for tools meant to be polled).
    """

    def __init__(
        self,
        *,
        max_retries: int = 2,
        examples: Sequence[Sequence[Message]] | None = None,
        instructions: str | None = None,
        refuse_repeats: bool = True,
    ) -> None:
        if max_retries < 0:
            raise ConfigError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.examples = DEFAULT_EXAMPLES if examples is None else tuple(tuple(e) for e in examples)
        self.format_instructions = DEFAULT_FORMAT if instructions is None else instructions
        self.refuse_repeats = refuse_repeats

    async def stream_step(self, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        tools, allow_final = _allowed(request)
        answer_schema = request.output_schema  # a structured final answer (the agent's output_type)
        instructions = self.system_prompt(request.instructions, tools, allow_final)
        if answer_schema is not None and allow_final:
            instructions += (
                '\n\nThe final answer is not text: give {"action": "final_answer", "answer": <JSON value>} '
                f"where the value matches this JSON schema: {json.dumps(answer_schema, separators=(',', ':'))}"
            )
        text_request = ModelRequest(
            messages=self.prompt_messages(request.messages),
            instructions=instructions,
            settings=request.settings,
            output_schema=decision_schema(tools, allow_final=allow_final, answer_schema=answer_schema),
            output_schema_name="decision",
        )
        done = calls_this_turn(request.messages) if self.refuse_repeats else set()
        state = _StepState()
        for attempt in range(1, self.max_retries + 2):
            outcome = _Attempt(allow_final)
            # aclosing: a consumer that stops early must stop the model now (the local model's generation
            # thread), not whenever the garbage collector finalizes the generators.
            async with aclosing(outcome.run(model, text_request, state)) as parts:
                async for part in parts:
                    yield part
            if outcome.aborted:
                return
            if outcome.answer is not None and outcome.answer.started:
                # Visible text cannot be taken back: the answer stands, truncated if the model ran out.
                yield TextEnd(id=outcome.answer.id)
                reason = "stop" if outcome.answer.closed else _reason(outcome.finish)
                yield Finish(reason=reason, usage=state.usage)
                return
            try:
                decision = parse_decision(
                    outcome.text,
                    tools,
                    allow_final=allow_final,
                    done=done,
                    structured=answer_schema is not None,
                )
            except DriverError as exc:
                if attempt > self.max_retries:
                    raise type(exc)(
                        f"no valid decision after {attempt} attempts: {exc.message}",
                        raw_output=exc.raw_output,
                        attempts=attempt,
                    ) from exc
                text_request = _with_messages(
                    text_request,
                    Message(role="assistant", parts=(TextPart(text=outcome.text),)),
                    Message.user(
                        f"That reply was not valid: {exc.message}. Reply with one JSON object only."
                    ),
                )
                continue
            for part in _decision_parts(decision):
                yield part
            yield Finish(
                reason="stop" if isinstance(decision, FinalAnswer) else "tool-calls", usage=state.usage
            )
            return

    def system_prompt(
        self, instructions: str | None, tools: Sequence[ToolDefinition], allow_final: bool
    ) -> str:
        """The text-only system prompt: agent instructions, tool catalog, reply format."""
        sections = [instructions.strip()] if instructions else []
        if tools:
            sections.append("Tools:\n" + "\n".join(_catalog_line(t) for t in tools))
        sections.append(self.format_instructions)
        if not allow_final:
            sections.append("Call a tool now; do not answer yet.")
        elif not tools:
            sections.append(
                'No tools are available now: reply with {"action": "final_answer", "answer": "..."}.'
            )
        return "\n\n".join(sections)

    def prompt_messages(self, history: Sequence[Message]) -> list[Message]:
        """The examples, then the history, as text-only chat messages."""
        out: list[Message] = []
        for example in self.examples:
            out += render_history(example)
        return out + render_history(history)


@dataclass(slots=True)
class _StepState:
    usage: Usage = field(default_factory=Usage)
    started: bool = False
    """Whether ``stream-start`` went out: one per step, carrying the first attempt's warnings."""


class _Attempt:
    """One model call of a step: forwards what the consumer may see now, collects the decision text."""

    def __init__(self, allow_final: bool) -> None:
        self.answer = _AnswerStreamer("answer-0") if allow_final else None
        self.finish: Finish | None = None
        self.aborted = False
        self._raw: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._raw)

    async def run(
        self, model: Model, request: ModelRequest, state: _StepState
    ) -> AsyncGenerator[ModelStreamPart, None]:
        stream = model.stream(request)
        try:
            async for part in stream:
                match part:
                    case StreamStart():
                        if not state.started:
                            state.started = True
                            yield part
                    case TextDelta():
                        self._raw.append(part.delta)
                        if self.answer is not None:
                            for out in self.answer.feed(part.delta):
                                yield out
                    case Finish():
                        self.finish = part
                        state.usage = state.usage + part.usage
                    case StreamError():
                        self.aborted = True
                        yield part
                        return
                    case ResponseMetadata() | ReasoningStart() | ReasoningDelta() | ReasoningEnd():
                        yield part
                    case _:
                        pass  # text start/end are re-framed by the driver; no tools were sent, so no tool parts
        finally:
            await _aclose(stream)  # stop the model now (the local model's generation thread), not at GC
        if not state.started:
            state.started = True
            yield StreamStart()


async def _aclose(stream: AsyncIterator[ModelStreamPart]) -> None:
    aclose = getattr(stream, "aclose", None)  # ``Model.stream`` promises an iterator; adapters are generators
    if aclose is not None:
        await aclose()


# ---------------------------------------------------------------------------------------------
# Decisions


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDecision:
    tool_name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAnswer:
    text: str


Decision = ToolDecision | FinalAnswer


def _allowed(request: ModelRequest) -> tuple[list[ToolDefinition], bool]:
    """The tools the model may pick this step and whether it may answer instead, from ``tool_choice``."""
    tools = list(request.tools)
    match request.tool_choice:
        case "auto":
            return tools, True
        case "none":
            return [], True
        case "required":
            if not tools:
                raise ConfigError("tool_choice 'required' needs at least one tool")
            return tools, False
        case name:
            chosen = [t for t in tools if t.name == name]
            if not chosen:
                raise ConfigError(f"tool_choice {name!r} names no tool of this request")
            return chosen, False


def decision_schema(
    tools: Sequence[ToolDefinition], *, allow_final: bool, answer_schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    """JSON schema of one decision: an object per tool with a ``const`` action, or a final answer.

    One ``action`` key for every choice (rather than ``{"tool": ...}`` beside ``{"final_answer": ...}``)
    matters for small models: the choice is made on the tool name itself, right after the question that
    mentions it. With separate keys SmolLM2-135M chose ``final_answer`` for 8 of 8 lookup questions.
    """
    if any(t.name == FINAL_ANSWER for t in tools):
        raise ConfigError(f"a tool named {FINAL_ANSWER!r} clashes with the ReAct answer action")
    defs: dict[str, Any] = {}
    options: list[dict[str, Any]] = []
    for tool in tools:
        args = _hoist_defs(tool.parameters, prefix=f"{tool.name}__", into=defs)
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
            _hoist_defs(answer_schema, prefix="answer__", into=defs) if answer_schema else {"type": "string"}
        )
        options.append(
            {
                "type": "object",
                "properties": {"action": {"const": FINAL_ANSWER}, "answer": answer},
                "required": ["action", "answer"],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


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
        raise DecisionValidationFailed(
            f"{decision.tool_name} was already called with these arguments; use its observation above",
            raw_output=text,
            attempts=1,
        )
    return decision


def calls_this_turn(history: Sequence[Message]) -> set[tuple[str, str]]:
    """Calls made since the last user message that already have a result.

    A small model that has just read an observation tends to ask for the same call again, forever (until
    the loop's ``max_steps``); refusing the exact repeat, with the reason fed back, makes it answer.
    """
    answered: set[str] = set()
    calls: list[ToolCallPart] = []
    for message in reversed(history):
        if message.role == "user":
            break
        answered.update(p.tool_call_id for p in message.tool_results)
        calls += message.tool_calls
    return {_call_key(c.tool_name, c.args) for c in calls if c.tool_call_id in answered}


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


def _decision_parts(decision: Decision) -> list[ModelStreamPart]:
    match decision:
        case ToolDecision():
            call_id = f"call_{uuid.uuid4().hex[:24]}"
            args_json = json.dumps(decision.args, ensure_ascii=False)
            return [
                ToolInputStart(id=call_id, tool_name=decision.tool_name),
                ToolInputDelta(id=call_id, delta=args_json),
                ToolInputEnd(
                    id=call_id, tool_name=decision.tool_name, args=decision.args, args_json=args_json
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


def _reason(finish: Finish | None) -> FinishReason:
    return finish.reason if finish is not None and finish.reason != "tool-calls" else "other"


def _with_messages(request: ModelRequest, *extra: Message) -> ModelRequest:
    return ModelRequest(
        messages=[*request.messages, *extra],
        instructions=request.instructions,
        settings=request.settings,
        output_schema=request.output_schema,
        output_schema_name=request.output_schema_name,
    )


class _AnswerStreamer:
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
        self._buffer = ""
        self._gave_up = False

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
        return [TextDelta(id=self.id, delta=text)]


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


# ---------------------------------------------------------------------------------------------
# History as text


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
    kind = spec.get("type", "any")
    if "enum" in spec:
        kind = " | ".join(json.dumps(v) for v in spec["enum"])
    elif "pattern" in spec:
        kind = f"{kind} like {spec['pattern'].strip('^$')}"
    return f"{name}: {kind}" + ("" if required else "?")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


__all__ = [
    "DEFAULT_EXAMPLES",
    "DEFAULT_FORMAT",
    "FINAL_ANSWER",
    "Decision",
    "FinalAnswer",
    "ReActDriver",
    "ToolDecision",
    "calls_this_turn",
    "decision_schema",
    "extract_json",
    "parse_decision",
    "render_history",
]
