"""Both sides of a model stream, shared by every adapter and by the agent loop.

Writing parts (adapters): text and reasoning parts, tool arguments accumulated and parsed alike everywhere.
Reading parts: :class:`MessageBuilder` assembles a stream into a message and :func:`collect` runs one to the
end, so the agent loop and non-streaming callers build messages identically.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Generic, Literal, TypeAlias, TypeVar, assert_never

from toolwire.errors import ProviderError, ProviderProtocolError
from toolwire.messages import FilePart, Message, Part, ProviderMetadata, ReasoningPart, TextPart
from toolwire.models.base import (
    DecisionRetry,
    File,
    Finish,
    Model,
    ModelRequest,
    ModelResponse,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResult,
)

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# Writing parts

TextKind: TypeAlias = Literal["text", "reasoning"]
"""Text and reasoning stream alike: a start, deltas, an end."""


def text_start(kind: TextKind, id: str, provider_metadata: ProviderMetadata | None = None) -> ModelStreamPart:
    if kind == "text":
        return TextStart(id=id, provider_metadata=provider_metadata or {})
    return ReasoningStart(id=id, provider_metadata=provider_metadata or {})


def text_delta(kind: TextKind, id: str, delta: str) -> ModelStreamPart:
    return TextDelta(id=id, delta=delta) if kind == "text" else ReasoningDelta(id=id, delta=delta)


def text_end(
    kind: TextKind,
    id: str,
    provider_metadata: ProviderMetadata | None = None,
    *,
    signature: str | None = None,
    redacted_data: str | None = None,
) -> ModelStreamPart:
    """The end of a text or reasoning part; only reasoning carries a signature or redacted data."""
    if kind == "text":
        return TextEnd(id=id, provider_metadata=provider_metadata or {})
    metadata = provider_metadata or {}
    return ReasoningEnd(id=id, signature=signature, redacted_data=redacted_data, provider_metadata=metadata)


def compact_json(value: Any) -> str:
    """Compact JSON with non-ASCII kept as-is: the form of argument text toolwire writes itself."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
            tool_call_id=id,
            tool_name=tool_name,
            args=args,
            args_json=raw if raw.strip() else "{}",
            args_error=error,
            provider_metadata=provider_metadata or {},
            provider_executed=provider_executed,
            title=title,
        )


def whole_tool_input(
    id: str,
    tool_name: str,
    args: Any,
    *,
    provider_metadata: ProviderMetadata | None = None,
    provider_executed: bool = False,
) -> list[ModelStreamPart]:
    """The delta and end of a call whose arguments arrived whole (a non-streamed call, a built-in tool)."""
    accumulator = ToolArgsAccumulator()
    accumulator.add(compact_json(args))
    return [
        ToolInputDelta(tool_call_id=id, delta=accumulator.text()),
        accumulator.end(
            id=id,
            tool_name=tool_name,
            provider_metadata=provider_metadata,
            provider_executed=provider_executed,
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Reading parts


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
            case DecisionRetry():
                pass  # a rejected attempt: announced, never part of the message
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
        key = ("tool", part.tool_call_id)
        if isinstance(part, ToolInputStart):
            if key not in self._open:
                self._open[key] = len(self._slots)
                self._slots.append(None)  # keeps the call's place among the parts
        elif isinstance(part, ToolInputEnd):
            if part.args_error is not None:
                self.args_errors[part.tool_call_id] = part.args_error
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


class closing(Generic[T]):  # lower case, like contextlib.aclosing
    """``contextlib.aclosing`` for a stream typed as a plain ``AsyncIterator`` (what :meth:`Model.stream` and
    the agent's drivers promise): closes it on exit when it can be closed, so a consumer that stops early
    stops the producer (and its HTTP response) at once. ``aclosing`` itself needs a declared ``aclose``.
    A class rather than an ``@asynccontextmanager``: that one is itself a generator to start and close,
    on every model step."""

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncIterator[T]) -> None:
        self._stream = stream

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._stream

    async def __aexit__(self, *exc_info: object) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def collect(model: Model, request: ModelRequest) -> ModelResponse:
    """Run ``model.stream`` to completion and assemble the response (the non-streaming path)."""
    builder = MessageBuilder(provider=model.provider, model=model.model_name)
    async with closing(model.stream(request)) as parts:  # an error part stops the HTTP response now
        async for part in parts:
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


__all__ = [
    "MessageBuilder",
    "TextKind",
    "ToolArgsAccumulator",
    "closing",
    "collect",
    "compact_json",
    "merge_metadata",
    "parse_tool_args",
    "text_delta",
    "text_end",
    "text_start",
    "whole_tool_input",
]
