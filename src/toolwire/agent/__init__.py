"""The agent: one loop shared by run() and stream()."""

from toolwire.agent.agent import Agent
from toolwire.agent.drivers import Driver, NativeToolDriver, ScriptedDriver
from toolwire.agent.loop import AgentRun, RunResult, ToolExecution

__all__ = ["Agent", "AgentRun", "Driver", "NativeToolDriver", "RunResult", "ScriptedDriver", "ToolExecution"]
