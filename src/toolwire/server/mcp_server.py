"""toolwire as an MCP server: the agent is one MCP tool, served over stdio (``toolwire mcp``) or streamable
HTTP (``/mcp`` in ``toolwire serve``).

The tool is named after the agent and takes ``prompt`` and an optional ``session_id``; it answers the
agent's text, with ``{session_id, status, answer, awaiting}`` as structured content. A call runs a turn like
every other door (:meth:`~toolwire.server._state.ToolwireServer.start_watched`): stored, owned by the
caller's user, followed on the hub. While it runs, the turn's tool activity goes to the caller as
``notifications/progress`` (when it sent a ``progressToken``).

A turn that waits for approval asks the host with an elicitation form (approve / deny) when the host
declared the capability and the connection can carry a request, and resumes the run with the answers; a
host without it (or a person who dismissed the form) gets the waiting calls and how to answer them: call
the tool again with ``session_id`` and ``approvals`` (and ``tool_outputs`` for client-side tools), the same
shapes as the native API's answers.

``expose_tools`` also lists the agent's own tools (not its client-side ones); a call of one runs it
directly through the tool executor with a :class:`~toolwire.tools.context.RunContext` of its own (no
conversation is stored), after an elicited approval when the tool requires one.

Built on the official SDK's lowlevel ``Server`` (``mcp`` 2.x): it serves JSON-RPC, the handshake and both
transports. Its streamable HTTP session manager is mounted as a plain ASGI route behind toolwire's own
bearer tokens; each MCP session is bound to the user that opened it (the SDK's own check, fed toolwire's
user), and every call is checked again against the store's owner of the session it names.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

try:
    import mcp_types as types
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # mcp 1.x has another server API (decorators, no ``mcp_types``)
    from toolwire.errors import MissingExtraError

    raise MissingExtraError("mcp", "the MCP server (mcp>=2)", missing=exc.name) from exc
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from toolwire.errors import ResumeError, SessionBusyError
from toolwire.events import (
    InteractionEnd,
)
from toolwire.messages import ToolCallPart, new_id
from toolwire.server._mcp_tool import (
    APPROVAL_FORM,
    AgentCall,
    Progress,
    Turn,
    agent_result,
    agent_tool,
    agent_tool_name,
    args_text,
    can_elicit,
    error_result,
    invalid,
    parse_agent_call,
)
from toolwire.server._sse import with_pings
from toolwire.server._state import ToolwireServer
from toolwire.server.errors import RequestError, error_body
from toolwire.tools.context import RunContext
from toolwire.tools.executor import ToolExecutor
from toolwire.tools.function import Tool
from toolwire.tools.pending import Approval, DecisionKey, Denied, PendingCall

_USER_SCOPE_KEY = "toolwire.user"
"""Where the HTTP door leaves the caller's user in the ASGI scope, for the handlers to read."""


class MCPEndpoint:
    """The MCP server of one :class:`ToolwireServer`: its lowlevel SDK server, and the ``/mcp`` ASGI app."""

    def __init__(
        self, server: ToolwireServer, *, expose_tools: bool = False, default_user: str | None = None
    ) -> None:
        self.server = server
        self.expose_tools = expose_tools
        self.default_user = default_user
        """The user of a transport without credentials (stdio: the local user, as ``toolwire run``)."""
        self.tool_name = agent_tool_name(server.agent.name)
        self.mcp: Server[Any] = Server(
            "toolwire",
            version=_version(),
            instructions=server.agent.instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._manager: StreamableHTTPSessionManager | None = None

    # -- transports --------------------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve one MCP client on stdin/stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.mcp.run(read, write, self.mcp.create_initialization_options())

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The streamable HTTP sessions' lifetime (the app's lifespan); their calls are cancelled at exit."""
        self._manager = StreamableHTTPSessionManager(
            app=self.mcp, max_request_body_size=self.server.limits.max_body_bytes
        )
        async with self._manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/mcp``: toolwire's bearer tokens first (a refusal is its usual JSON 4xx), then the SDK."""
        try:
            user = self.server.user(Request(scope))
        except RequestError as exc:
            await JSONResponse(error_body(exc), status_code=exc.status)(scope, receive, send)
            return
        if self._manager is None:  # mounted without the lifespan (an app served without it)
            await JSONResponse({"error": {"type": "unavailable", "message": "MCP is not running"}}, 503)(
                scope, receive, send
            )
            return
        # The SDK binds each MCP session to the user that opened it (another user's session id is a 404).
        token = AccessToken(token="", client_id=user, scopes=[])
        scope = {**scope, "user": AuthenticatedUser(token), _USER_SCOPE_KEY: user}
        await self._manager.handle_request(scope, receive, send)

    # -- tools -------------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        agent = self.server.agent
        tools = [agent_tool(self.tool_name, agent)]
        if self.expose_tools:
            tools += [
                types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
                for t in await self._own_tools()
            ]
        return types.ListToolsResult(tools=tools)

    async def _own_tools(self) -> list[Tool]:
        """The agent's tools a host may call directly: all but client-side ones and a clash with the agent's."""
        return [
            t for t in await self.server.agent.list_tools() if not t.external and t.name != self.tool_name
        ]

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        user = self._user(ctx)
        if params.name == self.tool_name:
            return await self._call_agent(ctx, parse_agent_call(params.arguments, self.server), user)
        if self.expose_tools:
            tool = next((t for t in await self._own_tools() if t.name == params.name), None)
            if tool is not None:
                return await self._call_own_tool(ctx, tool, dict(params.arguments or {}), user)
        raise invalid(f"unknown tool {params.name!r}")

    def _user(self, ctx: ServerRequestContext[Any, Any]) -> str:
        request = ctx.request
        if isinstance(request, Request) and isinstance(request.scope.get(_USER_SCOPE_KEY), str):
            return str(request.scope[_USER_SCOPE_KEY])
        if self.default_user is not None:
            return self.default_user
        raise MCPError(types.INVALID_REQUEST, "no user: this transport carries no credentials")

    # -- the agent ---------------------------------------------------------------------------------

    async def _call_agent(
        self, ctx: ServerRequestContext[Any, Any], call: AgentCall, user: str
    ) -> types.CallToolResult:
        session_id = call.session_id or new_id("mcp_")
        progress = Progress(ctx)
        prompt, approvals, outputs = call.prompt, call.approvals, call.tool_outputs
        asked: set[tuple[str, str]] = set()
        while True:
            try:
                turn = await self._run_turn(session_id, prompt, approvals, outputs, user, progress)
            except (RequestError, SessionBusyError, ResumeError) as exc:
                draining = isinstance(exc, RequestError) and exc.status >= 500
                raise MCPError(types.INTERNAL_ERROR if draining else types.INVALID_PARAMS, str(exc)) from None
            pending = await self.server.agent.pending(session_id, user_id=user)
            if turn.status not in ("paused", "unknown") or not pending:
                break
            turn.status = "paused"
            to_ask = [p for p in pending if _askable(p) and p.key not in asked]
            if not to_ask or not can_elicit(ctx):
                break
            decided = await self._elicit(ctx, to_ask)
            asked.update(p.key for p in to_ask)
            if decided is None:  # dismissed: the calls stay waiting, answerable by a later call
                break
            prompt, (approvals, outputs) = None, decided
        return agent_result(self.tool_name, session_id, turn, pending if turn.status == "paused" else [])

    async def _run_turn(
        self,
        session_id: str,
        prompt: str | None,
        approvals: Mapping[DecisionKey, Approval],
        outputs: Mapping[DecisionKey, Any],
        user: str,
        progress: Progress,
    ) -> Turn:
        server = self.server
        if prompt is None:  # answers reach only an existing session of the caller's
            info = await server.authorize(session_id, user)
            if info.parent_session_id:
                raise RequestError("answer a sub-agent's calls through its conversation", status=403)
        await server.claim(session_id, user)
        subscription = await server.start_watched(
            session_id, prompt, user=user, approvals=approvals, tool_outputs=outputs
        )
        turn = Turn()
        try:
            async for item in with_pings(subscription, server.limits.ping_interval):
                if item is None:
                    continue
                if item.event is None:  # the stream was reset: read what the run left from the store
                    break
                event = item.event
                if isinstance(event, InteractionEnd) and event.session_id == session_id:
                    turn.status, turn.answer, turn.error = event.status, event.output, event.error
                    break
                await progress.event(event)
        finally:
            subscription.close()
        return turn

    async def _elicit(
        self, ctx: ServerRequestContext[Any, Any], calls: list[PendingCall]
    ) -> tuple[dict[DecisionKey, Approval], dict[DecisionKey, Any]] | None:
        """An approve/deny form per call awaiting approval, and a tool's own question relayed as it was
        asked (its form); ``None`` when the person dismissed one (nothing is answered then)."""
        decided: dict[DecisionKey, Approval] = {}
        answers: dict[DecisionKey, Any] = {}
        for call in calls:
            if call.question is not None:
                asked = await ctx.session.elicit_form(
                    call.question.message,
                    dict(call.question.requested_schema) or {"type": "object", "properties": {}},
                    related_request_id=ctx.request_id,
                )
                if asked.action == "cancel":
                    return None
                answers[call.shown] = (
                    dict(asked.content or {}) if asked.action == "accept" else {"action": asked.action}
                )
                continue
            result = await ctx.session.elicit_form(
                f"Allow {call.tool_name}({args_text(call.args)})?",
                APPROVAL_FORM,
                related_request_id=ctx.request_id,
            )
            content = result.content or {}
            if result.action == "cancel":
                return None
            if result.action == "decline":
                decided[call.shown] = Denied("declined by the user")
            elif content.get("approve") is True:
                decided[call.shown] = True
            else:
                reason = content.get("reason")
                decided[call.shown] = Denied(reason) if isinstance(reason, str) and reason else False
        return decided, answers

    async def _call_own_tool(
        self, ctx: ServerRequestContext[Any, Any], tool: Tool, args: dict[str, Any], user: str
    ) -> types.CallToolResult:
        agent = self.server.agent
        session_id = new_id("mcp_direct_")  # a call of its own: no conversation is stored for it
        call = ToolCallPart(tool_call_id=new_id("call_"), tool_name=tool.name, args=args)
        run_ctx: RunContext[Any] = RunContext(
            deps=None,
            session_id=session_id,
            user_session_id=session_id,
            interaction_id=new_id("int_"),
            agent_name=agent.name,
            call=call,
        )
        if tool.requires_approval is not False:
            # Without a conversation there is no pause to come back to: the host is asked now, or refused.
            if not can_elicit(ctx):
                return error_result(
                    f"{tool.name} needs a person's approval: ask the agent ({self.tool_name})"
                )
            decided = await self._elicit(
                ctx,
                [
                    PendingCall(
                        tool_call_id=call.tool_call_id,
                        tool_name=tool.name,
                        args=args,
                        kind="approval",
                        session_id=session_id,
                    )
                ],
            )
            if decided is None or next(iter(decided[0].values()), None) is not True:
                return error_result(f"{tool.name} was not approved")
        executor = ToolExecutor(
            registry=agent.registry,
            interceptors=agent.interceptors,
            default_timeout=agent.tool_timeout,
            max_output_chars=agent.max_tool_output_chars,
        )
        outcome = await executor.execute(call, run_ctx)
        output = outcome.full_output
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=outcome.result.is_error)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("toolwire")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


__all__ = ["MCPEndpoint", "agent_tool_name", "parse_agent_call"]


def _askable(call: PendingCall) -> bool:
    """A waiting call the host can be asked about with a form: an approval, or a tool's form question."""
    return call.kind == "approval" or (call.question is not None and call.question.mode == "form")
