"""Anthropic Messages API adapter (``POST /v1/messages``), streaming and non-streaming.

Request translation lives in ``_request.py`` and event parsing in ``_stream.py``; the HTTP exchange is
:class:`~toolwire.models._http.HTTPModel`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack

from toolwire.models._http import Connection, Exchange, HTTPModel, Json
from toolwire.models._providers import ANTHROPIC
from toolwire.models.anthropic._request import build_body
from toolwire.models.anthropic._stream import PROVIDER, AnthropicEventParser, events_from_message
from toolwire.models.base import ModelRequest, StreamError

API_VERSION = "2023-06-01"


class AnthropicModel(HTTPModel):
    """Claude through the Anthropic Messages API.

    ``thinking`` is sent as the request's ``thinking`` object (e.g. ``{"type": "enabled",
    "budget_tokens": 2048}``); ``builtin_tools`` are Anthropic server tools appended verbatim to
    ``tools`` (e.g. ``{"type": "web_search_20250305", "name": "web_search"}``); ``betas`` go in the
    ``anthropic-beta`` header. ``ANTHROPIC_API_KEY`` is only sent to ``api.anthropic.com``: another base URL
    (``ANTHROPIC_BASE_URL`` included) needs ``api_key=``, except a loopback server, which may run without
    one. A missing key is a :class:`~toolwire.errors.ConfigError` here, when the model is built. The other
    options are :class:`~toolwire.models._http.HTTPModel`'s.
    """

    provider = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        builtin_tools: Sequence[Mapping[str, Any]] = (),
        betas: Sequence[str] = (),
        **connection: Unpack[Connection],
    ) -> None:
        super().__init__(model, **connection)
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.builtin_tools = [dict(t) for t in builtin_tools]
        self.betas = tuple(betas)

    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        return ANTHROPIC.endpoint(api_key, base_url)

    async def _exchange(self, request: ModelRequest) -> Exchange:
        body, warnings = build_body(request, self)
        auth = {"anthropic-version": API_VERSION}
        if self.api_key:  # None only for a loopback server or an explicit api_key=""
            auth["x-api-key"] = self.api_key
        return self._messages_exchange(f"{self.base_url}/v1/messages", body, warnings, auth)

    def _messages_exchange(
        self, url: str, body: Json, warnings: Sequence[str], auth: dict[str, str]
    ) -> Exchange:
        """A Messages request to ``url`` with ``auth`` headers (the Messages API's, or a platform's)."""
        headers = {
            **auth,
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream_enabled else "application/json",
        }
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        return Exchange(
            url=url,
            headers=headers,
            body=body,
            parser=AnthropicEventParser(model=self.model_name),
            warnings=warnings,
        )

    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        return events_from_message(body)


__all__ = ["AnthropicModel"]
