"""The native API: a user's sessions and their history, new sessions and turns, cancel, and the live event
stream over SSE or WebSocket.

Every path resolves the caller first and checks the session's owner (:mod:`toolwire.server._state`) before
it reads, writes or subscribes; HTTP refusals are raised and answered by :mod:`toolwire.server.errors`,
a WebSocket closes with ``4000 + status`` instead (``4409`` when its stream was reset).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from toolwire._text import session_title
from toolwire.errors import ResumeError, SessionAccessError, SessionBusyError, ToolExecutionError
from toolwire.messages import Message, MessageAdapter, ToolResultPart, new_id
from toolwire.server._input import (
    check_prompt,
    check_session_id,
    int_param,
    make_page_cursor,
    page_cursor,
    parse_answers,
    parse_json,
    read_json,
    stream_cursor,
)
from toolwire.server._sse import CONNECTED, PING, SSE_HEADERS, event_frame, with_pings
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError, error_body, not_found
from toolwire.server.hub import StreamKey, Subscription
from toolwire.store._rename import rename_session
from toolwire.store.records import SessionInfo, ToolCallRecord
from toolwire.tools.pending import Approval, DecisionKey, pending_of_rows
from toolwire.tools.registry import ToolRegistry
from toolwire.transcript import merge_histories


class NativeEndpoints:
    """The native endpoints over one :class:`ToolwireServer`."""

    def __init__(self, server: ToolwireServer) -> None:
        self.server = server

    # -- history ---------------------------------------------------------------------------------

    async def list_sessions(self, request: Request) -> Response:
        """The caller's conversations (top-level sessions), newest first, a page at a time."""
        user = self.server.user(request)
        limit = int_param(request.query_params.get("limit"), default=50, low=1, high=200, name="limit")
        after = page_cursor(request.query_params.get("cursor"))
        store = await self.server.store()
        rows = await store.list_sessions(user_id=user, limit=limit + 1, top_level=True, after=after)
        page = rows[:limit]
        more = len(rows) > limit
        return JSONResponse(
            {
                "sessions": [_session_json(s) for s in page],
                "next_cursor": make_page_cursor(page[-1]) if more and page else None,
            }
        )

    async def session_messages(self, request: Request) -> Response:
        """A session's history merged with its sub-sessions', and the cursor to follow it live from."""
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        info = await server.authorize(session_id, user)
        store = await server.store()
        tree = await store.list_sessions(user_session_id=info.user_session_id or info.id, limit=100_000)
        subtree = _subtree(session_id, tree, info)
        root = info.user_session_id or info.id
        awaiting: list[dict[str, Any]] = []
        # Decided once: "running" and the snapshot below must agree (a run ending meanwhile made a paused
        # conversation look finished with nothing awaited).
        live = server.runs.running(root) or await store.run_in_progress(root)
        if live:
            # A live run: its pending calls are still running; their results arrive as events.
            histories = [await store.raw_messages(s.id) for s in subtree]
        else:
            # Repaired (nothing is marked): after a crash the client sees the interrupted calls and the
            # results that did finish, exactly what the model will be sent. The calls a paused run waits
            # for are listed in ``awaiting`` and shown without a result (the repaired history would give
            # them the "not answered" result they get only if the conversation moves on).
            # A conversation's own client tools are the served agent's: their forms are built from its schemas.
            tools = server.agent.registry if info.parent_session_id is None else None
            awaiting = _awaiting(session_id, await store.tool_calls(session_id), tools)
            waits = {(a["session_id"], a["message_id"], a["tool_call_id"]) for a in awaiting}
            histories = [_without_results(await store.load_history(s.id), s.id, waits) for s in subtree]
        merged = merge_histories(histories)
        # Each turn that failed keeps its error (shown after the turn's messages; it is no message).
        errors = [asdict(e) for s in subtree for e in await store.turn_errors(s.id)]
        key = await server.stream_key(info)
        cursor = await server.hub.resume_cursor(key, {s.id: s.last_seq for s in subtree})
        return JSONResponse(
            {
                "session_id": session_id,
                "messages": [MessageAdapter.dump_python(m, mode="json") for m in merged],
                "parents": {
                    s.id: s.parent_session_id for s in subtree if s.id != session_id and s.parent_session_id
                },
                "agents": {s.id: s.agent_name for s in subtree if s.id != session_id and s.agent_name},
                "last_seq": {s.id: s.last_seq for s in subtree},
                "cursor": cursor,
                "running": live,
                "awaiting": awaiting,
                "errors": sorted(errors, key=lambda e: e["created_at"]),
            }
        )

    # -- runs --------------------------------------------------------------------------------------

    async def create_session(self, request: Request) -> Response:
        """An empty conversation owned by the caller (so its event stream can be opened before the first turn)."""
        server = self.server
        user = server.user(request)
        length = request.headers.get("content-length") or "0"
        body = await read_json(request, server.limits) if length != "0" else {}
        raw = body.get("session_id") if isinstance(body, dict) else None
        session_id = check_session_id(raw) if raw is not None else new_id("web-")
        store = await server.store()
        info = SessionInfo(id=session_id, user_session_id=session_id, user_id=user)
        if not await store.create_session(info):
            # The same answer whoever holds the id (the caller or another user): no ownership oracle.
            raise RequestError(f"session id {session_id!r} is taken", status=409, kind="exists")
        # Created: the stored row is ``info`` (its creation time is the incarnation).
        cursor = await server.hub.cursor(StreamKey(session_id, info.incarnation))
        return JSONResponse({"session_id": session_id, "cursor": cursor}, status_code=201)

    async def post_message(self, request: Request) -> Response:
        """Start a turn (202 once the run holds the session); its events follow on the stream.

        ``{"text"}`` is a new prompt; ``{"approvals", "tool_outputs"}`` (with or without ``text``) answer
        the calls a paused run waits for: answers that do not apply are refused with 409 (nothing written).
        """
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        body = await read_json(request, server.limits)
        if not isinstance(body, dict):
            raise RequestError("the body must be an object with 'text' and/or 'approvals' / 'tool_outputs'")
        text, approvals, outputs, info = await self._turn(session_id, user, body)
        cursor = await server.hub.cursor(StreamKey(session_id, info.incarnation))
        await server.runs.start(session_id, text, user_id=user, approvals=approvals, tool_outputs=outputs)
        # Subscribing with ``after=cursor`` receives this run's events from its very first one.
        return JSONResponse({"session_id": session_id, "accepted": True, "cursor": cursor}, status_code=202)

    async def _turn(
        self, session_id: str, user: str, body: dict[str, Any]
    ) -> tuple[str | None, dict[DecisionKey, Approval], dict[DecisionKey, Any], SessionInfo]:
        """A turn's prompt and answers, the session checked for the caller: a new prompt alone may create
        the session (:meth:`ToolwireServer.claim`); answers only reach an existing one of the caller's."""
        approvals, outputs = parse_answers(body)
        answering = bool(approvals or outputs)
        text = body.get("text")
        if text is not None or not answering:
            text = check_prompt(text, self.server.limits)
        if not answering:
            return text, approvals, outputs, await self.server.claim(session_id, user)
        info = await self.server.authorize(session_id, user)
        if info.parent_session_id:
            raise RequestError(
                "answer a sub-agent's calls through its conversation", status=403, kind="forbidden"
            )
        return text, approvals, outputs, info

    async def cancel(self, request: Request) -> Response:
        """Cancel the session's run on whichever replica runs it (stored as cancelled); ``cancelled``: was one."""
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        await server.authorize(session_id, user)
        cancelled = await server.cancel(session_id)
        return JSONResponse({"session_id": session_id, "cancelled": cancelled})

    # -- managing conversations --------------------------------------------------------------------

    async def update_session(self, request: Request) -> Response:
        """Rename a conversation: ``{"title": "..."}`` (whitespace collapsed, at most 200 characters),
        published as a numbered ``session-renamed`` event; 409 while a turn runs in it."""
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        body = await read_json(request, server.limits)
        title = body.get("title") if isinstance(body, dict) else None
        if not isinstance(title, str) or not " ".join(title.split()):
            raise RequestError("the body must be an object with a non-empty 'title'")
        stored = session_title(title)
        if stored is None:  # no store keeps U+0000 alike (PostgreSQL text cannot): refused everywhere
            raise RequestError("the title must not contain U+0000")
        info = await server.authorize(session_id, user)
        if server.runs.running(session_id):  # the run numbers the session's events: rename from a tool
            raise SessionBusyError(f"session {session_id!r} is running; rename it when the turn ends")
        store = await server.store()
        renamed = await rename_session(store, session_id, stored)  # 409 while a run of any replica holds it
        if renamed is None:
            raise not_found(session_id)  # deleted meanwhile: 404 like any missing one
        # ONE numbered event, outside any run: every subscriber of the conversation sees the new title.
        server.hub.publish(renamed, (await server.stream_key(info)).incarnation)
        info = await server.authorize(session_id, user)
        return JSONResponse(_session_json(info))

    async def delete_session(self, request: Request) -> Response:
        """Delete a conversation with its sub-agent sessions (409 while a turn runs in it)."""
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        info = await server.authorize(session_id, user)
        if info.parent_session_id:
            raise RequestError(
                "sub-agent sessions are deleted with their conversation", status=403, kind="forbidden"
            )
        if server.runs.running(session_id):
            raise SessionBusyError(f"session {session_id!r} is running; cancel the turn first")
        store = await server.store()
        tree = await store.list_sessions(user_session_id=session_id, limit=100_000)
        if not await store.delete_session(session_id):
            raise not_found(session_id)
        # Every open stream of the conversation ends now, and nothing of it stays to be replayed (on
        # PostgreSQL the store's deleting transaction purged the log and told the other replicas).
        server.hub.end_streams({session_id, *(s.id for s in tree)}, info.incarnation)
        return Response(status_code=204)

    # -- streams -----------------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        """The session's events over SSE, resumed after ``Last-Event-ID`` (or ``?after=``)."""
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        info = await server.authorize(session_id, user)
        after = stream_cursor(request.headers.get("last-event-id") or request.query_params.get("after"))
        subscription = await server.hub.open(await server.stream_key(info), after)
        return StreamingResponse(
            _event_stream(subscription, server.limits.ping_interval), headers=SSE_HEADERS
        )

    async def websocket(self, websocket: WebSocket) -> None:
        """The session's events, and ``user-message`` / ``cancel`` commands, over one WebSocket."""
        server = self.server
        try:
            user = server.user(websocket)
            session_id = check_session_id(websocket.path_params["session_id"])
            after = stream_cursor(websocket.query_params.get("after"))
            # Opening a socket on a new id creates that session for the caller, atomically: it can never
            # be bound to a session someone else creates later.
            info = await server.claim(session_id, user)
        except RequestError as exc:
            await websocket.close(code=4000 + exc.status, reason=str(exc)[:120])
            return
        except SessionAccessError:
            await websocket.close(code=4404, reason=f"no session {session_id!r}"[:120])
            return
        await websocket.accept()
        subscription = await server.hub.open(StreamKey(session_id, info.incarnation), after)
        sender = asyncio.create_task(_ws_send(websocket, subscription))
        try:
            while True:
                frame = await websocket.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                if frame.get("text") is None:
                    await websocket.close(code=1003, reason="send JSON text frames")
                    break
                try:
                    message = parse_json(frame["text"], server.limits)
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

    async def _ws_command(self, websocket: WebSocket, session_id: str, user: str, message: Any) -> None:
        """Run one command; a refused one is answered with an ``error`` message and the socket stays open."""
        server = self.server
        try:
            if not isinstance(message, dict) or message.get("type") not in ("user-message", "cancel"):
                raise RequestError("send {'type': 'user-message', 'text': ...} or {'type': 'cancel'}")
            await server.authorize(session_id, user)  # every command is checked at the moment it runs
            if message["type"] == "cancel":
                await server.cancel(session_id)
                return
            text, approvals, outputs, _ = await self._turn(session_id, user, message)
            await server.runs.start(session_id, text, user_id=user, approvals=approvals, tool_outputs=outputs)
            await websocket.send_json({"type": "accepted", "session_id": session_id})
        except SessionAccessError:
            await websocket.send_json({"type": "error", "error": error_body(not_found(session_id))["error"]})
        except (RequestError, SessionBusyError, ResumeError, ToolExecutionError) as exc:
            await websocket.send_json({"type": "error", "error": error_body(exc)["error"]})


async def _event_stream(subscription: Subscription, ping_interval: float) -> AsyncIterator[bytes]:
    try:
        yield CONNECTED
        frames: list[bytes] = []
        async for item in with_pings(subscription, ping_interval):
            frames.append(PING if item is None else event_frame(item))
            if not subscription.has_queued():
                yield b"".join(frames)
                frames.clear()
        if frames:
            yield b"".join(frames)
    finally:
        subscription.close()


async def _ws_send(websocket: WebSocket, subscription: Subscription) -> None:
    async for item in subscription:
        await websocket.send_json({"cursor": item.cursor, "event": item.as_dict()})
    await websocket.close(code=4409, reason="stream reset: reload the history")


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


def _awaiting(
    session_id: str, rows: list[ToolCallRecord], tools: ToolRegistry | None
) -> list[dict[str, Any]]:
    """What a paused run of the session waits for, in call order: each call a person answers (a
    sub-agent's with its own ``session_id``), and each call of the session waiting for its sub-agent
    (``kind: "subagent"``, for the transcript; answered through the sub-agent's calls). A client tool of
    the session itself (``kind: "output"``) comes with its ``parameters`` schema from ``tools``."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if row.awaiting is None:
            continue
        if row.awaiting == "subagent":
            out.append(
                {
                    "session_id": session_id,
                    "tool_call_id": row.tool_call_id,
                    "tool_name": row.tool_name,
                    "args": row.args,
                    "kind": "subagent",
                    "message_id": row.message_id,
                }
            )
        for pending in pending_of_rows([row], session_id):
            entry = pending.to_dict()
            tool = tools.get(pending.tool_name) if tools is not None else None
            if tool is not None and pending.kind == "output" and pending.session_id == session_id:
                entry["parameters"] = tool.parameters
            out.append(entry)
    return out


def _without_results(
    history: list[Message], session_id: str, waits: set[tuple[str, str, str]]
) -> list[Message]:
    """The history without the repaired results of awaited calls ``(session_id, message_id, call_id)``."""
    if not waits:
        return history
    out: list[Message] = []
    call_message = ""
    for message in history:
        if message.role == "assistant":
            call_message = message.id
        elif message.role == "tool":
            parts = tuple(
                p
                for p in message.parts
                if not (isinstance(p, ToolResultPart) and (session_id, call_message, p.tool_call_id) in waits)
            )
            if not parts:
                continue
            message = replace(message, parts=parts)
        out.append(message)
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
