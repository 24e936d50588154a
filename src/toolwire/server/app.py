"""The ASGI app behind ``toolwire serve``: AI SDK chat, native session events, history, the web page.

Every run goes the same way, whichever endpoint started it: :class:`RunManager` starts the agent's
one loop as a server-owned task and publishes each event to the :class:`~toolwire.server.hub.EventHub`;
endpoints only *watch* (the AI SDK stream of ``POST /api/chat``, SSE, WebSocket). So a client that
disconnects stops watching, never the run: the run finishes and is stored, and the client resumes
from the stream cursor or the history. ``POST /api/sessions/{id}/cancel`` stops a run on purpose
(stored as cancelled); shutting the server down cancels its runs the same way, so no tool keeps
running unowned.

State lives in the store (the same schema on SQLite and PostgreSQL), so replicas can share one
database. Live event fan-out is per process: a client following a run's native stream must reach
the replica running it (sticky sessions), while history and every new turn work on any replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from toolwire._text import clean_json
from toolwire.agent.agent import Agent
from toolwire.errors import ConfigError, RequestError, SessionAccessError, SessionBusyError
from toolwire.events import AgentEvent, InteractionEnd
from toolwire.messages import MessageAdapter, new_id
from toolwire.server.auth import Auth
from toolwire.server.hub import EventHub, Subscription
from toolwire.server.security import PAGE_CSP, OriginGuard, normalise_origin
from toolwire.server.ui_messages import last_user_text, ui_messages_to_history
from toolwire.server.ui_stream import (
    DONE_FRAME,
    UI_STREAM_HEADERS,
    ClientFeatures,
    UIStreamEncoder,
    parse_client_version,
    sse_data,
)
from toolwire.store.base import Store
from toolwire.store.records import SessionInfo
from toolwire.transcript import merge_histories

logger = logging.getLogger("toolwire.server")

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:~-]{0,199}")
_CURSOR = re.compile(r"[0-9]{1,18}")  # ASCII digits only: str.isdigit() also accepts "²" and "١"
VERSION_HEADER = "x-toolwire-ai-sdk-version"
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}


class Limits:
    """Request limits; everything over them is refused with 413 before any work is done."""

    def __init__(
        self,
        *,
        max_body_bytes: int = 1_000_000,
        max_messages: int = 1_000,
        max_prompt_chars: int = 100_000,
        ping_interval: float = 15.0,
        max_json_depth: int = 64,
        body_timeout: float = 30.0,
        header_timeout: float = 10.0,
        max_connections: int | None = None,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self.max_messages = max_messages
        self.max_prompt_chars = max_prompt_chars
        self.ping_interval = ping_interval
        self.max_json_depth = max_json_depth
        """Deeper JSON is refused with 400 (deep nesting would exhaust recursion further on)."""
        self.body_timeout = body_timeout
        """Seconds a client may take to send a request body (408 after)."""
        self.header_timeout = header_timeout
        """Seconds a connection may take to send a request head (``toolwire serve``)."""
        self.max_connections = max_connections
        """Open connections at most (``toolwire serve``); ``None``: 1,000, less under a low fd limit."""
        self.shutdown_timeout = shutdown_timeout
        """Seconds SIGTERM waits for runs to be cancelled and streams to close."""


class RunManager:
    """Owns the running agent loops: at most one per session in this process."""

    def __init__(self, agent: Agent[Any], hub: EventHub) -> None:
        self.agent = agent
        self.hub = hub
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._starting: set[str] = set()

    def running(self, session_id: str) -> bool:
        return session_id in self._tasks or session_id in self._starting

    async def start(self, session_id: str, prompt: str, *, user_id: str) -> None:
        """Start a run; returns once it holds the session (its first event is published).

        Raises :class:`SessionBusyError` when a run is going on, here or in another replica.
        """
        if self.running(session_id):
            raise SessionBusyError(f"session {session_id!r} is already running; wait for it or cancel it")
        self._starting.add(session_id)
        try:
            events = self.agent.stream(prompt, session_id=session_id, user_id=user_id).__aiter__()
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
            self.hub.publish(first)
            self._tasks[session_id] = asyncio.create_task(self._pump(session_id, events))
        finally:
            self._starting.discard(session_id)

    async def _pump(self, session_id: str, events: AsyncIterator[AgentEvent]) -> None:
        try:
            async for event in events:
                if isinstance(event, InteractionEnd) and event.session_id == session_id:
                    # The loop released the session before yielding its end: so must we, before anyone
                    # sees it, or a client that starts the next turn on [DONE] would get 409.
                    self._tasks.pop(session_id, None)
                self.hub.publish(event)
        except asyncio.CancelledError:
            raise
        except Exception:  # the loop already published its error and interaction end
            logger.info("run on session %s ended with an error", session_id, exc_info=True)
        finally:
            self._tasks.pop(session_id, None)

    async def cancel(self, session_id: str) -> bool:
        task = self._tasks.get(session_id)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return True

    async def shutdown(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class ToolwireServer:
    """The endpoints, over one agent, one store, one hub."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        auth: Auth,
        hub: EventHub,
        limits: Limits,
        ai_sdk_version: str | None,
    ) -> None:
        self.agent = agent
        self.auth = auth
        self.hub = hub
        self.limits = limits
        try:
            self.features = ClientFeatures.for_version(parse_client_version(ai_sdk_version))
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        self.runs = RunManager(agent, hub)

    # -- helpers -------------------------------------------------------------------------------

    def user(self, request: Request | WebSocket) -> str:
        client = request.client.host if request.client else None
        return self.auth.user_for(
            request.headers.get("authorization"), request.query_params.get("token"), client
        )

    @staticmethod
    def session_id(raw: Any) -> str:
        if not isinstance(raw, str) or not SESSION_ID.fullmatch(raw):
            raise RequestError("a session id is 1-200 characters of letters, digits and . _ : ~ -")
        return raw

    async def owns(self, info: SessionInfo, user: str) -> bool:
        """Whether ``user`` owns the session: its own row and, for a sub-session, its conversation's root."""
        if info.user_id != user:
            return False
        root_id = info.user_session_id or info.id
        if root_id == info.id:
            return True
        root = await (await self.agent.get_store()).get_session(root_id)
        return root is not None and root.user_id == user

    async def authorize(self, session_id: str, user: str) -> SessionInfo:
        """An existing session of ``user``; 404 alike for sessions that do not exist or are someone else's."""
        info = await (await self.agent.get_store()).get_session(session_id)
        if info is None or not await self.owns(info, user):
            raise _not_found(session_id)
        return info

    async def claim(self, session_id: str, user: str) -> SessionInfo:
        """The session for a new turn: created for ``user`` if it does not exist, in one atomic step
        (the first writer fixes the owner), otherwise only if ``user`` owns it; 404 alike if not."""
        store = await self.agent.get_store()
        info = await store.ensure_session(
            SessionInfo(id=session_id, user_session_id=session_id, user_id=user)
        )
        if not await self.owns(info, user):
            raise _not_found(session_id)
        if info.parent_session_id:
            raise RequestError("sub-agent sessions take no user messages", status=403, kind="forbidden")
        return info

    async def close(self) -> None:
        """Shutdown: cancel every run (stored as cancelled), then end every open stream."""
        await self.runs.shutdown()
        self.hub.close_all()

    async def read_json(self, request: Request) -> Any:
        media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != "application/json":
            # A form or text/plain POST needs no CORS preflight: JSON endpoints accept JSON only.
            raise RequestError(
                "the body must be JSON (content-type: application/json)",
                status=415,
                kind="unsupported_media_type",
            )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limits.max_body_bytes:
            raise RequestError(
                f"request body over {self.limits.max_body_bytes} bytes", status=413, kind="too_large"
            )
        body = bytearray()
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > self.limits.max_body_bytes:
                        raise RequestError(
                            f"request body over {self.limits.max_body_bytes} bytes",
                            status=413,
                            kind="too_large",
                        )
        except TimeoutError:
            raise RequestError(
                f"the request body took over {self.limits.body_timeout:g}s", status=408, kind="timeout"
            ) from None
        return self.parse_json(bytes(body))

    def parse_json(self, raw: bytes | str) -> Any:
        """JSON from a client: depth-limited, lone surrogates cleaned (stored as-is they would make every
        later request unencodable)."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise RequestError(f"the body is not JSON: {exc}") from exc
        if _deeper_than(data, self.limits.max_json_depth):
            raise RequestError(f"JSON nested deeper than {self.limits.max_json_depth} levels")
        return clean_json(data)

    def check_prompt(self, text: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise RequestError("'text' must be a non-empty string")
        if len(text) > self.limits.max_prompt_chars:
            raise RequestError(
                f"message over {self.limits.max_prompt_chars} characters", status=413, kind="too_large"
            )
        return text

    # -- history -------------------------------------------------------------------------------

    async def list_sessions(self, request: Request) -> Response:
        """The caller's conversations (top-level sessions), newest first, a page at a time."""
        user = self.user(request)
        limit = _int_param(request.query_params.get("limit"), default=50, low=1, high=200, name="limit")
        after = _page_cursor(request.query_params.get("cursor"))
        store = await self.agent.get_store()
        rows = await store.list_sessions(user_id=user, limit=limit + 1, top_level=True, after=after)
        page = rows[:limit]
        more = len(rows) > limit
        return JSONResponse(
            {
                "sessions": [_session_json(s) for s in page],
                "next_cursor": _make_page_cursor(page[-1]) if more and page else None,
            }
        )

    async def session_messages(self, request: Request) -> Response:
        user = self.user(request)
        session_id = self.session_id(request.path_params["session_id"])
        info = await self.authorize(session_id, user)
        assert info is not None
        store = await self.agent.get_store()
        tree = await store.list_sessions(user_session_id=info.user_session_id or info.id, limit=100_000)
        subtree = _subtree(session_id, tree, info)
        root = info.user_session_id or info.id
        if self.runs.running(root) or await store.run_in_progress(root):
            # A live run: its pending calls are still running; their results arrive as events.
            histories = [await store.raw_messages(s.id) for s in subtree]
        else:
            # Repaired (nothing is marked): after a crash the client sees the interrupted calls and the
            # results that did finish, exactly what the model will be sent.
            histories = [await store.load_history(s.id) for s in subtree]
        merged = merge_histories(histories)
        cursor = self.hub.resume_cursor(session_id, {s.id: s.last_seq for s in subtree})
        return JSONResponse(
            {
                "session_id": session_id,
                "messages": [MessageAdapter.dump_python(m, mode="json") for m in merged],
                "parents": {
                    s.id: s.parent_session_id for s in subtree if s.id != session_id and s.parent_session_id
                },
                "last_seq": {s.id: s.last_seq for s in subtree},
                "cursor": cursor,
                "running": self.runs.running(session_id),
            }
        )

    # -- native runs and streams -----------------------------------------------------------------

    async def post_message(self, request: Request) -> Response:
        user = self.user(request)
        session_id = self.session_id(request.path_params["session_id"])
        body = await self.read_json(request)
        if not isinstance(body, dict):
            raise RequestError("the body must be an object with 'text'")
        text = self.check_prompt(body.get("text"))
        await self.claim(session_id, user)
        cursor = self.hub.cursor(session_id)
        await self.runs.start(session_id, text, user_id=user)
        # Subscribing with ``after=cursor`` receives this run's events from its very first one.
        return JSONResponse({"session_id": session_id, "accepted": True, "cursor": cursor}, status_code=202)

    async def create_session(self, request: Request) -> Response:
        """An empty conversation owned by the caller (so its event stream can be opened before the first turn)."""
        user = self.user(request)
        length = request.headers.get("content-length") or "0"
        body = await self.read_json(request) if length != "0" else {}
        raw = body.get("session_id") if isinstance(body, dict) else None
        session_id = self.session_id(raw) if raw is not None else new_id("web-")
        store = await self.agent.get_store()
        if not await store.create_session(
            SessionInfo(id=session_id, user_session_id=session_id, user_id=user)
        ):
            # The same answer whoever holds the id (the caller or another user): no ownership oracle.
            raise RequestError(f"session id {session_id!r} is taken", status=409, kind="exists")
        return JSONResponse(
            {"session_id": session_id, "cursor": self.hub.cursor(session_id)}, status_code=201
        )

    async def cancel(self, request: Request) -> Response:
        user = self.user(request)
        session_id = self.session_id(request.path_params["session_id"])
        await self.authorize(session_id, user)
        cancelled = await self.runs.cancel(session_id)
        return JSONResponse({"session_id": session_id, "cancelled": cancelled})

    async def events(self, request: Request) -> Response:
        user = self.user(request)
        session_id = self.session_id(request.path_params["session_id"])
        await self.authorize(session_id, user)
        after = _cursor(request.headers.get("last-event-id") or request.query_params.get("after"))
        subscription = self.hub.subscribe(session_id, after)
        return StreamingResponse(self._sse(subscription), headers=SSE_HEADERS)

    async def _sse(self, subscription: Subscription) -> AsyncIterator[bytes]:
        try:
            yield b": connected\n\n"
            while True:
                try:
                    async with asyncio.timeout(self.limits.ping_interval):
                        item = await subscription.get()
                except TimeoutError:
                    yield b": ping\n\n"
                    continue
                if item is None:
                    return
                data = json.dumps(item.as_dict(), ensure_ascii=False, separators=(",", ":"))
                yield f"id: {item.cursor}\ndata: {data}\n\n".encode()
        finally:
            subscription.close()

    async def websocket(self, websocket: WebSocket) -> None:
        try:
            user = self.user(websocket)
            session_id = self.session_id(websocket.path_params["session_id"])
            after = _cursor(websocket.query_params.get("after"))
            # Opening a socket on a new id creates that session for the caller, atomically: it can never
            # be bound to a session someone else creates later.
            await self.claim(session_id, user)
        except RequestError as exc:
            await websocket.close(code=4000 + exc.status, reason=str(exc)[:120])
            return
        except SessionAccessError:
            await websocket.close(code=4404, reason=f"no session {session_id!r}"[:120])
            return
        await websocket.accept()
        subscription = self.hub.subscribe(session_id, after)
        sender = asyncio.create_task(self._ws_send(websocket, subscription))
        try:
            while True:
                frame = await websocket.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                if frame.get("text") is None:
                    await websocket.close(code=1003, reason="send JSON text frames")
                    break
                try:
                    message = self.parse_json(frame["text"])
                except RequestError as exc:
                    await websocket.close(code=1007, reason=str(exc)[:120])
                    break
                await self._ws_command(websocket, session_id, user, message)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            subscription.close()
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender

    async def _ws_send(self, websocket: WebSocket, subscription: Subscription) -> None:
        async for item in subscription:
            await websocket.send_json({"cursor": item.cursor, "event": item.as_dict()})
        await websocket.close(code=4409, reason="stream reset: reload the history")

    async def _ws_command(self, websocket: WebSocket, session_id: str, user: str, message: Any) -> None:
        try:
            if not isinstance(message, dict) or message.get("type") not in ("user-message", "cancel"):
                raise RequestError("send {'type': 'user-message', 'text': ...} or {'type': 'cancel'}")
            await self.authorize(session_id, user)  # every command is checked at the moment it runs
            if message["type"] == "cancel":
                await self.runs.cancel(session_id)
                return
            text = self.check_prompt(message.get("text"))
            await self.runs.start(session_id, text, user_id=user)
            await websocket.send_json({"type": "accepted", "session_id": session_id})
        except SessionAccessError:
            await websocket.send_json(
                {"type": "error", "error": _error_body(_not_found(session_id))["error"]}
            )
        except (RequestError, SessionBusyError) as exc:
            await websocket.send_json({"type": "error", "error": _error_body(exc)["error"]})

    # -- Vercel AI SDK ---------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        user = self.user(request)
        body = await self.read_json(request)
        if not isinstance(body, dict):
            raise RequestError("the body must be the chat request object {id, messages, trigger}")
        session_id = self.session_id(body.get("id"))
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise RequestError("'messages' must be an array of UI messages")
        if len(messages) > self.limits.max_messages:
            raise RequestError(f"more than {self.limits.max_messages} messages", status=413, kind="too_large")
        trigger = body.get("trigger", "submit-message")
        if trigger not in ("submit-message", "regenerate-message"):
            raise RequestError(f"unknown trigger {trigger!r}")
        features = self.features
        if (version := request.headers.get(VERSION_HEADER)) is not None:
            try:
                features = ClientFeatures.for_version(parse_client_version(version))
            except ValueError as exc:
                raise RequestError(str(exc)) from exc
        prompt = self.check_prompt(last_user_text(messages))
        history = ui_messages_to_history(messages[:-1], session_id=session_id)
        await self._import(session_id, user, history)

        subscription = self.hub.subscribe(session_id, None)
        try:
            await self.runs.start(session_id, prompt, user_id=user)
        except BaseException:
            subscription.close()
            raise
        encoder = UIStreamEncoder(session_id, new_id("msg_"), features)
        return StreamingResponse(self._ui_stream(encoder, subscription), headers=UI_STREAM_HEADERS)

    async def _import(self, session_id: str, user: str, history: list[Any]) -> None:
        """Claim the session, and start a conversation the store does not know yet from the client's
        messages: one transaction, so a refused or killed request writes nothing."""
        if not history:
            await self.claim(session_id, user)
            return
        store = await self.agent.get_store()
        info = SessionInfo(id=session_id, user_session_id=session_id, user_id=user)
        try:
            await store.import_history(info, history, interaction_id=new_id("import_"))
        except SessionAccessError:
            raise _not_found(session_id) from None
        await self.claim(session_id, user)  # a sub-session id is refused here like everywhere

    async def _ui_stream(self, encoder: UIStreamEncoder, subscription: Subscription) -> AsyncIterator[bytes]:
        try:
            yield sse_data(encoder.start())
            while True:
                try:
                    async with asyncio.timeout(self.limits.ping_interval):
                        item = await subscription.get()
                except TimeoutError:
                    yield b": ping\n\n"  # a tool is running: keep proxies from closing a quiet stream
                    continue
                if item is None or item.event is None:
                    yield sse_data({"type": "error", "errorText": "the stream fell too far behind; reload"})
                    break
                event = item.event
                for chunk in encoder.encode(event):
                    yield sse_data(chunk)
                if isinstance(event, InteractionEnd) and event.session_id == encoder.session_id:
                    break
            yield DONE_FRAME
        finally:
            subscription.close()

    # -- the page --------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        page = _static_dir() / "index.html"
        headers = {"content-security-policy": PAGE_CSP}
        if page.is_file():
            return FileResponse(str(page), media_type="text/html", headers=headers)
        return HTMLResponse(
            "<!doctype html><title>toolwire</title><p>toolwire server is running.</p>", headers=headers
        )


def _static_dir() -> Any:
    return resources.files("toolwire.server") / "static"


def _cursor(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not _CURSOR.fullmatch(raw):
        raise RequestError("Last-Event-ID / after must be a stream cursor (a non-negative integer)")
    return int(raw)


def _int_param(raw: str | None, *, default: int, low: int, high: int, name: str) -> int:
    if raw is None or raw == "":
        return default
    if not _CURSOR.fullmatch(raw) or not low <= int(raw) <= high:
        raise RequestError(f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def _make_page_cursor(info: SessionInfo) -> str:
    return f"{info.updated_at!r}~{info.id}"


def _page_cursor(raw: str | None) -> tuple[float, str] | None:
    """``updated_at~id`` of the last session of the previous page (keyset paging: stable under inserts)."""
    if raw is None or raw == "":
        return None
    stamp, sep, session_id = raw.partition("~")
    try:
        updated_at = float(stamp)
    except ValueError:
        updated_at = float("nan")
    if not sep or updated_at != updated_at or not SESSION_ID.fullmatch(session_id):
        raise RequestError("cursor must be the next_cursor of a previous page")
    return updated_at, session_id


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON nests containers deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _not_found(session_id: str) -> RequestError:
    return RequestError(f"no session {session_id!r}", status=404, kind="not_found")


def _subtree(session_id: str, tree: list[SessionInfo], info: SessionInfo) -> list[SessionInfo]:
    """``session_id`` and every session below it, oldest first."""
    children: dict[str, list[SessionInfo]] = {}
    for s in tree:
        if s.parent_session_id and s.id != s.parent_session_id:
            children.setdefault(s.parent_session_id, []).append(s)
    out: list[SessionInfo] = []
    seen: set[str] = set()
    todo = [info]
    while todo:
        current = todo.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        out.append(current)
        todo.extend(children.get(current.id, []))
    out.sort(key=lambda s: s.created_at)
    return out


def _session_json(info: SessionInfo) -> dict[str, Any]:
    return {
        "session_id": info.id,
        "parent_session_id": info.parent_session_id,
        "user_session_id": info.user_session_id or info.id,
        "title": info.title,
        "agent_name": info.agent_name,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "last_seq": info.last_seq,
    }


def _error_body(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, RequestError):
        return {"error": {"type": exc.kind, "message": str(exc)}}
    if isinstance(exc, SessionBusyError):
        return {"error": {"type": "session_busy", "message": str(exc)}}
    return {"error": {"type": "internal", "message": "internal server error"}}


def _handler(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            return await endpoint(request)
        except RequestError as exc:
            return JSONResponse(_error_body(exc), status_code=exc.status)
        except SessionAccessError:
            session_id = request.path_params.get("session_id", "")
            return JSONResponse(_error_body(_not_found(str(session_id))), status_code=404)
        except SessionBusyError as exc:
            return JSONResponse(_error_body(exc), status_code=409)

    return handle


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

        async def send_and_note(message: Any) -> None:
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
    agent: Agent[Any],
    *,
    store: Store | str | None = None,
    tokens: dict[str, str] | None = None,
    tokens_file: str | None = None,
    ai_sdk_version: str | None = None,
    limits: Limits | None = None,
    hub: EventHub | None = None,
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
        agent, auth=auth, hub=hub or EventHub(), limits=limits or Limits(), ai_sdk_version=ai_sdk_version
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if auth.development:
            logger.warning(
                "no tokens configured: DEVELOPMENT MODE, loopback clients only, all as user 'local'"
            )
        await agent.get_store()
        yield
        await server.close()

    routes = [
        Route("/", server.index),
        Route("/api/chat", _handler(server.chat), methods=["POST"]),
        Route("/api/sessions", _handler(server.list_sessions), methods=["GET"]),
        Route("/api/sessions", _handler(server.create_session), methods=["POST"]),
        Route("/api/sessions/{session_id}/messages", _handler(server.session_messages), methods=["GET"]),
        Route("/api/sessions/{session_id}/messages", _handler(server.post_message), methods=["POST"]),
        Route("/api/sessions/{session_id}/cancel", _handler(server.cancel), methods=["POST"]),
        Route("/api/sessions/{session_id}/events", _handler(server.events)),
        WebSocketRoute("/api/sessions/{session_id}/ws", server.websocket),
    ]
    static = _static_dir()
    if static.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=str(static)), name="static"))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.toolwire = server
    app.add_middleware(_AccessLog)
    if guard_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=guard_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type", "last-event-id", VERSION_HEADER],
        )
    # Outermost: nothing runs for a request the origin rules refuse.
    app.add_middleware(OriginGuard, allowed_origins=guard_origins, development=auth.development)
    return app


async def serve(
    agent: Agent[Any],
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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
    await Server(config, before_shutdown=server.close).serve()
