"""The agent ``toolwire serve`` runs in the attack tests: its scripted model answers by the prompt's first
word, so concurrent sessions of several users never depend on the order of requests.

- ``secret <text>``: answers with ``<text>`` (a user's private data, to look for in others' streams);
- ``lookup <txn>``: calls ``lookup`` (a Gemini-style call with a thoughtSignature), then answers;
- ``delegate``: calls the ``helper`` sub-agent, then answers;
- ``progress <n>``: calls ``reporter``, which emits n progress events and n system messages while
  heartbeats run (``TW_HEARTBEAT`` seconds);
- ``slow``: calls ``slow_tool`` (sleeps ``TW_SLOW`` seconds);
- ``surrogate``: answers with text holding a lone UTF-16 surrogate;
- ``repeat``: calls ``lookup`` with the same call id in two steps (as some servers number calls);
- ``big``: calls ``big_output`` (``TW_BIG_CHARS`` characters of output);
- anything else: answers ``ok``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from toolwire import Agent, RunContext, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel

SIGNATURE = {"google": {"thoughtSignature": "c2lnLXNlY3VyaXR5"}}
SURROGATE_TEXT = "before \ud800 after"


def lookup(txn: str) -> dict[str, str]:
    """Look a transaction up.

    Args:
        txn: The transaction id.
    """
    return {"txn": txn, "status": "settled"}


async def reporter(ctx: RunContext[Any], count: int) -> str:
    """Reports progress while it works.

    Args:
        count: How many progress events to emit.
    """
    for i in range(count):
        ctx.progress((i + 1) / count, f"step {i + 1}")
        ctx.system_message(f"note {i + 1}")
        await asyncio.sleep(0.02)
    return f"reported {count}"


async def slow_tool() -> str:
    """Takes a while."""
    await asyncio.sleep(float(os.environ.get("TW_SLOW", "30")))
    return "slow done"


def big_output() -> str:
    """Returns a lot of text."""
    return "y" * int(os.environ.get("TW_BIG_CHARS", "200000"))


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


def _respond(request: ModelRequest) -> Sequence[Part]:
    prompt = _last_user_text(request)
    word, _, rest = prompt.partition(" ")
    last = request.messages[-1] if request.messages else None
    answered = last is not None and last.role == "tool"
    if word == "secret":
        return [TextPart(text=rest)]
    if word == "surrogate":
        return [TextPart(text=SURROGATE_TEXT)]
    if answered:
        if word == "repeat" and sum(m.role == "tool" for m in request.messages) < 2:
            return [ToolCallPart(tool_call_id="call_0", tool_name="lookup", args={"txn": "T2"})]
        return [TextPart(text=f"done: {str(last.tool_results[0].output)[:40] if last else ''}")]
    calls: dict[str, tuple[str, str, dict[str, Any]]] = {
        "lookup": ("call_1", "lookup", {"txn": rest or "T1"}),
        "delegate": ("call_1", "helper", {"task": rest or "help"}),
        "progress": ("call_1", "reporter", {"count": int(rest) if rest.isdigit() else 5}),
        "slow": ("call_1", "slow_tool", {}),
        "repeat": ("call_0", "lookup", {"txn": "T1"}),
        "big": ("call_1", "big_output", {}),
    }
    if word in calls:
        call_id, name, args = calls[word]
        metadata = SIGNATURE if name == "lookup" else {}
        return [ToolCallPart(tool_call_id=call_id, tool_name=name, args=args, provider_metadata=metadata)]
    return [TextPart(text="ok")]


def _helper_respond(request: ModelRequest) -> Sequence[Part]:
    return [TextPart(text=f"helper says: {_last_user_text(request)}")]


def build() -> Agent[Any]:
    helper = Agent(ScriptedModel(_helper_respond), name="helper")
    heartbeat = float(os.environ.get("TW_HEARTBEAT", "1.0"))
    return Agent(
        ScriptedModel(_respond, chunk_size=4),
        tools=[lookup, reporter, slow_tool, big_output, helper.as_tool("helper", "Helps with a task")],
        heartbeat_interval=heartbeat,
        max_tool_output_chars=int(os.environ.get("TW_MAX_OUTPUT", "2000")),
    )
