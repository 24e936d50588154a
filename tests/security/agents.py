"""The agent ``toolwire serve`` runs in the attack tests: its scripted model answers by the prompt's first
word, so concurrent sessions of several users never depend on the order of requests.

- ``secret <text>``: answers with ``<text>`` (a user's private data, to look for in others' streams);
- ``lookup <txn>``: calls ``lookup`` (a Gemini-style call with a thoughtSignature), then answers;
- ``delegate``: calls the ``helper`` sub-agent, then answers (``delegate refund <order>``: the helper calls
  ``refund``, which waits for the user's approval);
- ``progress <n>``: calls ``reporter``, which emits n progress events and n system messages while
  heartbeats run (``TW_HEARTBEAT`` seconds);
- ``slow``: calls ``slow_tool`` (sleeps ``TW_SLOW`` seconds);
- ``surrogate``: answers with text holding a lone UTF-16 surrogate;
- ``repeat``: calls ``lookup`` with the same call id in two steps (as some servers number calls);
- ``big``: calls ``big_output`` (``TW_BIG_CHARS`` characters of output);
- ``refund <order>``: calls ``refund``, which waits for the user's approval (a Gemini-style call); once
  answered, says whether the call still carried its signature;
- ``tz``: calls ``browser_time_zone``, a client tool (the client supplies its output);
- ``both``: calls ``refund`` and ``browser_time_zone`` in one step;
- anything else: answers ``ok``.

With ``TW_RECORD`` set to a file path, every model request (its messages, as stored JSON) and every run of
``refund`` is appended to that file as one JSON line, so tests can check a replica's continuation request
field by field and count tool runs across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import Any

from toolwire import Agent, RunContext, TextPart, ToolCallPart, tool
from toolwire.messages import Part, messages_to_json
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


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get("TW_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as sink:  # one short line per write: appends do not interleave
            sink.write(json.dumps({**entry, "pid": os.getpid()}) + "\n")


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (asks the user first).

    Args:
        order: The order id.
    """
    _record({"tool": "refund", "order": order})
    return f"refunded {order}"


@tool(external=True)
def browser_time_zone() -> str:
    """The user's time zone, as their browser reports it (runs in the client)."""
    raise NotImplementedError  # never runs: the client supplies the output


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


def _respond(request: ModelRequest) -> Sequence[Part]:
    _record({"model": json.loads(messages_to_json(request.messages))})
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
        if word in ("refund", "tz", "both"):
            made = [c for m in request.messages for c in m.tool_calls]
            signed = all(c.provider_metadata == SIGNATURE for c in made if c.tool_name == "refund")
            outputs = " | ".join(str(r.output)[:60] for r in last.tool_results) if last else ""
            return [TextPart(text=f"answered: {outputs} signed={signed}")]
        return [TextPart(text=f"done: {str(last.tool_results[0].output)[:40] if last else ''}")]
    if word == "both":
        return [
            ToolCallPart(
                tool_call_id="call_1", tool_name="refund", args={"order": "B1"}, provider_metadata=SIGNATURE
            ),
            ToolCallPart(tool_call_id="call_2", tool_name="browser_time_zone", args={}),
        ]
    calls: dict[str, tuple[str, str, dict[str, Any]]] = {
        "lookup": ("call_1", "lookup", {"txn": rest or "T1"}),
        "delegate": ("call_1", "helper", {"task": rest or "help"}),
        "progress": ("call_1", "reporter", {"count": int(rest) if rest.isdigit() else 5}),
        "slow": ("call_1", "slow_tool", {}),
        "repeat": ("call_0", "lookup", {"txn": "T1"}),
        "big": ("call_1", "big_output", {}),
        "refund": ("call_1", "refund", {"order": rest or "A1"}),
        "tz": ("call_1", "browser_time_zone", {}),
    }
    if word in calls:
        call_id, name, args = calls[word]
        metadata = SIGNATURE if name in ("lookup", "refund") else {}
        return [ToolCallPart(tool_call_id=call_id, tool_name=name, args=args, provider_metadata=metadata)]
    return [TextPart(text="ok")]


def _helper_respond(request: ModelRequest) -> Sequence[Part]:
    task = _last_user_text(request)
    last = request.messages[-1]
    if last.role == "tool":
        return [TextPart(text=f"helper got: {last.tool_results[0].output}")]
    if task.startswith("refund "):  # the sub-agent's call waits for the user: so does its caller's
        return [ToolCallPart(tool_call_id="sub_1", tool_name="refund", args={"order": task[7:]})]
    return [TextPart(text=f"helper says: {task}")]


def build() -> Agent[Any]:
    helper = Agent(ScriptedModel(_helper_respond), name="helper", tools=[refund])
    heartbeat = float(os.environ.get("TW_HEARTBEAT", "1.0"))
    return Agent(
        ScriptedModel(_respond, chunk_size=4),
        tools=[
            lookup,
            reporter,
            slow_tool,
            big_output,
            refund,
            browser_time_zone,
            helper.as_tool("helper", "Helps with a task"),
        ],
        heartbeat_interval=heartbeat,
        max_tool_output_chars=int(os.environ.get("TW_MAX_OUTPUT", "2000")),
    )
