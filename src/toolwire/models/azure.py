"""Azure OpenAI: the OpenAI wires on an Azure resource.

- Chat Completions goes to ``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...``
  (the deployment in the path; ``api-version`` from ``api_version=``, ``AZURE_OPENAI_API_VERSION`` or
  ``2024-10-21``, the latest GA version of that API);
- the Responses API goes to ``{endpoint}/openai/v1/responses``, the v1 API, which takes no ``api-version``;
  the deployment is the body's ``model``
  (https://learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle).

The endpoint is ``endpoint=`` or ``AZURE_OPENAI_ENDPOINT`` (``https://RESOURCE.openai.azure.com``). The key,
``api_key=`` or ``AZURE_OPENAI_API_KEY``, goes in the ``api-key`` header; without one, an Entra ID token
(``ad_token=`` or ``AZURE_OPENAI_AD_TOKEN``) goes as ``Authorization: Bearer``. The variables are only read
for an https Azure host (``*.openai.azure.com``, ``*.cognitiveservices.azure.com``,
``*.services.ai.azure.com``); a missing credential is a :class:`~toolwire.errors.ConfigError` when the model
is built.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote, urlencode

from toolwire.errors import ConfigError
from toolwire.models._providers import (
    AZURE_DEFAULT_API_VERSION,
    AZURE_VERSION_VARIABLE,
    AzureCredentials,
    azure_credentials,
)
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.openai_responses import OpenAIResponsesModel

_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _checked(deployment: str) -> str:
    """A deployment name goes in the URL path: only the characters Azure allows in one."""
    if not _DEPLOYMENT.fullmatch(deployment):
        raise ConfigError(f"invalid Azure OpenAI deployment name {deployment!r}")
    return deployment


class _Azure:
    """The endpoint and credential of an Azure resource, resolved before the adapter's own ``__init__``;
    ``api-key`` for a key, ``Authorization: Bearer`` for an Entra ID token."""

    _azure: AzureCredentials
    otel_provider_name = "azure.ai.openai"

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        ad_token: str | None = None,
        **options: Any,
    ) -> None:
        self._azure = azure_credentials(endpoint, api_key, ad_token)
        # The next class is the OpenAI adapter: http_client, stream, headers and its own options.
        super().__init__(_checked(deployment), **options)  # type: ignore[call-arg]

    def _auth_headers(self) -> dict[str, str]:
        if self._azure.api_key:
            return {"api-key": self._azure.api_key}
        if self._azure.ad_token:
            return {"authorization": f"Bearer {self._azure.ad_token}"}
        return {}


class AzureOpenAIChatModel(_Azure, OpenAIChatModel):
    """Chat Completions on an Azure OpenAI deployment (see the module docstring for URL and credentials).

    Takes ``endpoint``, ``api_key``, ``ad_token`` and ``api_version``, and otherwise the options of
    :class:`~toolwire.models.openai_chat.OpenAIChatModel` (``http_client``, ``stream``, ``headers``...).
    """

    def __init__(self, deployment: str, *, api_version: str | None = None, **options: Any) -> None:
        self.api_version = api_version or os.environ.get(AZURE_VERSION_VARIABLE) or AZURE_DEFAULT_API_VERSION
        super().__init__(deployment, **options)

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        return f"{self._azure.endpoint}/openai/deployments/{quote(self.model_name)}", self._azure.api_key

    def _url(self) -> str:
        return f"{self.base_url}{self.path}?{urlencode({'api-version': self.api_version})}"

    @property
    def max_tokens_field(self) -> str:
        return "max_completion_tokens"  # OpenAI's models: reasoning ones reject max_tokens


class AzureOpenAIResponsesModel(_Azure, OpenAIResponsesModel):
    """The Responses API of an Azure OpenAI resource (``/openai/v1/responses``); the deployment is ``model``.

    Takes ``endpoint``, ``api_key`` and ``ad_token``, and otherwise the options of
    :class:`~toolwire.models.openai_responses.OpenAIResponsesModel`.
    """

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        return f"{self._azure.endpoint}/openai/v1", self._azure.api_key


__all__ = ["AzureOpenAIChatModel", "AzureOpenAIResponsesModel"]
