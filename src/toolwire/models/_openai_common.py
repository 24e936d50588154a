"""Pieces shared by the OpenAI Chat Completions and Responses adapters: auth, in-stream errors, metadata.

Wire JSON is handled as plain ``dict[str, Any]`` here and in both adapters rather than TypedDicts: the
shapes vary across OpenAI-compatible servers (extra fields, missing fields, renamed fields), so every read
goes through ``.get`` with a type check instead of trusting a declared shape.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, TypeAlias

from toolwire.errors import ConfigError, ProviderProtocolError, UnsupportedContentError
from toolwire.messages import FilePart, ProviderMetadata, TextPart, Usage
from toolwire.models._keys import from_environment, is_own_host, pick_key
from toolwire.models._metadata import RoundTrip, read_back
from toolwire.models.base import FinishReason, StreamError

Json: TypeAlias = dict[str, Any]

PROVIDER = "openai"
"""The ``provider_metadata`` key of both adapters (also for OpenAI-compatible servers: same wire)."""
DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"
"""Sent to OpenAI's own hosts only (``api.openai.com`` and its regional ``*.api.openai.com``)."""
COMPATIBLE_KEY_VARIABLE = "OPENAI_COMPATIBLE_API_KEY"
"""The key for whichever other server a model is configured with; never sent to OpenAI."""

# Error codes/types that mean "the provider is overloaded or failed internally": worth retrying.
_RETRYABLE_CODES = frozenset(
    {
        "server_error",
        "internal_error",
        "internal_server_error",
        "overloaded",
        "overloaded_error",
        "service_unavailable",
        "rate_limit_exceeded",
        "rate_limit_error",
        "timeout",
    }
)


def resolve_base_url(base_url: str | None) -> str:
    """The explicit URL, else ``OPENAI_BASE_URL`` (as the OpenAI SDKs read it), else api.openai.com."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def is_openai_url(url: str) -> bool:
    return is_own_host(url, lambda host: host == "api.openai.com" or host.endswith(".api.openai.com"))


def resolve_api_key(api_key: str | None, base_url: str) -> str | None:
    """The key for ``base_url`` (see ``toolwire.models._keys``): ``OPENAI_API_KEY`` for OpenAI's own hosts,
    ``OPENAI_COMPATIBLE_API_KEY`` for any other server, none for a loopback server without one."""
    if is_openai_url(base_url):
        return pick_key(api_key, base_url, own_host=True, variables=(KEY_VARIABLE,), provider="OpenAI")
    if api_key is None:
        api_key = from_environment((COMPATIBLE_KEY_VARIABLE,))
    return pick_key(
        api_key,
        base_url,
        own_host=False,
        variables=(KEY_VARIABLE,),
        provider="OpenAI",
        elsewhere=f"pass api_key= or set {COMPATIBLE_KEY_VARIABLE}",
    )


def request_headers(
    api_key: str | None, base_url: str, extra: Mapping[str, str], *, stream: bool
) -> dict[str, str]:
    """Headers for one request (``api_key`` comes from :func:`resolve_api_key`; ``None`` sends none)."""
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream" if stream else "application/json",
    }
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    elif is_openai_url(base_url):  # the key was cleared after the model was built
        raise ConfigError(f"no OpenAI API key: pass api_key= or set {KEY_VARIABLE}")
    headers.update(extra)
    return headers


def openai_meta(metadata: ProviderMetadata, declared: RoundTrip) -> dict[str, Any]:
    """The keys an adapter ``declared`` in this provider's metadata; other providers' are never read."""
    return read_back(metadata, declared, PROVIDER)


def meta(**values: Any) -> ProviderMetadata:
    """``{"openai": values}`` without the ``None`` values, or ``{}`` when nothing is left."""
    kept = {k: v for k, v in values.items() if v is not None}
    return {PROVIDER: kept} if kept else {}


def error_event(payload: Any, *, model: str) -> StreamError:
    """An error inside a 200 stream (``event: error`` frame, ``response.failed``, ``error`` chunk)."""
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if not isinstance(err, dict):
        err = {"message": str(err)}
    code = err.get("code") or err.get("type")
    status = err.get("status_code")
    message = err.get("message") or "the provider reported an error in the stream"
    retryable = (isinstance(code, str) and code in _RETRYABLE_CODES) or (
        isinstance(status, int) and (status >= 500 or status == 429)
    )
    return StreamError(
        error=ProviderProtocolError(
            str(message),
            provider=PROVIDER,
            model=model,
            code=str(code) if code is not None else None,
            retryable=retryable,
            body=payload,
        )
    )


def protocol_error(message: str, *, model: str, retryable: bool = False) -> StreamError:
    return StreamError(
        error=ProviderProtocolError(message, provider=PROVIDER, model=model, retryable=retryable)
    )


def parse_json(data: str | bytes) -> Any:
    """``json.loads`` returning ``None`` on invalid JSON (callers turn that into a protocol error)."""
    try:
        return json.loads(data)
    except ValueError:
        return None


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_dict(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def usage_from(
    usage: Json, *, input_key: str, output_key: str, input_details: str, output_details: str
) -> Usage:
    """Map an OpenAI usage object (Chat and Responses differ only in key names)."""
    cached = as_int(as_dict(usage.get(input_details)).get("cached_tokens"))
    if not cached:  # DeepSeek reports the cache hit under its own key
        cached = as_int(usage.get("prompt_cache_hit_tokens"))
    return Usage(
        input_tokens=as_int(usage.get(input_key)),
        output_tokens=as_int(usage.get(output_key)),
        reasoning_tokens=as_int(as_dict(usage.get(output_details)).get("reasoning_tokens")),
        cache_read_tokens=cached,
        requests=1,
    )


def finish_reason(raw: str | None, *, has_tool_calls: bool) -> FinishReason:
    match raw:
        case "stop" | "completed":
            return "tool-calls" if has_tool_calls else "stop"
        case "length" | "max_output_tokens" | "max_tokens":
            return "length"
        case "tool_calls" | "function_call":
            return "tool-calls"
        case "content_filter":
            return "content-filter"
        case None:
            return "tool-calls" if has_tool_calls else "other"
        case _:
            return "other"


def file_data_url(part: FilePart) -> str:
    """``data:`` URL for inline bytes, else the part's URL."""
    if part.data is not None:
        return f"data:{part.media_type};base64,{part.data}"
    if part.url is not None:
        return part.url
    raise UnsupportedContentError("a file part needs data or url")


def joined_text(parts: Any) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


__all__ = [
    "COMPATIBLE_KEY_VARIABLE",
    "DEFAULT_BASE_URL",
    "KEY_VARIABLE",
    "PROVIDER",
    "Json",
    "as_dict",
    "as_int",
    "compact_json",
    "error_event",
    "file_data_url",
    "finish_reason",
    "is_openai_url",
    "joined_text",
    "meta",
    "openai_meta",
    "parse_json",
    "protocol_error",
    "request_headers",
    "resolve_api_key",
    "resolve_base_url",
    "usage_from",
]


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI's strict structured-output mode accepts this schema: every object closes its
    properties (``additionalProperties: false``) and requires all of them. Anything else is sent with
    ``strict: false`` rather than rejected by the server."""
    if isinstance(schema, list):
        return all(strict_compatible(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", [])) != set(props):
            return False
    return all(
        strict_compatible(v) for k, v in schema.items() if k not in ("required", "enum", "const", "default")
    )
