"""What the two content-block wires share: Anthropic Messages and Bedrock Converse.

Both take history as alternating user/assistant turns of typed blocks and stream a response as indexed
blocks (start, deltas, stop). :class:`BlockHistory` walks history once for both (turn merging, tool ids,
whose signatures may be sent back) and each adapter spells the blocks; :class:`OpenBlocks` holds the
blocks of a response between their start and stop.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from toolwire.errors import UnsupportedContentError
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
from toolwire.models._builder import TextKind, ToolArgsAccumulator, text_delta, text_end, text_start
from toolwire.models._http import Json
from toolwire.models.base import (
    Finish,
    FinishReason,
    ModelRequest,
    ModelStreamPart,
    ToolInputDelta,
    ToolInputStart,
)

_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")

FINISH_REASONS: Mapping[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}
"""Stop reasons both wires use; each adapter adds its own."""


# ---------------------------------------------------------------------------------------------
# Request: history -> turns


class BlockHistory(ABC):
    """Canonical history -> system texts and alternating turns of blocks. Subclasses spell each block."""

    provider: ClassVar[str]
    """Whose signatures (thinking, server tool blocks) may be sent back: only the provider that minted them."""
    label: ClassVar[str]
    """The wire's name in error messages."""
    empty_tool_id: ClassVar[str]

    def turns(self, request: ModelRequest) -> tuple[list[str], list[Json]]:
        """The system texts (the instructions first) and the turns of history; consecutive same-role messages
        (tool results followed by a user text, say) become one turn, as both wires require alternating roles."""
        system = [request.instructions] if request.instructions else []
        wire: list[Json] = []
        marks = set(request.cache_marks)
        self.marks: list[tuple[int, int]] = []
        """Where the messages named by ``request.cache_marks`` end: (turn, block), oldest first."""
        for message in request.messages:
            match message.role:
                case "system":
                    system.extend(p.text for p in message.parts if isinstance(p, TextPart) and p.text)
                    continue
                case "assistant":
                    role, content = "assistant", self._assistant(message)
                case "user" | "tool":
                    role, content = "user", self._user(message.parts, wire)
            if not content:
                continue
            if wire and wire[-1]["role"] == role:
                wire[-1]["content"].extend(content)
            else:
                wire.append({"role": role, "content": content})
            if message.id in marks:
                self.marks.append((len(wire) - 1, len(wire[-1]["content"]) - 1))
        return system, wire

    def tool_id(self, tool_call_id: str) -> str:
        """Both wires want ids matching ``^[a-zA-Z0-9_-]+$``; ids minted by other providers are made to fit."""
        return _ID_UNSAFE.sub("_", tool_call_id) or self.empty_tool_id

    def _assistant(self, message: Message) -> list[Json]:
        # ``Message.provider`` tells whose signatures a message holds; ``None`` means a hand-built history,
        # which we trust.
        own = message.provider in (None, self.provider)
        blocks: list[Json | None] = []
        for part in message.parts:
            match part:
                case TextPart():
                    if part.text:  # both APIs reject empty text blocks
                        blocks.append(self.assistant_text(part))
                case ReasoningPart():
                    blocks.append(self.reasoning(part) if own else None)
                case ToolCallPart():
                    blocks.append(self.tool_use(part, own=own))
                case ToolResultPart():
                    blocks.append(self.server_result(part) if part.provider_executed and own else None)
                case FilePart():
                    raise UnsupportedContentError(f"{self.label} assistant messages cannot contain files")
        return [block for block in blocks if block is not None]

    def _user(self, parts: Sequence[Part], wire: list[Json]) -> list[Json]:
        blocks: list[Json] = []
        for part in parts:
            match part:
                case TextPart():
                    if part.text:
                        blocks.append(self.text(part.text))
                case FilePart():
                    blocks.append(self.file(part))
                case ToolResultPart(provider_executed=True):
                    self._attach_server_result(part, wire)
                case ToolResultPart():
                    blocks.append(self.tool_result(part))
                case ReasoningPart() | ToolCallPart():
                    raise UnsupportedContentError(f"a {part.type} part cannot be sent in a user turn")
        return blocks

    def _attach_server_result(self, part: ToolResultPart, wire: list[Json]) -> None:
        """Provider-executed results belong to the assistant turn; move one there unless it already is."""
        if not wire or wire[-1]["role"] != "assistant":
            return
        content = wire[-1]["content"]
        result = self.server_result(part)
        if result is not None and not any(b.get("tool_use_id") == part.tool_call_id for b in content):
            content.append(result)

    @abstractmethod
    def text(self, text: str) -> Json: ...

    def assistant_text(self, part: TextPart) -> Json:
        """A text the model wrote; a wire may send back what it said about the text (citations)."""
        return self.text(part.text)

    @abstractmethod
    def file(self, part: FilePart) -> Json: ...

    @abstractmethod
    def reasoning(self, part: ReasoningPart) -> Json | None:
        """Our own reasoning, or ``None`` when it cannot be sent back (unsigned thinking, say)."""

    @abstractmethod
    def tool_use(self, part: ToolCallPart, *, own: bool) -> Json | None:
        """A call, or ``None`` when this wire cannot replay it (another provider's server-side call)."""

    @abstractmethod
    def tool_result(self, part: ToolResultPart) -> Json: ...

    def server_result(self, part: ToolResultPart) -> Json | None:
        """A provider-executed result replayed in the assistant turn; ``None``: the wire has no such block."""
        return None


def tool_input(part: ToolCallPart) -> Any:
    """The call's arguments as the model wrote them (its JSON text, so key order and numbers survive), else
    the parsed arguments."""
    try:
        return json.loads(part.wire_args_json())
    except ValueError:
        return part.args


# ---------------------------------------------------------------------------------------------
# Response: indexed blocks


@dataclass(slots=True)
class _Block:
    kind: Literal["text", "reasoning", "tool"]
    id: str
    tool_name: str = ""
    metadata: ProviderMetadata = field(default_factory=dict)
    provider_executed: bool = False
    args: ToolArgsAccumulator = field(default_factory=ToolArgsAccumulator)
    signature: str | None = None
    redacted: str | None = None


class OpenBlocks:
    """The blocks of one response between their start and their stop, by index."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}

    def open_text(self, index: int, kind: TextKind) -> list[ModelStreamPart]:
        """Open a text or reasoning block, unless it is open already."""
        if index in self._blocks:
            return []
        self._blocks[index] = _Block(kind, str(index))
        return [text_start(kind, str(index))]

    def open_tool(
        self,
        index: int,
        call_id: str,
        tool_name: str,
        *,
        metadata: ProviderMetadata | None = None,
        provider_executed: bool = False,
    ) -> list[ModelStreamPart]:
        block = _Block("tool", call_id, tool_name, metadata or {}, provider_executed)
        self._blocks[index] = block
        return [
            ToolInputStart(
                tool_call_id=call_id,
                tool_name=tool_name,
                provider_metadata=block.metadata,
                provider_executed=provider_executed,
            )
        ]

    def text(self, index: int, text: str) -> list[ModelStreamPart]:
        block = self._blocks.get(index)
        if block is None or not text:
            return []
        match block.kind:
            case "text" | "reasoning" as kind:
                return [text_delta(kind, block.id, text)]
            case "tool":
                return []

    def args(self, index: int, fragment: str) -> list[ModelStreamPart]:
        """A fragment of a tool call's argument JSON (an empty first fragment carries nothing)."""
        block = self._blocks.get(index)
        if block is None or block.kind != "tool" or not fragment:
            return []
        block.args.add(fragment)
        return [ToolInputDelta(tool_call_id=block.id, delta=fragment)]

    def tool_input(self, index: int) -> tuple[ToolArgsAccumulator, str] | None:
        """The arguments received so far and the id of the tool call open at ``index``."""
        block = self._blocks.get(index)
        return (block.args, block.id) if block is not None and block.kind == "tool" else None

    def sign(self, index: int, *, signature: str | None = None, redacted: str | None = None) -> None:
        """A reasoning block's signature (the last one wins) or redacted data (appended as received)."""
        block = self._blocks.get(index)
        if block is None:
            return
        block.signature = signature or block.signature
        if redacted is not None:
            block.redacted = (block.redacted or "") + redacted

    def stop(self, index: int, metadata: ProviderMetadata | None = None) -> list[ModelStreamPart]:
        """End a block; ``metadata`` is what a text or reasoning block learned on the way (citations)."""
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        match block.kind:
            case "text" | "reasoning" as kind:
                return [
                    text_end(
                        kind, block.id, metadata, signature=block.signature, redacted_data=block.redacted
                    )
                ]
            case "tool":
                return [
                    block.args.end(
                        id=block.id,
                        tool_name=block.tool_name,
                        provider_metadata=block.metadata,
                        provider_executed=block.provider_executed,
                    )
                ]

    def stop_all(self) -> list[ModelStreamPart]:
        return [part for index in sorted(self._blocks) for part in self.stop(index)]


def block_finish(
    raw: str | None,
    reasons: Mapping[str, FinishReason],
    usage: Json,
    keys: tuple[str, str, str, str],
    *,
    provider: str,
    metadata: Json,
    reasoning_tokens: Any = 0,
) -> Finish:
    """The finish of a response: ``reasons`` maps the stop reason (anything else is ``other``); ``keys`` name
    the wire's input, output, cache-read and cache-write token counts in ``usage``."""
    input_key, output_key, read_key, write_key = keys
    # Both wires leave cached prompt tokens out of their input count; ours counts every prompt token (as
    # OpenAI's does).
    read, write = int(usage.get(read_key) or 0), int(usage.get(write_key) or 0)
    return Finish(
        reason=reasons.get(raw or "", "other"),
        raw_reason=raw,
        usage=Usage(
            input_tokens=int(usage.get(input_key) or 0) + read + write,
            output_tokens=int(usage.get(output_key) or 0),
            reasoning_tokens=int(reasoning_tokens or 0),
            cache_read_tokens=read,
            cache_write_tokens=write,
            requests=1,
        ),
        provider_metadata={provider: metadata} if metadata else {},
    )


__all__ = ["FINISH_REASONS", "BlockHistory", "OpenBlocks", "block_finish", "tool_input"]
