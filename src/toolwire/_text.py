"""Make text safe to store and send: lone UTF-16 surrogates (legal in Python strings and in JSON
``\\ud800`` escapes, but not encodable as UTF-8) become U+FFFD. Applied where outside text enters the
canonical history: model output, tool output, user prompts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, TypeVar

from toolwire.messages import Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

_SURROGATE = re.compile("[\ud800-\udfff]")
P = TypeVar("P", bound=Part)


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


def clean_part(part: P) -> P:
    if isinstance(part, TextPart):
        text = clean_text(part.text)
        return part if text is part.text else replace(part, text=text)
    if isinstance(part, ReasoningPart):
        text = clean_text(part.text)
        return part if text is part.text else replace(part, text=text)
    if isinstance(part, ToolCallPart):
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
    if isinstance(part, ToolResultPart):
        return replace(part, output=clean_json(part.output))
    return part


def _clean_already(value: Any) -> bool:
    if isinstance(value, str):
        return clean_text(value) is value
    if isinstance(value, dict):
        return all(_clean_already(k) and _clean_already(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_clean_already(v) for v in value)
    return True
