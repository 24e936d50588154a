"""How many tokens a request will take, known before it is sent (to decide whether it fits the window).

For OpenAI's own models, tiktoken counts them when it is installed (an optional package, not a dependency
of toolwire). Otherwise the request's characters are divided by a characters-per-token ratio: a calibrated
default (:data:`DEFAULT_CHARS_PER_TOKEN`), then, per model, a line fitted to the provider's own counts:
:func:`record_usage` adds each response's reported ``input_tokens`` for the request that was sent, and the
estimate becomes tokens-per-character times the characters plus what every request adds unseen (a chat
template, the tool-use preamble Anthropic adds), following the model's real tokenizer after a few requests.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Hashable
from typing import Any

from toolwire.messages import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, Usage
from toolwire.models._window import window_key
from toolwire.models.base import Model, ModelRequest, ToolDefinition

DEFAULT_CHARS_PER_TOKEN = 3.5
"""English prose averages about 4 characters per token on current BPE tokenizers, JSON (tool arguments and
results, schemas) about 3; 3.5 leans to over-counting, the safe side when the question is "does it fit"."""
FILE_TOKENS = 1_000
"""A file (image, PDF page) counted as this many tokens: its real cost depends on pixels and pages the
request does not state (an estimate, unverified across providers; corrected by reported usage like text)."""
MESSAGE_OVERHEAD = 4
"""Tokens each message costs beyond its content (role and separators; OpenAI's chat format uses 3-4)."""
_DECAY = 0.9
"""Weight kept by older observations at each new one: the fit follows the latest requests."""
_TOKENS_PER_CHAR = (1 / 8, 1.0)
"""Bounds of a fitted slope (no tokenizer makes fewer than 1 token per 8 characters, or more than 1 per character
of text)."""


class _Fit:
    """A model's observed (characters, tokens) pairs, reduced to decayed sums for a least-squares line: the
    slope is the tokenizer's tokens per character, the intercept what every request adds unseen (a chat
    template's default system prompt, Anthropic's tool-use preamble)."""

    __slots__ = ("n", "sx", "sxx", "sxy", "sy")

    def __init__(self) -> None:
        self.n = self.sx = self.sy = self.sxx = self.sxy = 0.0

    def add(self, chars: float, tokens: float) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) * _DECAY)
        self.n += 1
        self.sx += chars
        self.sy += tokens
        self.sxx += chars * chars
        self.sxy += chars * tokens

    def line(self) -> tuple[float, float]:
        """``(tokens per character, tokens per request)``."""
        variance = self.sxx * self.n - self.sx * self.sx
        if variance > 1e-6 * self.sxx * self.n:  # requests of different sizes: slope and intercept
            slope = (self.sxy * self.n - self.sx * self.sy) / variance
            intercept = (self.sy - slope * self.sx) / self.n
            if _TOKENS_PER_CHAR[0] <= slope <= _TOKENS_PER_CHAR[1] and intercept >= 0:
                return slope, intercept
        slope = self.sy / self.sx  # one size seen (or an odd fit): through the origin
        return min(max(slope, _TOKENS_PER_CHAR[0]), _TOKENS_PER_CHAR[1]), 0.0


_fits: dict[Hashable, _Fit] = {}
_fits_lock = threading.Lock()


class Sizes:
    """What a run's requests measure of each message and tool, kept for the run.

    A run sends its history again at every step, as the same message objects: measured once each, its
    estimates stay linear in the run's length instead of quadratic (a 200-step run measured each message
    ~200 times). Keyed by identity, each entry holding its object (so an id is never reused while kept).
    """

    __slots__ = ("_chars", "_runs", "_tokens", "_tools")

    def __init__(self) -> None:
        self._chars: dict[int, tuple[Message, int, int]] = {}
        self._tools: dict[int, tuple[ToolDefinition, int]] = {}
        self._tokens: dict[int, tuple[Message, int, int]] = {}
        self._runs: list[tuple[tuple[Message, ...], int, int]] = []
        """The last message sequences measured, with their totals: the next step's history starts with the
        previous one's (a tuple comparison checks that at C speed, identity first), so only the messages
        after it are measured. Two kept: a step measures its history, and again once compacted."""

    def messages_chars(self, messages: tuple[Message, ...]) -> tuple[int, int]:
        """``(characters, fixed tokens)`` of ``messages``, per-message overhead included."""
        at = next(
            (i for i, run in enumerate(self._runs) if messages[: len(run[0])] == run[0]),
            None,
        )
        known, chars, fixed = self._runs.pop(at) if at is not None else ((), 0, 0)
        for message in messages[len(known) :]:
            message_chars, message_fixed = self.message_chars(message)
            chars += message_chars
            fixed += message_fixed + MESSAGE_OVERHEAD
        self._runs.insert(0, (messages, chars, fixed))
        del self._runs[2:]
        return chars, fixed

    def message_chars(self, message: Message) -> tuple[int, int]:
        entry = self._chars.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1], entry[2]
        chars, fixed = _message_chars(message)
        self._chars[id(message)] = (message, chars, fixed)
        return chars, fixed

    def tool_chars(self, tool: ToolDefinition) -> int:
        entry = self._tools.get(id(tool))
        if entry is not None and entry[0] is tool:
            return entry[1]
        chars = _tool_chars(tool)
        self._tools[id(tool)] = (tool, chars)
        return chars

    def message_tokens(self, message: Message, encoding: Any) -> tuple[int, int]:
        entry = self._tokens.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1], entry[2]
        tokens, fixed = _message_tokens(message, encoding)
        self._tokens[id(message)] = (message, tokens, fixed)
        return tokens, fixed


def request_chars(request: ModelRequest, sizes: Sizes | None = None) -> tuple[int, int]:
    """``(characters, fixed tokens)`` of what ``request`` sends: its text, and the tokens counted per file
    and per message (``sizes``: the run's measures, reused)."""
    chars = len(request.instructions or "")
    for tool in request.tools:
        chars += sizes.tool_chars(tool) if sizes is not None else _tool_chars(tool)
    if request.output_schema is not None:
        chars += len(_json(request.output_schema))
    if sizes is not None:
        message_chars, fixed = sizes.messages_chars(tuple(request.messages))
        return chars + message_chars, fixed
    fixed = 0
    for message in request.messages:
        message_chars, message_fixed = _message_chars(message)
        chars += message_chars
        fixed += message_fixed + MESSAGE_OVERHEAD
    return chars, fixed


def _tool_chars(tool: ToolDefinition) -> int:
    return len(tool.name) + len(tool.description) + len(_json(tool.parameters))


def _message_chars(message: Message) -> tuple[int, int]:
    chars = fixed = 0
    for part in message.parts:
        match part:
            case TextPart() | ReasoningPart():
                chars += len(part.text)
            case ToolCallPart():
                chars += len(part.tool_name) + len(part.args_json)
            case ToolResultPart():
                chars += len(part.tool_name) + len(part.output_text())
            case FilePart():
                fixed += FILE_TOKENS
    return chars, fixed


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def chars_per_token(model: Model) -> float:
    """The characters per token estimates for ``model`` use (fitted to its reported usage, else the default)."""
    fit = _fits.get(window_key(model))
    return 1 / fit.line()[0] if fit is not None else DEFAULT_CHARS_PER_TOKEN


def estimate_request_tokens(model: Model, request: ModelRequest, sizes: Sizes | None = None) -> int:
    """The tokens ``request`` will take on ``model``'s prompt side (tiktoken for OpenAI models when installed,
    else its characters on the line fitted to the model's reported usage, or over the default ratio);
    ``sizes``: the run's measures of its messages, reused from step to step."""
    counted = _tiktoken_count(model, request, sizes)
    if counted is not None:
        return counted
    chars, fixed = request_chars(request, sizes)
    fit = _fits.get(window_key(model))
    slope, intercept = fit.line() if fit is not None else (1 / DEFAULT_CHARS_PER_TOKEN, 0.0)
    return int(chars * slope + intercept + 0.999) + fixed


def record_usage(model: Model, request: ModelRequest, usage: Usage, sizes: Sizes | None = None) -> None:
    """Correct ``model``'s estimates with what the provider counted for ``request`` (its ``input_tokens``,
    cached ones included). A usage without input tokens (a provider that reports none) changes nothing."""
    if usage.input_tokens <= 0:
        return
    chars, fixed = request_chars(request, sizes)
    text_tokens = usage.input_tokens - fixed
    if usage.input_tokens <= 0 or text_tokens <= 0 or chars <= 0:
        return
    key = window_key(model)
    with _fits_lock:
        _fits.setdefault(key, _Fit()).add(chars, text_tokens)


def failed_attempt_usage(
    model: Model,
    request: ModelRequest,
    *,
    reported: Usage | None = None,
    answered: bool = False,
    streamed_chars: int = 0,
) -> Usage:
    """What a failed attempt of ``request`` on ``model`` probably cost, counted apart from the step's usage.

    ``reported`` is what the provider said before failing (Anthropic reports the input at the start of its
    stream), taken as it is when it has input tokens. Otherwise: a request the provider never answered
    (``answered=False``: connection refused, an HTTP error status) is not billed and counts nothing; one it
    began to answer (a stream cut later) counts the estimated prompt and the ``streamed_chars`` it sent."""
    if reported is not None and reported.input_tokens > 0:
        return reported
    if not answered:
        return Usage()
    output = int(streamed_chars / chars_per_token(model) + 0.999) if streamed_chars else 0
    return Usage(input_tokens=estimate_request_tokens(model, request), output_tokens=output, requests=1)


# ---------------------------------------------------------------------------------------------
# tiktoken, for OpenAI's own models


def _tiktoken_count(model: Model, request: ModelRequest, sizes: Sizes | None) -> int | None:
    if model.provider != "openai" or getattr(model, "preset", None) is not None:
        return None  # a compatible server's model has its own tokenizer
    encoding = _encoding(model.model_name)
    if encoding is None:
        return None
    texts = [request.instructions or ""]
    texts += [t.name + t.description + _json(t.parameters) for t in request.tools]
    total = sum(len(tokens) for tokens in encoding.encode_batch(texts, disallowed_special=()))
    measure = functools.partial(
        sizes.message_tokens if sizes is not None else _message_tokens, encoding=encoding
    )
    for message in request.messages:
        tokens, fixed = measure(message)
        total += tokens + fixed + MESSAGE_OVERHEAD
    return total


def _message_tokens(message: Message, encoding: Any) -> tuple[int, int]:
    """``(tokens, fixed tokens)`` of one message's text with tiktoken's ``encoding``."""
    texts: list[str] = []
    fixed = 0
    for part in message.parts:
        match part:
            case TextPart() | ReasoningPart():
                texts.append(part.text)
            case ToolCallPart():
                texts.append(part.tool_name + part.args_json)
            case ToolResultPart():
                texts.append(part.output_text())
            case FilePart():
                fixed += FILE_TOKENS
    return sum(len(tokens) for tokens in encoding.encode_batch(texts, disallowed_special=())), fixed


@functools.cache
def _encoding(model_name: str) -> Any:
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        return tiktoken.encoding_for_model(model_name)
    except (KeyError, ValueError):  # a model tiktoken does not know
        return None
    except Exception:  # its encoding files are fetched once: offline, fall back to the ratio
        return None


__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "Sizes",
    "chars_per_token",
    "estimate_request_tokens",
    "failed_attempt_usage",
    "record_usage",
    "request_chars",
]
