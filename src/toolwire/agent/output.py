"""Structured output: an ``output_type`` becomes a schema, a validator and a per-model output mode
(:class:`OutputSpec`); :class:`OutputPolicy` is what a run does with it step by step."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, Union

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from toolwire._partial_json import PartialJSONParser
from toolwire.errors import ConfigError, NoObjectGenerated
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from toolwire.models._strict_schema import allows_null
from toolwire.models.base import (
    Model,
    ModelStreamPart,
    TextDelta,
    TextEnd,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from toolwire.tools.outcome import ToolOutcome

OutputMode: TypeAlias = Literal["auto", "native", "tool", "grammar", "prompted"]
ResolvedMode: TypeAlias = Literal["native", "tool", "grammar", "prompted"]
FINAL_RESULT_TOOL = "final_result"
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_WRAPPER_KEY = "result"
_EVERY_DELTA_UNTIL = 1024
"""Partial objects: every delta emits one while the object is this small (characters); past it, one is
emitted when the text has grown by a quarter since the last, so the snapshots of a long object add up to
about five times its length (each is validated and serialised whole) instead of one per delta."""


class OutputValidationError(ValueError):
    """The model's output does not match the requested type."""

    def __init__(self, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """How a run's final output is requested and checked."""

    schema: dict[str, Any]
    """JSON schema of the output type itself (what a grammar receives; see :attr:`request_schema`)."""
    name: str
    mode: ResolvedMode
    wrapped: bool
    """A non-object output (``list[int]``, a union, ``int``) travels as ``{"result": ...}``: tool arguments
    and OpenAI's / Anthropic's native formats take objects only. Unwrapped on the way back."""
    _validate: Callable[[Any], Any]
    _validate_partial: Callable[[Any], Any] | None
    optional_properties: bool = True
    """Whether some object of the schema has an optional, not nullable property (whose ``null`` a strict
    mode's answer may carry; see :func:`drop_added_nulls`). When none has, values are not walked."""
    mode_with_tools: ResolvedMode | None = None
    """The mode when the run has tools, if it differs: Gemini 2.x rejects function declarations beside
    ``responseMimeType: application/json``; a server that enforces no schema (prompted without tools)
    forces the ``final_result`` call when it has function calling anyway."""

    @property
    def request_schema(self) -> dict[str, Any]:
        """The schema sent to the provider (native mode) or as the ``final_result`` parameters."""
        return _wrap(self.schema) if self.wrapped else self.schema

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """``ModelRequest.output_schema``: what the provider enforces (native) or the grammar constrains;
        ``None`` in tool mode (the ``final_result`` tool carries the schema) and in prompted mode (the
        instructions do, see :meth:`prompt`)."""
        if self.mode in ("tool", "prompted"):
            return None
        return self.request_schema if self.mode == "native" else self.schema

    def for_tools(self, has_tools: bool) -> OutputSpec:
        """The spec for a run with (or without) tools."""
        if has_tools and self.mode_with_tools is not None and self.mode_with_tools != self.mode:
            return dataclasses.replace(self, mode=self.mode_with_tools)
        return self

    @property
    def answers_in_text(self) -> bool:
        """Whether the answer is JSON text (native, grammar, prompted), not a ``final_result`` call."""
        return self.mode != "tool"

    def prompt(self) -> str:
        """Prompted mode's section of the system prompt: the schema the answer must match."""
        schema = json.dumps(self.request_schema, ensure_ascii=False)
        where = f' (the value goes in "{_WRAPPER_KEY}")' if self.wrapped else ""
        # the instruction last: small models follow what they read last more than what they read first
        return (
            f"The JSON schema of your answer ({self.name}):\n{schema}\n\n"
            f"Answer with one JSON object matching this schema{where}, and nothing else: no text before or "
            "after it."
        )

    def instructions(self, instructions: str | None) -> str | None:
        """The run's system prompt: the agent's instructions, then the schema in prompted mode (added to
        each request, never stored as a message)."""
        if self.mode != "prompted":
            return instructions
        return f"{instructions.rstrip()}\n\n{self.prompt()}" if instructions else self.prompt()

    def tool_definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=FINAL_RESULT_TOOL,
            description="Give the final result. Call this once you have everything needed; it ends the run.",
            parameters=self.request_schema,
        )

    def unwrap(self, value: Any) -> Any:
        if self.wrapped and isinstance(value, dict) and _WRAPPER_KEY in value:
            return value[_WRAPPER_KEY]
        return value

    def validate(self, value: Any) -> Any:
        value = self._without_added_nulls(value)
        try:
            return self._validate(value)
        except ValidationError as exc:
            errors = [f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()]
            raise OutputValidationError("; ".join(errors), errors) from exc
        except OutputValidationError:
            raise
        except ValueError as exc:
            raise OutputValidationError(str(exc), [str(exc)]) from exc

    def validate_partial(self, value: Any) -> Any:
        """Validate as far as the value goes; the raw value when partial validation is not possible."""
        if self._validate_partial is None:
            return value
        try:
            return self._validate_partial(self._without_added_nulls(value))
        except (ValidationError, ValueError):
            return value

    def _without_added_nulls(self, value: Any) -> Any:
        return drop_added_nulls(value, self.schema, self.schema) if self.optional_properties else value

    def from_tool_args(self, args: dict[str, Any]) -> Any:
        return self.validate(self.unwrap(args))

    def from_text(self, text: str) -> Any:
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1)
        try:
            value = json.loads(body)
        except ValueError as exc:
            message = (
                f"the answer is not valid JSON ({exc}); answer with a JSON value matching the schema only"
            )
            raise OutputValidationError(message, [message]) from exc
        return self.validate(self.unwrap(value))


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"result": schema}`` as a closed object; ``$defs`` move to the root, where ``#/$defs/..`` points."""
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {_WRAPPER_KEY: inner},
        "required": [_WRAPPER_KEY],
        "additionalProperties": False,
    }
    if "$defs" in schema:
        wrapper["$defs"] = schema["$defs"]
    return wrapper


def drop_added_nulls(value: Any, schema: Any, root: dict[str, Any]) -> Any:
    """``value`` without the ``null`` of properties the schema leaves optional and not nullable: strict
    modes make such properties required and nullable (``models._strict_schema``), so ``null`` there means
    "not given" and the type's default applies."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict) and "properties" not in schema:
        # ``Place | None`` and the like: the one object alternative, when there is exactly one
        objects = [r for b in schema.get("anyOf", ()) if _is_object(r := _resolve(b, root))]
        if len(objects) == 1:
            schema = objects[0]
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value
        required = set(schema.get("required", ()))
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                out[key] = item
            elif item is None and key not in required and not allows_null(_resolve(sub, root)):
                continue
            else:
                out[key] = drop_added_nulls(item, sub, root)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [drop_added_nulls(item, schema["items"], root) for item in value]
    return value


def _is_object(schema: Any) -> bool:
    return isinstance(schema, dict) and isinstance(schema.get("properties"), dict)


def _has_optional(schema: Any) -> bool:
    if isinstance(schema, list):
        return any(_has_optional(s) for s in schema)
    if not isinstance(schema, dict):
        return False
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = set(schema.get("required", ()))
        if any(name not in required and not allows_null(sub) for name, sub in properties.items()):
            return True
    return any(
        _has_optional(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples")
    )


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), schema)
    return schema


def build_output_spec(output_type: Any, model: Model, mode: OutputMode = "auto") -> OutputSpec | None:
    """A spec for a pydantic model, TypedDict, dataclass, other type, a list of alternatives, or a JSON schema
    dict; ``None`` for ``str`` (and ``None``): the output is the final text, answered as plain text."""
    if output_type is None or output_type is str:
        return None
    validate_partial: Callable[[Any], Any] | None = None
    if isinstance(output_type, dict):
        schema = output_type
        name = str(schema.get("title") or "output")
        validate = _jsonschema_validator(schema)
    else:
        if isinstance(output_type, list | tuple):
            if not output_type:
                raise ConfigError("output_type alternatives must not be empty")
            output_type = Union[tuple(output_type)]  # noqa: UP007 - a runtime union of the alternatives
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = adapter.json_schema()
        except (PydanticUserError, PydanticSchemaGenerationError) as exc:
            raise ConfigError(f"cannot use {output_type!r} as an output type: {exc}") from exc
        name = str(schema.get("title") or getattr(output_type, "__name__", "output"))
        validate = adapter.validate_python

        def validate_partial(value: Any) -> Any:
            return adapter.validate_python(value, experimental_allow_partial=True)

    resolved, with_tools = _resolve_mode(mode, model)
    not_object = schema.get("type") != "object" or "anyOf" in schema or "oneOf" in schema
    wrapped = not_object and resolved != "grammar"
    return OutputSpec(
        schema,
        _tool_safe(name),
        resolved,
        wrapped,
        validate,
        validate_partial,
        optional_properties=_has_optional(schema),
        mode_with_tools=with_tools,
    )


def _resolve_mode(mode: OutputMode, model: Model) -> tuple[ResolvedMode, ResolvedMode | None]:
    """The mode, and the mode when the run has tools if that differs (``auto`` only)."""
    if mode != "auto":
        return mode, None
    if not model.supports_tools:
        return "grammar", None  # the embedded model: a JSON-schema grammar constrains generation
    # tool mode needs ``tool_choice: "required"`` to force the final_result call
    forced: ResolvedMode = "tool" if model.forced_tool_call else "prompted"
    if model.supports_native_output:
        return "native", None if model.native_output_with_tools else forced
    if model.prompted_output_without_tools:
        return "prompted", None if forced == "prompted" else "tool"
    return forced, None


def _jsonschema_validator(schema: dict[str, Any]) -> Callable[[Any], Any]:
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - jsonschema is a core dependency
        raise ConfigError("a raw JSON schema output_type needs the jsonschema package") from exc
    validator = jsonschema.Draft202012Validator(schema)

    def validate(value: Any) -> Any:
        errors = [
            f"{'.'.join(str(p) for p in e.absolute_path) or 'value'}: {e.message}"
            for e in validator.iter_errors(value)
        ]
        if errors:
            raise OutputValidationError("; ".join(errors), errors)
        return value

    return validate


def _tool_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output"


NOTHING: Any = object()
"""No valid output yet (``None`` can be a valid output)."""


class OutputPolicy:
    """What a run does about its ``output_type``: settle ``final_result`` calls, stream partial objects,
    decide whether a step ended the run, and word the re-prompt after an invalid answer."""

    def __init__(self, spec: OutputSpec, retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.attempts = 0
        self._parser: PartialJSONParser | None = None
        self._call: str | None = None
        self._last: Any = None
        self._fed = 0
        self._unsent = 0
        self._head: str | None = None

    # -- partial objects while the model streams ----------------------------------------------------

    def reset_partial(self) -> None:
        self._parser, self._call, self._last, self._head = None, None, None, None
        self._fed = self._unsent = 0

    def partial(self, part: ModelStreamPart) -> Any | None:
        """The validated partial object after ``part`` (JSON-ready), or ``None`` when none is due.

        Each fragment is parsed once (incrementally); a snapshot is taken for every delta of a small
        object and at a geometric pace for a long one (see ``_EVERY_DELTA_UNTIL``), and always at the end
        of the text or the ``final_result`` call, so the last partial is the whole object."""
        fragment, end = self._fragment(part)
        if self._parser is None or (fragment is None and not end):
            return None
        if fragment and not self._parser.complete:  # past the value: a closing fence, or prose
            try:
                self._parser.feed(fragment)
            except ValueError:
                self._parser = None  # not JSON after all; the final check reports it
                return None
            self._fed += len(fragment)
            self._unsent += len(fragment)
        if not self._unsent or not (end or self._fed <= _EVERY_DELTA_UNTIL or self._unsent * 4 >= self._fed):
            return None
        self._unsent = 0
        value = self._parser.value()
        if self.spec.wrapped:
            value = value.get(_WRAPPER_KEY) if isinstance(value, dict) else None
        if value is None or value == self._last:
            return None
        self._last = value
        return to_jsonable_python(self.spec.validate_partial(value), fallback=str)

    def _fragment(self, part: ModelStreamPart) -> tuple[str | None, bool]:
        """The JSON text ``part`` adds to the output, and whether it ends it."""
        if not self.spec.answers_in_text:
            match part:
                case ToolInputStart() if part.tool_name == FINAL_RESULT_TOOL:
                    self._call, self._parser = part.tool_call_id, PartialJSONParser()
                case ToolInputDelta() if part.tool_call_id == self._call:
                    return part.delta, False
                case ToolInputEnd() if part.tool_call_id == self._call:
                    return None, True
            return None, False
        match part:
            case TextDelta():
                if self._call is None:  # the first delta of the answer: parse the text as JSON
                    self._call, self._parser, self._head = "", PartialJSONParser(), ""
                return self._unfenced(part.delta), False
            case TextEnd():
                return None, True
        return None, False

    def _unfenced(self, delta: str) -> str:
        """``delta`` without an opening ```` ```json ```` fence (models often fence a JSON answer, and
        :meth:`OutputSpec.from_text` accepts it): the text is held until the fence is known or ruled out."""
        if self._head is None:  # decided: no fence, or already past it
            return delta
        self._head += delta
        head = self._head.lstrip()
        if not head.startswith("```"):
            if "```".startswith(head):  # "", "`" or "``": maybe a fence still
                return ""
            self._head = None
            return head
        tag = head[3:]
        if len(tag) < 4 and "json".startswith(tag):  # the language tag may still be arriving
            return ""
        body = tag.removeprefix("json").lstrip()
        if body:
            self._head = None
        return body

    # -- the end of a step --------------------------------------------------------------------------

    def settle(self, calls: Sequence[ToolCallPart]) -> tuple[Any, list[str], dict[str, ToolOutcome]]:
        """Validate ``final_result`` calls: ``(value or NOTHING, the last errors, settled outcomes)``. When
        one is valid, the step's other calls are settled too (not executed: the result ended the run)."""
        accepted: Any = NOTHING
        errors: list[str] = []
        outcomes: dict[str, ToolOutcome] = {}
        now = time.time()
        for call in calls:
            if call.tool_name != FINAL_RESULT_TOOL:
                continue
            try:
                value = self.spec.from_tool_args(call.args)
            except OutputValidationError as exc:
                errors = exc.errors
                output, is_error = (
                    f"Invalid final result: {exc}. Call {FINAL_RESULT_TOOL} again, fixed.",
                    True,
                )
            else:
                if accepted is NOTHING:
                    accepted = value
                output, is_error = "Final result accepted.", False
            outcomes[call.tool_call_id] = _settled(call, output, is_error, now)
        if accepted is not NOTHING:
            for call in calls:
                if call.tool_call_id not in outcomes:
                    outcomes[call.tool_call_id] = _settled(
                        call, "Not executed: the final result ended the run.", True, now
                    )
        return accepted, errors, outcomes

    def parse_text(self, text: str) -> tuple[Any, list[str]]:
        """A text answer: ``(value or NOTHING, errors)``."""
        if self.spec.mode == "tool":
            return (
                NOTHING,
                [f"no {FINAL_RESULT_TOOL} call: the answer must be given by calling {FINAL_RESULT_TOOL}"],
            )
        try:
            return self.spec.from_text(text), []
        except OutputValidationError as exc:
            return NOTHING, exc.errors

    def rejected(
        self, message: Message, errors: list[str], *, usage: Usage, finish_reason: str | None
    ) -> NoObjectGenerated | None:
        """Count an invalid answer; the error to raise once the retries are spent, else ``None``.
        ``usage`` is the run's so far (every attempt was billed)."""
        self.attempts += 1
        if self.attempts <= self.retries:
            return None
        finals = [c.args_json for c in message.tool_calls if c.tool_name == FINAL_RESULT_TOOL]
        return NoObjectGenerated(
            f"no valid {self.spec.name} after {self.attempts} attempt(s): {'; '.join(errors)}",
            raw_output=finals[-1] if finals else message.text,
            errors=errors,
            usage=usage,
            finish_reason=finish_reason,
        )

    def retry_message(self, errors: list[str], session_id: str) -> Message:
        """The user turn that tells the model what was wrong with its text answer (stored like any turn)."""
        error = "; ".join(errors)
        if self.spec.mode == "tool":
            text = f"Your answer was not accepted: {error}. Call {FINAL_RESULT_TOOL} with the result."
        else:
            text = (
                f"Your answer was not accepted: {error}. Reply again with only a JSON value matching the "
                f"{self.spec.name} schema."
            )
        part = TextPart(text=text, provider_metadata={"toolwire": {"output_retry": True}})
        return Message(role="user", parts=(part,), session_id=session_id)


def _settled(call: ToolCallPart, output: str, is_error: bool, now: float) -> ToolOutcome:
    return ToolOutcome(
        call=call,
        result=ToolResultPart(
            tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=output, is_error=is_error
        ),
        status="error" if is_error else "ok",
        started_at=now,
        finished_at=now,
        full_output=output,
    )
