"""MCP servers as tool sources: ``MCPServerStdio(command, args)`` and ``MCPServerHTTP(url)``.

Built on the official ``mcp`` SDK (``pip install 'toolwire[mcp]'``; the 1.x and 2.x client APIs are
both supported). A server is connected on first use and kept open. Its tools keep their JSON Schema,
which the executor validates arguments against before any call reaches the server.

Failures become error results the model can read, never a crash:

* a result with ``isError: true`` -> error result with the server's text;
* an MCP protocol error, a closed connection, a server process that died -> error result, and the
  connection is dropped so the next use starts the server again;
* no answer within ``timeout`` seconds -> error result (and a restart, since a server that stopped
  answering cannot be trusted with the next call).

``requires_approval`` (``True``, a predicate ``(ctx, args) -> bool``, or tool names) makes calls of the
server's tools wait for a person's approval before they reach the server.

The SDK's context managers are anyio-scoped: they must be entered and exited in one task. Each
source therefore runs its connection in a dedicated owner task and talks to the session from any
task; closing the source stops the owner task, which exits the contexts where it entered them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from toolwire.errors import ConfigError
from toolwire.models.base import Model
from toolwire.tools._mcp_auth import (
    FileTokenStore,
    MemoryTokenStore,
    OAuth,
    OAuthAuthorizationCode,
    OAuthClientCredentials,
    TokenStore,
    auth_for,
)
from toolwire.tools._mcp_elicitation import ElicitationAnswer, ElicitationHandler, ElicitationRequest
from toolwire.tools._mcp_sampling import SamplingPolicy, SamplingRequest
from toolwire.tools._mcp_session import RESOURCE_TOOL, MCPToolError, _MCPServer
from toolwire.tools._mcp_wire import (
    MCPPrompt,
    MCPPromptArgument,
    MCPPromptResult,
    MCPResource,
    MCPResourceContent,
)
from toolwire.tools.function import ApprovalPolicy


class MCPServerStdio(_MCPServer):
    """An MCP server run as a subprocess speaking JSON-RPC over stdin/stdout."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        prefix: str | None = None,
        name: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
        requires_approval: ApprovalPolicy = False,
        resources_as_tool: bool = False,
        sampling_model: Model | str | None = None,
        sampling_policy: SamplingPolicy = "deny",
        elicitation_handler: ElicitationHandler | None = None,
        input_timeout: float = 900.0,
    ) -> None:
        super().__init__(
            name=name or os.path.basename(command),
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
            requires_approval=requires_approval,
            resources_as_tool=resources_as_tool,
            sampling_model=sampling_model,
            sampling_policy=sampling_policy,
            elicitation_handler=elicitation_handler,
            input_timeout=input_timeout,
        )
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = os.fspath(cwd) if cwd is not None else None

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=self.cwd)
        return stdio_client(params)


class MCPServerHTTP(_MCPServer):
    """An MCP server reached over streamable HTTP (``http://host:port/mcp``)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        name: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
        requires_approval: ApprovalPolicy = False,
        resources_as_tool: bool = False,
        sampling_model: Model | str | None = None,
        sampling_policy: SamplingPolicy = "deny",
        elicitation_handler: ElicitationHandler | None = None,
        input_timeout: float = 900.0,
        oauth: OAuth | None = None,
        token_store: TokenStore | None = None,
        user: str = "default",
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"an MCP HTTP server URL must start with http:// or https://, not {url!r}")
        super().__init__(
            name=name or url,
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
            requires_approval=requires_approval,
            resources_as_tool=resources_as_tool,
            sampling_model=sampling_model,
            sampling_policy=sampling_policy,
            elicitation_handler=elicitation_handler,
            input_timeout=input_timeout,
        )
        self.url = url
        self.headers = dict(headers or {})
        self.oauth = oauth
        """OAuth 2.1 for this server: :class:`OAuthAuthorizationCode` or :class:`OAuthClientCredentials`."""
        self.token_store: TokenStore = token_store if token_store is not None else MemoryTokenStore()
        """Where the OAuth tokens and the client registration are kept, by server URL and :attr:`user`."""
        self.user = user
        """Whose tokens this connection uses (one connection acts for one user: :meth:`for_user`)."""
        self._init_options: dict[str, Any] = {
            "headers": headers,
            "prefix": prefix,
            "name": name,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "requires_approval": requires_approval,
            "resources_as_tool": resources_as_tool,
            "sampling_model": sampling_model,
            "sampling_policy": sampling_policy,
            "elicitation_handler": elicitation_handler,
            "input_timeout": input_timeout,
            "oauth": oauth,
            "token_store": self.token_store,
        }

    def for_user(self, user: str) -> MCPServerHTTP:
        """The same server acting for ``user``: its own connection, with that user's tokens from the same
        token store (the others' tokens are never sent)."""
        return MCPServerHTTP(self.url, **self._init_options, user=user)

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        from mcp.client import streamable_http

        auth = auth_for(self.oauth, self.url, self.token_store, self.user) if self.oauth else None
        legacy = getattr(streamable_http, "streamablehttp_client", None)  # mcp 1.x
        if legacy is not None:
            context: AbstractAsyncContextManager[Any] = legacy(
                self.url, headers=self.headers or None, auth=auth
            )
            return context
        return _modern_http(streamable_http.streamable_http_client, self.url, self.headers, auth)


@contextlib.asynccontextmanager
async def _modern_http(factory: Any, url: str, headers: dict[str, str], auth: Any) -> AsyncIterator[Any]:
    """mcp 2.x takes a pre-configured HTTP client for headers and auth instead of arguments."""
    if not headers and auth is None:
        async with factory(url) as streams:
            yield streams
        return
    from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's timeouts for long streams

    client = create_mcp_http_client(headers=headers or None, auth=auth)
    async with client, factory(url, http_client=client) as streams:
        yield streams


__all__ = [
    "RESOURCE_TOOL",
    "ElicitationAnswer",
    "ElicitationHandler",
    "ElicitationRequest",
    "FileTokenStore",
    "MCPPrompt",
    "MCPPromptArgument",
    "MCPPromptResult",
    "MCPResource",
    "MCPResourceContent",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolError",
    "MemoryTokenStore",
    "OAuthAuthorizationCode",
    "OAuthClientCredentials",
    "SamplingPolicy",
    "SamplingRequest",
    "TokenStore",
]
