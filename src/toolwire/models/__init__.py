"""Model adapters. Adapter classes load lazily so importing toolwire never imports an optional SDK."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from toolwire.errors import ConfigError
from toolwire.models._builder import collect
from toolwire.models._catalog import PRESETS, Preset
from toolwire.models._limits import Breaker, RateLimit, rate_limit
from toolwire.models._providers import is_http_url
from toolwire.models._tokens import estimate_request_tokens, record_usage
from toolwire.models.base import Model, ModelRequest, ModelResponse, ModelSettings, ToolDefinition

if TYPE_CHECKING:
    from toolwire.models.anthropic import AnthropicModel
    from toolwire.models.anthropic.vertex import AnthropicVertexModel
    from toolwire.models.azure import AzureOpenAIChatModel, AzureOpenAIResponsesModel
    from toolwire.models.bedrock import BedrockModel
    from toolwire.models.bedrock.invoke import BedrockAnthropicModel
    from toolwire.models.fallback import FallbackModel
    from toolwire.models.gemini import GeminiModel
    from toolwire.models.local import LocalModel
    from toolwire.models.openai_chat import OpenAIChatModel
    from toolwire.models.openai_responses import OpenAIResponsesModel
    from toolwire.models.scripted import ScriptedModel

_LAZY = {
    "OpenAIChatModel": "toolwire.models.openai_chat",
    "OpenAIResponsesModel": "toolwire.models.openai_responses",
    "AnthropicModel": "toolwire.models.anthropic",
    "AnthropicVertexModel": "toolwire.models.anthropic.vertex",
    "BedrockAnthropicModel": "toolwire.models.bedrock.invoke",
    "AzureOpenAIChatModel": "toolwire.models.azure",
    "AzureOpenAIResponsesModel": "toolwire.models.azure",
    "GeminiModel": "toolwire.models.gemini",
    "BedrockModel": "toolwire.models.bedrock",
    "FallbackModel": "toolwire.models.fallback",
    "LocalModel": "toolwire.models.local",
    "ScriptedModel": "toolwire.models.scripted",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolwire.models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def _compatible(cls: Callable[..., Model], name: str) -> Model:
    model_name, at, url = name.partition("@")
    if not at or not is_http_url(url):
        raise ConfigError("use 'openai-compatible:MODEL@BASE_URL' with an http(s) BASE_URL")
    return cls(model_name, base_url=url)  # its key: see infer_model


def _preset(preset: Preset) -> Callable[[Any, str], Model]:
    """Build ``preset``'s model from ``MODEL``, or ``MODEL@BASE_URL`` for a self-hosted server."""

    def build(cls: Callable[..., Model], name: str) -> Model:
        if not preset.self_hosted:
            return cls(name, preset=preset)
        model_name, at, url = name.partition("@")
        if at and not is_http_url(url):
            raise ConfigError(f"use '{preset.name}:MODEL@BASE_URL' with an http(s) BASE_URL")
        return cls(model_name, preset=preset, base_url=url or None)

    return build


def _preset_entries() -> dict[str, tuple[str, Callable[[Any, str], Model]]]:
    entries = {p.name: ("OpenAIChatModel", _preset(p)) for p in PRESETS.values()}
    entries.update(
        {f"{p.name}-responses": ("OpenAIResponsesModel", _preset(p)) for p in PRESETS.values() if p.responses}
    )
    return entries


_PROVIDERS: Mapping[str, tuple[str, Callable[[Any, str], Model]]] = MappingProxyType(
    {
        **_preset_entries(),
        "openai": ("OpenAIChatModel", lambda cls, name: cls(name)),
        "openai-responses": ("OpenAIResponsesModel", lambda cls, name: cls(name)),
        "openai-compatible": ("OpenAIChatModel", _compatible),
        "anthropic": ("AnthropicModel", lambda cls, name: cls(name)),
        "gemini": ("GeminiModel", lambda cls, name: cls(name)),
        "google": ("GeminiModel", lambda cls, name: cls(name)),
        "vertex": ("GeminiModel", lambda cls, name: cls(name, vertex=True)),
        "bedrock": ("BedrockModel", lambda cls, name: cls(name)),
        "anthropic-bedrock": ("BedrockAnthropicModel", lambda cls, name: cls(name)),
        "anthropic-vertex": ("AnthropicVertexModel", lambda cls, name: cls(name)),
        "scripted": ("ScriptedModel", lambda cls, name: cls.from_file(name, continue_sessions=True)),
        "local": ("LocalModel", lambda cls, _: cls()),
        "azure": ("AzureOpenAIChatModel", lambda cls, name: cls(name)),
        "azure-responses": ("AzureOpenAIResponsesModel", lambda cls, name: cls(name)),
    }
)
"""Model string prefix -> (adapter class, a key of ``_LAZY``; how to build it from the rest of the string)."""


ModelSpec: TypeAlias = "Model | str | Sequence[Model | str]"
"""A model, a model string, or a list of them (the first asked first, the others its fallbacks)."""


def infer_model(spec: ModelSpec) -> Model:
    """Build a model from a string such as ``openai:gpt-4o``, ``anthropic:claude-sonnet-4-5``,
    ``gemini:gemini-2.5-flash``, ``vertex:...``, ``openai-responses:gpt-5``, ``bedrock:MODEL_ID``,
    ``openai-compatible:NAME@URL``, ``local`` or ``scripted:FILE.json``; a provider preset of
    ``toolwire.models._catalog`` (``groq:llama-3.3-70b``, ``mistral:...``, ``deepseek:...``, ``ollama:llama3``,
    ``vllm:MODEL@URL``, ``lmstudio-responses:...``...); ``azure:DEPLOYMENT`` / ``azure-responses:DEPLOYMENT``.

    Keys come from the environment, and a key only ever goes to the host it belongs to:

    * ``OPENAI_API_KEY`` is sent to OpenAI's own hosts only (https ``api.openai.com``): never to an
      ``openai-compatible`` URL, nor to an ``OPENAI_BASE_URL`` elsewhere;
    * ``openai-compatible:NAME@URL`` takes its key from ``OPENAI_COMPATIBLE_API_KEY`` (meant for that
      server, never sent to OpenAI); a server on loopback (``localhost``, ``127.0.0.1``, ``[::1]``) may run
      without one. To give a key in code instead, build ``OpenAIChatModel(NAME, base_url=URL, api_key=...)``
      (keys do not go in model strings, which end up in logs and process lists);
    * ``ANTHROPIC_API_KEY`` goes to ``api.anthropic.com`` only, ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` to
      ``generativelanguage.googleapis.com`` only, ``GOOGLE_API_KEY`` / ``GOOGLE_ACCESS_TOKEN`` (Vertex) to
      ``*aiplatform.googleapis.com`` only, AWS credentials and ``AWS_BEARER_TOKEN_BEDROCK`` to AWS hosts only;
    * each hosted preset's variable (``GROQ_API_KEY``, ``MISTRAL_API_KEY``...) goes to its own host only;
      self-hosted presets (``ollama``, ``vllm``, ``llamacpp``, ``lmstudio``) run keyless on loopback and
      otherwise take ``OPENAI_COMPATIBLE_API_KEY``;
    * ``AZURE_OPENAI_API_KEY`` (or ``AZURE_OPENAI_AD_TOKEN``) goes to the Azure host of
      ``AZURE_OPENAI_ENDPOINT`` only.

    A missing key is a :class:`~toolwire.errors.ConfigError` raised here, before any request is made or
    anything is stored.

    A list (``["anthropic:claude-sonnet-4-5", "openai:gpt-4o"]``) builds a
    :class:`~toolwire.models.fallback.FallbackModel`: the first model, then the next when a step fails.
    """
    if isinstance(spec, Model):
        return spec
    if not isinstance(spec, str):
        if len(spec) == 1:
            return infer_model(spec[0])
        if not spec:
            raise ConfigError("an empty list of models")
        return __getattr__("FallbackModel")(*spec)  # type: ignore[no-any-return]
    if spec == "local":  # the one model string without a name
        provider, name = spec, ""
    else:
        provider, sep, name = spec.partition(":")
        if not sep or not name:
            raise ConfigError(f"model string {spec!r} must look like 'provider:model' (or 'local')")
    entry = _PROVIDERS.get(provider)
    if entry is None:
        raise ConfigError(_unknown_provider(provider, spec))
    class_name, build = entry
    return build(__getattr__(class_name), name)


def _unknown_provider(provider: str, spec: str) -> str:
    """Names the known providers (and the closest one) so a typo is a one-line fix."""
    import difflib

    close = difflib.get_close_matches(provider, _PROVIDERS, n=1)
    guess = f"did you mean '{close[0]}:...'? " if close else ""
    known = ", ".join(sorted(_PROVIDERS))
    return f"unknown model provider {provider!r} in {spec!r}: {guess}known providers: {known}"


__all__ = [
    "AnthropicModel",
    "AnthropicVertexModel",
    "AzureOpenAIChatModel",
    "AzureOpenAIResponsesModel",
    "BedrockAnthropicModel",
    "BedrockModel",
    "Breaker",
    "FallbackModel",
    "GeminiModel",
    "LocalModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelSpec",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "RateLimit",
    "ScriptedModel",
    "ToolDefinition",
    "collect",
    "estimate_request_tokens",
    "infer_model",
    "rate_limit",
    "record_usage",
]
