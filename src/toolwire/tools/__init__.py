"""Tools: function tools, the registry and the one executor."""

from toolwire.tools.context import RunContext
from toolwire.tools.executor import (
    Allow,
    Block,
    RewriteArgs,
    ToolExecutor,
    ToolInterceptor,
    ToolOutcome,
)
from toolwire.tools.function import Tool, function_tool, tool
from toolwire.tools.registry import ToolRegistry, Toolset, ToolSource

__all__ = [
    "Allow",
    "Block",
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
