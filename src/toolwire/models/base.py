"""The model contract: one streaming primitive yielding a closed union of stream parts.

Every adapter implements :meth:`Model.stream`. Everything else (non-streaming generation, agent steps,
UI streams) is derived from that one primitive; :func:`collect` turns a stream into a response.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, assert_never

from pydantic import Field, TypeAdapter

from toolwire.errors import ProviderError, ProviderProtocolError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ProviderMetadata,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

T = TypeVar("T")

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
    id: str
    """The tool call id."""
    tool_name: str
    provider_metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    title: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputDelta:
    type: Literal["tool-input-delta"] = "tool-input-delta"
    id: str
    delta: str
    """A raw fragment of the argument JSON, exactly as received."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInputEnd:
    """The call is complete: carries the whole call with parsed arguments."""

    type: Literal["tool-input-end"] = "tool-input-end"
    id: str
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
            tool_call_id=self.id,
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


ModelStreamPart: TypeAlias = Annotated[
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
    | Finish
    | StreamError,
    Field(discriminator="type"),
]


def _stream_part_adapter() -> TypeAdapter[Any]:
    # StreamError holds an exception, which pydantic cannot describe; it is excluded from the adapter.
    return TypeAdapter(
        Annotated[
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
            | Finish,
            Field(discriminator="type"),
        ]
    )


StreamPartAdapter: TypeAdapter[Any] = _stream_part_adapter()
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
    supports_native_output: bool = False
    """True when ``request.output_schema`` is enforced by the provider (JSON schema structured output)."""

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        """Stream one model response as canonical parts. Raises :class:`ProviderError` on HTTP failure."""

    async def aclose(self) -> None:
        """Release resources (HTTP clients the adapter created itself)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """A whole response, assembled from stream parts by :func:`collect`."""

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


def merge_metadata(base: ProviderMetadata, extra: ProviderMetadata) -> ProviderMetadata:
    """Merge provider metadata one provider key deep (later values win)."""
    if not extra:
        return base
    if not base:
        return extra
    out = {k: dict(v) for k, v in base.items()}
    for provider, values in extra.items():
        out.setdefault(provider, {}).update(values)
    return out


class MessageBuilder:
    """Assembles stream parts into an assistant message, in arrival order of each part's start.

    Shared by :func:`collect` and the agent loop so both build messages identically.
    """

    def __init__(self, *, provider: str | None = None, model: str | None = None) -> None:
        self.provider = provider
        self.model = model
        self.reset()

    def reset(self) -> None:
        """Forget everything received (a retried request starts over)."""
        self.args_errors: dict[str, str] = {}
        """Tool call id -> why its arguments could not be parsed."""
        self._slots: list[Any] = []
        self._open: dict[tuple[str, str], int] = {}
        self._text: dict[int, list[str]] = {}
        self.finish: Finish | None = None
        self.response_id: str | None = None
        self.warnings: tuple[str, ...] = ()
        self.error: ProviderError | None = None

    def add(self, part: ModelStreamPart) -> None:
        match part:
            case StreamStart():
                self.warnings = self.warnings + part.warnings
            case ResponseMetadata():
                self.response_id = part.response_id or self.response_id
                if part.model:  # the model that actually answered (e.g. a dated snapshot name)
                    self.model = part.model
            case TextStart() | TextDelta() | TextEnd() | ReasoningStart() | ReasoningDelta() | ReasoningEnd():
                self._add_text(part)
            case ToolInputStart() | ToolInputDelta() | ToolInputEnd():
                self._add_tool_input(part)
            case ToolResult():
                self._slots.append(part.to_part())
            case File():
                self._slots.append(
                    FilePart(
                        media_type=part.media_type, data=part.data, provider_metadata=part.provider_metadata
                    )
                )
            case Finish():
                self.finish = part
            case StreamError():
                self.error = part.error
            case _:
                assert_never(part)

    def _add_text(
        self, part: TextStart | TextDelta | TextEnd | ReasoningStart | ReasoningDelta | ReasoningEnd
    ) -> None:
        match part:
            case TextStart():
                self._open_slot("text", part.id, TextPart(text="", provider_metadata=part.provider_metadata))
            case TextDelta():
                self._delta("text", part.id, part.delta, lambda: TextPart(text=""))
            case TextEnd():
                self._close_text(part)
            case ReasoningStart():
                initial = ReasoningPart(text="", provider_metadata=part.provider_metadata)
                self._open_slot("reasoning", part.id, initial)
            case ReasoningDelta():
                self._delta("reasoning", part.id, part.delta, lambda: ReasoningPart(text=""))
            case ReasoningEnd():
                self._close_reasoning(part)

    def _add_tool_input(self, part: ToolInputStart | ToolInputDelta | ToolInputEnd) -> None:
        key = ("tool", part.id)
        if isinstance(part, ToolInputStart):
            if key not in self._open:
                self._open[key] = len(self._slots)
                self._slots.append(None)  # keeps the call's place among the parts
        elif isinstance(part, ToolInputEnd):
            if part.args_error is not None:
                self.args_errors[part.id] = part.args_error
            index = self._open.pop(key, None)
            if index is None:
                self._slots.append(part.to_part())
            else:
                self._slots[index] = part.to_part()

    def _open_slot(self, kind: str, part_id: str, initial: Any) -> None:
        self._open[(kind, part_id)] = len(self._slots)
        self._text[len(self._slots)] = []
        self._slots.append(initial)

    def _delta(self, kind: str, part_id: str, delta: str, factory: Any) -> None:
        index = self._open.get((kind, part_id))
        if index is None:  # a delta without a start: tolerate it
            self._open_slot(kind, part_id, factory())
            index = self._open[(kind, part_id)]
        self._text[index].append(delta)

    def _close_text(self, part: TextEnd) -> None:
        index = self._open.pop(("text", part.id), None)
        if index is None:
            return
        current: TextPart = self._slots[index]
        self._slots[index] = TextPart(
            text="".join(self._text.pop(index)),
            provider_metadata=merge_metadata(current.provider_metadata, part.provider_metadata),
        )

    def _close_reasoning(self, part: ReasoningEnd) -> None:
        index = self._open.pop(("reasoning", part.id), None)
        if index is None:
            index = len(self._slots)
            self._slots.append(ReasoningPart(text=""))
            self._text[index] = []
        current: ReasoningPart = self._slots[index]
        self._slots[index] = ReasoningPart(
            text="".join(self._text.pop(index)),
            signature=part.signature,
            redacted_data=part.redacted_data,
            provider_metadata=merge_metadata(current.provider_metadata, part.provider_metadata),
        )

    def parts(self) -> tuple[Part, ...]:
        """Completed parts. Unclosed text/reasoning is closed; unfinished tool calls are dropped."""
        out: list[Part] = []
        for index, slot in enumerate(self._slots):
            if slot is None:
                continue  # tool input never completed
            if index in self._text:  # still open
                text = "".join(self._text[index])
                if isinstance(slot, TextPart):
                    slot = TextPart(text=text, provider_metadata=slot.provider_metadata)
                else:
                    slot = ReasoningPart(text=text, provider_metadata=slot.provider_metadata)
            out.append(slot)
        return tuple(out)

    def message(self, *, session_id: str | None = None) -> Message:
        return Message(
            role="assistant",
            parts=self.parts(),
            session_id=session_id,
            provider=self.provider,
            model=self.model,
        )


async def collect(model: Model, request: ModelRequest) -> ModelResponse:
    """Run ``model.stream`` to completion and assemble the response (the non-streaming path)."""
    builder = MessageBuilder(provider=model.provider, model=model.model_name)
    async for part in model.stream(request):
        builder.add(part)
        if builder.error is not None:
            raise builder.error
    finish = builder.finish
    if finish is None:
        raise ProviderProtocolError(
            "stream ended without a finish part", provider=model.provider, model=model.model_name
        )
    return ModelResponse(
        message=builder.message(),
        finish_reason=finish.reason,
        raw_finish_reason=finish.raw_reason,
        usage=finish.usage,
        response_id=builder.response_id,
        warnings=builder.warnings,
    )


@asynccontextmanager
async def closing(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """Like ``contextlib.aclosing`` for any async iterator: closes it (if it can be closed) on exit, so a
    cancelled consumer stops the producer (and its HTTP response) at once."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def parse_tool_args(args_json: str) -> tuple[dict[str, Any], str | None]:
    """Parse argument JSON. An empty string means ``{}``. Returns ``(args, error)``."""
    text = args_json.strip()
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


class ToolArgsAccumulator:
    """Collects argument fragments for one call in O(total bytes): fragments are joined once at the end."""

    __slots__ = ("_fragments",)

    def __init__(self) -> None:
        self._fragments: list[str] = []

    def add(self, fragment: str) -> None:
        if fragment:
            self._fragments.append(fragment)

    def text(self) -> str:
        return "".join(self._fragments)

    def end(
        self,
        *,
        id: str,
        tool_name: str,
        provider_metadata: ProviderMetadata | None = None,
        provider_executed: bool = False,
        title: str | None = None,
    ) -> ToolInputEnd:
        raw = self.text()
        args, error = parse_tool_args(raw)
        return ToolInputEnd(
            id=id,
            tool_name=tool_name,
            args=args,
            args_json=raw if raw.strip() else "{}",
            args_error=error,
            provider_metadata=provider_metadata or {},
            provider_executed=provider_executed,
            title=title,
        )


__all__ = [
    "File",
    "Finish",
    "FinishReason",
    "MessageBuilder",
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
    "StreamStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ToolArgsAccumulator",
    "ToolChoice",
    "ToolDefinition",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
    "ToolResult",
    "collect",
    "merge_metadata",
    "parse_tool_args",
]
