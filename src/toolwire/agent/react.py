"""The ReAct driver: tool use for models without function calling, through JSON decisions.

Each step the model is shown the tool catalog and a text-only rendering of the history, and answers with
one JSON object: ``{"tool": NAME, "args": {...}}`` or ``{"final_answer": TEXT}``. The decision schema goes
out as ``request.output_schema``, so models that can constrain generation (the local llama.cpp model
applies it as a grammar) cannot produce anything else. The reply is still parsed defensively, because
other models only follow the format by instruction: JSON is extracted from surrounding prose and code
fences, validated, and on failure the model is re-prompted with the reason, a bounded number of times.

The driver turns the decision into canonical stream parts, so the loop cannot tell it from a native
function-calling step: a tool decision becomes ``tool-input-start/delta/end`` with a fresh call id, a
final answer becomes text, streamed while it is generated.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from toolwire.agent.drivers import Driver
from toolwire.agent.react_text import (
    AnswerStreamer,
    Decision,
    FinalAnswer,
    ToolDecision,
    decision_json,
    extract_json,
    validate_decision,
)
from toolwire.errors import ConfigError, DecisionExtractionFailed, DecisionValidationFailed, ProviderError
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
from toolwire.models.base import (
    File,
    Finish,
    FinishReason,
    Model,
    ModelRequest,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolDefinition,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResult,
)
