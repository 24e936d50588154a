"""Make text safe to store and send: lone UTF-16 surrogates (legal in Python strings and in JSON
``\\ud800`` escapes, but not encodable as UTF-8) become U+FFFD. Applied where outside text enters the
canonical history: model output, tool output, user prompts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, TypeVar

from toolwire.messages import ToolCallPart
from toolwire.models.base import (
    ModelStreamPart,
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResult,
)

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def clean_json(value: Any) -> Any:
    """A copy of a JSON-compatible value with every string (keys included) cleaned."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


_Call = TypeVar("_Call", bound=ToolCallPart | ToolInputEnd)


def _clean_call(part: _Call) -> _Call:
    """A tool call (stored part or streamed end) with its name and arguments made safe to encode."""
    name = clean_text(part.tool_name)
    if _clean_already(part.args):
        args_json = clean_text(part.args_json)
        if name is part.tool_name and args_json is part.args_json:
            return part
        return replace(part, tool_name=name, args_json=args_json)
    # The raw text escapes a lone surrogate (e.g. "\ud800"): adapters that re-parse it would bring it
    # back, so the raw text is rebuilt from the cleaned arguments.
    args = clean_json(part.args)
    return replace(part, tool_name=name, args=args, args_json=json.dumps(args, separators=(",", ":")))


def clean_stream_part(part: ModelStreamPart) -> ModelStreamPart:
    """A model stream part made safe to encode, for every kind of delta alike.

    The loop applies it once to each part it receives, so live events and the stored copy agree.
    """
    match part:
        case TextDelta() | ReasoningDelta() | ToolInputDelta():
            delta = clean_text(part.delta)
            return part if delta is part.delta else replace(part, delta=delta)
        case ToolInputStart():
            name = clean_text(part.tool_name)
            return part if name is part.tool_name else replace(part, tool_name=name)
        case ToolInputEnd():
            return _clean_call(part)
        case ToolResult():
            return part if _clean_already(part.output) else replace(part, output=clean_json(part.output))
    return part


def _clean_already(value: Any) -> bool:
    # Loops, not all(<generator>): every streamed call's arguments pass here (a generator per container).
    if isinstance(value, str):
        return value.isascii() or clean_text(value) is value
    if isinstance(value, dict):
        for k, v in value.items():
            if not (_clean_already(k) and _clean_already(v)):
                return False
    elif isinstance(value, list):
        for v in value:
            if not _clean_already(v):
                return False
    return True


def without_nul(text: str) -> str:
    """``text`` with U+0000 shown as U+FFFD, for the few texts a store keeps outside JSON (a title): a
    PostgreSQL ``text`` column cannot hold U+0000 (SQLite can), and both stores must answer alike."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def truncate_output(output: Any, max_chars: int) -> Any:
    """The one truncation rule for tool output shown to a model (live results and repaired ones alike).

    ``max_chars <= 0`` keeps everything; numbers, booleans and ``None`` are never cut.
    """
    if max_chars <= 0 or output is None or isinstance(output, int | float | bool):
        return output
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if len(text) <= max_chars:
        return output
    return (
        f"{text[:max_chars]}\n[output truncated: showing {max_chars:,} of "
        f"{len(text):,} characters; the full output is kept in the session store]"
    )


def title_from(text: str, limit: int = 60) -> str:
    """A conversation title from its first prompt: whitespace collapsed; a longer one is cut at a word in
    its second half, never after a comma (the page's rule, ``static/app.js`` ``shorten``)."""
    words = without_nul(" ".join(text.split()))  # the prompt keeps its U+0000; a title cannot (PostgreSQL)
    if len(words) <= limit:
        return words
    cut = words[: limit - 1]
    space = cut.rfind(" ")
    if space > limit / 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "\u2026"


def session_title(text: str) -> str | None:
    """A title as a conversation stores it (whitespace collapsed, at most 200 characters), or ``None`` for
    one no store keeps alike: blank, or holding U+0000 (PostgreSQL text cannot)."""
    words = " ".join(text.split())
    if not words or "\x00" in words:
        return None
    return words[:200]
