"""Tools: function tools, the registry and the one executor."""

from typing import TYPE_CHECKING, Any

from toolwire.tools.context import RunContext
from toolwire.tools.executor import (
    Allow,
    Block,
    RewriteArgs,
    ToolExecutor,
    ToolInterceptor,
)
from toolwire.tools.function import Tool, function_tool, tool
from toolwire.tools.outcome import ToolOutcome
from toolwire.tools.registry import ToolRegistry, Toolset, ToolSource

if TYPE_CHECKING:
    from toolwire.tools.mcp import MCPServerHTTP, MCPServerStdio


def __getattr__(name: str) -> Any:
    # MCP sources import lazily: the SDK is the optional 'mcp' extra.
    if name in ("MCPServerHTTP", "MCPServerStdio"):
        from toolwire.tools import mcp

        return getattr(mcp, name)
    raise AttributeError(f"module 'toolwire.tools' has no attribute {name!r}")


__all__ = [
    "Allow",
    "Block",
    "MCPServerHTTP",
    "MCPServerStdio",
    "RewriteArgs",
    "RunContext",
    "Tool",
    "ToolExecutor",
    "ToolInterceptor",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSource",
    "Toolset",
    "function_tool",
    "tool",
]
