"""``ToolOutcome``: what happened to one tool call, as the executor hands it to the step that stores it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolwire._fast_init import fast_frozen_init
from toolwire.errors import ToolError
from toolwire.events import ToolCallStatus
from toolwire.messages import ToolCallPart, ToolResultPart
from toolwire.store.records import CallCompletion


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What happened to one call."""

    call: ToolCallPart
    """The call as executed (arguments possibly rewritten by an interceptor)."""
    result: ToolResultPart
    """What the model sees (output possibly truncated)."""
    status: ToolCallStatus
    started_at: float
    finished_at: float
    full_output: Any = None
    """The untruncated output, kept in the store."""
    error: ToolError | None = None

    @property
    def duration(self) -> float:
        return self.finished_at - self.started_at

    def completion(self, message_id: str) -> CallCompletion:
        """Its row's end, for the call made by assistant message ``message_id``."""
        return CallCompletion(
            tool_call_id=self.call.tool_call_id,
            message_id=message_id,
            status=self.status,
            output=self.full_output,
            is_error=self.result.is_error,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )
