"""``POST /api/chat``: the Vercel AI SDK endpoint (``useChat`` and its default transport).

The request carries the client's whole conversation, but the store stays authoritative: the client's
earlier messages are only imported into a conversation the store does not know yet
(:meth:`ChatEndpoint._import_client_history`); of a known one, only which user turns the client still
shows is read: turns it regenerated, edited or truncated away are dropped from the store
(:meth:`ChatEndpoint._follow_client`; these are the two places the server writes messages outside the
agent loop). The last message is the new turn. When it is the assistant's message instead, the client answered its calls
(``addToolApprovalResponse`` / ``addToolOutput`` and ``sendAutomaticallyWhen``): the answers for the calls
the store awaits resume the paused run, which continues that message. The answer is the run's events as an
AI SDK UI message stream.

``GET /api/chat/{id}/stream`` is the AI SDK's resumable stream (``chat.resumeStream()``,
``useChat({resume: true})``): on any replica, the running turn's message again from its start (replayed from
the event log), then live until it ends; 204 when the session runs nothing. The message keeps its id
(:func:`turn_message_id`), so the client replaces the message it holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from toolwire.errors import ResumeError, SessionAccessError, SessionBusyError, SubSessionError
from toolwire.events import InteractionEnd, InteractionStart
from toolwire.messages import new_id
from toolwire.server._input import check_prompt, check_session_id, read_json
from toolwire.server._sse import PING, data_frame, with_pings
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError, not_found
from toolwire.server.hub import StreamKey, Subscription
from toolwire.server.ui_messages import (
    answers_calls,
    client_answers,
    last_user_text,
    shows_turns,
    turn_to_replace,
    ui_messages_to_history,
)
from toolwire.server.ui_stream import (
    DONE_FRAME,
    UI_STREAM_HEADERS,
    ClientFeatures,
    UIStreamEncoder,
    parse_client_version,
    turn_message_id,
)
from toolwire.store._locks import lock_owner
from toolwire.store.records import SessionInfo
from toolwire.tools.pending import Approval, DecisionKey

VERSION_HEADER = "x-toolwire-ai-sdk-version"
"""A request may name its AI SDK client version here, overriding the server's ``ai_sdk_version``."""
_FIRST_EVENT_POLLS = 20
_FIRST_EVENT_POLL = 0.1
_FELL_BEHIND = data_frame({"type": "error", "errorText": "the stream fell too far behind; reload"})


class ChatEndpoint:
    """``POST /api/chat`` over one :class:`ToolwireServer`."""

    def __init__(self, server: ToolwireServer) -> None:
        self.server = server

    async def post(self, request: Request) -> Response:
        """Start the turn of an AI SDK chat request; answer with its UI message stream."""
        server = self.server
        user = server.user(request)
        body = await read_json(request, server.limits)
        if not isinstance(body, dict):
            raise RequestError("the body must be the chat request object {id, messages, trigger}")
        session_id = check_session_id(body.get("id"))
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise RequestError("'messages' must be an array of UI messages")
        if len(messages) > server.limits.max_messages:
            raise RequestError(
                f"more than {server.limits.max_messages} messages", status=413, kind="too_large"
            )
        trigger = body.get("trigger", "submit-message")
        if trigger not in ("submit-message", "regenerate-message"):
            raise RequestError(f"unknown trigger {trigger!r}")
        features = self._features(request)
        last = messages[-1] if messages else None
        prompt: str | None = None
        approvals: dict[DecisionKey, Approval] = {}
        outputs: dict[DecisionKey, Any] = {}
        message_id = ""  # a new turn's message is named after its run (a resumed stream names it alike)
        claimed = True  # False: the run's own start claims the session (the one store call of a new chat)
        if trigger == "submit-message" and isinstance(last, dict) and answers_calls(last):
            # The client answered the calls of its last assistant message (approvals, client tools'
            # outputs) and re-submitted: continue that message with the answers the store awaits.
            approvals, outputs = await self._answers(session_id, user, last)
            if isinstance(last.get("id"), str) and last["id"]:
                message_id = last["id"]
        else:
            prompt = check_prompt(last_user_text(messages), server.limits)
            history = ui_messages_to_history(messages[:-1], session_id=session_id)
            # regenerate-message and edits (messageId) replace a turn even when the client shows none
            replaces = trigger == "regenerate-message" or body.get("messageId") is not None
            if history or replaces or shows_turns(messages[:-1]) or server.runs.running(session_id):
                if not await self._import_client_history(session_id, user, history):
                    await self._follow_client(session_id, messages[:-1], replaces=replaces)
            else:
                # Only the new message: nothing to import or cut, so the run's start claims the session
                # in its one store transaction (a burst of new chats costs one writer round trip each).
                # A run going on here is claimed first above, so its 409 never answers a stranger.
                claimed = False
        if claimed:
            # Subscribed once the run holds the session and before its first event is published, so the
            # stream misses none of its events (and follows the incarnation the run writes to).
            subscription = await server.start_watched(
                session_id, prompt, user=user, approvals=approvals, tool_outputs=outputs
            )
        else:
            subscription = await self._start_unclaimed(session_id, prompt, user)
        encoder = UIStreamEncoder(session_id, message_id, features)
        return StreamingResponse(
            _ui_stream(encoder, subscription, server.limits.ping_interval), headers=UI_STREAM_HEADERS
        )

    async def stream(self, request: Request) -> Response:
        """``GET /api/chat/{id}/stream``: the running turn's UI message stream from its start, or 204."""
        server = self.server
        user = server.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        features = self._features(request)
        info = await server.authorize(session_id, user)
        if info.parent_session_id:
            raise not_found(session_id)  # the chat API shows conversations, never a sub-agent's session
        key = StreamKey(session_id, info.incarnation)
        turn = await server.hub.open_turn(key)
        if turn is None and await (await server.store()).run_in_progress(session_id):
            # A run holds the session but its first events are not in the shared log yet.
            for _ in range(_FIRST_EVENT_POLLS):
                await asyncio.sleep(_FIRST_EVENT_POLL)
                if (turn := await server.hub.open_turn(key)) is not None:
                    break
        if turn is None:
            return Response(status_code=204)
        subscription = await server.hub.open(key, turn.after)
        encoder = UIStreamEncoder(session_id, "", features)
        return StreamingResponse(
            _ui_stream(encoder, subscription, server.limits.ping_interval, live_from=turn.live_from),
            headers=UI_STREAM_HEADERS,
        )

    async def _start_unclaimed(self, session_id: str, prompt: str | None, user: str) -> Subscription:
        """Start a new turn whose run claims the session (creates it for ``user``, or checks that ``user``
        owns it and that it is no sub-agent's) in its first store transaction; the stream subscribes once
        that claim succeeded and before the run's first event is published, so it misses none."""
        server = self.server
        try:
            return await server.start_watched(session_id, prompt, user=user, top_level=True)
        except SubSessionError:
            raise RequestError(
                "sub-agent sessions take no user messages", status=403, kind="forbidden"
            ) from None
        except SessionAccessError:
            raise not_found(session_id) from None

    def _features(self, request: Request) -> ClientFeatures:
        """What the caller's AI SDK version accepts (its header, else the server's setting)."""
        if (version := request.headers.get(VERSION_HEADER)) is None:
            return self.server.features
        try:
            return ClientFeatures.for_version(parse_client_version(version))
        except ValueError as exc:
            raise RequestError(str(exc)) from exc

    async def _answers(
        self, session_id: str, user: str, message: dict[str, Any]
    ) -> tuple[dict[DecisionKey, Approval], dict[DecisionKey, Any]]:
        """The answers of a re-submitted assistant message, for the calls the caller's session awaits;
        409 (:class:`ResumeError`) when it answers none of them (a replay, or nothing was asked)."""
        info = await self.server.authorize(session_id, user)
        if info.parent_session_id:
            raise RequestError("sub-agent sessions take no user messages", status=403, kind="forbidden")
        store = await self.server.store()
        approvals, outputs = client_answers(message, await store.tool_calls(session_id), session_id)
        if not approvals and not outputs:
            raise ResumeError(
                "the last message is the assistant's, but it answers no tool call this conversation "
                "awaits (send a new user message, or the approvals / outputs of its awaited calls)"
            )
        return approvals, outputs

    async def _import_client_history(self, session_id: str, user: str, history: list[Any]) -> bool:
        """Claim the session; a conversation the store does not know yet starts from the client's messages.

        One of the two store writers outside the agent loop (with :meth:`_follow_client`): one transaction,
        so a refused or killed request writes nothing, and a known conversation is left as the store has it.
        Whether the history was imported.
        """
        self.server.runs.check_accepting()  # a draining server imports nothing (503 before any write)
        if not history:
            await self.server.claim(session_id, user)
            return False
        store = await self.server.store()
        info = SessionInfo(id=session_id, user_session_id=session_id, user_id=user)
        try:
            imported = await store.import_history(info, history, interaction_id=new_id("import_"))
        except SessionAccessError:
            raise not_found(session_id) from None
        await self.server.claim(session_id, user)  # a sub-session id is refused here like everywhere
        return imported

    async def _follow_client(self, session_id: str, earlier: list[Any], *, replaces: bool) -> None:
        """Drop the stored turns the client no longer shows (regenerated, edited or truncated), under the
        session's lock so no run writes meanwhile (:func:`turn_to_replace` says which; the caller owns the
        session, claimed just before)."""
        if not replaces and not shows_turns(earlier):
            return  # nothing can be cut (see turn_to_replace): the stored messages need not be read
        store = await self.server.store()
        cut = turn_to_replace(earlier, await store.raw_messages(session_id), replaces=replaces)
        if cut is None:
            return
        if self.server.runs.running(session_id):
            raise SessionBusyError(f"session {session_id!r} is already running; wait for it or cancel it")
        owner = lock_owner(new_id("cut_"))
        await store.lock_session(session_id, owner, ttl=60.0)
        try:
            cut_done = await store.truncate_history(session_id, cut)
        finally:
            await store.unlock_session(session_id, owner)
        info = await store.get_session(session_id)
        if cut_done and info is not None:
            # The dropped turns must not be replayed: this replica's watchers are reset and reload the
            # history (on PostgreSQL the truncating transaction also purged them from the shared log).
            self.server.hub.end_streams([session_id], info.incarnation, deleted=False)


async def _ui_stream(
    encoder: UIStreamEncoder, subscription: Subscription, ping_interval: float, *, live_from: int = 0
) -> AsyncIterator[bytes]:
    """The run's events of the chat's own session, until its interaction ends; then ``[DONE]``.

    The ``start`` chunk goes out with the first event, which names the message when ``encoder`` has no
    id yet. Ends of the chat's runs before cursor ``live_from`` are paused runs of a replayed turn that
    the client continued: skipped. Frames of events queued together leave in one write."""
    frames: list[bytes] = []
    try:
        if encoder.message_id:
            yield data_frame(encoder.start())
        async for item in with_pings(subscription, ping_interval):
            if item is None:
                frames.append(PING)
            elif (event := item.event) is None:  # a stream-reset: this client fell too far behind
                if not encoder.message_id:
                    encoder.message_id = new_id("msg_")
                    frames.append(data_frame(encoder.start()))
                frames.append(_FELL_BEHIND)
                break
            else:
                if not encoder.message_id:
                    own_start = isinstance(event, InteractionStart) and event.session_id == encoder.session_id
                    encoder.message_id = (
                        turn_message_id(event.interaction_id) if own_start else new_id("msg_")
                    )
                    frames.append(data_frame(encoder.start()))
                own_end = isinstance(event, InteractionEnd) and event.session_id == encoder.session_id
                if not (own_end and item.cursor < live_from):
                    frames.extend(data_frame(chunk) for chunk in encoder.encode(event))
                    if own_end:
                        break
            if frames and not subscription.has_queued():
                yield b"".join(frames)
                frames.clear()
        else:
            frames.append(_FELL_BEHIND)  # the stream ended (server shutdown) before the run did
        frames.append(DONE_FRAME)
        yield b"".join(frames)
    finally:
        subscription.close()
