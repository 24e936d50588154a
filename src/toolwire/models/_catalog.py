"""Provider presets: OpenAI-compatible servers by name (``groq:llama-3.3-70b``), with their URL, their key and
their quirks. Users name providers, not wire formats.

Each preset says where requests go (``base_url``), which environment variable holds its key (sent only to
that URL's host over https, see ``toolwire.models._providers.preset_endpoint``), the assistant-message field
reasoning goes back in, how its usage counts, which ``tool_choice`` values it takes, how its tool-call ids
must look, and whether it takes a JSON schema as ``response_format`` (structured output). The comment above
each preset names the documentation its facts come from; "checked" marks what was read in that source when
the preset was written, "unverified" an OpenAI default assumed for lack of one. The base URLs and key variables are also those the providers' own SDKs and docs use.

Self-hosted servers (``ollama``, ``vllm``, ``llamacpp``, ``lmstudio``) have no key variable of their own: on
loopback they run without one, elsewhere (``ollama:MODEL@URL``) they take ``OPENAI_COMPATIBLE_API_KEY`` or
``api_key=``, as any ``openai-compatible`` server does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias, cast

from toolwire.errors import ConfigError

ToolChoiceKind: TypeAlias = Literal["auto", "none", "required", "named"]
"""A ``tool_choice`` value: ``"named"`` stands for ``{"type": "function", "function": {"name": ...}}``."""

UsageQuirk: TypeAlias = Literal["reasoning-outside-completion", "thoughts-only-in-total"]
"""How a server's ``completion_tokens`` departs from OpenAI's, where it includes the reasoning tokens:

- ``reasoning-outside-completion``: ``completion_tokens`` leaves the reasoning out and
  ``completion_tokens_details.reasoning_tokens`` counts it (``total_tokens`` has both);
- ``thoughts-only-in-total``: ``completion_tokens`` leaves the thinking out and nothing else counts it but
  ``total_tokens`` (prompt + completion + thoughts).
"""

ToolCallIds: TypeAlias = Literal["any", "alphanumeric-9"]
"""What tool-call ids a server accepts in history: ``any`` string, or exactly 9 ASCII letters and digits."""

ALL_TOOL_CHOICES: frozenset[ToolChoiceKind] = frozenset({"auto", "none", "required", "named"})
NO_NAMED_CHOICE: frozenset[ToolChoiceKind] = ALL_TOOL_CHOICES - {"named"}
SELF_HOSTED_KEY_VARIABLE = "OPENAI_COMPATIBLE_API_KEY"
"""The key of a self-hosted preset away from loopback (the same as for ``openai-compatible``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Preset:
    """An OpenAI-compatible provider by name."""

    name: str
    """The model-string prefix: ``NAME:MODEL``."""
    title: str
    """As written in messages and listings."""
    base_url: str | None
    """``None``: there is no usual address, the model string must give one (``vllm:MODEL@URL``)."""
    key_variable: str | None
    """The environment variable of its key, sent only to the host of ``base_url`` over https; ``None`` for a
    self-hosted server (see :data:`SELF_HOSTED_KEY_VARIABLE`)."""
    reasoning_field: str | None = None
    """Set: reasoning always goes back in this assistant-message field on tool-call turns (the server
    requires it). ``None``: the field reasoning came in is remembered and used (``reasoning_content`` or
    ``reasoning``)."""
    usage_quirk: UsageQuirk | None = None
    """``None``: ``completion_tokens`` counts like OpenAI's (reasoning included, or none reported)."""
    tool_choices: frozenset[ToolChoiceKind] = ALL_TOOL_CHOICES
    """The ``tool_choice`` values it takes; another is left out of the request, with a warning."""
    tool_call_ids: ToolCallIds = "any"
    responses: bool = False
    """Also speaks the Responses API (``NAME-responses:MODEL``)."""
    json_schema_output: bool = True
    """Takes ``response_format: {type: json_schema}`` (native structured output). ``False``: the server
    enforces no schema, so ``output_mode="auto"`` asks in the instructions (prompted) in runs without
    tools and through the ``final_result`` tool in runs with tools. Unknown or model-dependent: ``True``
    (native is kept; a model that refuses it answers 400, and ``output_mode="prompted"`` is the way out)."""

    @property
    def self_hosted(self) -> bool:
        return self.key_variable is None


PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        p.name: p
        for p in (
            # https://docs.ollama.com/api/openai-compatibility (checked): http://localhost:11434/v1, the key is
            # ignored, tool_choice among the supported request fields; reasoning as `reasoning` (recordings).
            # Structured output: `response_format` json_schema (Ollama >= 0.5 structured outputs; unverified here).
            Preset(name="ollama", title="Ollama", base_url="http://localhost:11434/v1", key_variable=None),
            # https://docs.vllm.ai/en/latest/features/tool_calling/ (checked): named function calling, auto,
            # required (vLLM >= 0.8.3) and none. No usual address (`vllm serve` binds :8000 on any host): give one.
            # Structured output: `response_format` json_schema through its guided decoding (unverified here).
            Preset(name="vllm", title="vLLM", base_url=None, key_variable=None),
            # llama.cpp's llama-server (tools/server/README.md): binds 127.0.0.1:8080, no key unless --api-key.
            # tool_choice: the strings "auto", "none", "required" only, anything else is "Invalid tool_choice"
            # (llama.cpp common/chat.cpp, common_chat_tool_choice_parse_oaicompat).
            # Structured output: `response_format` json_schema, turned into a grammar (tools/server/README.md;
            # unverified here).
            Preset(
                name="llamacpp",
                title="llama.cpp server",
                base_url="http://127.0.0.1:8080/v1",
                key_variable=None,
                tool_choices=NO_NAMED_CHOICE,
            ),
            # https://lmstudio.ai/docs/api/openai-api (checked): http://localhost:1234/v1, /v1/chat/completions
            # and /v1/responses (https://lmstudio.ai/blog/lmstudio-v0.3.29). tool_choice "none" / "auto" /
            # "required" (unverified: no named choice found documented, so none is sent).
            # Structured output: `response_format` json_schema (LM Studio structured output docs; unverified here).
            Preset(
                name="lmstudio",
                title="LM Studio",
                base_url="http://localhost:1234/v1",
                key_variable=None,
                tool_choices=NO_NAMED_CHOICE,
                responses=True,
            ),
            # https://console.groq.com/docs/openai : https://api.groq.com/openai/v1, GROQ_API_KEY; usage counts
            # like OpenAI's and reasoning comes as `reasoning` (checked in the recordings, tests/recordings).
            # Structured output: json_schema on some models only (others answer 400 "This model does not support
            # response format `json_schema`", as reported by users): model-dependent, so native is kept.
            Preset(
                name="groq",
                title="Groq",
                base_url="https://api.groq.com/openai/v1",
                key_variable="GROQ_API_KEY",
            ),
            # https://docs.mistral.ai/api/ : https://api.mistral.ai/v1, MISTRAL_API_KEY; tool_choice auto / none /
            # any / required / a named function (checked: Mistral's OpenAPI spec, ToolChoice and ToolChoiceEnum,
            # as generated in https://docs.rs/crate/mistral-openapi-client). Tool-call ids must be 9 letters and
            # digits (checked: the API's error "must be a-z, A-Z, 0-9, with a length of 9", and mistral-common's
            # validator as quoted by https://docs.vllm.ai/en/v0.15.0/api/vllm/tool_parsers/mistral_tool_parser/).
            # Usage like OpenAI's (recorded Magistral stream).
            # Structured output: `response_format` json_schema (Mistral custom structured outputs; unverified here).
            Preset(
                name="mistral",
                title="Mistral",
                base_url="https://api.mistral.ai/v1",
                key_variable="MISTRAL_API_KEY",
                tool_call_ids="alphanumeric-9",
            ),
            # https://api-docs.deepseek.com/ : https://api.deepseek.com, DEEPSEEK_API_KEY;
            # https://api-docs.deepseek.com/guides/thinking_mode : `reasoning_content`, to be sent back on
            # tool-call turns. Usage like OpenAI's, cache hits as prompt_cache_hit_tokens (checked in the
            # recordings, test_deepseek_*.yaml).
            # Structured output: `response_format` takes {"type": "json_object"} only (checked:
            # https://api-docs.deepseek.com/guides/json_mode, no json_schema): prompted without tools.
            Preset(
                name="deepseek",
                title="DeepSeek",
                base_url="https://api.deepseek.com",
                key_variable="DEEPSEEK_API_KEY",
                reasoning_field="reasoning_content",
                json_schema_output=False,
            ),
            # https://docs.x.ai/docs/api-reference : https://api.x.ai/v1, XAI_API_KEY; reasoning tokens
            # "counted separately from completion_tokens, but ... in the total_tokens" (docs.x.ai, consumption
            # and rate limits).
            # Structured output: `response_format` json_schema (docs.x.ai structured outputs; unverified here).
            Preset(
                name="xai",
                title="xAI",
                base_url="https://api.x.ai/v1",
                key_variable="XAI_API_KEY",
                usage_quirk="reasoning-outside-completion",
            ),
            # https://openrouter.ai/docs/quickstart : https://openrouter.ai/api/v1, OPENROUTER_API_KEY;
            # reasoning as `reasoning` (https://openrouter.ai/docs/use-cases/reasoning-tokens). tool_choice
            # depends on the routed model (unverified).
            # Structured output: depends on the routed model (unverified): native is kept.
            Preset(
                name="openrouter",
                title="OpenRouter",
                base_url="https://openrouter.ai/api/v1",
                key_variable="OPENROUTER_API_KEY",
            ),
            # https://docs.together.ai/docs/openai-api-compatibility : https://api.together.xyz/v1,
            # TOGETHER_API_KEY. tool_choice and usage: OpenAI's (unverified).
            # Structured output: json_schema on the models its JSON-mode docs list (model-dependent): native kept.
            Preset(
                name="together",
                title="Together AI",
                base_url="https://api.together.xyz/v1",
                key_variable="TOGETHER_API_KEY",
            ),
            # https://docs.fireworks.ai/tools-sdks/openai-compatibility : https://api.fireworks.ai/inference/v1,
            # FIREWORKS_API_KEY. tool_choice and usage: OpenAI's (unverified).
            # Structured output: `response_format` json_schema (unverified): native is kept.
            Preset(
                name="fireworks",
                title="Fireworks AI",
                base_url="https://api.fireworks.ai/inference/v1",
                key_variable="FIREWORKS_API_KEY",
            ),
            # https://inference-docs.cerebras.ai/resources/openai : https://api.cerebras.ai/v1,
            # CEREBRAS_API_KEY (checked: https://promptfoo.dev/docs/providers/cerebras and langchain-cerebras's
            # CEREBRAS_BASE_URL). tool_choice "none" / "auto" / "required" (checked in third-party docs); a
            # named function: unverified. Usage: OpenAI's (unverified).
            # Structured output: `response_format` json_schema (unverified): native is kept.
            Preset(
                name="cerebras",
                title="Cerebras",
                base_url="https://api.cerebras.ai/v1",
                key_variable="CEREBRAS_API_KEY",
            ),
        )
    }
)
"""Preset name -> preset."""


def get_preset(name: str) -> Preset:
    preset = PRESETS.get(name)
    if preset is None:
        raise ConfigError(f"unknown provider preset {name!r}; known: {', '.join(PRESETS)}")
    return preset


_ALPHANUMERIC = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_NINE_ALPHANUMERIC = re.compile(r"[A-Za-z0-9]{9}")


def alphanumeric_9(tool_call_id: str) -> str:
    """``tool_call_id`` as 9 ASCII letters and digits (Mistral's rule), the same for the same id.

    An id that already fits (every id Mistral itself sends) is kept as it is; another (``call_...`` from an
    earlier OpenAI turn, toolwire's own) becomes 9 characters of its SHA-256. History keeps the original id:
    only the wire sees this one, for the call and for its result alike.
    """
    if _NINE_ALPHANUMERIC.fullmatch(tool_call_id):
        return tool_call_id
    number = int.from_bytes(hashlib.sha256(tool_call_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, len(_ALPHANUMERIC))
        chars.append(_ALPHANUMERIC[digit])
    return "".join(chars)


def tool_choice_kind(choice: str) -> ToolChoiceKind:
    if choice in ("auto", "none", "required"):
        return cast(ToolChoiceKind, choice)
    return "named"


__all__ = [
    "ALL_TOOL_CHOICES",
    "NO_NAMED_CHOICE",
    "PRESETS",
    "SELF_HOSTED_KEY_VARIABLE",
    "Preset",
    "ToolCallIds",
    "ToolChoiceKind",
    "UsageQuirk",
    "alphanumeric_9",
    "get_preset",
    "tool_choice_kind",
]
