"""What the OpenAI Chat Completions and Responses adapters share: the model base (credentials, headers, the
exchange), in-stream errors, usage and finish mapping, metadata and content helpers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, assert_never

from toolwire.errors import MissingKeyError, ProviderProtocolError, UnsupportedContentError
from toolwire.messages import FilePart, Message, Part, ProviderMetadata, TextPart, ToolResultPart, Usage
from toolwire.models._catalog import Preset, get_preset, tool_choice_kind
from toolwire.models._http import Exchange, HTTPModel, Json, WireParser
from toolwire.models._metadata import RoundTrip, read_back
from toolwire.models._providers import OPENAI, preset_endpoint
from toolwire.models._strict_schema import close_schema
from toolwire.models._window import as_context_length
from toolwire.models.base import FinishReason, ModelRequest, StreamError

PROVIDER = "openai"
"""The ``provider_metadata`` key of both adapters (also for OpenAI-compatible servers: same wire)."""

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


_OTEL_NAMES = {
    "xai": "x_ai",
    "mistral": "mistral_ai",
    "azure": "azure.ai.openai",
    "azure-responses": "azure.ai.openai",
}
"""Presets whose OpenTelemetry ``gen_ai.provider.name`` differs from the preset's name."""


class OpenAIWireModel(HTTPModel):
    """The base of both OpenAI adapters: OpenAI's key rule (``_providers.OPENAI``) or a preset's
    (``_catalog``), bearer auth, and one ``POST {base_url}{path}`` of the body the wire builds."""

    provider = PROVIDER
    supports_native_output = True
    path: ClassVar[str]
    """The endpoint under ``base_url``."""
    preset: Preset | None = None
    """The provider preset (``groq``, ``ollama``...): its URL, key variable and quirks. Set before
    ``super().__init__()``, which resolves the credentials."""

    @property
    def configured_provider(self) -> str:
        """``openai``, or the preset's name (``ollama``, ``groq``, ``azure``...)."""
        return self.preset.name if self.preset is not None else PROVIDER

    @property
    def otel_provider_name(self) -> str:
        """``openai``; a preset's provider by its well-known OpenTelemetry name where it has one, else by
        the preset's own name (``ollama``, ``vllm``, ...)."""
        if self.preset is None:
            return PROVIDER
        return _OTEL_NAMES.get(self.preset.name, self.preset.name)

    def _use_preset(self, preset: str | Preset | None) -> None:
        self.preset = get_preset(preset) if isinstance(preset, str) else preset
        if self.preset is not None:  # what structured output its server takes (``output_mode="auto"``)
            self.supports_native_output = self.preset.json_schema_output
            self.prompted_output_without_tools = not self.preset.json_schema_output
            self.forced_tool_call = "required" in self.preset.tool_choices

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        if self.preset is not None:
            return preset_endpoint(self.preset, api_key, base_url)
        return OPENAI.endpoint(api_key, base_url)

    def _url(self) -> str:
        return f"{self.base_url}{self.path}"

    def _auth_headers(self) -> dict[str, str]:
        if self.api_key:
            return {"authorization": f"Bearer {self.api_key}"}
        if OPENAI.owns(self.base_url):  # the key was cleared after the model was built
            raise MissingKeyError("no OpenAI API key", variables=OPENAI.key_variables[:1])
        return {}

    def unsupported_tool_choice(self, choice: str) -> str | None:
        """A warning when the preset's server does not take ``choice`` (then it is left out)."""
        if self.preset is None or tool_choice_kind(choice) in self.preset.tool_choices:
            return None
        return f"tool_choice {choice!r} ignored: {self.preset.title} does not support it"

    def set_tool_choice(
        self, body: Json, choice: str, wire_choice: str | Json, *, has_tools: bool, warnings: list[str]
    ) -> None:
        """``tool_choice`` into ``body`` (as ``wire_choice``), unless the server does not take it or the
        request has no tools (then a warning says why it was left out)."""
        if not has_tools:
            if choice not in ("auto", "none"):
                warnings.append(f"tool_choice {choice!r} ignored: the request has no tools")
        elif unsupported := self.unsupported_tool_choice(choice):
            warnings.append(unsupported)
        else:
            body["tool_choice"] = wire_choice

    @abstractmethod
    def build_body(self, request: ModelRequest) -> tuple[Json, list[str]]:
        """The request body for ``request`` and warnings about settings the wire cannot honour."""

    @abstractmethod
    def _parser(self) -> WireParser: ...

    async def _exchange(self, request: ModelRequest) -> Exchange:
        body, warnings = self.build_body(request)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream_enabled else "application/json",
            **self._auth_headers(),
        }
        return Exchange(
            url=self._url(),
            headers=headers,
            body=body,
            parser=self._parser(),
            warnings=warnings,
        )


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
        error=as_context_length(
            ProviderProtocolError(
                str(message),
                provider=PROVIDER,
                model=model,
                code=str(code) if code is not None else None,
                retryable=retryable,
                body=payload,
            )
        )
    )


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


class OpenAIHistory(ABC):
    """Canonical history -> Chat ``messages`` or Responses ``input`` items: the two wires take the same roles
    and differ in how an assistant message, a tool result and a file are spelled."""

    text_type: ClassVar[str]
    """The type of a text part in user content."""

    def items(self, messages: Sequence[Message]) -> list[Json]:
        out: list[Json] = []
        for message in messages:
            match message.role:
                case "system":
                    out.append({"role": "system", "content": joined_text(message.parts)})
                case "user":
                    out.extend(self._user(message.parts))
                case "assistant":
                    out.extend(self.assistant(message))
                case "tool":
                    out.extend(self.tool_results(message.parts))
                case _:
                    assert_never(message.role)
        return out

    def _user(self, parts: Sequence[Part]) -> list[Json]:
        # Results that ended up in a user message still go first: they answer the calls before it.
        out = self.tool_results(parts)
        content = [p for p in parts if not isinstance(p, ToolResultPart)]
        if not content:
            return out
        if len(content) == 1 and isinstance(content[0], TextPart):
            return [*out, {"role": "user", "content": content[0].text}]
        wire: list[Json] = []
        for part in content:
            match part:
                case TextPart():
                    wire.append({"type": self.text_type, "text": part.text})
                case FilePart():
                    wire.append(self.file(part))
                case _:
                    raise UnsupportedContentError(f"a {part.type} part cannot be sent in a user message")
        return [*out, {"role": "user", "content": wire}]

    @abstractmethod
    def assistant(self, message: Message) -> list[Json]: ...

    @abstractmethod
    def tool_results(self, parts: Sequence[Part]) -> list[Json]:
        """The results among ``parts`` that answer our calls (provider-executed ones have no form here)."""

    @abstractmethod
    def file(self, part: FilePart) -> Json: ...


def joined_text(parts: Any) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def json_schema_format(request: ModelRequest, warnings: list[str]) -> Json:
    """The ``json_schema`` response format both wires send (Chat nests it under ``json_schema``, Responses
    spreads it into ``text.format``): the schema closed as strict mode requires, ``strict: true`` when it
    could be closed, else ``strict: false`` and a warning saying what stayed open."""
    assert request.output_schema is not None
    closed = close_schema(request.output_schema, require_all=True)
    for problem in closed.problems:
        warnings.append(f"strict structured output is off: {problem}")
    return {"name": request.output_schema_name, "schema": closed.schema, "strict": not closed.problems}


__all__ = [
    "PROVIDER",
    "OpenAIHistory",
    "OpenAIWireModel",
    "as_dict",
    "as_int",
    "error_event",
    "file_data_url",
    "finish_reason",
    "joined_text",
    "json_schema_format",
    "meta",
    "openai_meta",
    "usage_from",
]
