"""Canonical messages and parts: the one history shape every provider is translated to and from.

Parts are frozen, slotted dataclasses with a ``type`` literal. The one field that says what a part is
may be given positionally: ``TextPart("hi")``, ``ReasoningPart("...")``, ``ToolCallPart("lookup",
tool_call_id=..., args=...)``, ``ToolResultPart("lookup", tool_call_id=..., output=...)``,
``FilePart("image/png", url=...)``; every other field is keyword-only. Fields keep their declared order
(``type`` first, then ``tool_call_id``, marked keyword-only one by one) because that order is the key
order of stored and serialized parts.

``provider_metadata`` is keyed by provider (``{"google": {"thoughtSignature": ...}}``); an adapter reads
and writes only its own key, which is how metadata of one provider never reaches another.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from toolwire._fast_init import fast_frozen_init

JsonValue: TypeAlias = Any
ProviderMetadata: TypeAlias = dict[str, dict[str, Any]]
Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


def new_id(prefix: str = "") -> str:
    """A random, URL-safe identifier: 128 random bits in hex, the shape of ``uuid4().hex`` at a quarter
    of its cost (several ids are made per agent step)."""
    return f"{prefix}{os.urandom(16).hex()}"


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text from the user or the model."""

    type: Literal["text"] = field(default="text", kw_only=True)
    text: str
    _: KW_ONLY
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    """E.g. a Gemini ``thoughtSignature`` on a trailing text part, an OpenAI Responses message id."""


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """Model reasoning ("thinking"). Either readable text with an optional signature, or opaque redacted data."""

    type: Literal["reasoning"] = field(default="reasoning", kw_only=True)
    text: str = ""
    _: KW_ONLY
    signature: str | None = None
    """Provider signature that must be sent back with the text (Anthropic, Bedrock)."""
    redacted_data: str | None = None
    """Opaque encrypted reasoning that must be sent back unchanged (Anthropic ``redacted_thinking``)."""
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call made by the model (or executed by the provider itself when ``provider_executed``)."""

    type: Literal["tool-call"] = field(default="tool-call", kw_only=True)
    tool_call_id: str = field(kw_only=True)
    tool_name: str
    _: KW_ONLY
    args: dict[str, Any] = field(default_factory=dict)
    args_json: str = ""
    """The raw argument text as the provider sent it; derived from ``args`` when empty."""
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    title: str | None = None

    def __post_init__(self) -> None:
        if not self.args_json:
            object.__setattr__(self, "args_json", json.dumps(self.args, separators=(",", ":")))

    def wire_args_json(self) -> str:
        """The argument text to send back: the provider's own text when it is a JSON object, else ``args``."""
        try:
            if isinstance(json.loads(self.args_json), dict):
                return self.args_json
        except ValueError:
            pass
        return json.dumps(self.args, separators=(",", ":"))


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The result of a tool call, matched to it by ``tool_call_id``."""

    type: Literal["tool-result"] = field(default="tool-result", kw_only=True)
    tool_call_id: str = field(kw_only=True)
    tool_name: str
    _: KW_ONLY
    output: JsonValue = None
    is_error: bool = False
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    """True for results the provider produced itself (Anthropic server tools); we never send our own."""

    def output_text(self) -> str:
        """The output as text, for wires that only accept strings."""
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class FilePart:
    """A file or image, inline (base64 ``data``) or by ``url``."""

    type: Literal["file"] = field(default="file", kw_only=True)
    media_type: str
    _: KW_ONLY
    data: str | None = None
    """Base64-encoded bytes."""
    url: str | None = None
    filename: str | None = None
    provider_metadata: ProviderMetadata = field(default_factory=dict)


Part: TypeAlias = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart, Field(discriminator="type")
]


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage; add two with ``+``."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            requests=self.requests + other.requests,
        )


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a conversation. Tool results of one step travel in one ``tool`` message."""

    role: Role
    parts: tuple[Part, ...]
    id: str = field(default_factory=lambda: new_id("msg_"))
    session_id: str | None = None
    created_at: float = field(default_factory=time.time)
    provider: str | None = None
    """The provider whose model produced an assistant message (``None`` for user/tool messages)."""
    model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.parts, tuple):
            object.__setattr__(self, "parts", tuple(self.parts))

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        return cls(role="user", parts=(TextPart(text=text),), **kwargs)

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> Message:
        return cls(role="system", parts=(TextPart(text=text),), **kwargs)


PartAdapter: TypeAdapter[Part] = TypeAdapter(Part)
MessageAdapter: TypeAdapter[Message] = TypeAdapter(Message)
MessagesAdapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
UsageAdapter: TypeAdapter[Usage] = TypeAdapter(Usage)


def messages_to_json(messages: Sequence[Message]) -> str:
    """Serialize messages to JSON without loss."""
    return MessagesAdapter.dump_json(list(messages)).decode()


def messages_from_json(data: str | bytes) -> list[Message]:
    """Inverse of :func:`messages_to_json`."""
    return MessagesAdapter.validate_json(data)


def parts_to_jsonable(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Parts as plain JSON-compatible dicts (for storage)."""
    return [PartAdapter.dump_python(p, mode="json") for p in parts]


def parts_from_jsonable(data: Sequence[dict[str, Any]]) -> tuple[Part, ...]:
    return tuple(PartAdapter.validate_python(d) for d in data)
