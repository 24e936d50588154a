"""The base of every HTTP adapter: the client it owns (or borrows), one exchange per request, the response read
as a stream of events or as one JSON body, and transport, status and protocol errors mapped to typed errors.

An adapter says how to build its request (:meth:`HTTPModel._exchange`) and how its events become stream
parts (a :class:`WireParser`); :meth:`HTTPModel.stream` runs the exchange the same way for every provider.
"""

from __future__ import annotations

import email.utils
import functools
import json
import ssl
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypedDict, runtime_checkable

import httpx
from pydantic_core import from_json

from toolwire.errors import (
    ContextLengthExceeded,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderProtocolError,
)
from toolwire.models._sse import SSEDecoder, SSEEvent
from toolwire.models._window import as_context_length, learn, window_key
from toolwire.models.base import (
    Model,
    ModelRequest,
    ModelStreamPart,
    ResponseMetadata,
    StreamError,
    StreamStart,
)

Json: TypeAlias = dict[str, Any]
"""Wire JSON is handled as plain dicts, read through ``.get`` with a type check: servers speaking the same
wire differ (extra, missing and renamed fields), so no declared shape is trusted."""

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=10.0)
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
DONE = "[DONE]"
"""The ``type`` of the event standing for OpenAI's ``data: [DONE]`` terminator (which is not JSON)."""
_DONE_BYTES = DONE.encode()
_BATCH = 64
"""Events decoded and handed on together (one generator step for all of them)."""


def make_client(http_client: httpx.AsyncClient | None) -> tuple[httpx.AsyncClient, bool]:
    """Return ``(client, owned)``: the injected client, or a new one the adapter must close."""
    if http_client is not None:
        return http_client, False
    return httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, verify=_tls_context()), True


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # httpx builds a context per client by reading and parsing the whole CA bundle (~16 ms), which each
    # adapter's first request paid; one verifying context serves every client (it holds no connection state).
    return httpx.create_ssl_context()


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def error_details(body: Any) -> tuple[str | None, str | None]:
    """Extract ``(code, message)`` from the usual provider error bodies."""
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return None, None
    err = body.get("error", body)
    if isinstance(err, str):
        return None, err
    if not isinstance(err, dict):
        return None, None
    code = err.get("code") or err.get("type") or err.get("status") or body.get("__type")
    if isinstance(err.get("code"), int) and isinstance(err.get("status"), str):
        code = err["status"]  # Google: numeric HTTP code in "code", the meaningful one in "status"
    message = err.get("message") or body.get("message") or body.get("Message")
    return (str(code) if code is not None else None), (str(message) if message is not None else None)


def http_error(response: httpx.Response, content: bytes, *, provider: str, model: str) -> ProviderHTTPError:
    """The typed error of an HTTP error response: a :class:`ContextLengthExceeded` when the provider says the
    request is too long for the model (the limit parsed when stated), else a :class:`ProviderHTTPError`."""
    try:
        body: Any = json.loads(content) if content else None
    except ValueError:
        body = content.decode("utf-8", "replace")
    code, message = error_details(body)
    if code is None:  # AWS puts the error type in a header: "ValidationException:http://..."
        code = response.headers.get("x-amzn-errortype", "").split(":")[0] or None
    error = ProviderHTTPError(
        message or f"HTTP {response.status_code}",
        provider=provider,
        model=model,
        status=response.status_code,
        code=code,
        retryable=response.status_code in RETRYABLE_STATUS,
        body=body,
        retry_after=parse_retry_after(response.headers),
    )
    typed = as_context_length(error)
    assert isinstance(typed, ProviderHTTPError)  # ContextLengthExceeded is one
    return typed


def protocol_error(message: str, *, provider: str, model: str, retryable: bool = False) -> StreamError:
    """A response the adapter cannot read (bad JSON, a stream cut short), reported in the stream."""
    return StreamError(
        error=ProviderProtocolError(message, provider=provider, model=model, retryable=retryable)
    )


def parse_json(data: str | bytes) -> Any:
    """The JSON value, or ``None`` for invalid JSON (callers turn that into a protocol error).

    ``pydantic_core.from_json`` is 1.5-3x faster than ``json.loads`` on stream events
    (``benchmarks/stream_layers.py``); it refuses escaped lone surrogates, which ``json.loads`` accepts
    (they are cleaned later, at the loop's one cleaning point), so those fall back to ``json.loads``.
    """
    try:
        return from_json(data)
    except ValueError:
        pass
    try:
        return json.loads(data)
    except ValueError:
        return None


@contextmanager
def _transport_errors(*, provider: str, model: str, timeout: str, failure: str) -> Iterator[None]:
    """httpx's timeouts and transport failures as retryable :class:`ProviderConnectionError`."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise ProviderConnectionError(
            f"{timeout}: {exc}", provider=provider, model=model, retryable=True
        ) from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(
            f"{failure}: {exc}", provider=provider, model=model, retryable=True
        ) from exc


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    provider: str,
    model: str,
    json_body: Any = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    window: Hashable | None = None,
) -> AsyncIterator[httpx.Response]:
    """Send a request and yield the streaming response; non-2xx and transport errors become typed errors.

    A context-length error that states the model's window teaches it to the model identified by ``window``
    (``toolwire.models._window.learn``)."""
    request = client.build_request(method, url, json=json_body, content=content, headers=headers)
    with _transport_errors(provider=provider, model=model, timeout="timed out", failure="connection failed"):
        response = await client.send(request, stream=True)
    try:
        if response.status_code >= 400:
            body = await response.aread()
            error = http_error(response, body, provider=provider, model=model)
            if isinstance(error, ContextLengthExceeded) and error.limit and window is not None:
                learn(window, error.limit)
            raise error
        with _transport_errors(
            provider=provider, model=model, timeout="stream stalled", failure="stream broken"
        ):
            yield response
    finally:
        await response.aclose()


# ---------------------------------------------------------------------------------------------
# The adapter base


class WireParser(Protocol):
    """Turns one response's events into stream parts."""

    @property
    def done(self) -> bool:
        """A terminal event (the finish, an error) arrived: nothing after it is read."""

    def feed(self, event: Json) -> list[ModelStreamPart]: ...

    def end(self) -> list[ModelStreamPart]:
        """The body ended without a terminal event: close what is open and finish, or report the cut."""


@runtime_checkable
class DataParser(WireParser, Protocol):
    """A parser of server-sent events that reads some events' data itself, without decoding it as JSON
    first (when its model's ``_sse_body`` is set; the base class's ``_stream_batches`` is then not used)."""

    def feed_data(self, name: str, data: bytes) -> list[ModelStreamPart] | None:
        """The parts of an event (its name and data); None: decode it and :meth:`feed` it (next, always)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One request, ready to send, and the parser for its answer."""

    url: str
    headers: dict[str, str]
    body: Json | bytes
    """A JSON body, or bytes sent as they are (a signed body must go exactly as signed)."""
    parser: WireParser
    warnings: Sequence[str] = ()
    """Settings the wire cannot honour, reported in ``stream-start``."""


class Connection(TypedDict, total=False):
    """The keyword arguments every HTTP adapter takes (see :class:`HTTPModel`)."""

    api_key: str | None
    base_url: str | None
    http_client: httpx.AsyncClient | None
    stream: bool
    headers: Mapping[str, str] | None
    context_window: int | None
    max_output_tokens: int | None


class HTTPModel(Model):
    """A model behind an HTTP API.

    ``api_key`` and ``base_url`` are resolved when the model is built (:meth:`_credentials`), so missing
    credentials are a :class:`~toolwire.errors.ConfigError` then, not on the first request. ``http_client``
    is borrowed (never closed here); without one the adapter opens its own on first use and :meth:`aclose`
    closes it, and a later request opens a new one (a client is bound to its event loop, and
    ``Agent.run_sync`` closes the model when its loop ends). ``stream=False`` asks for one JSON body, read
    into the same parts. ``headers`` are added to every request. ``context_window`` and ``max_output_tokens``
    override the model's documented limits (see :attr:`~toolwire.models.base.Model.context_window`).
    """

    _sse_body = True
    """A streamed body is server-sent events, read here (an adapter reading another format in its own
    ``_stream_batches`` sets False: its parser is then fed decoded events only)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        headers: Mapping[str, str] | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        self.model_name = model
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.stream_enabled = stream
        self.extra_headers = dict(headers or {})
        self.base_url, self.api_key = self._credentials(api_key, base_url)
        self._given_client = http_client
        self._open_client: httpx.AsyncClient | None = None
        self._owns_client = False

    def _client(self) -> httpx.AsyncClient:
        if self._open_client is None:
            self._open_client, self._owns_client = make_client(self._given_client)
        return self._open_client

    async def aclose(self) -> None:
        client, self._open_client = self._open_client, None
        if client is not None and self._owns_client:
            await client.aclose()

    @abstractmethod
    def _credentials(self, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
        """``(base_url, key)`` for this provider (see ``toolwire.models._providers``). Called by ``__init__``:
        options it reads must be set before ``super().__init__()``."""

    @abstractmethod
    async def _exchange(self, request: ModelRequest) -> Exchange:
        """The request for ``request``."""

    @abstractmethod
    def _whole_events(self, body: Json) -> Iterable[Json | StreamError]:
        """The events a whole (non-streamed) response body stands for."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        exchange = await self._exchange(request)
        parser = exchange.parser
        json_body, content = (
            (None, exchange.body) if isinstance(exchange.body, bytes) else (exchange.body, None)
        )
        async with open_stream(
            self._client(),
            "POST",
            exchange.url,
            provider=self.configured_provider,  # as the user named it (ollama:, groq:)
            model=self.model_name,
            json_body=json_body,
            content=content,
            headers={**exchange.headers, **self.extra_headers},
            window=window_key(self),
        ) as response:
            yield StreamStart(warnings=tuple(exchange.warnings))
            metadata = self._response_metadata(response)
            if metadata is not None:
                yield metadata
            feed_data = parser.feed_data if self._sse_body and isinstance(parser, DataParser) else None
            batches: AsyncGenerator[list[Json | StreamError], None] | AsyncGenerator[list[SSEEvent], None]
            if self._is_whole(response):
                batches = self._whole(response)
            elif feed_data is not None:
                batches = self._sse_batches(response)
            else:
                batches = self._stream_batches(response)
            # An error, or a terminal event, ends the read; a body that just ends is the parser's to judge.
            async with aclosing(batches):
                async for batch in batches:
                    for item in batch:
                        if isinstance(item, tuple):  # undecoded (a DataParser's stream)
                            name, data = item
                            parts = feed_data(name, data) if feed_data is not None else None
                            if parts is not None:
                                for part in parts:
                                    yield part
                                continue
                            decoded = self._sse_event(name, data)
                            if decoded is None:
                                continue
                            event = decoded
                        else:
                            event = item
                        if isinstance(event, StreamError):
                            yield event
                            return
                        for part in parser.feed(event):
                            yield part
                        if parser.done:
                            return
        for part in parser.end():
            yield part

    def _response_metadata(self, response: httpx.Response) -> ResponseMetadata | None:
        """Metadata found in the response headers rather than in the body."""
        return None

    def _is_whole(self, response: httpx.Response) -> bool:
        # A server may answer a streaming request with one JSON body (errors, or no streaming support).
        content_type = response.headers.get("content-type", "")
        return not self.stream_enabled or content_type.startswith("application/json")

    async def _whole(self, response: httpx.Response) -> AsyncGenerator[list[Json | StreamError], None]:
        content = await response.aread()
        body = parse_json(content)
        if not isinstance(body, dict):
            yield [self._protocol_error(f"invalid JSON response: {content[:200]!r}")]
            return
        yield list(self._whole_events(body))

    async def _stream_batches(
        self, response: httpx.Response
    ) -> AsyncGenerator[list[Json | StreamError], None]:
        """The body's events, a list per chunk read (not a generator step per event: a large tool call
        streams thousands): server-sent events whose data is a JSON object; a named event's ``type``
        defaults to its name. An invalid event ends its batch with the error."""
        async for events in self._sse_batches(response):
            batch: list[Json | StreamError] = []
            for name, data in events:
                event = self._sse_event(name, data)
                if event is not None:
                    batch.append(event)
                    if isinstance(event, StreamError):
                        yield batch
                        return
            if batch:
                yield batch

    async def _sse_batches(self, response: httpx.Response) -> AsyncGenerator[list[SSEEvent], None]:
        """The body's server-sent events, undecoded, up to ``_BATCH`` at a time.

        Decoded a slice at a time: a large chunk's events are not all alive at once as parsed JSON (the
        garbage collector would scan them again and again: time no longer linear in size)."""
        decoder = SSEDecoder()
        async for chunk in response.aiter_bytes():
            events = decoder.feed(chunk)
            for start in range(0, len(events), _BATCH):
                yield events[start : start + _BATCH]
        events = decoder.end()
        if events:
            yield events

    def _sse_event(self, name: str, raw: bytes) -> Json | StreamError | None:
        """One event's data as a JSON object (``[DONE]`` as the DONE event), an error, or None (no data)."""
        data = raw.strip()
        if data == _DONE_BYTES:
            return {"type": DONE}
        if not data:
            return None
        event = parse_json(data)
        if not isinstance(event, dict):
            shown = data[:200].decode("utf-8", "replace")
            return self._protocol_error(f"invalid JSON in {name!r} event: {shown!r}")
        if name != "message":  # the SSE default: the data alone says what it is
            event.setdefault("type", name)
        return event

    def _protocol_error(self, message: str, *, retryable: bool = False) -> StreamError:
        return protocol_error(
            message, provider=self.configured_provider, model=self.model_name, retryable=retryable
        )


__all__ = [
    "DEFAULT_TIMEOUT",
    "DONE",
    "RETRYABLE_STATUS",
    "Connection",
    "DataParser",
    "Exchange",
    "HTTPModel",
    "Json",
    "WireParser",
    "error_details",
    "http_error",
    "make_client",
    "open_stream",
    "parse_json",
    "parse_retry_after",
    "protocol_error",
]
