"""The model contract: one streaming primitive yielding a closed union of stream parts.

Every adapter implements :meth:`Model.stream`. Everything else (non-streaming generation, agent steps,
UI streams) is derived from that one primitive (see ``toolwire.models._builder``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, get_args

from pydantic import Field, TypeAdapter

from toolwire._fast_init import fast_frozen_init
from toolwire.errors import ProviderError
from toolwire.messages import Message, ProviderMetadata, ToolCallPart, ToolResultPart, Usage
from toolwire.models._window import known_limits, learned, window_key

FinishReason: TypeAlias = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]
ToolChoice: TypeAlias = str
"""``"auto"`` | ``"required"`` | ``"none"`` | the name of one tool."""


# ---------------------------------------------------------------------------------------------
# Request side


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a model is told about one tool."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""
    strict: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Common generation settings; adapters warn (in ``stream-start``) about the ones they cannot honour."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    parallel_tool_calls: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields merged into the wire request as-is."""
    cache_breakpoints: bool = True
    """Mark the stable prefix for the provider's prompt cache: Anthropic ``cache_control`` (also on Vertex AI
    and Bedrock), Bedrock Converse ``cachePoint`` blocks (see ``toolwire.models._cache``)."""
    prompt_cache_key: bool | str = True
    """OpenAI's ``prompt_cache_key`` (its own API only): True sends the request's ``cache_key`` (or one
    derived from the instructions and tools), a string sends that key, False sends none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything an adapter needs to build one provider request."""

    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    tool_choice: ToolChoice = "auto"
    instructions: str | None = None
    """System prompt; adapters place it where the provider expects it."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    output_schema: dict[str, Any] | None = None
    """When set, the model must answer with JSON text matching this schema (native structured output / grammar)."""
    output_schema_name: str = "output"
    json_answer: bool = False
    """The answer is JSON text the instructions ask for (prompted output): streamed live, like an answer
    to ``output_schema``, not held back as a possible echo of tool-call arguments."""
    cache_key: str | None = None
    """What the conversation's requests share in the provider's prompt cache (the session id): OpenAI's
    ``prompt_cache_key``. ``None``: one derived from the instructions and tools."""
    cache_marks: tuple[str, ...] = ()
    """Ids of messages (oldest first) at whose end what is sent stays the same for many steps: the ends of
    the blocks compaction trimmed. An adapter with explicit cache breakpoints (Anthropic) puts one at the
    last two, so a step after the trimming boundary moved reads the prefix up to the previous boundary from
    the cache instead of writing it again."""


# ---------------------------------------------------------------------------------------------
# Stream parts (adapter output). Start/delta/end triplets are addressed by ``id``.


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStart:
    type: Literal["stream-start"] = "stream-start"
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseMetadata:
    type: Literal["response-metadata"] = "response-metadata"
    response_id: str | None = None
    model: str | None = None
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextStart:
    type: Literal["text-start"] = "text-start"
    id: str
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    type: Literal["text-delta"] = "text-delta"
    id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TextEnd:
    type: Literal["text-end"] = "text-end"
    id: str
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    """Merged over the start's metadata (e.g. a signature that arrives at the end)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningStart:
    type: Literal["reasoning-start"] = "reasoning-start"
    id: str
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    type: Literal["reasoning-delta"] = "reasoning-delta"
    id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningEnd:
    type: Literal["reasoning-end"] = "reasoning-end"
    id: str
    signature: str | None = None
    redacted_data: str | None = None
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputStart:
    type: Literal["tool-input-start"] = "tool-input-start"
    tool_call_id: str
    tool_name: str
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputDelta:
    type: Literal["tool-input-delta"] = "tool-input-delta"
    tool_call_id: str
    delta: str
    """A raw fragment of the argument JSON, exactly as received."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputEnd:
    """The call is complete: carries the whole call with parsed arguments."""

    type: Literal["tool-input-end"] = "tool-input-end"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = field(default_factory=dict)
    args_json: str = "{}"
    args_error: str | None = None
    """Set when ``args_json`` is not a JSON object; ``args`` is then empty and the call gets an error result."""
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    title: str | None = None

    def to_part(self) -> ToolCallPart:
        return ToolCallPart(
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            args=self.args,
            args_json=self.args_json,
            provider_metadata=self.provider_metadata,
            provider_executed=self.provider_executed,
            title=self.title,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A result the provider produced itself (provider-executed tools)."""

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    output: Any = None
    is_error: bool = False
    provider_metadata: ProviderMetadata = field(default_factory=dict)

    def to_part(self) -> ToolResultPart:
        return ToolResultPart(
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            output=self.output,
            is_error=self.is_error,
            provider_metadata=self.provider_metadata,
            provider_executed=True,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class File:
    type: Literal["file"] = "file"
    media_type: str
    data: str
    """Base64 bytes."""
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRetry:
    """A driver's, never an adapter's: the model's reply was not a valid decision and it is asked again
    (the ReAct driver). Not stored; the loop announces it as a ``system-message`` event with code
    ``decision-retry``, so every client sees the re-prompt."""

    type: Literal["decision-retry"] = "decision-retry"
    attempt: int
    """The attempt that failed, from 1."""
    error: str
    """Why it was not valid (what the model is told)."""
    raw_output: str = ""
    """What the model replied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    type: Literal["finish"] = "finish"
    reason: FinishReason
    raw_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    provider_metadata: ProviderMetadata = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamError:
    """An error reported inside an otherwise successful stream (e.g. an SSE ``error`` event)."""

    type: Literal["error"] = "error"
    error: ProviderError


_SerializablePart: TypeAlias = (
    StreamStart
    | ResponseMetadata
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolInputEnd
    | ToolResult
    | File
    | DecisionRetry
    | Finish
)
"""Every stream part but :class:`StreamError`, which holds an exception pydantic cannot describe."""

ModelStreamPart: TypeAlias = Annotated[_SerializablePart | StreamError, Field(discriminator="type")]

for _part_class in (*get_args(_SerializablePart), StreamError):
    fast_frozen_init(_part_class)  # one part per streamed fragment: built at slot speed

StreamPartAdapter: TypeAdapter[Any] = TypeAdapter(Annotated[_SerializablePart, Field(discriminator="type")])
"""Serializes every stream part except :class:`StreamError` (golden files, debugging)."""


# ---------------------------------------------------------------------------------------------
# The contract


class Model(ABC):
    """A model adapter. Implement :meth:`stream`; nothing else is required."""

    provider: str = "unknown"
    """Key used in ``provider_metadata`` and in stored rows (``openai``, ``anthropic``, ``google``, ...)."""
    model_name: str = "unknown"
    supports_tools: bool = True
    """False for models driven by the ReAct driver (no native function calling)."""
    tool_calls_per_turn: int | None = None
    """For a model driven by the ReAct driver: how many tool calls one user turn may make before only an
    answer is allowed (the default driver's ``max_calls_per_turn``); None: no limit."""
    supports_native_output: bool = False
    """True when ``request.output_schema`` is enforced by the provider (JSON schema structured output)."""
    forced_tool_call: bool = True
    """Whether the provider takes ``tool_choice: "required"``: the ``final_result`` tool mode needs it.
    When not (and no native output), ``output_mode="auto"`` asks in the instructions (prompted)."""
    prompted_output_without_tools: bool = False
    """Whether ``output_mode="auto"`` puts the schema in the instructions (prompted) rather than asking
    through the ``final_result`` tool in a run without tools: for servers that enforce no schema and serve
    models that may lack function calling (OpenAI-compatible presets, see ``models._catalog``)."""
    counts_tokens: ClassVar[bool] = True
    """Whether the usage it reports is the provider's own count of a request's tokens (what the token
    estimates learn from); a scripted model's is made up."""
    _context_window: int | None = None
    _max_output_tokens: int | None = None

    @property
    def context_window(self) -> int | None:
        """Tokens one request may hold, prompt and output together: as set (``context_window=``), else as
        learned from the provider's own context-length error, else as documented for the model's family
        (``toolwire.models._window``); ``None`` when unknown."""
        if self._context_window is not None:
            return self._context_window
        stated = learned(window_key(self))
        if stated is not None:
            return stated
        limits = known_limits(self.model_name)
        return limits.context_window if limits is not None else None

    @context_window.setter
    def context_window(self, tokens: int | None) -> None:
        self._context_window = tokens

    @property
    def max_output_tokens(self) -> int | None:
        """The most tokens one answer may have: as set (``max_output_tokens=``), else as documented for the
        model's family; ``None`` when unknown. (How many one request asks for is ``ModelSettings.max_tokens``.)"""
        if self._max_output_tokens is not None:
            return self._max_output_tokens
        limits = known_limits(self.model_name)
        return limits.max_output_tokens if limits is not None else None

    @max_output_tokens.setter
    def max_output_tokens(self, tokens: int | None) -> None:
        self._max_output_tokens = tokens

    @property
    def configured_provider(self) -> str:
        """The provider as the user named it (a model string's prefix): ``ollama`` for ``ollama:llama3``,
        whose wire (:attr:`provider`) is OpenAI's. What people are shown, and a turn's error is stored with."""
        return self.provider

    @property
    def otel_provider_name(self) -> str:
        """The provider as OpenTelemetry's ``gen_ai.provider.name`` names it (its well-known values where one
        exists: ``openai``, ``anthropic``, ``gcp.gemini``, ``gcp.vertex_ai``, ``aws.bedrock``, ...)."""
        return self.provider

    @property
    def native_output_with_tools(self) -> bool:
        """Whether native structured output may be sent in a request that also has function tools (when
        not, a run with tools asks for the output through the ``final_result`` tool)."""
        return self.supports_native_output

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        """Stream one model response as canonical parts. Raises :class:`ProviderError` on HTTP failure."""

    async def aclose(self) -> None:
        """Release resources (HTTP clients the adapter created itself)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """A whole response, assembled from stream parts by :func:`toolwire.models.collect`."""

    message: Message
    finish_reason: FinishReason
    raw_finish_reason: str | None
    usage: Usage
    response_id: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return self.message.tool_calls


__all__ = [
    "File",
    "Finish",
    "FinishReason",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamPart",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningStart",
    "ResponseMetadata",
    "StreamError",
    "StreamPartAdapter",
    "StreamStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ToolChoice",
    "ToolDefinition",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
    "ToolResult",
]
