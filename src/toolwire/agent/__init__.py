"""The agent: one loop shared by run() and stream()."""

from toolwire.agent.agent import Agent
from toolwire.agent.drivers import Driver, NativeToolDriver
from toolwire.agent.drivers.react import ReActDriver
from toolwire.agent.loop import AgentRun
from toolwire.agent.result import RunResult, ToolExecution

__all__ = ["Agent", "AgentRun", "Driver", "NativeToolDriver", "ReActDriver", "RunResult", "ToolExecution"]
