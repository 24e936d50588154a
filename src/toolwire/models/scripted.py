"""A deterministic model for tests, demos and benchmarks: streams scripted turns, records every request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire.errors import ConfigError
from toolwire.messages import Part, ReasoningPart, TextPart, ToolCallPart, Usage
from toolwire.models._builder import TextKind, parse_tool_args, text_delta, text_end, text_start
from toolwire.models.base import (
    Finish,
    Model,
    ModelRequest,
    ModelStreamPart,
    StreamStart,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the scripted model received (what a real provider would have been sent)."""

    request: ModelRequest

    @property
    def messages(self) -> list[Any]:
        return list(self.request.messages)

    @property
    def tools(self) -> list[Any]:
        return list(self.request.tools)


class ScriptedModel(Model):
    """Streams ``turns[i]`` on the i-th request. Each turn is a list of parts.

    ``turns`` may instead be a function of the request returning the turn to stream, for scripts that
    must not depend on the order of requests (several sessions at once).

    Text is streamed in chunks of ``chunk_size`` characters and tool arguments in fragments, so the loop
    sees the same part shapes a real provider produces. When the script runs out, the model answers
    with an empty text turn (``repeat_last=True`` repeats the last turn instead, for benchmarks).

    ``continue_sessions=True`` (a ``scripted:FILE.json`` model string) lets a script span processes: a
    request whose history already holds N answers (assistant messages) gets turn N at the earliest, so a
    ``toolwire run`` that resumes a session another process paused goes on where the script stopped.
    """

    provider = "scripted"

    counts_tokens = False  # its usage is made up: the token estimates never learn from it

    def __init__(
        self,
        turns: Sequence[Sequence[Part]] | Callable[[ModelRequest], Sequence[Part]],
        *,
        model_name: str = "scripted",
        chunk_size: int = 16,
        repeat_last: bool = False,
        usage_per_turn: Usage | None = None,
        record_requests: bool = True,
        continue_sessions: bool = False,
    ) -> None:
        self.respond = turns if callable(turns) else None
        self.turns = [] if callable(turns) else [list(t) for t in turns]
        self.model_name = model_name
        self.chunk_size = max(1, chunk_size)
        self.repeat_last = repeat_last
        self.usage_per_turn = usage_per_turn or Usage(input_tokens=10, output_tokens=5, requests=1)
        self.record_requests = record_requests
        self.continue_sessions = continue_sessions
        self.requests: list[RecordedRequest] = []
        self._next = 0

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ScriptedModel:
        """Read a JSON list of turns; each turn is a list of ``{"type": "text" | "reasoning" | "tool-call", ...}``."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read scripted model file {path}: {exc}") from exc
        return cls.from_data(data, **kwargs)

    @classmethod
    def from_data(cls, data: Any, **kwargs: Any) -> ScriptedModel:
        if not isinstance(data, list) or not all(isinstance(t, list) for t in data):
            raise ConfigError("a scripted model file must hold a JSON list of turns, each a list of parts")
        return cls([[_part_from_json(p) for p in turn] for turn in data], **kwargs)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        if self.record_requests:
            self.requests.append(RecordedRequest(request))
        turn = list(self.respond(request)) if self.respond is not None else self._take_turn(request)
        yield StreamStart()
        has_calls = False
        for index, part in enumerate(turn):
            if isinstance(part, TextPart | ReasoningPart):
                kind: TextKind = "text" if isinstance(part, TextPart) else "reasoning"
                pid = f"{kind[0]}{index}"
                yield text_start(kind, pid, part.provider_metadata)
                for chunk in _chunks(part.text, self.chunk_size):
                    yield text_delta(kind, pid, chunk)
                if isinstance(part, ReasoningPart):
                    yield text_end(kind, pid, signature=part.signature, redacted_data=part.redacted_data)
                else:
                    yield text_end(kind, pid)
            elif isinstance(part, ToolCallPart):
                has_calls = has_calls or not part.provider_executed
                yield ToolInputStart(
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    provider_metadata=part.provider_metadata,
                    provider_executed=part.provider_executed,
                    title=part.title,
                )
                for chunk in _chunks(part.args_json, self.chunk_size):
                    yield ToolInputDelta(tool_call_id=part.tool_call_id, delta=chunk)
                args, args_error = parse_tool_args(part.args_json)
                yield ToolInputEnd(
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    args=args,
                    args_json=part.args_json,
                    args_error=args_error,
                    provider_metadata=part.provider_metadata,
                    provider_executed=part.provider_executed,
                    title=part.title,
                )
        yield Finish(
            reason="tool-calls" if has_calls else "stop",
            raw_reason="tool_calls" if has_calls else "stop",
            usage=self.usage_per_turn,
        )

    def _take_turn(self, request: ModelRequest) -> list[Part]:
        if self.continue_sessions:  # the answers another process gave in this session used those turns
            answered = sum(1 for message in request.messages if message.role == "assistant")
            self._next = max(self._next, answered)
        if self._next < len(self.turns):
            turn = self.turns[self._next]
            self._next += 1
            return turn
        if self.repeat_last and self.turns:
            return self.turns[-1]
        return [TextPart(text="")]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def _part_from_json(data: Any) -> Part:
    if not isinstance(data, dict):
        raise ConfigError(f"a scripted part must be an object, got {data!r}")
    kind = data.get("type")
    try:
        if kind == "text":
            return TextPart(text=str(data["text"]), provider_metadata=data.get("provider_metadata") or {})
        if kind == "reasoning":
            return ReasoningPart(
                text=str(data.get("text", "")),
                signature=data.get("signature"),
                redacted_data=data.get("redacted_data"),
                provider_metadata=data.get("provider_metadata") or {},
            )
        if kind == "tool-call":
            args = data.get("args") or {}
            if not isinstance(args, dict):
                raise ConfigError(f"tool-call args must be an object, got {args!r}")
            return ToolCallPart(
                tool_call_id=str(data["tool_call_id"]),
                tool_name=str(data["tool_name"]),
                args=args,
                args_json=str(data.get("args_json") or ""),
                provider_metadata=data.get("provider_metadata") or {},
                provider_executed=bool(data.get("provider_executed", False)),
                title=data.get("title"),
            )
    except KeyError as exc:
        raise ConfigError(f"scripted {kind} part is missing {exc}") from exc
    raise ConfigError(f"unknown scripted part type {kind!r} (expected text, reasoning or tool-call)")
