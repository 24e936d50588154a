"""toolwire: LLM tool calling that behaves the same on every provider.

One loop, one executor, one store hook, one event stream. Adapters live in ``toolwire.models`` and are
imported lazily, so importing ``toolwire`` never imports an optional provider SDK.
"""

from toolwire.agent import Agent, AgentRun, Driver, NativeToolDriver, RunResult, ScriptedDriver, ToolExecution
from toolwire.errors import (
    ConfigError,
    DecisionExtractionFailed,
    DecisionValidationFailed,
    MaxStepsExceeded,
    ProviderError,
    SessionAccessError,
    SessionBusyError,
    StepAborted,
    StoreError,
    ToolError,
    ToolwireError,
)
from toolwire.events import AgentEvent
from toolwire.messages import (
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolwire.models.base import Model, ModelRequest, ToolDefinition
from toolwire.store import open_store
from toolwire.tools import Allow, Block, RewriteArgs, RunContext, Tool, ToolInterceptor, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentRun",
    "Allow",
    "Block",
    "ConfigError",
    "DecisionExtractionFailed",
    "DecisionValidationFailed",
    "Driver",
    "FilePart",
    "MaxStepsExceeded",
    "Message",
    "Model",
    "ModelRequest",
    "NativeToolDriver",
    "ProviderError",
    "ReasoningPart",
    "RewriteArgs",
    "RunContext",
    "RunResult",
    "ScriptedDriver",
    "SessionAccessError",
    "SessionBusyError",
    "StepAborted",
    "StoreError",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolDefinition",
    "ToolError",
    "ToolExecution",
    "ToolInterceptor",
    "ToolResultPart",
    "ToolwireError",
    "Usage",
    "__version__",
    "open_store",
    "tool",
]
