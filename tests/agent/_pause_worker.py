"""One process of a paused conversation (used by test_pause_processes.py).

usage: python _pause_worker.py STORE_URL SESSION_ID MODE LOG

MODE "pause": the first turn pauses on an approval and a client tool; prints the result as one JSON line,
then waits to be killed (SIGKILL: nothing is closed or flushed by this process after the pause).
MODE "resume": answers them (the refund approved, the colour given) and prints the result and the
continuation request the model received, as one JSON line. LOG gets a line each time the refund runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from toolwire import Agent, TextPart, ToolCallPart, open_store, tool
from toolwire.errors import ToolwireError
from toolwire.messages import MessageAdapter, Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel

SIGNATURES = {"c_lookup": "c2lnLWxvb2t1cA==", "c_refund": "c2lnLXJlZnVuZA==", "c_colour": "c2lnLWNvbG91cg=="}


def respond(request: ModelRequest) -> Sequence[Part]:
    if any(m.role == "tool" for m in request.messages):
        return [TextPart(text="Refunded, wrapped in blue.")]
    calls = [("c_lookup", "lookup", {"order": "42"}), ("c_refund", "refund", {"order": "42"}),
             ("c_colour", "pick_colour", {"question": "Gift wrap colour?"})]  # fmt: skip
    return [
        TextPart(text="On it."),
        *(
            ToolCallPart(
                tool_call_id=cid,
                tool_name=name,
                args=args,
                provider_metadata={"google": {"thoughtSignature": SIGNATURES[cid]}},
            )
            for cid, name, args in calls
        ),
    ]


async def main(url: str, session_id: str, mode: str, log: str) -> None:
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: shipped"

    def refund(order: str) -> str:
        """Refund an order."""
        with open(log, "a") as out:
            out.write(f"refund {order} in {mode}\n")
        return f"refunded {order}"

    def pick_colour(question: str) -> str:
        """Ask the user for a colour."""
        raise AssertionError("runs on the client")

    model = ScriptedModel(respond)
    store = await open_store(url)
    agent = Agent(
        model,
        tools=[lookup, tool(refund, requires_approval=True), tool(pick_colour, external=True)],
        store=store,
    )
    report: dict[str, Any]
    if mode == "pause":
        result = await agent.run("Refund order 42, gift wrapped.", session_id=session_id)
        report = {"status": result.status, "pending": [p.to_dict() for p in result.pending]}
        print(json.dumps(report), flush=True)
        time.sleep(600)  # killed here
        return
    try:
        result = await agent.run(
            session_id=session_id, approvals={"c_refund": True}, tool_outputs={"c_colour": "blue"}
        )
    except ToolwireError as exc:
        report = {"error": type(exc).__name__, "message": str(exc)}
    else:
        report = {
            "status": result.status,
            "output": result.output,
            "continuation": [MessageAdapter.dump_python(m, mode="json") for m in model.requests[0].messages],
        }
    await store.close()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
