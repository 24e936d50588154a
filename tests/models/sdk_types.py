"""Request bodies checked against the official SDKs' own request types (dev dependencies only).

Each wire has one checker; a body that does not fit raises ``AssertionError`` naming what is wrong:

- OpenAI Chat Completions and Responses: ``openai``'s ``CompletionCreateParams`` / ``ResponseCreateParams``
  TypedDicts, through a pydantic ``TypeAdapter``;
- Anthropic Messages: ``anthropic``'s ``MessageCreateParams`` TypedDict, the same way (on Vertex AI and
  Bedrock: without ``model`` and with the platform's ``anthropic_version``);
- Gemini: ``google-genai``'s pydantic models for each top-level field of the REST body (``Content``, ``Tool``,
  ``ToolConfig``, ``GenerationConfig``), read from JSON as the REST API reads it;
- Bedrock Converse: botocore's ``ParamValidator`` against the ``bedrock-runtime`` service model.

The SDK TypedDicts ignore unknown keys unless told otherwise, so every TypedDict reachable from a root type
is marked ``extra="forbid"`` before its adapter is built, and so is every response model a request union
accepts (rebuilt; they are not used otherwise in the tests): a misspelled or invented field fails. The only
keys let through are the documented extensions of OpenAI-compatible servers that toolwire sends on
purpose (:data:`CHAT_EXTENSIONS`) and the sampling fields of Anthropic's (:data:`ANTHROPIC_SAMPLING`),
removed before the check.
"""

from __future__ import annotations

import copy
import functools
import json
import typing
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

CHAT_EXTENSIONS = {
    "message": ("reasoning_content", "reasoning", "extra_content"),
    "tool_call": ("extra_content",),
}
"""Fields of compatible servers that OpenAI's types do not have: DeepSeek's / vLLM's ``reasoning_content``,
Ollama's / Groq's ``reasoning`` and Gemini's ``extra_content`` (see ``toolwire.models.openai_chat``)."""

ANTHROPIC_SAMPLING = ("temperature", "top_p", "top_k")
"""Sampling fields the Messages API took from every recorded client (pydantic-ai, llm-anthropic) but that
``anthropic`` 2.x's ``MessageCreateParams`` no longer lists; toolwire sends them only when asked to, and
never to a model known to reject them (``toolwire.models.anthropic._request``)."""


def _forbid_extra(root: Any, seen: set[int] | None = None) -> None:
    """Mark every TypedDict reachable from ``root`` as closed (pydantic reads ``__pydantic_config__``)."""
    seen = set() if seen is None else seen
    if id(root) in seen:
        return
    seen.add(id(root))
    if is_typeddict(root):
        # Arbitrary types: the file-upload members of some unions (``IO[bytes]``) have no pydantic schema.
        root.__pydantic_config__ = {"extra": "forbid", "arbitrary_types_allowed": True}
        for hint in typing.get_type_hints(root, include_extras=True).values():
            _forbid_extra(hint, seen)
        return
    if isinstance(root, type) and issubclass(root, BaseModel):
        # A response model in a request union (Anthropic lets a block read from a response be sent back
        # as it is): closed too, its fields first, as a rebuilt model embeds its fields' schemas.
        for field in root.model_fields.values():
            _forbid_extra(field.annotation, seen)
        root.model_config["extra"] = "forbid"
        root.model_rebuild(force=True)
        return
    for arg in typing.get_args(root):
        _forbid_extra(arg, seen)
    value = getattr(root, "__value__", None)  # a ``type X = ...`` alias
    if value is not None:
        _forbid_extra(value, seen)


@functools.cache
def _adapter(root: Any) -> TypeAdapter[Any]:
    _forbid_extra(root)
    return TypeAdapter(root)


def _check_create(params: Any, name: str, body: dict[str, Any], wire: str) -> None:
    """The SDKs type a create request twice, by its ``stream``: ``<name>Streaming``, ``<name>NonStreaming``."""
    root = getattr(params, f"{name}Streaming" if body.get("stream") else f"{name}NonStreaming")
    _check(_adapter(root), body, wire)


def _consume(value: Any, path: str = "") -> None:
    """pydantic validates an ``Iterable[X]`` field lazily, as it is iterated: iterate every one."""
    if isinstance(value, dict):
        for key, item in value.items():
            _consume(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple, Iterator)):
        for index, item in enumerate(value):
            _consume(item, f"{path}[{index}]")


def _check(adapter: TypeAdapter[Any], body: Any, wire: str) -> None:
    try:
        _consume(adapter.validate_python(body))
    except ValidationError as exc:
        raise AssertionError(f"{wire} request body does not fit the SDK's type:\n{_short(exc)}") from None


def _short(exc: ValidationError) -> str:
    """The errors of the union members whose ``type`` matched (the full report lists every member of every
    union), deepest first."""
    errors = exc.errors()
    wrong_type = {
        e["loc"][:-1] for e in errors if e["loc"] and e["loc"][-1] == "type" and e["type"] == "literal_error"
    }
    kept = [e for e in errors if not any(e["loc"][: len(w)] == w for w in wrong_type)] or errors
    kept.sort(key=lambda e: -len(e["loc"]))
    return "\n".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in kept[:8])


# -- OpenAI -------------------------------------------------------------------------------------


def check_openai_chat(body: dict[str, Any]) -> None:
    from openai.types.chat import completion_create_params as params

    body = copy.deepcopy(body)
    for message in body.get("messages", []):
        for key in CHAT_EXTENSIONS["message"]:
            message.pop(key, None)
        for call in message.get("tool_calls") or []:
            for key in CHAT_EXTENSIONS["tool_call"]:
                call.pop(key, None)
    _check_create(params, "CompletionCreateParams", body, "Chat Completions")


def check_openai_responses(body: dict[str, Any]) -> None:
    from openai.types.responses import response_create_params as params

    _check_create(params, "ResponseCreateParams", body, "Responses")


# -- Anthropic ----------------------------------------------------------------------------------


def check_anthropic(body: dict[str, Any]) -> None:
    from anthropic.types import message_create_params as params

    body = {k: v for k, v in body.items() if k not in ANTHROPIC_SAMPLING}
    _check_create(params, "MessageCreateParams", body, "Anthropic Messages")


def check_anthropic_on_platform(body: dict[str, Any], *, version: str, model: str) -> None:
    """A Messages body for Vertex AI or Bedrock: the platform's ``anthropic_version`` in the body, no
    ``model`` (it is in the URL), Bedrock's betas as ``anthropic_beta``; the rest is ``MessageCreateParams``."""
    assert body.get("anthropic_version") == version, body.get("anthropic_version")
    assert "model" not in body
    assert all(isinstance(beta, str) for beta in body.get("anthropic_beta", []))
    rest = {k: v for k, v in body.items() if k not in ("anthropic_version", "anthropic_beta")}
    check_anthropic({**rest, "model": model})


# -- Gemini -------------------------------------------------------------------------------------


def check_gemini(body: dict[str, Any]) -> None:
    from google.genai import types

    fields: dict[str, Callable[[str], Any]] = {
        "contents": TypeAdapter(list[types.Content]).validate_json,
        "systemInstruction": types.Content.model_validate_json,
        "tools": TypeAdapter(list[types.Tool]).validate_json,
        "toolConfig": types.ToolConfig.model_validate_json,
        "generationConfig": types.GenerationConfig.model_validate_json,
        "safetySettings": TypeAdapter(list[types.SafetySetting]).validate_json,
        "cachedContent": TypeAdapter(str).validate_json,
    }
    unknown = set(body) - set(fields)
    assert not unknown, f"Gemini request body has fields GenerateContentRequest does not: {sorted(unknown)}"
    for key, validate in fields.items():
        if key in body:
            try:
                # JSON, as the REST API reads it: bytes fields (thoughtSignature, inline data) are base64.
                validate(json.dumps(body[key]))
            except ValidationError as exc:
                raise AssertionError(
                    f"Gemini request field {key!r} does not fit google-genai:\n{_short(exc)}"
                ) from None


# -- Bedrock ------------------------------------------------------------------------------------


@functools.cache
def _bedrock_shapes() -> tuple[Any, Any]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return model.operation_model("Converse").input_shape, model.operation_model("ConverseStream").input_shape


def check_bedrock(body: dict[str, Any], *, model_id: str, stream: bool) -> None:
    """``modelId`` travels in the URL, not the body; it is added so the input shape is complete."""
    from botocore.validate import ParamValidator

    converse, converse_stream = _bedrock_shapes()
    report = ParamValidator().validate({**body, "modelId": model_id}, converse_stream if stream else converse)
    assert not report.has_errors(), (
        f"Converse request body does not fit botocore:\n{report.generate_report()}"
    )


__all__ = [
    "ANTHROPIC_SAMPLING",
    "CHAT_EXTENSIONS",
    "check_anthropic",
    "check_bedrock",
    "check_gemini",
    "check_openai_chat",
    "check_openai_responses",
]
