"""``final_via_inference``: once a ReAct decision says "answer now", a separate model call, without any
grammar, writes the answer from the whole conversation.

A decision's ``answer`` is bounded and written inside a JSON string by a model busy choosing; the answer
written by its own call reads the conversation as prose (calls and observations in words, not as decision
JSON, which the model would imitate) and is streamed as the step's text, exactly as a decided answer is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from toolwire.models._builder import closing
from toolwire.models.base import (
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
    TextDelta,
    TextEnd,
    TextStart,
)

ANSWER_INSTRUCTIONS = (
    "Write the answer to the user's last message now, in plain text, using only what the conversation "
    "above says (the tool observations included). Do not call tools and do not reply in JSON."
)
"""What the answer's own call is told, after the agent's instructions."""

ANSWER_ID = "answer-0"


def answer_request(request: ModelRequest) -> ModelRequest:
    """The answer's own request: the conversation as prose, the agent's instructions, no tools, no grammar."""
    instructions = "\n\n".join(t for t in (request.instructions, ANSWER_INSTRUCTIONS) if t)
    return ModelRequest(
        messages=tuple(_prose(m) for m in request.messages),
        instructions=instructions,
        settings=request.settings,
    )


def _prose(message: Message) -> Message:
    lines: list[str] = []
    for part in message.parts:
        match part:
            case TextPart():
                lines.append(part.text)
            case ToolCallPart() if not part.provider_executed:
                lines.append(f"(I called {part.tool_name} with {json.dumps(part.args, ensure_ascii=False)}.)")
            case ToolResultPart():
                label = "Error from" if part.is_error else "Observation from"
                lines.append(f"{label} {part.tool_name}: {part.output_text()}")
            case _:
                pass  # reasoning, files, provider-executed calls: not part of what the answer is written from
    role = "user" if message.role == "tool" else message.role
    return Message(role=role, parts=(TextPart(text="\n".join(line for line in lines if line)),))


async def answer_parts(model: Model, request: ModelRequest) -> AsyncGenerator[ModelStreamPart, None]:
    """The answer streamed as the step's text (one text part), then a ``Finish`` with this call's reason
    and usage (the driver adds the decisions' usage)."""
    started, usage = False, Usage()
    reason: FinishReason = "stop"
    async with closing(model.stream(request)) as stream:
        async for part in stream:
            match part:
                case TextDelta():
                    if not started:
                        started = True
                        yield TextStart(id=ANSWER_ID)
                    yield TextDelta(id=ANSWER_ID, delta=part.delta)
                case Finish():
                    usage = part.usage
                    reason = part.reason if part.reason != "tool-calls" else "stop"
                case StreamError():
                    yield part
                    return
                case ResponseMetadata() | ReasoningStart() | ReasoningDelta() | ReasoningEnd():
                    yield part
                case _:
                    pass  # its text start/end are re-framed here; the step's stream-start went out already
    if started:
        yield TextEnd(id=ANSWER_ID)
    yield Finish(reason=reason, usage=usage)
