"""A2A (protocol 0.3, JSON-RPC binding): the agent card at ``/.well-known/agent-card.json`` and ``POST /a2a``.

A task is a turn, a context is a session: ``contextId`` is the session id (a new one is made when the
message names none) and a task's id is ``"{contextId}/{id of the turn's stored user message}"``, so any
replica answers ``tasks/get`` from the store alone. Methods: ``message/send`` (the task once its run
ended or paused), ``message/stream`` (SSE: the task, ``artifact-update`` events carrying the answer's
text as it streams, a final ``status-update``), ``tasks/get`` and ``tasks/cancel``.

A call waiting for approval (or a client-side tool) leaves the task ``input-required``; its status
message carries a data part ``{"awaiting": [{tool_call_id, tool_name, args, kind}]}``. The client answers
with a message naming the task (``taskId``) whose data part is ``{"approvals": {id: true|false}}`` and/or
``{"tool_outputs": {id: value}}``, the same shape as the native API's answers.

Errors are JSON-RPC errors (HTTP 200) with A2A's codes; another user's context or task is ``-32001``
(task not found), exactly like one that does not exist. Authentication, body limits and draining stay
HTTP errors (401, 413, 503), as on every endpoint.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from toolwire.errors import ResumeError, SessionBusyError
from toolwire.events import (
    AgentEvent,
    InteractionEnd,
    TextDeltaEvent,
    ToolCallAwaiting,
    UserTurnStart,
)
from toolwire.messages import Message, new_id
from toolwire.server._input import SESSION_ID, check_prompt, parse_answers, read_json
from toolwire.server._sse import SSE_HEADERS, data_frame, with_pings
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError
from toolwire.server.hub import Subscription
from toolwire.tools.pending import Approval, DecisionKey, pending_of_rows

PROTOCOL_VERSION = "0.3.0"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
TASK_NOT_FOUND, TASK_NOT_CANCELABLE, UNSUPPORTED, CONTENT_TYPE = -32001, -32002, -32004, -32005
BUSY = -32000
"""The context runs another task: a server error of JSON-RPC's implementation-defined range."""
_TASK_SEPARATOR = "/"  # never in a session id (SESSION_ID), so a task id splits back unambiguously
_STATES = {
    "completed": "completed",
    "max-steps": "completed",
    "paused": "input-required",
    "error": "failed",
    "cancelled": "canceled",
    "blocked": "rejected",  # a policy (stop_on_block) refused a call: the agent declines the task
}


class RPCError(Exception):
    """A JSON-RPC error answered to the caller."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def task_id(context_id: str, user_message_id: str) -> str:
    return f"{context_id}{_TASK_SEPARATOR}{user_message_id}"


@dataclass(slots=True)
class TurnResult:
    """What one run of a task told the stream: enough to build the task."""

    context_id: str
    task_id: str | None
    state: str = "working"
    text: str = ""
    awaiting: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


class A2AEndpoint:
    """The agent card and ``POST /a2a`` over one :class:`ToolwireServer`."""

    def __init__(self, server: ToolwireServer) -> None:
        self.server = server

    async def card(self, request: Request) -> Response:
        """``GET /.well-known/agent-card.json``: public, like any discovery document (no session data)."""
        agent = self.server.agent
        name = agent.name or "toolwire agent"
        card: dict[str, Any] = {
            "protocolVersion": PROTOCOL_VERSION,
            "name": name,
            "description": agent.instructions or f"{name}, served by toolwire",
            "url": str(request.base_url).rstrip("/") + "/a2a",
            "preferredTransport": "JSONRPC",
            "version": _version(),
            "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False},
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain", "application/json"],
            "skills": [
                {
                    "id": "chat",
                    "name": name,
                    "description": "A conversation with the agent and its tools",
                    "tags": ["chat"],
                }
            ],
        }
        if not self.server.auth.development:
            card["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            card["security"] = [{"bearer": []}]
        return JSONResponse(card)

    async def post(self, request: Request) -> Response:
        """One JSON-RPC request: its result, an SSE stream of results (``message/stream``), or its error."""
        user = self.server.user(request)  # a refused token stays an HTTP 401, as everywhere
        try:
            body = await read_json(request, self.server.limits)
        except RequestError as exc:
            if exc.status != 400:
                raise
            return _error(None, PARSE_ERROR, str(exc))
        rpc_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(rpc_id, str | int) or isinstance(rpc_id, bool):
            rpc_id = None
        try:
            return await self._dispatch(body, rpc_id, user)
        except RPCError as exc:
            return _error(rpc_id, exc.code, str(exc))
        except RequestError as exc:
            if exc.status == 404:
                return _error(rpc_id, TASK_NOT_FOUND, str(exc))
            if exc.status in (400, 403, 413):
                return _error(rpc_id, INVALID_PARAMS, str(exc))
            raise
        except SessionBusyError as exc:
            return _error(rpc_id, BUSY, str(exc))
        except ResumeError as exc:
            return _error(rpc_id, INVALID_PARAMS, str(exc))

    async def _dispatch(self, body: Any, rpc_id: Any, user: str) -> Response:
        if (
            not isinstance(body, dict)
            or body.get("jsonrpc") != "2.0"
            or not isinstance(body.get("method"), str)
        ):
            raise RPCError(INVALID_REQUEST, "not a JSON-RPC 2.0 request {jsonrpc, id, method, params}")
        params = body.get("params", {})
        if not isinstance(params, dict):
            raise RPCError(INVALID_PARAMS, "'params' must be an object")
        method = body["method"]
        if method == "message/send":
            return _result(rpc_id, await self._send(params, user))
        if method == "message/stream":
            return await self._stream(rpc_id, params, user)
        if method == "tasks/get":
            return _result(rpc_id, await self._get(params, user))
        if method == "tasks/cancel":
            return _result(rpc_id, await self._cancel(params, user))
        if method.startswith("tasks/pushNotificationConfig/") or method == "tasks/resubscribe":
            raise RPCError(UNSUPPORTED, f"{method} is not supported by this agent")
        raise RPCError(METHOD_NOT_FOUND, f"unknown method {method!r}")

    # -- methods -----------------------------------------------------------------------------------

    async def _start(
        self, params: dict[str, Any], user: str
    ) -> tuple[TurnResult, Subscription, dict[str, Any]]:
        """Start the turn a ``message/send`` or ``message/stream`` carries; its stream, subscribed."""
        server = self.server
        message = params.get("message")
        if (
            not isinstance(message, dict)
            or message.get("role") != "user"
            or not isinstance(message.get("parts"), list)
        ):
            raise RPCError(
                INVALID_PARAMS, "'message' must be a user message {role: 'user', parts, messageId}"
            )
        context_id = message.get("contextId") or new_id("ctx_")
        if not isinstance(context_id, str) or not SESSION_ID.fullmatch(context_id):
            raise RPCError(INVALID_PARAMS, "'contextId' must be a session id (letters, digits, ._:~-)")
        texts: list[str] = []
        answers: dict[str, Any] = {}
        for part in message["parts"]:
            kind = part.get("kind") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "data" and isinstance(part.get("data"), dict):
                answers.update(part["data"])
            else:
                raise RPCError(CONTENT_TYPE, "only text parts and data parts (answers) are accepted")
        approvals: dict[DecisionKey, Approval] = {}
        outputs: dict[DecisionKey, Any] = {}
        task = message.get("taskId")
        if answers:
            approvals, outputs = parse_answers(answers)
        prompt = check_prompt("\n".join(texts), server.limits) if texts else None
        if prompt is None and not approvals and not outputs:
            raise RPCError(INVALID_PARAMS, "the message has no text and answers no call")
        if task is not None:
            # Only a task of this context continues: its answers resume the turn's run.
            if not isinstance(task, str) or task.partition(_TASK_SEPARATOR)[0] != context_id:
                raise RPCError(TASK_NOT_FOUND, f"no task {task!r} in context {context_id!r}")
            await server.authorize(context_id, user)
        await server.claim(context_id, user)
        subscription = await server.start_watched(
            context_id, prompt, user=user, approvals=approvals, tool_outputs=outputs
        )
        turn = TurnResult(context_id=context_id, task_id=task if prompt is None else None)
        user_message = {**message, "contextId": context_id}
        return turn, subscription, user_message

    async def _send(self, params: dict[str, Any], user: str) -> dict[str, Any]:
        turn, subscription, user_message = await self._start(params, user)
        try:
            async for item in with_pings(subscription, self.server.limits.ping_interval):
                if item is not None and item.event is not None and _follow(turn, item.event):
                    break
        finally:
            subscription.close()
        return _task(turn, [user_message])

    async def _stream(self, rpc_id: Any, params: dict[str, Any], user: str) -> Response:
        turn, subscription, user_message = await self._start(params, user)

        async def frames() -> AsyncIterator[bytes]:
            announced = False
            try:
                async for item in with_pings(subscription, self.server.limits.ping_interval):
                    if item is None or item.event is None:
                        continue
                    event = item.event
                    ended = _follow(turn, event)
                    if not announced and turn.task_id is not None:
                        announced = True
                        yield _frame(rpc_id, _task(turn, [user_message], working=True))
                    if (
                        announced
                        and isinstance(event, TextDeltaEvent)
                        and event.session_id == turn.context_id
                    ):
                        yield _frame(
                            rpc_id, _text_update(turn, event.delta, first=len(turn.text) == len(event.delta))
                        )
                    if ended:
                        yield _frame(rpc_id, _status_update(turn))
                        return
            finally:
                subscription.close()

        return StreamingResponse(frames(), headers=SSE_HEADERS)

    async def _get(self, params: dict[str, Any], user: str) -> dict[str, Any]:
        context_id, message_id = await self._task_of(params, user)
        store = await self.server.store()
        messages = await store.raw_messages(context_id)
        turn_start = next(
            (i for i, m in enumerate(messages) if m.id == message_id and m.role == "user"), None
        )
        if turn_start is None:
            raise RPCError(TASK_NOT_FOUND, f"no task {params['id']!r}")
        later = [m for m in messages[turn_start + 1 :]]
        next_user = next((i for i, m in enumerate(later) if m.role == "user"), None)
        turn_messages = later if next_user is None else later[:next_user]
        turn = TurnResult(context_id=context_id, task_id=params["id"], state="completed")
        turn.text = next((m.text for m in reversed(turn_messages) if m.role == "assistant" and m.text), "")
        if next_user is None:  # the context's last turn: it may still run or wait
            if await store.run_in_progress(context_id) or self.server.runs.running(context_id):
                turn.state = "working"
            else:
                pending = pending_of_rows(await store.tool_calls(context_id), context_id)
                turn.awaiting = [
                    _awaiting_entry(
                        p.tool_call_id,
                        p.tool_name,
                        p.args,
                        p.kind,
                        p.question.to_dict() if p.question is not None else None,
                    )
                    for p in pending
                ]
                if turn.awaiting:
                    turn.state = "input-required"
        history = [_a2a_message(messages[turn_start], context_id, turn.task_id)]
        return _task(turn, history)

    async def _cancel(self, params: dict[str, Any], user: str) -> dict[str, Any]:
        context_id, _ = await self._task_of(params, user)
        task = await self._get(params, user)
        if task["status"]["state"] != "working" or not await self.server.cancel(context_id):
            raise RPCError(TASK_NOT_CANCELABLE, f"task {params['id']!r} is not running")
        task["status"] = {"state": "canceled", "timestamp": _now()}
        return task

    async def _task_of(self, params: dict[str, Any], user: str) -> tuple[str, str]:
        raw = params.get("id")
        if not isinstance(raw, str):
            raise RPCError(INVALID_PARAMS, "'id' must be a task id")
        context_id, sep, message_id = raw.partition(_TASK_SEPARATOR)
        if not sep or not SESSION_ID.fullmatch(context_id) or not message_id:
            raise RPCError(TASK_NOT_FOUND, f"no task {raw!r}")
        await self.server.authorize(context_id, user)  # 404 -> TASK_NOT_FOUND, alike for others' tasks
        return context_id, message_id


def _follow(turn: TurnResult, event: AgentEvent) -> bool:
    """Note what ``event`` tells about the task; whether the task's run ended."""
    if event.session_id != turn.context_id:
        return False
    if isinstance(event, UserTurnStart):
        turn.task_id = task_id(turn.context_id, event.message.id)
    elif isinstance(event, TextDeltaEvent):
        turn.text += event.delta
    elif isinstance(event, ToolCallAwaiting) and event.kind != "subagent":
        if all(a["tool_call_id"] != event.tool_call_id for a in turn.awaiting):
            turn.awaiting.append(
                _awaiting_entry(event.tool_call_id, event.tool_name, event.args, event.kind, event.question)
            )
    elif isinstance(event, InteractionEnd):
        turn.state = _STATES.get(event.status, "completed")
        if event.output:
            turn.text = event.output
        turn.error = event.error
        if turn.task_id is None:  # a run that failed before storing the message still names a task
            turn.task_id = task_id(turn.context_id, new_id("msg_"))
        return True
    return False


def _awaiting_entry(
    call_id: str, name: str, args: dict[str, Any], kind: str, question: dict[str, Any] | None
) -> dict[str, Any]:
    entry = {"tool_call_id": call_id, "tool_name": name, "args": args, "kind": kind}
    return {**entry, "question": question} if question is not None else entry


def _status(turn: TurnResult) -> dict[str, Any]:
    status: dict[str, Any] = {"state": turn.state, "timestamp": _now()}
    parts: list[dict[str, Any]] = []
    if turn.state == "input-required":
        names = ", ".join(
            f"{a['tool_name']} ({a['question']['message']})" if a.get("question") else a["tool_name"]
            for a in turn.awaiting
        )
        parts = [
            {"kind": "text", "text": f"Waiting for your answer to: {names}"},
            {"kind": "data", "data": {"awaiting": turn.awaiting}},
        ]
    elif turn.state == "failed":
        parts = [{"kind": "text", "text": turn.error or "the run failed"}]
    elif turn.text:
        parts = [{"kind": "text", "text": turn.text}]
    if parts:
        status["message"] = {
            "kind": "message",
            "role": "agent",
            "messageId": new_id("msg_"),
            "parts": parts,
            "contextId": turn.context_id,
            "taskId": turn.task_id,
        }
    return status


def _task(turn: TurnResult, history: list[dict[str, Any]], *, working: bool = False) -> dict[str, Any]:
    task: dict[str, Any] = {
        "kind": "task",
        "id": turn.task_id,
        "contextId": turn.context_id,
        "status": {"state": "working", "timestamp": _now()} if working else _status(turn),
        "history": [{**m, "taskId": turn.task_id} for m in history],
    }
    if not working and turn.state == "completed" and turn.text:
        task["artifacts"] = [
            {"artifactId": "answer", "name": "answer", "parts": [{"kind": "text", "text": turn.text}]}
        ]
    return task


def _text_update(turn: TurnResult, delta: str, *, first: bool) -> dict[str, Any]:
    return {
        "kind": "artifact-update",
        "taskId": turn.task_id,
        "contextId": turn.context_id,
        "artifact": {"artifactId": "answer", "name": "answer", "parts": [{"kind": "text", "text": delta}]},
        "append": not first,
        "lastChunk": False,
    }


def _status_update(turn: TurnResult) -> dict[str, Any]:
    return {
        "kind": "status-update",
        "taskId": turn.task_id,
        "contextId": turn.context_id,
        "status": _status(turn),
        "final": True,
    }


def _a2a_message(message: Message, context_id: str, task: str | None) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "user" if message.role == "user" else "agent",
        "messageId": message.id,
        "parts": [{"kind": "text", "text": message.text}],
        "contextId": context_id,
        "taskId": task,
    }


def _result(rpc_id: Any, result: dict[str, Any]) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "result": result})


def _error(rpc_id: Any, code: int, message: str) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}})


def _frame(rpc_id: Any, result: dict[str, Any]) -> bytes:
    return data_frame({"jsonrpc": "2.0", "id": rpc_id, "result": result})


def _now() -> str:
    return datetime.fromtimestamp(time.time(), UTC).isoformat()


def _version() -> str:
    try:
        return metadata.version("toolwire")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"
