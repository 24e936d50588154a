"""The agent the protocol tests (AG-UI, A2A) serve: its scripted model answers by the prompt's first word.

- ``hello``: answers a greeting;
- ``lookup <txn>``: calls the server tool ``lookup``, then answers with its output;
- ``color``: calls ``pick_color``, a front-end tool only the AG-UI client declares, then answers with the
  client's output;
- ``refund <order>``: calls ``refund``, which waits for the user's approval, then answers with its output;
- ``secret <text>``: answers ``<text>`` (a user's private data, to look for where another user looks);
- anything else: answers ``ok``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.security.agents import lookup, refund
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel


def _respond(request: ModelRequest) -> Sequence[Part]:
    prompt = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
    word, _, rest = prompt.partition(" ")
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        return [TextPart(text=f"answered: {last.tool_results[0].output}")]
    if word == "hello":
        return [TextPart(text="Hi! How can I help?")]
    if word == "secret":
        return [TextPart(text=rest)]
    if word == "lookup":
        return [ToolCallPart(tool_call_id="call_1", tool_name="lookup", args={"txn": rest or "T1"})]
    if word == "color":
        return [
            TextPart(text="Let me ask."),
            ToolCallPart(tool_call_id="call_c", tool_name="pick_color", args={"hint": "warm"}),
        ]
    if word == "refund":
        return [ToolCallPart(tool_call_id="call_r", tool_name="refund", args={"order": rest or "A1"})]
    return [TextPart(text="ok")]


def build() -> Agent[Any]:
    return Agent(ScriptedModel(_respond, chunk_size=4), tools=[lookup, refund])
