"""Which part of a session's stream ``GET /api/chat/{id}/stream`` replays: the running turn from the run
that took the prompt, through the runs continuing the same message (after a paused end, or a takeover after
no end at all); nothing once the last run ended."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.server._turn import OpenTurn, open_turn
from toolwire.store.sql import SQLStore

from .conftest import live_server, parse_sse

START, END, PROMPT = "interaction-start", "interaction-end", "user-turn-start"


def test_no_turn_is_open_once_the_last_run_ended() -> None:
    assert open_turn([]) is None
    assert open_turn([(9, END, "completed"), (2, PROMPT, None), (1, START, None)]) is None
    assert open_turn([(9, END, "paused"), (2, PROMPT, None), (1, START, None)]) is None


def test_a_running_turn_begins_at_the_run_that_took_the_prompt() -> None:
    assert open_turn([(6, PROMPT, None), (5, START, None), (3, END, "completed")]) == OpenTurn(4, 5)
    # A takeover continues a dead run (no end between): the turn still begins with the dead run.
    assert open_turn([(20, START, None), (2, PROMPT, None), (1, START, None)]) == OpenTurn(0, 1)
    # A run answering a paused run's calls continues its message: replayed from the paused run's start,
    # whose end is not the turn's.
    assert open_turn(
        [(20, START, None), (15, END, "paused"), (2, PROMPT, None), (1, START, None)]
    ) == OpenTurn(0, 20)
    # A new prompt after a paused run is a new turn.
    markers = [
        (21, PROMPT, None),
        (20, START, None),
        (15, END, "paused"),
        (2, PROMPT, None),
        (1, START, None),
    ]
    assert open_turn(markers) == OpenTurn(19, 20)
    # The prompt's run fell out of the buffer: the going runs are what there is.
    assert open_turn([(20, START, None), (15, END, "completed")]) == OpenTurn(19, 20)


@tool(requires_approval=True)
async def refund(order: str) -> str:
    """Refunds an order, slowly."""
    await asyncio.sleep(1.0)
    return f"{order} refunded"


async def test_resuming_a_continued_paused_turn_replays_the_whole_message(tmp_path: Path) -> None:
    script: list[list[TextPart | ToolCallPart]] = [
        [
            TextPart(text="Refunding."),
            ToolCallPart(tool_call_id="c1", tool_name="refund", args={"order": "A1"}),
        ],
        [TextPart(text="Refunded.")],
    ]
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path}/s.db")
    app = create_app(Agent(ScriptedModel(script), tools=[refund], store=store))
    body = {
        "id": "c",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "refund A1"}]}],
    }
    async with live_server(app) as server, server.client() as http:
        paused = _chunks((await http.post("/api/chat", json=body)).text)
        assert paused[-1]["type"] == "finish" and (await http.get("/api/chat/c/stream")).status_code == 204
        # The approval continues the message (as POST /api/chat does for addToolApprovalResponse).
        await app.state.toolwire.runs.start("c", None, user_id="local", approvals={"c1": True})
        resumed = _chunks((await http.get("/api/chat/c/stream")).text)  # while the refund runs

    assert resumed[0] == paused[0]  # same message id
    types = [c["type"] for c in resumed]
    assert types.count("finish") == 1 and types[-1] == "finish"
    assert types.index("tool-approval-request") < types.index("tool-output-available")
    assert resumed[: len(paused) - 1] == paused[:-1]  # the paused run's chunks, then the continuation's
    deltas = "".join(c.get("delta", "") for c in resumed)
    assert deltas == "Refunding.Refunded."


def _chunks(raw: str) -> list[dict[str, Any]]:
    frames = parse_sse(raw)
    assert frames[-1]["data"] == "[DONE]"
    return [f["data"] for f in frames[:-1] if isinstance(f["data"], dict)]
