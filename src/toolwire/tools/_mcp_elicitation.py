"""An MCP server's ``elicitation/create`` requests (a question for the user while it serves a call).

With an ``elicitation_handler=`` callback, the callback answers in-process. Without one, the question becomes
one of the run's durable pauses (:mod:`toolwire.tools._mcp_asking`): the call waits ``awaiting_input`` and a
person answers it like a client tool's output, over any API, from any process. A question asked outside a
run (a direct ``server.call(...)``) is declined.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from toolwire.tools._mcp_asking import AskingCalls
from toolwire.tools._mcp_wire import describe, field_of
from toolwire.tools.context import RunContext
from toolwire.tools.pending import ElicitationAnswer, Question

__all__ = ["ElicitationAnswer", "ElicitationHandler", "ElicitationRequest", "Elicitor"]

logger = logging.getLogger("toolwire.tools.mcp")


@dataclass(frozen=True, slots=True, kw_only=True)
class ElicitationRequest:
    """What an MCP server asks the user: fill in a form (``requested_schema``) or visit a ``url``."""

    server: str
    """The source name of the asking server (``mcp:NAME``)."""
    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: Mapping[str, Any] = field(default_factory=dict)
    """The JSON Schema (flat object of primitives) the answer's ``content`` must match, in form mode."""
    url: str | None = None
    """In url mode: where the user should go (the interaction happens out of band)."""
    context: RunContext[Any] | None = None
    """The run context of the tool call the server is serving, when one is running."""


ElicitationHandler: TypeAlias = Callable[
    [ElicitationRequest],
    ElicitationAnswer | Mapping[str, Any] | Awaitable[ElicitationAnswer | Mapping[str, Any]],
]
"""Answers a server's question; a mapping returned means ``accept`` with that content."""

_INTERNAL_ERROR = -32603


class Elicitor:
    """The mcp SDK's elicitation callback for one server: the handler's answer, or the person's through
    the run (``asking``)."""

    def __init__(
        self,
        server: str,
        handler: ElicitationHandler | None,
        serving: Callable[[], RunContext[Any] | None],
        asking: AskingCalls,
    ) -> None:
        self.server = server
        self.handler = handler
        self.serving = serving
        self.asking = asking

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult, ErrorData

        url = getattr(params, "url", None)
        request = ElicitationRequest(
            server=self.server,
            message=params.message,
            mode="url" if url else "form",
            requested_schema=dict(field_of(params, "requested_schema", "requestedSchema") or {}),
            url=url,
            context=self.serving(),
        )
        try:
            answer = await self._answer(request)
        except Exception as exc:  # the server is told; the client goes on
            logger.warning("%s: the elicitation handler failed: %s", self.server, describe(exc))
            return ErrorData(code=_INTERNAL_ERROR, message=f"toolwire: elicitation failed: {describe(exc)}")
        content = dict(answer.content) if answer.action == "accept" and answer.content is not None else None
        return ElicitResult(action=answer.action, content=content)

    async def _answer(self, request: ElicitationRequest) -> ElicitationAnswer:
        if self.handler is not None:
            answer = self.handler(request)
            if inspect.isawaitable(answer):
                answer = await answer
            return (
                answer
                if isinstance(answer, ElicitationAnswer)
                else ElicitationAnswer(action="accept", content=answer)
            )
        ctx = request.context
        if ctx is None or ctx.call is None:
            return ElicitationAnswer(action="decline")  # no run to ask through
        question = Question(
            message=request.message,
            mode=request.mode,
            requested_schema=request.requested_schema,
            url=request.url,
            server=self.server,
        )
        return await self.asking.ask((ctx.session_id, ctx.call.tool_call_id), question)
