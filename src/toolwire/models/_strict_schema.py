"""Closing a JSON schema the way providers' strict structured-output modes require.

OpenAI's strict mode (Chat ``response_format``, Responses ``text.format``) takes only closed objects
(``additionalProperties: false``) that require every property; an optional property is sent as required
and nullable, and the answer's ``null`` is dropped again before validation
(``toolwire.agent.output.drop_added_nulls``). Anthropic's ``output_config.format`` takes closed objects
and keeps optional properties optional. What cannot be closed (a ``dict[str, X]`` is an object with
free-form keys) is left as it is and named in :attr:`ClosedSchema.problems`: the adapter then falls back
(``strict: false`` and a warning) instead of sending a schema the provider rejects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_VERBATIM = frozenset({"enum", "const", "default", "examples", "required"})
"""Keys whose values are data, not schemas: copied, never walked."""
_NAMED = frozenset({"properties", "$defs", "definitions", "patternProperties"})
"""Keys whose values map names to schemas."""
_ANNOTATIONS = ("title", "description")


@dataclass(frozen=True, slots=True)
class ClosedSchema:
    schema: dict[str, Any]
    problems: tuple[str, ...]
    """Why parts of the schema stay open (empty when a strict mode accepts it)."""


def close_schema(schema: dict[str, Any], *, require_all: bool) -> ClosedSchema:
    """A copy of ``schema`` with every object closed; with ``require_all``, every property required and
    each one that was optional made nullable (its ``default`` removed: the answer always carries it)."""
    problems: list[str] = []
    closed = _close(schema, "", require_all, problems)
    return ClosedSchema(closed, tuple(problems))


def _close(node: Any, path: str, require_all: bool, problems: list[str]) -> Any:
    if isinstance(node, list):
        return [_close(item, path, require_all, problems) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _VERBATIM:
            out[key] = value
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {
                name: _close(sub, f"{path}.{name}" if path else name, require_all, problems)
                for name, sub in value.items()
            }
        else:
            out[key] = _close(value, path, require_all, problems)
    if node.get("type") == "object" or "properties" in node:
        _close_object(out, node, path, require_all, problems)
    return out


def _close_object(
    out: dict[str, Any], node: dict[str, Any], path: str, require_all: bool, problems: list[str]
) -> None:
    extra = node.get("additionalProperties")
    if extra not in (None, False) or "patternProperties" in node:
        problems.append(
            f"{path or 'the root'} has free-form keys (additionalProperties) and cannot be closed"
        )
    else:
        out["additionalProperties"] = False
    if not require_all:
        return
    properties: dict[str, Any] = out.get("properties", {})
    required = set(node.get("required", ()))
    for name in properties:
        if name not in required:
            properties[name] = _nullable(properties[name])
    if properties or "required" in node:
        out["required"] = list(properties)


def _nullable(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    if allows_null(schema):
        return {k: v for k, v in schema.items() if k != "default"}
    notes = {k: schema[k] for k in _ANNOTATIONS if k in schema}
    inner = {k: v for k, v in schema.items() if k not in ("default", *_ANNOTATIONS)}
    if set(inner) == {"anyOf"}:
        return {"anyOf": [*inner["anyOf"], {"type": "null"}], **notes}
    return {"anyOf": [inner, {"type": "null"}], **notes}


def allows_null(schema: Any) -> bool:
    """Whether ``schema`` itself accepts ``null`` (without following ``$ref``)."""
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(allows_null(s) for key in ("anyOf", "oneOf") for s in schema.get(key, ()))


__all__ = ["ClosedSchema", "allows_null", "close_schema"]
