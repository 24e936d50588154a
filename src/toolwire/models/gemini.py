"""Gemini API and Vertex AI adapter (``generateContent`` / ``streamGenerateContent``), over plain httpx.

Wire translation lives in ``_gemini_request.py`` (request body), ``_gemini_response.py`` (chunks -> stream
parts) and ``_gemini_args.py`` (Vertex streamed arguments, JSON-array stream). This module picks the
endpoint, authenticates and reads the three response encodings:

* ``:streamGenerateContent?alt=sse``: server-sent events, one ``GenerateContentResponse`` per ``data:`` frame;
* ``:streamGenerateContent`` without ``alt=sse``: one JSON array whose elements arrive one by one;
* ``:generateContent``: one JSON object (``stream=False``), read as a single chunk.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from toolwire.errors import ConfigError, ProviderHTTPError, ProviderProtocolError
from toolwire.models._gemini_args import JsonArrayReader
from toolwire.models._gemini_request import build_body
from toolwire.models._gemini_response import PROVIDER, ResponseReader
from toolwire.models._http import make_client, open_stream
from toolwire.models._keys import from_environment, is_loopback, is_own_host, pick_key
from toolwire.models._sse import iter_sse
from toolwire.models.base import Model, ModelRequest, ModelStreamPart, StreamError, StreamStart

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
GEMINI_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
"""Sent to https ``generativelanguage.googleapis.com`` only; another ``base_url`` takes ``api_key=``."""
_LOCATION = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class GeminiModel(Model):
    """A Gemini model on the Gemini API (API key) or on Vertex AI (``vertex=True``, OAuth bearer token)."""

    provider = PROVIDER
    supports_native_output = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        vertex: bool = False,
        project: str | None = None,
        location: str | None = None,
        access_token: str | None = None,
        sse: bool = True,
        stream_function_call_arguments: bool = False,
    ) -> None:
        """
        Args:
            model: e.g. ``"gemini-3-flash-preview"`` (a ``models/`` prefix is accepted).
            api_key: Gemini API key (default ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``), sent as
                ``x-goog-api-key``. On Vertex it selects express mode when no access token is given.
                Keys and tokens from the environment are only sent to Google's own host (https
                ``generativelanguage.googleapis.com``, ``*aiplatform.googleapis.com`` on Vertex): another
                ``base_url`` needs them passed explicitly, unless it is a loopback server. Missing
                credentials are a :class:`~toolwire.errors.ConfigError` here, when the model is built.
            base_url: Everything before ``/models/<model>:<method>``.
            stream: False calls ``:generateContent`` and converts the whole response to the same parts.
            vertex: Use Vertex AI: ``project`` (default ``GOOGLE_CLOUD_PROJECT``), ``location`` (default
                ``GOOGLE_CLOUD_LOCATION``, else ``global``) and ``access_token`` (default
                ``GOOGLE_ACCESS_TOKEN``, e.g. from ``gcloud auth print-access-token``; toolwire does not
                depend on the Google SDKs).
            sse: Stream as server-sent events (``alt=sse``); False reads the streamed JSON array instead.
            stream_function_call_arguments: Vertex only: ask for arguments as they are generated
                (``partialArgs``), surfaced as ``tool-input-delta`` parts.
        """
        self.model_name = model.removeprefix("models/")
        self._stream = stream
        self._sse = sse
        self._vertex = vertex
        self._stream_arguments = stream_function_call_arguments
        if vertex:
            base_url, self._api_key, self._access_token = _vertex_auth(
                base_url, api_key, access_token, project, location
            )
        else:
            base_url = base_url or GEMINI_BASE_URL
            self._access_token = access_token
            self._api_key = api_key if access_token else _gemini_api_key(api_key, base_url)
        self._base_url = base_url.rstrip("/")
        self._client, self._owns_client = make_client(http_client)

    def _endpoint(self) -> tuple[str, dict[str, str]]:
        if self._stream:
            method = "streamGenerateContent?alt=sse" if self._sse else "streamGenerateContent"
        else:
            method = "generateContent"
        url = f"{self._base_url}/models/{self.model_name}:{method}"
        if self._access_token:
            return url, {"authorization": f"Bearer {self._access_token}"}
        if self._api_key:
            return url, {"x-goog-api-key": self._api_key}
        return url, {}  # a loopback server without credentials (checked when the model was built)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        body, warnings = build_body(request, vertex=self._vertex, stream_arguments=self._stream_arguments)
        url, headers = self._endpoint()
        yield StreamStart(warnings=tuple(warnings))
        reader = ResponseReader(model=self.model_name)
        try:
            async with open_stream(
                self._client,
                "POST",
                url,
                provider=self.provider,
                model=self.model_name,
                json_body=body,
                headers=headers,
            ) as response:
                async for chunk in self._chunks(response):
                    for part in reader.feed(chunk):
                        yield part
                    if reader.failed:
                        return
        except ProviderHTTPError as exc:
            _use_google_status(exc)
            raise
        except ProviderProtocolError as exc:  # undecodable body: reported in-stream like provider errors
            yield StreamError(error=exc)
            return
        for part in reader.finish():
            yield part

    async def _chunks(self, response: httpx.Response) -> AsyncIterator[Any]:
        try:
            if "text/event-stream" in response.headers.get("content-type", ""):
                async for event in iter_sse(response):
                    if event.data.strip():
                        yield json.loads(event.data)
            elif not self._stream:
                yield json.loads(await response.aread())
            else:
                array = JsonArrayReader()
                async for text in response.aiter_text():
                    for element in array.feed(text):
                        yield element
                if array.incomplete:
                    raise ProviderProtocolError(
                        "the response stream ended inside a JSON element",
                        provider=self.provider,
                        model=self.model_name,
                        retryable=True,
                    )
        except ValueError as exc:
            raise ProviderProtocolError(
                f"undecodable response: {exc}", provider=self.provider, model=self.model_name
            ) from exc

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _is_gemini_api_host(host: str) -> bool:
    return host == "generativelanguage.googleapis.com"


def _is_vertex_host(host: str) -> bool:
    return host == "aiplatform.googleapis.com" or host.endswith("-aiplatform.googleapis.com")


def _gemini_api_key(api_key: str | None, base_url: str) -> str | None:
    return pick_key(
        api_key,
        base_url,
        own_host=is_own_host(base_url, _is_gemini_api_host),
        variables=GEMINI_KEY_VARIABLES,
        provider="Gemini API",
    )


def _vertex_auth(
    base_url: str | None,
    api_key: str | None,
    access_token: str | None,
    project: str | None,
    location: str | None,
) -> tuple[str, str | None, str | None]:
    """``(base_url, api_key, access_token)`` for Vertex AI; environment credentials only for Google's host."""
    token = access_token or from_environment(("GOOGLE_ACCESS_TOKEN",))
    key = api_key or from_environment(("GOOGLE_API_KEY",))
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
    if base_url is None and project:
        # The location becomes part of the host name: anything but a region name could change the host.
        if not _LOCATION.fullmatch(location):
            raise ConfigError(f"invalid Vertex AI location {location!r}")
        host = (
            "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
        )
        base_url = f"https://{host}/v1beta1/projects/{project}/locations/{location}/publishers/google"
    elif base_url is None and token is None:  # express mode (API key, no project)
        base_url = "https://aiplatform.googleapis.com/v1beta1/publishers/google"
    if base_url is None:
        raise ConfigError("Vertex AI needs a project (project= or GOOGLE_CLOUD_PROJECT) or a base_url")
    if not is_own_host(base_url, _is_vertex_host):
        token, key = access_token, api_key  # environment credentials are for Google's own host only
    if not token and not key and not is_loopback(base_url):
        raise ConfigError(
            "Vertex AI needs access_token= (or GOOGLE_ACCESS_TOKEN) or an express-mode api_key (or "
            "GOOGLE_API_KEY); the environment variables are only sent to aiplatform.googleapis.com"
        )
    return base_url, key, token


def _use_google_status(error: ProviderHTTPError) -> None:
    """Google error bodies are ``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}``; the
    shared parser takes the numeric ``code``, which repeats the HTTP status. The status name is the code."""
    body = error.body[0] if isinstance(error.body, list) and error.body else error.body
    details = body.get("error") if isinstance(body, dict) else None
    if isinstance(details, dict) and isinstance(details.get("status"), str):
        error.code = details["status"]


__all__ = ["GeminiModel"]
