"""The driver a model gets when none is given: its own function calling, or ReAct without it."""

from __future__ import annotations

from toolwire.agent.drivers import Driver, NativeToolDriver
from toolwire.agent.drivers.react import ReActDriver
from toolwire.models.base import Model


def default_driver(model: Model) -> Driver:
    """Native tool calls for a model that has them, else the ReAct driver with the model's call budget."""
    if model.supports_tools:
        return NativeToolDriver()
    # Grounded decisions for the embedded model: a 135M model picks well among options, writes badly.
    # Grounded decisions for the embedded model: a 135M model picks well among options, writes badly. It
    # also asks again for what it has already read, so an answered call is answered from the history.
    small = model.provider == "local"
    return ReActDriver(max_calls_per_turn=model.tool_calls_per_turn, grounded=small, reuse_observations=small)
