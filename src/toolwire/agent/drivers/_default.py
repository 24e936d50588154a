"""The driver a model gets when none is given: its own function calling, or ReAct without it."""

from __future__ import annotations

from toolwire.agent.drivers import Driver, NativeToolDriver
from toolwire.agent.drivers.react import ReActDriver
from toolwire.models.base import Model


def default_driver(model: Model) -> Driver:
    """Native tool calls for a model that has them, else the ReAct driver with the model's call budget."""
    if model.supports_tools:
        return NativeToolDriver()
    return ReActDriver(max_calls_per_turn=model.tool_calls_per_turn)
