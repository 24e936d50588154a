"""An MCP server's ``elicitation/create`` requests (a question for the user while it serves a call),
answered by the ``elicitation_handler=`` callback.

Without a handler the client does not announce elicitation, so a server does not ask. Mapping the question
onto the run's durable pauses (a waiting call ``awaiting_input``, answered like a client-side tool) is the
loop's part; see issue 29.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from toolwire.tools._mcp_wire import describe, field_of
from toolwire.tools.context import RunContext

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ElicitationAnswer:
    """The user's answer: ``accept`` (with ``content`` in form mode), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


ElicitationHandler: TypeAlias = Callable[
    [ElicitationRequest],
    ElicitationAnswer | Mapping[str, Any] | Awaitable[ElicitationAnswer | Mapping[str, Any]],
]
"""Answers a server's question; a mapping returned means ``accept`` with that content."""

_INTERNAL_ERROR = -32603


class Elicitor:
    """The mcp SDK's elicitation callback for one server."""

    def __init__(
        self,
        server: str,
        handler: ElicitationHandler,
        serving: Callable[[], RunContext[Any] | None],
    ) -> None:
        self.server = server
        self.handler = handler
        self.serving = serving

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
            answer = self.handler(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:  # the server is told; the client goes on
            logger.warning("%s: the elicitation handler failed: %s", self.server, describe(exc))
            return ErrorData(code=_INTERNAL_ERROR, message=f"toolwire: elicitation failed: {describe(exc)}")
        if not isinstance(answer, ElicitationAnswer):
            answer = ElicitationAnswer(action="accept", content=answer)
        content = dict(answer.content) if answer.action == "accept" and answer.content is not None else None
        return ElicitResult(action=answer.action, content=content)
