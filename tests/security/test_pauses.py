"""Paused runs over the native API of a real ``toolwire serve``: a call waiting for the user's approval or a
client tool's output is listed by the history endpoint (``awaiting``), answered with ``POST
/api/sessions/{id}/messages`` (``approvals`` / ``tool_outputs``), refused with 409 when the answers do not
match what the store awaits (nothing written), refused with 404 for anyone but the owner, and still
answerable after the server process was stopped (SIGTERM or SIGKILL) and another one started on the same
database."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from .conftest import idle, serve

pytestmark = pytest.mark.timeout(180)
ALICE = "tok-alice"
MALLORY = "tok-mallory"


async def _turn(client: httpx.AsyncClient, session_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a turn and collect its events (native SSE) until its interaction ends."""
    history = (await client.get(f"/api/sessions/{session_id}/messages")).json()
    events: list[dict[str, Any]] = []
    async with client.stream(
        "GET", f"/api/sessions/{session_id}/events", params={"after": str(history["cursor"])}
    ) as stream:
        posted = await client.post(f"/api/sessions/{session_id}/messages", json=body)
        assert posted.status_code == 202, posted.text
        async for line in stream.aiter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                events.append(event)
                if event["type"] == "interaction-end" and event["session_id"] == session_id:
                    break
    return events


def _text(history: dict[str, Any]) -> str:
    last = history["messages"][-1]
    assert last["role"] == "assistant"
    return "".join(p.get("text", "") for p in last["parts"] if p["type"] == "text")


def _results(history: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for m in history["messages"] if m["role"] == "tool" for p in m["parts"]]


async def _pause(client: httpx.AsyncClient, session_id: str, prompt: str) -> dict[str, Any]:
    assert (await client.post("/api/sessions", json={"session_id": session_id})).status_code == 201
    events = await _turn(client, session_id, {"text": prompt})
    assert events[-1]["status"] == "paused"
    return await idle(client, session_id)


async def test_approval_is_asked_listed_refused_to_others_and_survives_restarts(tmp_path: Path) -> None:
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        paused = await _pause(alice, "r1", "refund A1")
        # The history of a paused session shows the call waiting, not the "not answered" result the
        # model would read if the conversation moved on.
        assert [
            (a["tool_call_id"], a["tool_name"], a["args"], a["kind"], a["session_id"])
            for a in paused["awaiting"]
        ] == [("call_1", "refund", {"order": "A1"}, "approval", "r1")]
        assert _results(paused) == []
        assert paused["messages"][-1]["parts"][-1]["tool_call_id"] == "call_1"

        async with server.client(MALLORY) as mallory:
            for body in ({"approvals": {"call_1": True}}, {"text": "hi", "approvals": {"call_1": True}}):
                refused = await mallory.post("/api/sessions/r1/messages", json=body)
                assert refused.status_code == 404, refused.text
            assert (await mallory.get("/api/sessions/r1/messages")).status_code == 404

        wrong: list[tuple[dict[str, Any], int, list[str] | None]] = [
            ({"approvals": {"call_9": True}}, 409, ["call_9"]),
            ({"tool_outputs": {"call_1": "x"}}, 409, ["call_1"]),  # awaits an approval, not an output
            ({"approvals": {"call_1": "yes"}}, 400, None),
            ({"approvals": ["call_1"]}, 400, None),
            ({}, 400, None),
        ]
        for body, status, ids in wrong:
            answer = await alice.post("/api/sessions/r1/messages", json=body)
            assert answer.status_code == status, (body, answer.text)
            if ids is not None:
                assert answer.json()["error"]["type"] == "not_awaited"
                assert answer.json()["error"]["tool_call_ids"] == ids
        for body in ({"approvals": {"call_1": True}}, {"text": "hi", "tool_outputs": {"call_1": 1}}):
            assert (await alice.post("/api/sessions/nope/messages", json=body)).status_code == 404
        assert (await alice.get("/api/sessions/nope/messages")).status_code == 404  # nothing was created
        unchanged = await idle(alice, "r1")
        assert unchanged["messages"] == paused["messages"]
        assert unchanged["last_seq"] == paused["last_seq"]
        assert unchanged["awaiting"] == paused["awaiting"]

        await _pause(alice, "r2", "refund A2")
        await _pause(alice, "t1", "tz")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(10)

    # A new process on the same database: the pauses are all in the store.
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        assert [a["tool_call_id"] for a in (await idle(alice, "r1"))["awaiting"]] == ["call_1"]
        events = await _turn(alice, "r1", {"approvals": {"call_1": True}})
        resolved = [e for e in events if e["type"] == "tool-call-resolved"]
        assert [(e["tool_call_id"], e["resolution"]) for e in resolved] == [("call_1", "approved")]
        complete = [e for e in events if e["type"] == "tool-call-complete"]
        assert [(e["status"], e["output"]) for e in complete] == [("ok", "refunded A1")]
        assert events[-1]["status"] == "completed"
        done = await idle(alice, "r1")
        assert done["awaiting"] == []
        assert _text(done) == "answered: refunded A1 signed=True"
        # answered: a second answer is a replay, refused without a trace
        again = await alice.post("/api/sessions/r1/messages", json={"approvals": {"call_1": True}})
        assert again.status_code == 409

        events = await _turn(alice, "r2", {"approvals": {"call_1": {"denied": "too large"}}})
        assert [(e["status"], e["output"]) for e in events if e["type"] == "tool-call-complete"] == [
            ("denied", "Tool call denied by the user: too large")
        ]
        assert _text(await idle(alice, "r2")) == (
            "answered: Tool call denied by the user: too large signed=True"
        )
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(20)

    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        waiting = (await idle(alice, "t1"))["awaiting"]
        assert [(a["tool_name"], a["kind"]) for a in waiting] == [("browser_time_zone", "output")]
        events = await _turn(alice, "t1", {"tool_outputs": {"call_1": "Europe/Paris"}})
        assert [e["resolution"] for e in events if e["type"] == "tool-call-resolved"] == ["output"]
        assert _text(await idle(alice, "t1")) == "answered: Europe/Paris signed=True"


async def test_partial_answers_failed_client_tools_and_a_new_prompt_while_waiting(
    tmp_path: Path, store_url: str
) -> None:
    async with serve(tmp_path, store_url=store_url) as server, server.client(ALICE) as alice:
        paused = await _pause(alice, "b1", "both")
        assert [(a["tool_call_id"], a["kind"]) for a in paused["awaiting"]] == [
            ("call_1", "approval"),
            ("call_2", "output"),
        ]
        # Half the answers: the refund runs, the client tool still waits, the run pauses again.
        events = await _turn(alice, "b1", {"approvals": {"call_1": True}})
        assert events[-1]["status"] == "paused"
        half = await idle(alice, "b1")
        assert [a["tool_call_id"] for a in half["awaiting"]] == ["call_2"]
        assert [r["output"] for r in _results(half)] == ["refunded B1"]

        events = await _turn(alice, "b1", {"tool_outputs": {"call_2": {"failed": "no clock here"}}})
        assert [(e["status"], e["output"]) for e in events if e["type"] == "tool-call-complete"] == [
            ("error", "no clock here")
        ]
        assert _text(await idle(alice, "b1")) == "answered: refunded B1 | no clock here signed=True"

        # A new prompt while a call waits closes it (the model reads it was not answered).
        await _pause(alice, "b2", "refund C1")
        events = await _turn(alice, "b2", {"text": "secret moving on"})
        assert [e["resolution"] for e in events if e["type"] == "tool-call-resolved"] == ["unanswered"]
        moved = await idle(alice, "b2")
        assert moved["awaiting"] == []
        assert _text(moved) == "moving on"


async def test_a_sub_agents_call_waits_with_its_caller_and_is_answered_through_the_conversation(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        paused = await _pause(alice, "d1", "delegate refund S9")
        caller, sub = paused["awaiting"]
        assert (caller["session_id"], caller["tool_call_id"], caller["kind"]) == ("d1", "call_1", "subagent")
        assert (sub["tool_call_id"], sub["tool_name"], sub["kind"]) == ("sub_1", "refund", "approval")
        child = sub["session_id"]
        assert child.startswith("d1.sub_") and paused["parents"] == {child: "d1"}
        assert _results(paused) == []  # neither call shows the "not answered" result
        # the sub-agent's session takes no answers of its own: they go through the conversation
        direct = await alice.post(f"/api/sessions/{child}/messages", json={"approvals": {"sub_1": True}})
        assert direct.status_code == 403
        async with server.client(MALLORY) as mallory:
            stolen = await mallory.post("/api/sessions/d1/messages", json={"approvals": {"sub_1": True}})
            assert stolen.status_code == 404

        events = await _turn(alice, "d1", {"approvals": {"sub_1": True}})
        assert [(e["session_id"], e["resolution"]) for e in events if e["type"] == "tool-call-resolved"] == [
            ("d1", "resumed"),
            (child, "approved"),
        ]
        done = await idle(alice, "d1")
        assert done["awaiting"] == []
        assert _text(done) == "done: helper got: refunded S9"


async def test_answers_over_the_websocket(tmp_path: Path) -> None:
    async with serve(tmp_path) as server, server.client(ALICE) as alice:
        paused = await _pause(alice, "w1", "tz")
        url = server.ws_url("/api/sessions/w1/ws", ALICE) + f"&after={paused['cursor']}"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "user-message", "tool_outputs": {"call_9": "UTC"}}))
            refused = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert refused["type"] == "error" and refused["error"]["tool_call_ids"] == ["call_9"]
            await ws.send(json.dumps({"type": "user-message", "tool_outputs": {"call_1": "UTC"}}))
            seen: list[dict[str, Any]] = []
            while not seen or seen[-1].get("type") != "interaction-end":
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                seen.append(frame.get("event", frame))
        assert {"type": "accepted", "session_id": "w1"} in seen
        assert seen[-1]["status"] == "completed"
        assert _text(await idle(alice, "w1")) == "answered: UTC signed=True"


def _tool_results_sent(record: Path) -> list[Any]:
    """Every tool result output the model was sent (``TW_RECORD``)."""
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    return [
        part["output"]
        for entry in sent
        if "model" in entry
        for message in entry["model"]
        if message["role"] == "tool"
        for part in message["parts"]
    ]


async def test_answer_text_is_cut_like_any_tool_output(tmp_path: Path) -> None:
    """A denial reason and a client tool's failure, 300,000 characters each, over the native API and the AI
    SDK (``output-error``, an approval's ``reason``): the model, the events and the stored messages get
    them cut to ``max_tool_output_chars`` (2,000 here) like any tool output; the row keeps them whole."""
    record = tmp_path / "record.jsonl"
    huge = "z" * 300_000
    limit = 2_000
    note = len(
        "\n[output truncated: showing 2,000 of 300,040 characters; the full output is kept in the session store]"
    )
    async with (
        serve(tmp_path, env={"TW_RECORD": str(record), "TW_MAX_OUTPUT": str(limit)}) as server,
        server.client(ALICE) as alice,
    ):
        await _pause(alice, "n1", "refund A1")
        events = await _turn(alice, "n1", {"approvals": {"call_1": {"denied": huge}}})
        await _pause(alice, "n2", "tz")
        events += await _turn(alice, "n2", {"tool_outputs": {"call_1": {"failed": huge}}})
        assert {e["type"] for e in events} >= {"tool-call-resolved", "tool-call-complete"}
        assert max(len(json.dumps(e)) for e in events) < limit + note + 1_000
        for session_id in ("n1", "n2"):
            results = _results(await idle(alice, session_id))
            assert len(results) == 1 and limit < len(results[0]["output"]) <= limit + note

        user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "tz"}]}
        chunks: list[dict[str, Any]] = []
        first = await alice.post("/api/chat", json={"id": "c1", "messages": [user]})
        assert first.status_code == 200, first.text
        call = {"type": "tool-browser_time_zone", "toolCallId": "call_1", "input": {}}
        errored = {
            "id": "a1",
            "role": "assistant",
            "parts": [{**call, "state": "output-error", "errorText": huge}],
        }
        resumed = await alice.post("/api/chat", json={"id": "c1", "messages": [user, errored]})
        assert resumed.status_code == 200, resumed.text
        chunks += _data_chunks(resumed.text)

        refund_user = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "refund A3"}]}
        first = await alice.post("/api/chat", json={"id": "c2", "messages": [refund_user]})
        assert first.status_code == 200, first.text
        refusal = {"id": "call_1", "approved": False, "reason": huge}
        denied = {
            "id": "a2",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-refund",
                    "toolCallId": "call_1",
                    "input": {"order": "A3"},
                    "state": "approval-responded",
                    "approval": refusal,
                }
            ],
        }
        resumed = await alice.post("/api/chat", json={"id": "c2", "messages": [refund_user, denied]})
        assert resumed.status_code == 200, resumed.text
        chunks += _data_chunks(resumed.text)
        assert any(c["type"] == "tool-output-error" for c in chunks)
        assert max(len(json.dumps(c)) for c in chunks) < limit + note + 1_000
        for session_id in ("c1", "c2"):
            results = _results(await idle(alice, session_id))
            assert len(results) == 1 and limit < len(results[0]["output"]) <= limit + note

    sent = _tool_results_sent(record)
    assert len(sent) == 4
    assert all(limit < len(output) <= limit + note for output in sent)
    with sqlite3.connect(tmp_path / "server.db") as db:
        kept = db.execute("SELECT session_id, output FROM toolwire_tool_calls ORDER BY session_id").fetchall()
    assert [(s, len(json.loads(o))) for s, o in kept] == [
        ("c1", 300_000),
        ("c2", len("Tool call denied by the user: ") + 300_000),
        ("n1", len("Tool call denied by the user: ") + 300_000),
        ("n2", 300_000),
    ]


def _data_chunks(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


def _refunds(record: Path) -> list[str]:
    lines = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return [entry["order"] for entry in lines if entry.get("tool") == "refund"]


async def test_an_answer_is_bound_to_the_call_it_was_shown_for(tmp_path: Path) -> None:
    """The model reuses ``call_1`` in the next turn: a stale tab's approval of ``refund("first")`` must not
    run ``refund("second")``. Native answers bound with ``message_ids`` (the ``awaiting`` list's message
    id) and AI SDK answers (whose parts show the call's name and input) for another call are a 409 that runs
    nothing; the right binding runs the call once; an unbound id still answers an unambiguous call."""
    record = tmp_path / "record.jsonl"
    async with serve(tmp_path, env={"TW_RECORD": str(record)}) as server, server.client(ALICE) as alice:
        first = (await _pause(alice, "e1", "refund first"))["awaiting"]
        events = await _turn(alice, "e1", {"text": "refund second"})  # closes call_1, makes call_1 again
        assert events[-1]["status"] == "paused"
        second = (await idle(alice, "e1"))["awaiting"]
        assert [a["tool_call_id"] for a in first] == [a["tool_call_id"] for a in second] == ["call_1"]
        assert first[0]["message_id"] != second[0]["message_id"]
        assert second[0]["args"] == {"order": "second"}

        stale = {"approvals": {"call_1": True}, "message_ids": {"call_1": first[0]["message_id"]}}
        refused = await alice.post("/api/sessions/e1/messages", json=stale)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == {
            "type": "not_awaited",
            "message": refused.json()["error"]["message"],
            "tool_call_ids": ["call_1"],
        }
        bad = await alice.post("/api/sessions/e1/messages", json={**stale, "message_ids": ["x"]})
        assert bad.status_code == 400
        assert (await idle(alice, "e1"))["awaiting"] == second and _refunds(record) == []

        bound = {"approvals": {"call_1": True}, "message_ids": {"call_1": second[0]["message_id"]}}
        events = await _turn(alice, "e1", bound)
        assert [(e["status"], e["output"]) for e in events if e["type"] == "tool-call-complete"] == [
            ("ok", "refunded second")
        ]
        assert _refunds(record) == ["second"]
        # an old client sending the id alone: taken while it names one awaited call
        await _pause(alice, "e2", "refund third")
        await _turn(alice, "e2", {"approvals": {"call_1": True}})
        assert _refunds(record) == ["second", "third"]

        # AI SDK: the re-submitted part shows the call it answers; another call's input is refused.
        user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "refund fourth"}]}
        assert (await alice.post("/api/chat", json={"id": "c1", "messages": [user]})).status_code == 200

        def approved(order: str) -> dict[str, Any]:
            part = {
                "type": "tool-refund",
                "toolCallId": "call_1",
                "input": {"order": order},
                "state": "approval-responded",
                "approval": {"id": "call_1", "approved": True},
            }
            return {"id": "a1", "role": "assistant", "parts": [part]}

        stale_tab = await alice.post("/api/chat", json={"id": "c1", "messages": [user, approved("first")]})
        assert stale_tab.status_code == 409, stale_tab.text
        assert stale_tab.json()["error"]["tool_call_ids"] == ["call_1"]
        assert _refunds(record) == ["second", "third"]
        answered = await alice.post("/api/chat", json={"id": "c1", "messages": [user, approved("fourth")]})
        assert answered.status_code == 200, answered.text
        await idle(alice, "c1")
        assert _refunds(record) == ["second", "third", "fourth"]
