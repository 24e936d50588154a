"""The agent the MCP server tests serve (``toolwire mcp tests.server.mcp_agents:build`` in a subprocess, and
``/mcp`` of a live server): the protocol tests' scripted agent (:mod:`tests.server.protocol_agents`), named
``support``, with one more word:

- ``progress <n>``: calls ``reporter``, which reports progress n times, then answers with its output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.security.agents import lookup, refund, reporter
from tests.server.protocol_agents import _respond as protocol_respond
from toolwire import Agent, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel


def _respond(request: ModelRequest) -> Sequence[Part]:
    prompt = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
    word, _, rest = prompt.partition(" ")
    last = request.messages[-1] if request.messages else None
    if word == "progress" and (last is None or last.role != "tool"):
        count = int(rest) if rest.isdigit() else 3
        return [ToolCallPart(tool_call_id="call_p", tool_name="reporter", args={"count": count})]
    return protocol_respond(request)


def build() -> Agent[Any]:
    return Agent(
        ScriptedModel(_respond, chunk_size=4),
        tools=[lookup, refund, reporter],
        name="support",
        instructions="The support desk.",
    )
