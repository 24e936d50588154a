"""Context windows: what each model reads and writes in one request, known from the providers' documentation,
set by the caller (``context_window=``), or learned from the provider's own context-length error.

The table below holds facts from each provider's model documentation, by model family; the comment above
each group names its source, and "unverified" marks a value taken from a secondary source or assumed. A
model name matches the longest family that appears in it as a whole segment, so dated and platform spellings
match too (``gpt-4o-mini-2024-07-18``, ``anthropic.claude-sonnet-4-5-20250929-v1:0`` on Bedrock,
``claude-sonnet-4-5@20250929`` on Vertex AI, ``meta-llama/llama-3.3-70b-instruct`` on OpenRouter).

A self-hosted server's window is whatever it was started with (llama.cpp's ``--ctx-size``, Ollama's
``num_ctx``): unknown until its first context-length error, which states it, and then remembered for every
model object of the process that talks to the same endpoint (:func:`learn`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from toolwire.errors import ContextLengthExceeded, ProviderError


@dataclass(frozen=True, slots=True)
class Limits:
    """A model family's context window (prompt and output together) and its maximum output, in tokens."""

    context_window: int
    max_output_tokens: int | None = None


_K = 1_000

KNOWN: dict[str, Limits] = {
    # OpenAI, https://platform.openai.com/docs/models (each model's page: "context window", "max output
    # tokens"; checked for gpt-4o, gpt-4.1, gpt-5, o3, o4-mini when written).
    "gpt-5": Limits(400_000, 128_000),
    "gpt-5-mini": Limits(400_000, 128_000),
    "gpt-5-nano": Limits(400_000, 128_000),
    "gpt-5.1": Limits(400_000, 128_000),  # unverified: assumed as gpt-5
    "gpt-4.1": Limits(1_047_576, 32_768),
    "gpt-4.1-mini": Limits(1_047_576, 32_768),
    "gpt-4.1-nano": Limits(1_047_576, 32_768),
    "gpt-4o": Limits(128_000, 16_384),
    "gpt-4o-mini": Limits(128_000, 16_384),
    "gpt-4-turbo": Limits(128_000, 4_096),
    "gpt-4": Limits(8_192, 8_192),
    "gpt-3.5-turbo": Limits(16_385, 4_096),
    "o1": Limits(200_000, 100_000),
    "o3": Limits(200_000, 100_000),
    "o3-mini": Limits(200_000, 100_000),
    "o4-mini": Limits(200_000, 100_000),
    "gpt-oss-120b": Limits(131_072, 131_072),  # unverified (model card: 128k context)
    "gpt-oss-20b": Limits(131_072, 131_072),  # unverified
    # Anthropic, https://docs.anthropic.com/en/docs/about-claude/models/overview ("context window", "max
    # output"; the 1M-token window of Sonnet 4 / 4.5 is a beta header away, not the default).
    "claude-opus-4-5": Limits(200_000, 64_000),
    "claude-opus-4-1": Limits(200_000, 32_000),
    "claude-opus-4": Limits(200_000, 32_000),
    "claude-sonnet-4-5": Limits(200_000, 64_000),
    "claude-sonnet-4": Limits(200_000, 64_000),
    "claude-haiku-4-5": Limits(200_000, 64_000),
    "claude-3-7-sonnet": Limits(200_000, 64_000),
    "claude-3-5-sonnet": Limits(200_000, 8_192),
    "claude-3-5-haiku": Limits(200_000, 8_192),
    "claude-3-opus": Limits(200_000, 4_096),
    "claude-3-haiku": Limits(200_000, 4_096),
    # Google, https://ai.google.dev/gemini-api/docs/models ("input token limit", "output token limit").
    "gemini-3-pro": Limits(1_048_576, 65_536),  # unverified: assumed as gemini-2.5-pro
    "gemini-2.5-pro": Limits(1_048_576, 65_536),
    "gemini-2.5-flash": Limits(1_048_576, 65_536),
    "gemini-2.5-flash-lite": Limits(1_048_576, 65_536),
    "gemini-2.0-flash": Limits(1_048_576, 8_192),
    "gemini-2.0-flash-lite": Limits(1_048_576, 8_192),
    "gemini-1.5-pro": Limits(2_097_152, 8_192),
    "gemini-1.5-flash": Limits(1_048_576, 8_192),
    # DeepSeek, https://api-docs.deepseek.com/quick_start/pricing ("context length" 128K; max output 8K for
    # deepseek-chat, 64K for deepseek-reasoner).
    "deepseek-chat": Limits(128 * _K, 8 * _K),
    "deepseek-reasoner": Limits(128 * _K, 64 * _K),
    # Groq, https://console.groq.com/docs/models ("context window", "max completion tokens").
    "llama-3.3-70b-versatile": Limits(131_072, 32_768),
    "llama-3.1-8b-instant": Limits(131_072, 131_072),
    # Mistral, https://docs.mistral.ai/getting-started/models/ (unverified: 128k for the current large and
    # small models, 40k for Magistral; no separate output limit stated).
    "mistral-large": Limits(128 * _K),
    "mistral-small": Limits(128 * _K),
    "magistral-medium": Limits(40 * _K),
    # xAI, https://docs.x.ai/docs/models ("context": 256,000 for grok-4, 131,072 for grok-3; unverified).
    "grok-4": Limits(256_000),
    "grok-3": Limits(131_072),
    # Amazon Nova on Bedrock, https://docs.aws.amazon.com/nova/latest/userguide/what-is-nova.html
    # (unverified: 300k for Pro and Lite, 128k for Micro; 10k output).
    "nova-pro": Limits(300 * _K, 10 * _K),
    "nova-lite": Limits(300 * _K, 10 * _K),
    "nova-micro": Limits(128 * _K, 10 * _K),
}
"""Model family -> its limits (see the module docstring for how a model name finds its family)."""

_FAMILY = re.compile(
    "(" + "|".join(re.escape(k) for k in sorted(KNOWN, key=len, reverse=True)) + r")(?=$|[-:@])"
)
"""A family at one position (longest first), ending the name or followed by a version or date."""


@functools.lru_cache(maxsize=256)  # asked before every step; a process talks to a few models
def known_limits(model_name: str) -> Limits | None:
    """The documented limits of ``model_name``'s family, or ``None`` when it is not in the table."""
    name = model_name.lower()
    starts = [0, *(i + 1 for i, c in enumerate(name) if c in "./:")]  # where a segment begins
    families = [m[1] for m in (_FAMILY.match(name, s) for s in starts) if m is not None]
    return KNOWN[max(families, key=len)] if families else None


# ---------------------------------------------------------------------------------------------
# Learned windows (self-hosted servers and unknown models)

_learned: dict[Hashable, int] = {}
_learned_lock = threading.Lock()


def window_key(model: Any) -> Hashable:
    """What a learned window is remembered by: adapter class, provider, model name and endpoint (each run
    builds its own model object; the server behind them is the same)."""
    return (type(model).__qualname__, model.provider, model.model_name, getattr(model, "base_url", None))


def learn(key: Hashable, limit: int) -> None:
    """Remember that the model identified by ``key`` has a ``limit``-token window (stated by its error)."""
    with _learned_lock:
        _learned[key] = limit


def learned(key: Hashable) -> int | None:
    """The window learned for ``key``, if any."""
    return _learned.get(key)


# ---------------------------------------------------------------------------------------------
# Context-length errors

_WORDING = re.compile(
    r"context[ _-]?(length|window|size)|prompt is too long|input is too long|too many input tokens"
    r"|exceeds the maximum (number of )?(input )?tokens|maximum context|exceed_context_size",
    re.IGNORECASE,
)
"""How providers word a request longer than the model's window: OpenAI (and compatible servers, and the
embedded model) ``context_length_exceeded``; Anthropic "prompt is too long"; Gemini "exceeds the maximum
number of tokens"; Bedrock "Input is too long for requested model" / "too many input tokens"; llama.cpp's
server "exceeds the available context size" (type ``exceed_context_size_error``); Ollama "the input length
exceeds the context length"."""

# (pattern, group of the limit, group of the requested count): each provider's documented wording.
_STATED: tuple[tuple[re.Pattern[str], int, int], ...] = (
    # OpenAI / vLLM / llama-cpp-python: "This model's maximum context length is 8192 tokens. However, your
    # messages resulted in 9000 tokens" (or "you requested 9000 tokens (...)").
    (
        re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.S),
        1,
        2,
    ),
    (re.compile(r"maximum context length is (\d+) tokens()"), 1, 2),
    # Anthropic (also Claude on Bedrock and Vertex): "prompt is too long: 250000 tokens > 200000 maximum".
    (re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"), 2, 1),
    # Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    (
        re.compile(r"input token count \(?(\d+)\)? exceeds the maximum number of tokens allowed \(?(\d+)"),
        2,
        1,
    ),
    # llama.cpp server: "request (4476 tokens) exceeds the available context size (4096 tokens)".
    (re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"), 2, 1),
    # llama-cpp-python (the embedded model): "Requested tokens (600) exceed context window of 512".
    (re.compile(r"requested tokens \((\d+)\) exceed context window of (\d+)", re.I), 2, 1),
)


def is_context_length_error(error: ProviderError) -> bool:
    """Whether ``error`` says the request does not fit the model's context window."""
    if isinstance(error, ContextLengthExceeded) or error.code in _CODES:
        return True
    # A retryable error is never one (Bedrock's throttling says "Too many tokens, please wait").
    return (
        not error.retryable and error.status in (None, 400, 413, 422) and bool(_WORDING.search(error.message))
    )


_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


def stated_limits(error: ProviderError) -> tuple[int | None, int | None]:
    """``(limit, requested)`` as the error states them (``None`` each when it does not)."""
    limit, requested = _body_limits(error.body)
    if limit is not None:
        return limit, requested
    for pattern, limit_group, requested_group in _STATED:
        match = pattern.search(error.message)
        if match is not None:
            return int(match[limit_group]), int(match[requested_group]) if match[requested_group] else None
    return None, None


def _body_limits(body: Any) -> tuple[int | None, int | None]:
    # llama.cpp's server states both as numbers beside its message: {"error": {"n_ctx": ..,
    # "n_prompt_tokens": ..}}.
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("n_ctx"), int):
        requested = err.get("n_prompt_tokens")
        return err["n_ctx"], requested if isinstance(requested, int) else None
    return None, None


def as_context_length(error: ProviderError) -> ProviderError:
    """``error`` as a :class:`ContextLengthExceeded` when it is a context-length error, else unchanged."""
    if isinstance(error, ContextLengthExceeded) or not is_context_length_error(error):
        return error
    limit, requested = stated_limits(error)
    typed = ContextLengthExceeded(
        error.message,
        limit=limit,
        requested=requested,
        provider=error.provider,
        model=error.model,
        status=error.status,
        code=error.code or "context_length_exceeded",
        retryable=False,
        body=error.body,
    )
    typed.__cause__ = error.__cause__
    return typed


__all__ = [
    "KNOWN",
    "Limits",
    "as_context_length",
    "is_context_length_error",
    "known_limits",
    "learn",
    "learned",
    "stated_limits",
    "window_key",
]
