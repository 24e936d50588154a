"""``POST /api/ag-ui``: the AG-UI protocol (CopilotKit and the ``@ag-ui/client`` ``HttpAgent``).

The body is AG-UI's ``RunAgentInput``; the answer is its event stream as SSE, one JSON event per ``data:``
frame: ``RUN_STARTED``, then the run's ``STEP_*``, ``TEXT_MESSAGE_*``, ``REASONING_*``, ``TOOL_CALL_*``,
``STATE_SNAPSHOT`` / ``STATE_DELTA`` / ``CUSTOM`` (from a tool's ``ctx.data``), a ``MESSAGES_SNAPSHOT`` of
the stored conversation, and ``RUN_FINISHED`` (or ``RUN_ERROR``). ``threadId`` is the session id; the run
is started like every other turn (:meth:`~toolwire.server.runs.RunManager.start`), so it is stored,
survives the client going away, and is followed on any replica.

The store is authoritative: of the client's messages only the last one is read (a new user turn, or the
``tool`` messages answering its front-end tools); the ``MESSAGES_SNAPSHOT`` before each ``RUN_FINISHED``
hands the client the stored conversation, ids included.

Pauses map onto the protocol's own:

- the input's ``tools`` are front-end tools: for this run the agent also knows them as client-side
  (``external``) tools. A call of one ends the run with ``outcome: {type: "success",
  pendingToolCallIds}``; the next ``RunAgentInput`` carrying a ``tool`` message for it answers it.
- a call waiting for approval ends the run with ``outcome: {type: "interrupt"}``, one interrupt per call
  (``reason: "tool_call"``, ``id`` = ``toolCallId``); the next input's ``resume`` entry answers it:
  ``{"interruptId": id, "status": "resolved", "payload": {"approved": true}}`` (``false`` and an optional
  ``reason`` deny it; ``status: "cancelled"`` denies it too).

This module is the endpoint (a run started, its answers matched to the calls the thread awaits, its stream);
the input is read in :mod:`~toolwire.server._ag_ui_input`, front-end tools live in
:mod:`~toolwire.server._ag_ui_tools`, events become AG-UI events in :mod:`~toolwire.server._ag_ui_encoder`,
and the stored conversation becomes ``MESSAGES_SNAPSHOT`` in :mod:`~toolwire.server._ag_ui_history`. Their
public names are re-exported here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from toolwire.errors import ResumeError
from toolwire.events import InteractionEnd, UserTurnStart
from toolwire.messages import Message
from toolwire.server._ag_ui_encoder import STATE_DELTA_DATA, STATE_SNAPSHOT_DATA, AGUIEncoder
from toolwire.server._ag_ui_history import history_to_ag_ui, result_message_id
from toolwire.server._ag_ui_input import RunInput, parse_run_input, resume_answer, resume_approval
from toolwire.server._ag_ui_tools import MAX_FRONTEND_TOOLS, FrontendToolRegistry, with_frontend_tools
from toolwire.server._input import read_json
from toolwire.server._sse import PING, SSE_HEADERS, data_frame, with_pings
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError
from toolwire.server.hub import Subscription
from toolwire.tools.pending import Approval, DecisionKey, ToolFailed, pending_of_rows

__all__ = [
    "MAX_FRONTEND_TOOLS",
    "STATE_DELTA_DATA",
    "STATE_SNAPSHOT_DATA",
    "AGUIEncoder",
    "AGUIEndpoint",
    "FrontendToolRegistry",
    "RunInput",
    "history_to_ag_ui",
    "parse_run_input",
    "result_message_id",
    "with_frontend_tools",
]


class AGUIEndpoint:
    """``POST /api/ag-ui`` over one :class:`ToolwireServer`."""

    def __init__(self, server: ToolwireServer) -> None:
        self.server = server

    async def post(self, request: Request) -> Response:
        """Start (or resume) the thread's turn; answer with its AG-UI event stream."""
        server = self.server
        user = server.user(request)
        run_input = parse_run_input(await read_json(request, server.limits), server)
        session_id = run_input.thread_id
        approvals: dict[DecisionKey, Approval] = {}
        outputs: dict[DecisionKey, Any] = {}
        if run_input.resume or run_input.tool_messages or run_input.tool_errors:
            # Answers are read only for calls the caller's thread awaits; the others are history.
            info = await server.authorize(session_id, user)
            if info.parent_session_id:
                raise RequestError("sub-agent sessions take no user messages", status=403, kind="forbidden")
            approvals, outputs = await self._answers(session_id, run_input)
        if run_input.prompt is None and not approvals and not outputs:
            if run_input.resume or run_input.tool_messages or run_input.tool_errors:
                raise ResumeError(
                    "the input answers no tool call this thread awaits (send a new user message, or "
                    "resume its interrupts / the outputs of its pending tool calls)"
                )
            raise RequestError("nothing to run: the last message must be the user's")
        await server.claim(session_id, user)
        agent = with_frontend_tools(server.agent, run_input.tools)
        subscription = await server.start_watched(
            session_id, run_input.prompt, user=user, approvals=approvals, tool_outputs=outputs, agent=agent
        )
        encoder = AGUIEncoder(session_id, run_input.run_id)
        return StreamingResponse(
            self._stream(encoder, subscription), headers={**SSE_HEADERS, "connection": "keep-alive"}
        )

    async def _answers(
        self, session_id: str, run_input: RunInput
    ) -> tuple[dict[DecisionKey, Approval], dict[DecisionKey, Any]]:
        store = await self.server.store()
        kinds = {
            p.tool_call_id: p.kind
            for p in pending_of_rows(await store.tool_calls(session_id), session_id)
            if p.session_id == session_id
        }
        approvals: dict[DecisionKey, Approval] = {}
        outputs: dict[DecisionKey, Any] = {}
        for entry in run_input.resume:
            call_id = entry["interruptId"]
            if kinds.get(call_id) == "input":
                outputs[call_id] = resume_answer(entry)
            elif kinds.get(call_id) == "approval":
                approvals[call_id] = resume_approval(entry)
        for call_id, value in run_input.tool_messages.items():
            if kinds.get(call_id) == "output":
                outputs[call_id] = value
        for call_id, error in run_input.tool_errors.items():
            if kinds.get(call_id) == "output":
                outputs[call_id] = ToolFailed(error)
        return approvals, outputs

    async def _stream(self, encoder: AGUIEncoder, subscription: Subscription) -> AsyncIterator[bytes]:
        frames: list[bytes] = [data_frame(encoder.start())]
        try:
            async for item in with_pings(subscription, self.server.limits.ping_interval):
                if item is None:
                    frames.append(PING)
                elif (event := item.event) is None:  # a stream-reset: this client fell too far behind
                    frames.append(data_frame(_fell_behind()))
                    break
                elif isinstance(event, InteractionEnd) and event.session_id == encoder.thread_id:
                    snapshot = await self._snapshot(encoder.thread_id) if event.status != "error" else None
                    frames.extend(data_frame(e) for e in encoder.finish(event, snapshot))
                    break
                elif isinstance(event, UserTurnStart) and event.session_id == encoder.thread_id:
                    # The client holds the user message under its own id: the store's history, this
                    # message included, replaces it now, so the answer streamed next is placed after it.
                    frames.append(data_frame(await self._snapshot(encoder.thread_id, event.message)))
                else:
                    frames.extend(data_frame(e) for e in encoder.encode(event))
                if frames and not subscription.has_queued():
                    yield b"".join(frames)
                    frames.clear()
            else:
                frames.append(data_frame(_fell_behind()))  # the server shut down before the run ended
            yield b"".join(frames)
        finally:
            subscription.close()

    async def _snapshot(self, session_id: str, new: Message | None = None) -> dict[str, Any]:
        """``MESSAGES_SNAPSHOT`` of the stored conversation (and ``new``, when not stored yet)."""
        messages = await (await self.server.store()).raw_messages(session_id)
        if new is not None and all(m.id != new.id for m in messages):
            messages = [*messages, new]
        return {"type": "MESSAGES_SNAPSHOT", "messages": history_to_ag_ui(messages)}


def _fell_behind() -> dict[str, Any]:
    return {
        "type": "RUN_ERROR",
        "message": "the stream ended before the run did; reload the thread",
        "code": "stream_reset",
    }
