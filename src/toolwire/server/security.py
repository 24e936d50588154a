"""What a browser on another origin may do here: nothing, unless the operator allowed that origin.

A development server (no tokens) trusts loopback peers, and the developer's browser is one: any page it
visits could otherwise drive the server. So, in every mode:

- a request or WebSocket handshake that carries an ``Origin`` is served only when that origin is the
  server's own (the ``Host`` the request was sent to) or one of ``allowed_origins``; a ``null`` origin
  (sandboxed frames, ``file:``) never is. A cross-site request without ``Origin`` (``Sec-Fetch-Site:
  cross-site``: an image or script tag) is refused on the API too;
- in development mode the ``Host`` header must be a loopback name (DNS rebinding points a foreign
  name at 127.0.0.1; the browser then sends that name);
- CORS headers are sent only for ``allowed_origins`` (Starlette's ``CORSMiddleware``).

Requiring ``application/json`` on JSON bodies (a form or ``text/plain`` POST needs no CORS preflight)
is done where bodies are read (:mod:`toolwire.server._input`).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

# Sent on every response: the API and the page are never to be framed or content-sniffed.
BASE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
# The page loads only its own files; inline script is never allowed (the page has none).
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def normalise_origin(origin: str) -> str:
    """``scheme://host[:port]`` in lower case, the form browsers send; raises ValueError otherwise."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"not an origin: {origin!r} (expected scheme://host[:port])")
    port = f":{parts.port}" if parts.port else ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host.lower()}{port}"


def is_loopback_host(host_header: str) -> bool:
    """Whether a ``Host`` header names this machine's loopback (``localhost``, ``127.x``, ``[::1]``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OriginGuard:
    """ASGI middleware enforcing the rules in the module docstring; adds :data:`BASE_HEADERS`."""

    def __init__(self, app: ASGIApp, *, allowed_origins: Iterable[str] = (), development: bool) -> None:
        self.app = app
        self.allowed = frozenset(normalise_origin(o) for o in allowed_origins)
        self.development = development

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await _refuse(scope, receive, send, refusal)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])  # type: ignore[call-overload]
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in BASE_HEADERS if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]

    def refusal(self, scope: Scope) -> str | None:
        """Why this request may not be served, or ``None``."""
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.development and not is_loopback_host(host):
            return "development mode (no tokens) serves only loopback host names such as localhost"
        origin = headers.get("origin")
        if origin is not None:
            if not self._origin_allowed(origin, host):
                return "requests from this origin are not allowed (see --allow-origin)"
        elif headers.get("sec-fetch-site") == "cross-site" and str(scope.get("path", "")).startswith("/api/"):
            return "cross-site requests are not allowed"
        return None

    def _origin_allowed(self, origin: str, host: str) -> bool:
        try:
            wanted = normalise_origin(origin)
        except ValueError:
            return False  # "null" and anything else that is not a web origin
        if wanted in self.allowed:
            return True
        return bool(host) and urlsplit(wanted).netloc == host.strip().lower()


async def _refuse(scope: Scope, receive: Receive, send: Send, reason: str) -> None:
    if scope["type"] == "websocket":
        # Close before accepting: the browser sees a failed handshake (HTTP 403), no data ever flows.
        await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
        return
    body = json.dumps({"error": {"type": "forbidden", "message": reason}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *BASE_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
