"""A real MCP server (the SDK's, over stdio) whose tool asks the user to visit a page: URL-mode elicitation.

``visit(url)`` asks "Open this page to confirm the booking." with ``url`` as the page, and tells which
answer it got. ``python _mcp_link_server.py`` serves it on stdin/stdout.
"""

from __future__ import annotations

try:  # mcp 2.x
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as _Server
except ImportError:  # mcp 1.x (``elicit_url`` since 1.23; the extra needs 1.30)
    from mcp.server.fastmcp import Context  # type: ignore[no-redef,attr-defined]
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef,attr-defined]

server = _Server("toolwire-links")


@server.tool()
async def visit(url: str, ctx: Context) -> str:
    """Asks the user to open ``url`` and confirm once done."""
    answer = await ctx.elicit_url("Open this page to confirm the booking.", url, "confirm-1")
    return f"visited: {answer.action}"


if __name__ == "__main__":
    server.run("stdio")
