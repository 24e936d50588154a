"""toolwire: LLM tool calling that behaves the same on every provider.

One loop, one executor, one store hook, one event stream. The common names are here: the agent, tools,
messages and parts, the events clients usually handle (the whole vocabulary is in :mod:`toolwire.events`),
the exception tree, models by string (:func:`infer_model`), the store and the transcript. They load on
first use, so ``import toolwire`` is fast and never imports an optional provider SDK.
"""

from __future__ import annotations

# Not ``from typing import TYPE_CHECKING``: importing typing is most of what ``import toolwire`` would
# cost (~10 ms). Type checkers treat any name ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from toolwire.agent.agent import Agent
    from toolwire.agent.config import Compaction, StepInfo, StepOverrides, UsageLimits
    from toolwire.agent.drivers import Driver, NativeToolDriver
    from toolwire.agent.drivers.react import ReActDriver
    from toolwire.agent.loop import AgentRun
    from toolwire.agent.result import RunResult, ToolExecution
    from toolwire.errors import (
        ConfigError,
        DecisionExtractionFailed,
        DecisionTimeout,
        DecisionValidationFailed,
        DriverError,
        MaxStepsExceeded,
        MissingExtraError,
        NoObjectGenerated,
        ProviderConnectionError,
        ProviderError,
        ProviderHTTPError,
        ProviderProtocolError,
        ResumeError,
        SessionAccessError,
        SessionBusyError,
        StepAborted,
        StoreError,
        ToolArgumentsError,
        ToolBlockedError,
        ToolError,
        ToolExecutionError,
        ToolNotFoundError,
        ToolTimeoutError,
        ToolwireError,
        UnsupportedContentError,
        UsageLimitExceeded,
    )
    from toolwire.events import (
        AgentEvent,
        ErrorEvent,
        InteractionEnd,
        OutputAvailable,
        OutputPartial,
        ReasoningDeltaEvent,
        TextDeltaEvent,
        ToolCallActive,
        ToolCallAwaiting,
        ToolCallComplete,
        ToolCallResolved,
        ToolProgress,
    )
    from toolwire.messages import (
        FilePart,
        Message,
        Part,
        ReasoningPart,
        TextPart,
        ToolCallPart,
        ToolResultPart,
        Usage,
    )
    from toolwire.models import infer_model
    from toolwire.models.base import Model, ModelRequest, ModelSettings, ToolDefinition
    from toolwire.models.scripted import ScriptedModel
    from toolwire.store import open_store
    from toolwire.store.base import Store
    from toolwire.tools.context import RunContext
    from toolwire.tools.executor import Allow, Block, RewriteArgs, ToolInterceptor
    from toolwire.tools.function import Tool, tool
    from toolwire.tools.pending import Denied, PendingCall, ToolFailed
    from toolwire.tools.registry import Toolset
    from toolwire.transcript import Transcript

    __version__: str

_MODULES: dict[str, tuple[str, ...]] = {
    "toolwire.agent.agent": ("Agent",),
    "toolwire.agent.config": ("Compaction", "StepInfo", "StepOverrides", "UsageLimits"),
    "toolwire.agent.drivers": ("Driver", "NativeToolDriver"),
    "toolwire.agent.drivers.react": ("ReActDriver",),
    "toolwire.agent.loop": ("AgentRun",),
    "toolwire.agent.result": ("RunResult", "ToolExecution"),
    "toolwire.tools.pending": ("Denied", "PendingCall", "ToolFailed"),
    "toolwire.errors": (
        "ConfigError",
        "DecisionExtractionFailed",
        "DecisionTimeout",
        "DecisionValidationFailed",
        "DriverError",
        "MaxStepsExceeded",
        "MissingExtraError",
        "NoObjectGenerated",
        "ProviderConnectionError",
        "ProviderError",
        "ProviderHTTPError",
        "ProviderProtocolError",
        "ResumeError",
        "SessionAccessError",
        "SessionBusyError",
        "StepAborted",
        "StoreError",
        "ToolArgumentsError",
        "ToolBlockedError",
        "ToolError",
        "ToolExecutionError",
        "ToolNotFoundError",
        "ToolTimeoutError",
        "ToolwireError",
        "UnsupportedContentError",
        "UsageLimitExceeded",
    ),
    "toolwire.events": (
        "AgentEvent",
        "ErrorEvent",
        "InteractionEnd",
        "OutputAvailable",
        "OutputPartial",
        "ReasoningDeltaEvent",
        "TextDeltaEvent",
        "ToolCallActive",
        "ToolCallAwaiting",
        "ToolCallComplete",
        "ToolCallResolved",
        "ToolProgress",
    ),
    "toolwire.messages": (
        "FilePart",
        "Message",
        "Part",
        "ReasoningPart",
        "TextPart",
        "ToolCallPart",
        "ToolResultPart",
        "Usage",
    ),
    "toolwire.models": ("infer_model",),
    "toolwire.models.base": ("Model", "ModelRequest", "ModelSettings", "ToolDefinition"),
    "toolwire.models.scripted": ("ScriptedModel",),
    "toolwire.store": ("open_store",),
    "toolwire.store.base": ("Store",),
    "toolwire.tools.context": ("RunContext",),
    "toolwire.tools.executor": ("Allow", "Block", "RewriteArgs", "ToolInterceptor"),
    "toolwire.tools.function": ("Tool", "tool"),
    "toolwire.tools.registry": ("Toolset",),
    "toolwire.transcript": ("Transcript",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


def _load(name: str) -> object:
    """Import an exported name on first use and keep it, so the next lookup is a plain attribute."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value: object = version("toolwire")
        except PackageNotFoundError:  # imported from a source tree that was never installed
            value = "0+unknown"
    elif name in _EXPORTS:
        from importlib import import_module

        value = getattr(import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'toolwire' has no attribute {name!r}")
    globals()[name] = value
    return value


if not TYPE_CHECKING:  # type checkers see the imports above; a typo is then an error, not Any
    __getattr__ = _load


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "__version__"})


__all__ = [
    "Agent",
    "AgentEvent",
    "AgentRun",
    "Allow",
    "Block",
    "Compaction",
    "ConfigError",
    "DecisionExtractionFailed",
    "DecisionTimeout",
    "DecisionValidationFailed",
    "Denied",
    "Driver",
    "DriverError",
    "ErrorEvent",
    "FilePart",
    "InteractionEnd",
    "MaxStepsExceeded",
    "Message",
    "MissingExtraError",
    "Model",
    "ModelRequest",
    "ModelSettings",
    "NativeToolDriver",
    "NoObjectGenerated",
    "OutputAvailable",
    "OutputPartial",
    "Part",
    "PendingCall",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ReActDriver",
    "ReasoningDeltaEvent",
    "ReasoningPart",
    "ResumeError",
    "RewriteArgs",
    "RunContext",
    "RunResult",
    "ScriptedModel",
    "SessionAccessError",
    "SessionBusyError",
    "StepAborted",
    "StepInfo",
    "StepOverrides",
    "Store",
    "StoreError",
    "TextDeltaEvent",
    "TextPart",
    "Tool",
    "ToolArgumentsError",
    "ToolBlockedError",
    "ToolCallActive",
    "ToolCallAwaiting",
    "ToolCallComplete",
    "ToolCallPart",
    "ToolCallResolved",
    "ToolDefinition",
    "ToolError",
    "ToolExecution",
    "ToolExecutionError",
    "ToolFailed",
    "ToolInterceptor",
    "ToolNotFoundError",
    "ToolProgress",
    "ToolResultPart",
    "ToolTimeoutError",
    "Toolset",
    "ToolwireError",
    "Transcript",
    "UnsupportedContentError",
    "Usage",
    "UsageLimitExceeded",
    "UsageLimits",
    "infer_model",
    "open_store",
    "tool",
]
