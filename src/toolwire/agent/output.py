"""Structured output: turn an ``output_type`` into a schema, a validator and a per-model output mode."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, Union

from pydantic import PydanticSchemaGenerationError, PydanticUserError, TypeAdapter, ValidationError

from toolwire.errors import ConfigError
from toolwire.models.base import Model, ToolDefinition

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
