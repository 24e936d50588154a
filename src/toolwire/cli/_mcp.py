"""``toolwire mcp``: the agent as an MCP server on stdin/stdout, for an MCP host to start.

stdout carries the protocol alone: logs and errors go to stderr. Conversations are stored in ``--store``
as the local user (the user ``toolwire run`` and a development-mode ``toolwire serve`` use), so a
conversation started in the host can be continued with ``toolwire run --session`` or on the web page.
"""

from __future__ import annotations

import argparse

from toolwire.cli._turns import build_agent, close_agent
from toolwire.errors import MissingExtraError


async def mcp(args: argparse.Namespace) -> int:
    try:
        from toolwire.server import Limits
        from toolwire.server._state import ToolwireServer
        from toolwire.server.auth import DEV_USER, Auth
        from toolwire.server.mcp_server import MCPEndpoint
    except ImportError as exc:
        if isinstance(exc, MissingExtraError) or (exc.name or "").partition(".")[0] == "toolwire":
            raise
        raise MissingExtraError("server", "toolwire mcp", missing=exc.name) from exc
    agent, store = await build_agent(args)
    # The same runs, hub and ownership rules as ``toolwire serve``, with no HTTP in front.
    server = ToolwireServer(agent, auth=Auth(), hub=None, limits=Limits(), ai_sdk_version=None)
    try:
        await server.start()
        endpoint = MCPEndpoint(server, expose_tools=args.expose_tools, default_user=DEV_USER)
        await endpoint.serve_stdio()
    finally:
        try:
            await server.close()
        finally:
            await close_agent(agent, store)
    return 0
