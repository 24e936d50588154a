"""``StreamingStep``: a step whose model is still streaming, kept if the run is stopped (Stop, a closed run).

While the model streams, the step's message exists only in its builder. A run stopped then (cancelled, its
stream closed) keeps what the model had written: the text and reasoning streamed so far become the step's
assistant message, under the ``message_id`` its live events carried, so a reloaded page (and
``Transcript.from_history``) shows the same bubble. Only text is kept, as plain text (its provider metadata
names an output item the provider never finished), and reasoning only when it was signed (an unsigned half
thought cannot be sent back to Anthropic or Bedrock): a half-streamed tool call has no arguments to send
back, and every provider accepts an assistant turn of text followed by the next user turn.
A step that fails (a provider error after partial output) keeps nothing: it was never an answer.
"""

from __future__ import annotations

from toolwire.agent._scope import RunScope
from toolwire.events import AgentEvent
from toolwire.messages import Message, ReasoningPart, TextPart, Usage
from toolwire.models._builder import MessageBuilder

STOPPED_FINISH_REASON = "cancelled"
"""The finish reason stored with a step whose stream was stopped."""


class StreamingStep:
    """The :class:`~toolwire.agent._scope.OpenStep` of a step while its model streams (see the module)."""

    __slots__ = ("_builder", "_message_id", "_scope", "_step")

    def __init__(self, scope: RunScope, step: int, builder: MessageBuilder, message_id: str) -> None:
        self._scope = scope
        self._step = step
        self._builder = builder
        self._message_id = message_id

    async def close(self) -> tuple[Message | None, list[AgentEvent]]:
        """The run stopped mid-stream: the streamed text stored as the step's message (returned), if any."""
        scope = self._scope
        scope.open_step = None
        if scope.recorder.detached or scope.ledger.status != "cancelled":
            return None, []
        message = self.partial()
        if message is None:
            return None, []
        await scope.recorder.begin_step(self._step, message, (), Usage(), STOPPED_FINISH_REASON, {})
        scope.history.append(message)
        return message, []

    def partial(self) -> Message | None:
        """What the model wrote so far as an assistant message (see the module), or ``None`` when it wrote
        no text (a message of reasoning alone is no answer to show or send)."""
        parts: list[TextPart | ReasoningPart] = []
        for part in self._builder.parts():
            if isinstance(part, TextPart) and part.text.strip():
                parts.append(TextPart(text=part.text))
            elif isinstance(part, ReasoningPart) and (part.signature or part.redacted_data is not None):
                parts.append(part)
        if not any(isinstance(p, TextPart) for p in parts):
            return None
        return Message(
            role="assistant",
            parts=tuple(parts),
            id=self._message_id,
            session_id=self._scope.session_id,
            provider=self._builder.provider,
            model=self._builder.model,
        )
