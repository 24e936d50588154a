"""Refused requests: :class:`RequestError`, the JSON it answers with, and the Starlette handlers.

Endpoints raise (``RequestError``, the store's ``SessionAccessError`` / ``SessionBusyError``, or a resume's
``ResumeError``: 409 with ``tool_call_ids``); the handlers in :data:`EXCEPTION_HANDLERS` answer ``{"error": {"type", "message"}}`` with a 4xx status. A
session that does not exist and a session of someone else answer the same 404, so nothing tells them
apart.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ExceptionHandler

from toolwire.errors import (
    ResumeError,
    SessionAccessError,
    SessionBusyError,
    ToolExecutionError,
    ToolwireError,
)


class RequestError(ToolwireError):
    """A client request the server cannot accept (malformed body, over a limit, unknown session)."""

    def __init__(
        self, message: str, *, status: int = 400, kind: str = "bad_request", retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.retry_after = retry_after
        """Seconds for the ``Retry-After`` header (a 503 the client should send again, elsewhere)."""


def not_found(session_id: str) -> RequestError:
    """The one 404 for a session that does not exist or is not the caller's."""
    return RequestError(f"no session {session_id!r}", status=404, kind="not_found")


def draining() -> RequestError:
    """The one 503 for a turn sent to a replica that is shutting down: nothing was stored or run, so the
    client sends it again (the balancer routes it to another replica once it sees the health check)."""
    return RequestError(
        "this server is shutting down and takes no new turns; send it again",
        status=503,
        kind="draining",
        retry_after=1,
    )


def error_body(exc: Exception) -> dict[str, Any]:
    """The JSON body of a refusal (its ``error`` member is also a WebSocket ``error`` message)."""
    if isinstance(exc, RequestError):
        return {"error": {"type": exc.kind, "message": str(exc)}}
    if isinstance(exc, SessionBusyError):
        return {"error": {"type": "session_busy", "message": str(exc)}}
    if isinstance(exc, ResumeError):
        return {"error": {"type": "not_awaited", "message": str(exc), "tool_call_ids": exc.tool_call_ids}}
    if isinstance(exc, ToolExecutionError):
        return {"error": {"type": "tool_source_failed", "message": str(exc)}}
    return {"error": {"type": "internal", "message": "internal server error"}}


async def _request_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestError)
    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONResponse(error_body(exc), status_code=exc.status, headers=headers)


async def _access_error(request: Request, exc: Exception) -> Response:
    # The store refused another user's session: answered exactly like a session that does not exist.
    session_id = str(request.path_params.get("session_id", ""))
    return JSONResponse(error_body(not_found(session_id)), status_code=404)


async def _busy(request: Request, exc: Exception) -> Response:
    """409: the session is busy, or its state does not match the request (``ResumeError``)."""
    return JSONResponse(error_body(exc), status_code=409)


async def _tool_source(request: Request, exc: Exception) -> Response:
    """502: a tool source the run needs first failed (an MCP server unreachable, or refusing the agent's
    credentials): the fault is upstream, not in the request, and the message names the source."""
    return JSONResponse(error_body(exc), status_code=502)


EXCEPTION_HANDLERS: dict[Any, ExceptionHandler] = {
    RequestError: _request_error,
    SessionAccessError: _access_error,
    SessionBusyError: _busy,
    ResumeError: _busy,  # answers for calls the session does not await: 409, nothing written
    # A call's own failure is a result the model sees; raised to an endpoint, it is a run start's source.
    ToolExecutionError: _tool_source,
}
"""For ``Starlette(exception_handlers=...)``: HTTP endpoints only (WebSocket endpoints close with a code)."""
