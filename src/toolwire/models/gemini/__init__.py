"""Gemini API and Vertex AI adapter (``generateContent`` / ``streamGenerateContent``), over plain httpx.

Wire translation lives in ``_request.py`` (request body), ``_stream.py`` (chunks -> stream parts) and
``_args.py`` (Vertex streamed arguments, JSON-array stream). This module picks the endpoint, authenticates
and reads the three response encodings:

* ``:streamGenerateContent?alt=sse``: server-sent events, one ``GenerateContentResponse`` per ``data:`` frame;
* ``:streamGenerateContent`` without ``alt=sse``: one JSON array whose elements arrive one by one;
* ``:generateContent``: one JSON object (``stream=False``), read as a single chunk.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncGenerator, Iterable
from typing import Any, Unpack

import httpx

from toolwire.models._google_auth import VertexCredentials, google_headers
from toolwire.models._http import Connection, Exchange, HTTPModel, Json
from toolwire.models._providers import GEMINI_API
from toolwire.models.base import ModelRequest, StreamError
from toolwire.models.gemini._args import JsonArrayReader
from toolwire.models.gemini._request import build_body
from toolwire.models.gemini._stream import PROVIDER, ResponseReader

_FAMILY = re.compile(r"gemini-(\d+)")


class GeminiModel(HTTPModel):
    """A Gemini model on the Gemini API (API key) or on Vertex AI (``vertex=True``, OAuth bearer token)."""

    provider = PROVIDER
    supports_native_output = True
    _sse_body = False  # SSE or a streamed JSON array, read by its _stream_batches

    @property
    def otel_provider_name(self) -> str:
        return "gcp.vertex_ai" if self.vertex else "gcp.gemini"

    @property
    def native_output_with_tools(self) -> bool:
        # Gemini 3 takes responseJsonSchema beside functionDeclarations; 2.x and older answer 400
        # ("Function calling with a response mime type 'application/json' is unsupported").
        family = _FAMILY.match(self.model_name.removeprefix("models/"))
        return family is not None and int(family.group(1)) >= 3

    def __init__(
        self,
        model: str,
        *,
        vertex: bool = False,
        project: str | None = None,
        location: str | None = None,
        access_token: str | None = None,
        credentials: Any = None,
        credentials_file: str | os.PathLike[str] | None = None,
        sse: bool = True,
        stream_function_call_arguments: bool = False,
        **connection: Unpack[Connection],
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
            vertex: Use Vertex AI: ``project`` (default ``GOOGLE_CLOUD_PROJECT``, else the credentials'
                project), ``location`` (default ``GOOGLE_CLOUD_LOCATION``, else ``global``) and refreshing
                google-auth credentials (``pip install 'toolwire[vertex]'``): ``credentials`` (a google-auth
                ``Credentials`` object), ``credentials_file`` (a service-account key file),
                else Application Default Credentials. A fixed ``access_token`` (or ``GOOGLE_ACCESS_TOKEN``)
                or an express-mode ``api_key`` is used instead when given (see
                ``toolwire.models._google_auth.VertexCredentials``).
            sse: Stream as server-sent events (``alt=sse``); False reads the streamed JSON array instead.
            stream_function_call_arguments: Vertex only: ask for arguments as they are generated
                (``partialArgs``), surfaced as ``tool-input-delta`` parts.
            http_client, headers: as for every :class:`~toolwire.models._http.HTTPModel`.
        """
        # Read by _credentials() during super().__init__().
        self.vertex = vertex
        self._project, self._location = project, location
        self.access_token = access_token
        self._google_credentials, self._credentials_file = credentials, credentials_file
        self._vertex: VertexCredentials | None = None
        super().__init__(model.removeprefix("models/"), **connection)
        self.sse = sse
        self.stream_function_call_arguments = stream_function_call_arguments

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        if self.vertex:
            self._vertex = VertexCredentials(
                base_url=base_url,
                api_key=api_key,
                access_token=self.access_token,
                project=self._project,
                location=self._location,
                credentials=self._google_credentials,
                credentials_file=self._credentials_file,
            )
            self.access_token = self._vertex.access_token
            return self._vertex.base_url, self._vertex.api_key
        if self.access_token:
            return (base_url or GEMINI_API.default_base_url).rstrip("/"), api_key
        return GEMINI_API.endpoint(api_key, base_url)

    def _endpoint(self) -> tuple[str, dict[str, str]]:
        """The URL and the fixed credentials' headers (refreshing ones: :meth:`_exchange`)."""
        if self.stream_enabled:
            method = "streamGenerateContent?alt=sse" if self.sse else "streamGenerateContent"
        else:
            method = "generateContent"
        return f"{self.base_url}/models/{self.model_name}:{method}", google_headers(
            self.access_token, self.api_key
        )

    async def _exchange(self, request: ModelRequest) -> Exchange:
        body, warnings = build_body(
            request, vertex=self.vertex, stream_arguments=self.stream_function_call_arguments
        )
        url, headers = self._endpoint()
        if self._vertex is not None:
            headers = await self._vertex.headers(provider=self.provider, model=self.model_name)
        return Exchange(
            url=url,
            headers=headers,
            body=body,
            parser=ResponseReader(model=self.model_name),
            warnings=warnings,
        )

    def _is_whole(self, response: httpx.Response) -> bool:
        # A streamed JSON array is application/json too: only the request says whether one body was asked for.
        return not self.stream_enabled and not _is_sse(response)

    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        return [body]

    async def _stream_batches(
        self, response: httpx.Response
    ) -> AsyncGenerator[list[Json | StreamError], None]:
        if _is_sse(response):
            async for batch in super()._stream_batches(response):
                yield batch
            return
        array = JsonArrayReader()
        try:
            async for text in response.aiter_text():
                elements: list[Json | StreamError] = list(array.feed(text))
                if elements:
                    yield elements
        except ValueError as exc:
            yield [self._protocol_error(f"undecodable response: {exc}")]
            return
        if array.incomplete:
            yield [self._protocol_error("the response stream ended inside a JSON element", retryable=True)]


def _is_sse(response: httpx.Response) -> bool:
    return "text/event-stream" in response.headers.get("content-type", "")


__all__ = ["GeminiModel"]
