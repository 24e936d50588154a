"""Claude on Google Vertex AI: ``rawPredict`` / ``streamRawPredict``.

The body is the Messages API's (``_request.py``) without ``model``, which is in the URL
(``projects/{project}/locations/{location}/publishers/anthropic/models/{model}:streamRawPredict``), and with
``anthropic_version: "vertex-2023-10-16"`` (https://docs.anthropic.com/en/api/claude-on-vertex-ai). The
answer is the Messages API's own stream or message, read by the Anthropic parser. Authentication is a
Google OAuth token from refreshing google-auth credentials (``toolwire.models._google_auth``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Unpack
from urllib.parse import quote

from toolwire.models._google_auth import VertexCredentials
from toolwire.models._http import Connection, Exchange
from toolwire.models.anthropic import AnthropicModel
from toolwire.models.anthropic._request import build_body
from toolwire.models.base import ModelRequest

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"


class AnthropicVertexModel(AnthropicModel):
    """Claude through Vertex AI (``anthropic-vertex:claude-sonnet-4-5@20250929``).

    ``project`` (default ``GOOGLE_CLOUD_PROJECT``, else the credentials' project) and ``location`` (default
    ``CLOUD_ML_REGION``, then ``GOOGLE_CLOUD_LOCATION``, else ``global``; a region such as ``us-east5``, or
    the multi-regions ``us`` / ``eu``) pick the endpoint. Credentials: ``credentials`` (a google-auth
    ``Credentials`` object), ``credentials_file``, else Application Default Credentials, each refreshed when
    its token expires; a fixed ``access_token`` (or ``GOOGLE_ACCESS_TOKEN``) is used when given.
    ``base_url`` replaces everything before ``/models/{model}:...``. ``betas`` go in the ``anthropic-beta``
    header, as Vertex takes them. History is Anthropic's: signatures and ``anthropic`` metadata round-trip
    with the Messages API.
    """

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        credentials_file: str | os.PathLike[str] | None = None,
        access_token: str | None = None,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Mapping[str, Any]] = (),
        betas: Sequence[str] = (),
        **connection: Unpack[Connection],
    ) -> None:
        # Read by _credentials() during super().__init__().
        self._project = project
        self._location = location or os.environ.get("CLOUD_ML_REGION")
        self._given = (credentials, credentials_file, access_token)
        super().__init__(
            model,
            max_tokens=max_tokens,
            thinking=thinking,
            builtin_tools=builtin_tools,
            betas=betas,
            **connection,
        )

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        credentials, credentials_file, access_token = self._given
        self._vertex = VertexCredentials(
            base_url=base_url,
            api_key=None,
            access_token=access_token,
            project=self._project,
            location=self._location,
            credentials=credentials,
            credentials_file=credentials_file,
            publisher="anthropic",
            version="v1",
            express=False,  # Claude on Vertex takes OAuth tokens only
        )
        return self._vertex.base_url, None

    async def _exchange(self, request: ModelRequest) -> Exchange:
        body, warnings = build_body(request, self)
        del body["model"]
        body["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        method = "streamRawPredict" if self.stream_enabled else "rawPredict"
        # Model ids carry '@' (claude-sonnet-4-5@20250929), kept as Vertex's own clients send it.
        url = f"{self.base_url}/models/{quote(self.model_name, safe='@')}:{method}"
        auth = await self._vertex.headers(provider=self.provider, model=self.model_name)
        return self._messages_exchange(url, body, warnings, auth)


__all__ = ["VERTEX_ANTHROPIC_VERSION", "AnthropicVertexModel"]
