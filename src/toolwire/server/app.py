"""The ASGI app behind ``toolwire serve``: routes, middleware, the web page, and :func:`serve`.

Runs belong to the server (:mod:`toolwire.server.runs`); endpoints only watch them, so a client that goes
away never stops a run. State lives in the store (the same schema on SQLite and PostgreSQL). On PostgreSQL
the server is one of N replicas with no other setting: events go through a shared event log
(:mod:`~toolwire.server.shared_hub`), so any replica streams any session, and runs hold leases that other
replicas take over when their replica dies (:mod:`~toolwire.server.takeover`). On SQLite everything stays
in one process.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, nullcontext
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolwire.agent.agent import Agent
from toolwire.errors import ConfigError, MissingExtraError
from toolwire.server._input import Limits
from toolwire.server._state import ToolwireServer
from toolwire.server.a2a import A2AEndpoint
from toolwire.server.ag_ui import AGUIEndpoint
from toolwire.server.auth import Auth
from toolwire.server.chat import VERSION_HEADER, ChatEndpoint
from toolwire.server.errors import EXCEPTION_HANDLERS
from toolwire.server.health import Health
from toolwire.server.hub import Hub
from toolwire.server.native import NativeEndpoints
from toolwire.server.security import PAGE_CSP, OriginGuard, normalise_origin
from toolwire.store.base import Store

if TYPE_CHECKING:
    from toolwire.server.mcp_server import MCPEndpoint

logger = logging.getLogger("toolwire.server")


async def _index(request: Request) -> Response:
    page = _static_dir() / "index.html"
    headers = {"content-security-policy": PAGE_CSP}
    if page.is_file():
        return FileResponse(str(page), media_type="text/html", headers=headers)
    return HTMLResponse(
        "<!doctype html><title>toolwire</title><p>toolwire server is running.</p>", headers=headers
    )


def _static_dir() -> Traversable:
    return resources.files("toolwire.server") / "static"


class _AccessLog:
    """Method, path (never the query string: it may carry a token) and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                logger.info(
                    "%s %s %d %.1fms",
                    scope["method"],
                    scope["path"],
                    status,
                    (time.perf_counter() - started) * 1e3,
                )
            await send(message)

        await self.app(scope, receive, send_and_note)


def create_app(
    agent: Agent[Any, Any],
    *,
    store: Store | str | None = None,
    tokens: dict[str, str] | None = None,
    tokens_file: str | None = None,
    ai_sdk_version: str | None = None,
    limits: Limits | None = None,
    hub: Hub | None = None,
    allow_origins: Sequence[str] = (),
) -> Starlette:
    """The toolwire ASGI app for ``agent``; mount it in an existing app or serve it with uvicorn.

    ``tokens`` maps bearer tokens to user ids (``tokens_file`` and ``TOOLWIRE_TOKENS`` add more);
    with none, only loopback clients are served, and only under loopback host names. ``ai_sdk_version``
    is the AI SDK client version to speak to (default: the newest 6.x); a request may override it with
    the ``x-toolwire-ai-sdk-version`` header. Browsers on other origins are refused unless listed in
    ``allow_origins`` (``scheme://host[:port]``), which also get CORS headers.
    """
    try:
        guard_origins = [normalise_origin(o) for o in allow_origins]
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if store is not None:
        agent.use_store(store)
    auth = Auth.from_sources(tokens_file, extra=tokens)
    server = ToolwireServer(
        agent, auth=auth, hub=hub, limits=limits or Limits(), ai_sdk_version=ai_sdk_version
    )

    mcp = _mcp_endpoint(server)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if auth.development:
            logger.warning(
                "no tokens configured: DEVELOPMENT MODE, loopback clients only, all as user 'local'"
            )
        async with mcp.running() if mcp is not None else nullcontext():
            await server.start()
            yield
            await server.close()  # before the MCP sessions end: their calls see their runs end first

    chat = ChatEndpoint(server)
    health = Health(server).get
    native = NativeEndpoints(server)
    ag_ui = AGUIEndpoint(server)
    a2a = A2AEndpoint(server)
    routes: list[BaseRoute] = [
        Route("/", _index),
        Route("/api/health", health, methods=["GET"]),
        Route("/api/chat", chat.post, methods=["POST"]),
        Route("/api/chat/{session_id}/stream", chat.stream, methods=["GET"]),
        Route("/api/ag-ui", ag_ui.post, methods=["POST"]),
        Route("/.well-known/agent-card.json", a2a.card, methods=["GET"]),
        Route("/a2a", a2a.post, methods=["POST"]),
        Route("/api/sessions", native.list_sessions, methods=["GET"]),
        Route("/api/sessions", native.create_session, methods=["POST"]),
        Route("/api/sessions/{session_id}/messages", native.session_messages, methods=["GET"]),
        Route("/api/sessions/{session_id}/messages", native.post_message, methods=["POST"]),
        Route("/api/sessions/{session_id}", native.update_session, methods=["PATCH"]),
        Route("/api/sessions/{session_id}", native.delete_session, methods=["DELETE"]),
        Route("/api/sessions/{session_id}/cancel", native.cancel, methods=["POST"]),
        Route("/api/sessions/{session_id}/events", native.events),
        WebSocketRoute("/api/sessions/{session_id}/ws", native.websocket),
    ]
    if mcp is not None:
        routes.append(Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]))
    static = _static_dir()
    if static.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=str(static)), name="static"))
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=EXCEPTION_HANDLERS)
    app.state.toolwire = server
    app.add_middleware(_AccessLog)
    if guard_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=guard_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["authorization", "content-type", "last-event-id", VERSION_HEADER],
        )
    # Outermost: nothing runs for a request the origin rules refuse.
    app.add_middleware(OriginGuard, allowed_origins=guard_origins, development=auth.development)
    return app


def _mcp_endpoint(server: ToolwireServer) -> MCPEndpoint | None:
    """``/mcp`` when the ``mcp`` extra (2.x) is installed; without it the rest of the server runs."""
    try:
        from toolwire.server.mcp_server import MCPEndpoint
    except MissingExtraError as exc:
        logger.info("no /mcp endpoint: %s", exc)
        return None
    return MCPEndpoint(server)


async def serve(
    agent: Agent[Any, Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens_file: str | None = None,
    ai_sdk_version: str | None = None,
    allow_origins: Sequence[str] = (),
    limits: Limits | None = None,
) -> None:
    """Serve ``agent`` with uvicorn until SIGINT/SIGTERM (``toolwire serve``).

    Slow or numerous clients are bounded (:mod:`toolwire.server._guard`); shutting down cancels the
    runs (stored as cancelled), closes every stream and exits within ``limits.shutdown_timeout``.
    """
    import uvicorn

    from toolwire.server._guard import (
        ACCEPT_BACKLOG,
        Server,
        default_max_connections,
        guarded_protocol,
        install_log_bounds,
    )

    limits = limits or Limits()
    app = create_app(
        agent,
        tokens_file=tokens_file,
        ai_sdk_version=ai_sdk_version,
        allow_origins=allow_origins,
        limits=limits,
    )
    server: ToolwireServer = app.state.toolwire
    if server.auth.development:
        print(
            "WARNING: no tokens configured (--tokens FILE or TOOLWIRE_TOKENS): development mode, "
            "only loopback clients are served, all as one user.",
            file=sys.stderr,
            flush=True,
        )
    install_log_bounds()
    protocol = guarded_protocol(
        max_connections=limits.max_connections or default_max_connections(),
        header_timeout=limits.header_timeout,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_level="info",
        ws="websockets-sansio",
        http=protocol,
        backlog=ACCEPT_BACKLOG,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=int(limits.shutdown_timeout) or 1,
    )
    print(f"toolwire serving on http://{host}:{port}/", file=sys.stderr, flush=True)
    await Server(config, before_shutdown=server.close, on_signal=server.begin_draining).serve()
