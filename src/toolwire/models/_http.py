"""HTTP plumbing shared by adapters: one place that maps transport and status errors to typed errors."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from toolwire.errors import ProviderConnectionError, ProviderHTTPError

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=10.0)
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def make_client(http_client: httpx.AsyncClient | None) -> tuple[httpx.AsyncClient, bool]:
    """Return ``(client, owned)``: the injected client, or a new one the adapter must close."""
    if http_client is not None:
        return http_client, False
    return httpx.AsyncClient(timeout=DEFAULT_TIMEOUT), True


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
    try:
        body: Any = json.loads(content) if content else None
    except ValueError:
        body = content.decode("utf-8", "replace")
    code, message = error_details(body)
    if code is None:  # AWS puts the error type in a header: "ValidationException:http://..."
        code = response.headers.get("x-amzn-errortype", "").split(":")[0] or None
    return ProviderHTTPError(
        message or f"HTTP {response.status_code}",
        provider=provider,
        model=model,
        status=response.status_code,
        code=code,
        retryable=response.status_code in RETRYABLE_STATUS,
        body=body,
        retry_after=parse_retry_after(response.headers),
    )


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
) -> AsyncIterator[httpx.Response]:
    """Send a request and yield the streaming response; non-2xx and transport errors become typed errors."""
    request = client.build_request(method, url, json=json_body, content=content, headers=headers)
    try:
        response = await client.send(request, stream=True)
    except httpx.TimeoutException as exc:
        raise ProviderConnectionError(
            f"timed out: {exc}", provider=provider, model=model, retryable=True
        ) from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(
            f"connection failed: {exc}", provider=provider, model=model, retryable=True
        ) from exc
    try:
        if response.status_code >= 400:
            body = await response.aread()
            raise http_error(response, body, provider=provider, model=model)
        try:
            yield response
        except httpx.TimeoutException as exc:
            raise ProviderConnectionError(
                f"stream stalled: {exc}", provider=provider, model=model, retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise ProviderConnectionError(
                f"stream broken: {exc}", provider=provider, model=model, retryable=True
            ) from exc
    finally:
        await response.aclose()
