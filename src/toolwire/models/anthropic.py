"""Anthropic Messages API adapter (``POST /v1/messages``), streaming and non-streaming.

Request translation lives in ``_anthropic_request.py`` and event parsing in ``_anthropic_stream.py``;
this module owns the HTTP exchange.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from toolwire.errors import ProviderProtocolError
from toolwire.models._anthropic_request import build_body
from toolwire.models._anthropic_stream import AnthropicEventParser, events_from_message
from toolwire.models._http import make_client, open_stream
from toolwire.models._keys import is_own_host, pick_key
from toolwire.models._sse import iter_sse
from toolwire.models.base import Model, ModelRequest, ModelStreamPart, StreamError, StreamStart

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""As in Anthropic's SDKs (and their ``ANTHROPIC_BASE_URL``): without ``/v1``."""
API_VERSION = "2023-06-01"
KEY_VARIABLE = "ANTHROPIC_API_KEY"
"""Sent to https ``api.anthropic.com`` only: another base URL (``ANTHROPIC_BASE_URL`` included) takes
``api_key=``."""


class AnthropicModel(Model):
    """Claude through the Anthropic Messages API.

    ``thinking`` is sent as the request's ``thinking`` object (e.g. ``{"type": "enabled",
    "budget_tokens": 2048}``); ``builtin_tools`` are Anthropic server tools appended verbatim to
    ``tools`` (e.g. ``{"type": "web_search_20250305", "name": "web_search"}``); ``betas`` go in the
    ``anthropic-beta`` header. ``ANTHROPIC_API_KEY`` is only sent to ``api.anthropic.com``: another base URL
    (``ANTHROPIC_BASE_URL`` included) needs ``api_key=``, except a loopback server, which may run without
    one. A missing key is a :class:`~toolwire.errors.ConfigError` here, when the model is built.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Mapping[str, Any]] = (),
        betas: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.model_name = model
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = pick_key(
            api_key,
            self.base_url,
            own_host=is_own_host(self.base_url, lambda host: host == "api.anthropic.com"),
            variables=(KEY_VARIABLE,),
            provider="Anthropic",
        )
        self.stream_enabled = stream
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.builtin_tools = [dict(t) for t in builtin_tools]
        self.betas = tuple(betas)
        self.extra_headers = dict(headers or {})
        self._client, self._owns_client = make_client(http_client)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def _headers(self) -> dict[str, str]:
        headers = {
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream_enabled else "application/json",
        }
        if self.api_key:  # None only for a loopback server or an explicit api_key=""
            headers["x-api-key"] = self.api_key
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        headers.update(self.extra_headers)
        return headers

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        body, warnings = build_body(
            request,
            model=self.model_name,
            max_tokens=self.max_tokens,
            stream=self.stream_enabled,
            thinking=self.thinking,
            builtin_tools=self.builtin_tools,
        )
        parser = AnthropicEventParser(model=self.model_name)
        async with open_stream(
            self._client,
            "POST",
            f"{self.base_url}/v1/messages",
            provider=self.provider,
            model=self.model_name,
            json_body=body,
            headers=self._headers(),
        ) as response:
            yield StreamStart(warnings=tuple(warnings))
            events = self._stream_events(response) if self.stream_enabled else self._whole_events(response)
            async for event in events:
                if isinstance(event, StreamError):
                    yield event
                    return
                for part in parser.feed(event):
                    yield part
                if parser.done:
                    return
        yield self._protocol_error("the response ended before message_stop")

    async def _stream_events(self, response: httpx.Response) -> AsyncIterator[dict[str, Any] | StreamError]:
        async for sse in iter_sse(response):
            # ``data:`` lines often carry trailing padding spaces; json.loads ignores them.
            try:
                event = json.loads(sse.data)
            except ValueError:
                yield self._protocol_error(f"invalid JSON in {sse.event!r} event: {sse.data[:200]!r}")
                return
            if isinstance(event, dict):
                event.setdefault("type", sse.event)
                yield event

    async def _whole_events(self, response: httpx.Response) -> AsyncIterator[dict[str, Any] | StreamError]:
        content = await response.aread()
        try:
            message = json.loads(content)
        except ValueError:
            yield self._protocol_error(f"invalid JSON response: {content[:200]!r}")
            return
        if not isinstance(message, dict):
            yield self._protocol_error("the response is not a JSON object")
            return
        if message.get("type") == "error":
            yield {"type": "error", "error": message.get("error") or {}}
            return
        for event in events_from_message(message):
            yield event

    def _protocol_error(self, message: str) -> StreamError:
        return StreamError(
            error=ProviderProtocolError(message, provider=self.provider, model=self.model_name)
        )


__all__ = ["AnthropicModel"]
