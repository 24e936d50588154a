"""Structured output: an ``output_type`` becomes a schema, a validator and a per-model output mode
(:class:`OutputSpec`); :class:`OutputPolicy` is what a run does with it step by step."""

from __future__ import annotations

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
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart
from toolwire.models.base import (
    Model,
    ModelStreamPart,
    TextDelta,
    ToolDefinition,
    ToolInputDelta,
    ToolInputStart,
)
from toolwire.tools.executor import ToolOutcome

OutputMode: TypeAlias = Literal["auto", "native", "tool", "grammar"]
FINAL_RESULT_TOOL = "final_result"
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class OutputValidationError(ValueError):
    """The model's output does not match the requested type."""

    def __init__(self, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """How a run's final output is requested and checked."""

    schema: dict[str, Any]
    """JSON schema of the output (what native structured output and grammars receive)."""
    name: str
    mode: Literal["native", "tool", "grammar"]
    wrapped: bool
    """Tool mode only: a non-object schema is wrapped as ``{"result": ...}`` because tool args are objects."""
    _validate: Callable[[Any], Any]
    _validate_partial: Callable[[Any], Any] | None

    def tool_definition(self) -> ToolDefinition:
        params = {"type": "object", "properties": {"result": self.schema}, "required": ["result"]}
        return ToolDefinition(
            name=FINAL_RESULT_TOOL,
            description="Give the final result. Call this once you have everything needed; it ends the run.",
            parameters=params if self.wrapped else self.schema,
        )

    def validate(self, value: Any) -> Any:
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
            return self._validate_partial(value)
        except (ValidationError, ValueError):
            return value

    def from_tool_args(self, args: dict[str, Any]) -> Any:
        return self.validate(args.get("result") if self.wrapped else args)

    def from_text(self, text: str) -> Any:
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1)
        try:
            value = json.loads(body)
        except ValueError as exc:
            raise OutputValidationError(
                f"the answer is not valid JSON ({exc}); answer with a JSON value matching the schema only",
                [f"invalid JSON: {exc}"],
            ) from exc
        return self.validate(value)


def build_output_spec(output_type: Any, model: Model, mode: OutputMode = "auto") -> OutputSpec:
    """A spec for a pydantic model, TypedDict, dataclass, other type, a list of alternatives, or a JSON schema dict."""
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

    resolved = _resolve_mode(mode, model)
    wrapped = schema.get("type") != "object" or "anyOf" in schema or "oneOf" in schema
    return OutputSpec(schema, _tool_safe(name), resolved, wrapped, validate, validate_partial)


def _resolve_mode(mode: OutputMode, model: Model) -> Literal["native", "tool", "grammar"]:
    if mode != "auto":
        return mode
    if not model.supports_tools:
        return "grammar"  # the embedded model: a JSON-schema grammar constrains generation
    return "native" if model.supports_native_output else "tool"


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

    # -- partial objects while the model streams ----------------------------------------------------

    def reset_partial(self) -> None:
        self._parser, self._call, self._last = None, None, None

    def partial(self, part: ModelStreamPart) -> Any | None:
        """The validated partial object after ``part`` (JSON-ready), or ``None`` when nothing changed."""
        spec = self.spec
        fragment = None
        if spec.mode == "tool":
            if isinstance(part, ToolInputStart) and part.tool_name == FINAL_RESULT_TOOL:
                self._call, self._parser = part.tool_call_id, PartialJSONParser()
            elif isinstance(part, ToolInputDelta) and part.tool_call_id == self._call:
                fragment = part.delta
        elif isinstance(part, TextDelta):
            if self._parser is None:
                self._parser = PartialJSONParser()
            fragment = part.delta
        if fragment is None or self._parser is None:
            return None
        try:
            self._parser.feed(fragment)
        except ValueError:
            self._parser = None  # not JSON after all; the final check reports it
            return None
        value = self._parser.value()
        if spec.mode == "tool" and spec.wrapped:
            value = value.get("result") if isinstance(value, dict) else None
        if value is None or value == self._last:
            return None
        self._last = value
        return to_jsonable_python(spec.validate_partial(value), fallback=str)

    # -- the end of a step --------------------------------------------------------------------------

    def settle(self, calls: Sequence[ToolCallPart]) -> tuple[Any, str, dict[str, ToolOutcome]]:
        """Validate ``final_result`` calls: ``(value or NOTHING, last error, settled outcomes)``. When one
        is valid, the step's other calls are settled too (not executed: the result ended the run)."""
        accepted: Any = NOTHING
        error = ""
        outcomes: dict[str, ToolOutcome] = {}
        now = time.time()
        for call in calls:
            if call.tool_name != FINAL_RESULT_TOOL:
                continue
            try:
                value = self.spec.from_tool_args(call.args)
            except OutputValidationError as exc:
                error = str(exc)
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
        return accepted, error, outcomes

    def parse_text(self, text: str) -> tuple[Any, str]:
        """A text answer: ``(value or NOTHING, error)``."""
        if self.spec.mode == "tool":
            return (
                NOTHING,
                f"no {FINAL_RESULT_TOOL} call: the answer must be given by calling {FINAL_RESULT_TOOL}",
            )
        try:
            return self.spec.from_text(text), ""
        except OutputValidationError as exc:
            return NOTHING, str(exc)

    def rejected(self, message: Message, error: str) -> NoObjectGenerated | None:
        """Count an invalid answer; the error to raise once the retries are spent, else ``None``."""
        self.attempts += 1
        if self.attempts <= self.retries:
            return None
        finals = [c.args_json for c in message.tool_calls if c.tool_name == FINAL_RESULT_TOOL]
        return NoObjectGenerated(
            f"no valid {self.spec.name} after {self.attempts} attempt(s): {error}",
            raw_output=finals[-1] if finals else message.text,
            errors=[error],
        )

    def retry_message(self, error: str, session_id: str) -> Message:
        """The user turn that tells the model what was wrong with its text answer (stored like any turn)."""
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
