"""The agent: one loop shared by run() and stream().

Exports load on first use, so the store can use :mod:`toolwire.agent.history` without importing the agent.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolwire.agent.agent import Agent
    from toolwire.agent.drivers import Driver, NativeToolDriver
    from toolwire.agent.drivers.react import ReActDriver
    from toolwire.agent.loop import AgentRun
    from toolwire.agent.result import RunResult, ToolExecution

_EXPORTS = {
    "Agent": "toolwire.agent.agent",
    "AgentRun": "toolwire.agent.loop",
    "Driver": "toolwire.agent.drivers",
    "NativeToolDriver": "toolwire.agent.drivers",
    "ReActDriver": "toolwire.agent.drivers.react",
    "RunResult": "toolwire.agent.result",
    "ToolExecution": "toolwire.agent.result",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolwire.agent' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["Agent", "AgentRun", "Driver", "NativeToolDriver", "ReActDriver", "RunResult", "ToolExecution"]
