"""Tools: function tools, the registry and the one executor."""

from toolwire.tools.context import RunContext
from toolwire.tools.executor import (
    Allow,
    Block,
    RewriteArgs,
    ToolExecutor,
    ToolInterceptor,
    ToolOutcome,
    ToolRegistry,
)
from toolwire.tools.function import Tool, function_tool, tool

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
    "function_tool",
    "tool",
]
