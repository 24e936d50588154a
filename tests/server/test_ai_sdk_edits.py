"""Replacing turns from ``useChat``: ``regenerate()`` and ``sendMessage({text, messageId})`` (an edit).

The real chat client (``AbstractChat`` of ai@6 and ai@5, ``tests/server/node/hitl_client.mjs edit``) sends
two turns, regenerates the last answer, then edits the first message. The store follows the client: the
replaced answers are dropped (documented in docs/server.md), the model never sees them again, and the
stored history is what the client shows. Raw requests pin the rules around it: a client that sends only its
new message keeps the conversation, an earlier message edited in place is a 409, a paused turn can be
regenerated.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.security.agents import refund
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore, Store
from toolwire.store.sql import SQLStore

from .conftest import live_server, parse_sse

NODE_DIR = Path(__file__).parent / "node"
SIGNATURE = {"google": {"thoughtSignature": "ZWRpdC1zaWduYXR1cmU="}}


def _answering_model() -> ScriptedModel:
    """Answers "answer N to <last user text>"; "refund" first calls the refund tool (it waits)."""
    count = 0

    def respond(request: ModelRequest) -> Sequence[Part]:
        nonlocal count
        count += 1
        last_user = next(m.text for m in reversed(request.messages) if m.role == "user")
        if last_user == "refund" and request.messages[-1].role == "user":
            return [
                ToolCallPart(
                    tool_call_id="call_1",
                    tool_name="refund",
                    args={"order": "A1"},
                    provider_metadata=SIGNATURE,
                )
            ]
        return [TextPart(text=f"answer {count} to {last_user}")]

    return ScriptedModel(respond)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store = (
        MemoryStore()
        if request.param == "memory"
        else await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path}/s.db")
    )
    yield opened
    await opened.close()


def _texts(messages: Sequence[Any]) -> list[str]:
    return [f"{m.role}: {m.text}" for m in messages if m.role in ("user", "assistant")]


@pytest.mark.parametrize("package", ["ai6", "ai5"])
async def test_regenerate_and_edit_with_the_real_client(package: str, store: Store) -> None:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    model = _answering_model()
    app = create_app(Agent(model), store=store)
    async with live_server(app) as server:
        process = await asyncio.create_subprocess_exec(
            node, "hitl_client.mjs", package, server.url, "edit", cwd=NODE_DIR, stdout=-1, stderr=-1
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, stderr.decode()[-3000:]
        seen = json.loads(stdout)
        assert seen["error"] is None, seen["error"]
        async with server.client() as client:
            stored = (await client.get(f"/api/sessions/{seen['chatId']}/messages")).json()

    two_turns, regenerated, edited = seen["views"]
    assert two_turns == [
        "user: first",
        "assistant: answer 1 to first",
        "user: second",
        "assistant: answer 2 to second",
    ]
    assert regenerated == [*two_turns[:3], "assistant: answer 3 to second"]
    assert edited == ["user: first, edited", "assistant: answer 4 to first, edited"]
    assert [r["trigger"] for r in seen["requests"]] == ["submit-message"] * 2 + [
        "regenerate-message",
        "submit-message",
    ]
    assert seen["requests"][3]["messageId"] is not None

    # the model never saw a replaced answer again, nor a second copy of a re-asked turn
    assert len(model.requests) == 4
    assert _texts(model.requests[2].messages) == [
        "user: first",
        "assistant: answer 1 to first",
        "user: second",
    ]
    assert _texts(model.requests[3].messages) == ["user: first, edited"]
    # the store holds what the client shows
    assert [f"{m['role']}: {_text(m)}" for m in stored["messages"]] == edited


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p.get("type") == "text")


def _user(text: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def _assistant(text: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


async def test_the_rules_around_replacing_turns(store: Store) -> None:
    model = _answering_model()
    app = create_app(Agent(model, tools=[refund]), store=store)
    u1, u2, u3 = _user("first", "u1"), _user("second", "u2"), _user("third", "u3")
    async with live_server(app) as server, server.client() as client:

        async def chat(messages: list[dict[str, Any]], **extra: Any) -> list[dict[str, Any]]:
            response = await client.post("/api/chat", json={"id": "c1", "messages": messages, **extra})
            assert response.status_code == 200, response.text
            return [f["data"] for f in parse_sse(response.text) if isinstance(f.get("data"), dict)]

        async def stored() -> list[str]:
            history = (await client.get("/api/sessions/c1/messages")).json()
            return [f"{m['role']}: {_text(m)}" for m in history["messages"] if m["role"] != "tool"]

        await chat([u1])
        await chat([u1, _assistant("answer 1 to first", "a1"), u2])
        assert await stored() == [
            "user: first",
            "assistant: answer 1 to first",
            "user: second",
            "assistant: answer 2 to second",
        ]

        # a client that sends only its new message (no regenerate, no messageId) keeps the conversation
        await chat([u3])
        assert len(await stored()) == 6

        # an earlier message edited in place while later ones are kept: no useChat flow, refused, nothing cut
        conflict = await client.post(
            "/api/chat",
            json={
                "id": "c1",
                "messages": [_user("FIRST", "u1"), _assistant("x", "a1"), _user("fourth", "u4")],
            },
        )
        assert conflict.status_code == 409 and conflict.json()["error"]["type"] == "history_conflict"
        assert len(await stored()) == 6 and len(model.requests) == 3

        # a paused turn regenerated: its waiting call goes with it, the history stays valid for the model
        paused = await chat([u1, _assistant("answer 1 to first", "a1"), _user("refund", "u5")])
        assert any(c["type"] == "tool-approval-request" for c in paused)
        await chat(
            [u1, _assistant("answer 1 to first", "a1"), _user("refund", "u5")], trigger="regenerate-message"
        )
        assert (await client.get("/api/sessions/c1/messages")).json()["awaiting"] == [
            {
                "session_id": "c1",
                "tool_call_id": "call_1",
                "tool_name": "refund",
                "args": {"order": "A1"},
                "kind": "approval",
                "message_id": (await store.tool_calls("c1"))[-1].message_id,
            }
        ]
        assert len(await store.tool_calls("c1")) == 1  # the first paused call was dropped with its turn
        # regenerating the first turn from a client that shows nothing before it starts over
        await chat([u1], trigger="regenerate-message")
        assert await stored() == ["user: first", f"assistant: answer {len(model.requests)} to first"]
        assert await store.tool_calls("c1") == []
        assert _texts(model.requests[-1].messages) == ["user: first"]


async def test_only_the_owner_cuts_and_never_under_a_running_turn(store: Store) -> None:
    """Another user's regenerate is 404 and cuts nothing; a cut while a turn runs is 409 ``session_busy``,
    and the running turn is kept whole."""
    release = asyncio.Event()

    async def wait() -> str:
        """Waits until the test lets it finish."""
        await release.wait()
        return "waited"

    def respond(request: ModelRequest) -> Sequence[Part]:
        last = request.messages[-1]
        if last.role == "user" and last.text == "wait":
            return [ToolCallPart(tool_call_id="call_w", tool_name="wait", args={})]
        return [TextPart(text=f"re: {next(m.text for m in reversed(request.messages) if m.role == 'user')}")]

    app = create_app(
        Agent(ScriptedModel(respond), tools=[wait]), store=store, tokens={"ta": "alice", "tm": "mallory"}
    )
    u1 = _user("first", "u1")
    async with live_server(app) as server, server.client("ta") as alice, server.client("tm") as mallory:
        assert (await alice.post("/api/chat", json={"id": "c1", "messages": [u1]})).status_code == 200
        foreign = await mallory.post(
            "/api/chat", json={"id": "c1", "messages": [u1], "trigger": "regenerate-message"}
        )
        assert foreign.status_code == 404
        running = await alice.post(
            "/api/sessions/c1/messages", json={"text": "wait"}
        )  # a turn that keeps running
        assert running.status_code == 202
        busy = await alice.post(
            "/api/chat", json={"id": "c1", "messages": [u1], "trigger": "regenerate-message"}
        )
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "session_busy"
        release.set()
        for _ in range(500):
            history = (await alice.get("/api/sessions/c1/messages")).json()
            if not history["running"]:
                break
            await asyncio.sleep(0.01)
        texts = [_text(m) for m in history["messages"] if m["role"] != "tool"]
        assert texts == ["first", "re: first", "wait", "", "re: wait"]
