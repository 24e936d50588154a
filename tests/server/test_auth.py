"""Bearer tokens and session isolation: another user's session is invisible on every endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import websockets

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.errors import ConfigError
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.server.auth import Auth
from toolwire.server.errors import RequestError
from toolwire.store import MemoryStore

from .conftest import live_server

SECRET_TEXT = "alice-private-ledger-7731"


def lookup(txn: str) -> str:
    """Look up."""
    return f"{SECRET_TEXT}:{txn}"


async def test_users_cannot_see_or_touch_each_others_sessions(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# token user\ntok-alice alice\ntok-bob bob\n")
    sub = Agent(ScriptedModel([[TextPart(text=SECRET_TEXT)]]), name="helper")
    model = ScriptedModel(
        [
            [ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"txn": "T1"})],
            [ToolCallPart(tool_call_id="c2", tool_name="helper", args={"task": "t"})],
            [TextPart(text=f"done {SECRET_TEXT}")],
        ]
    )
    app = create_app(
        Agent(model, tools=[lookup, sub.as_tool("helper", "helps")]),
        store=MemoryStore(),
        tokens_file=str(tokens),
    )
    async with (
        live_server(app) as server,
        server.client("tok-alice") as alice,
        server.client("tok-bob") as bob,
    ):
        posted = await alice.post("/api/sessions/a1/messages", json={"text": "look"})
        assert posted.status_code == 202
        for _ in range(300):
            if not app.state.toolwire.runs.running("a1"):
                break
            await asyncio.sleep(0.02)
        own = (await alice.get("/api/sessions/a1/messages")).json()
        sub = next(iter(own["parents"]))  # the helper's sub-session: a random id under a1
        assert SECRET_TEXT in json.dumps(own) and sub.startswith("a1.sub_") and own["parents"][sub] == "a1"

        async with server.client() as anonymous:
            assert (await anonymous.get("/api/sessions")).status_code == 401
            assert (await anonymous.get("/api/sessions/a1/messages")).status_code == 401
        async with server.client("wrong") as stranger:
            assert (await stranger.get("/api/sessions")).status_code == 401

        assert (await bob.get("/api/sessions")).json()["sessions"] == []
        user = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
        attempts = [
            await bob.get("/api/sessions/a1/messages"),
            await bob.get(f"/api/sessions/{sub}/messages"),
            await bob.get("/api/sessions/a1/events"),
            await bob.get(f"/api/sessions/{sub}/events"),
            await bob.get("/api/sessions/a1/events?token=tok-bob"),
            await bob.post("/api/sessions/a1/messages", json={"text": "mine now"}),
            await bob.post("/api/sessions/a1/cancel"),
            await bob.post("/api/chat", json={"id": "a1", "messages": [user]}),
        ]
        for response in attempts:
            assert response.status_code in (403, 404), (response.request.url, response.status_code)
            assert SECRET_TEXT not in response.text and "alice" not in response.text
        # Creating a taken id answers exactly as it does for the caller's own taken id: no ownership oracle.
        assert (await bob.post("/api/sessions", json={"session_id": "b1"})).status_code == 201
        taken_by_alice = await bob.post("/api/sessions", json={"session_id": "a1"})
        taken_by_bob = await bob.post("/api/sessions", json={"session_id": "b1"})
        assert taken_by_alice.status_code == taken_by_bob.status_code == 409
        assert taken_by_alice.json() == json.loads(taken_by_bob.text.replace("b1", "a1"))

        ws_url = server.url.replace("http", "ws") + "/api/sessions/a1/ws?token=tok-bob"
        with pytest.raises(websockets.exceptions.InvalidStatus):
            async with websockets.connect(ws_url):
                pass

        # Alice's stream works with the token in the query string (EventSource cannot send headers).
        async with server.client() as by_query:
            response = await by_query.get("/api/sessions/a1/messages?token=tok-alice")
            assert response.status_code == 200
        # and nothing bob did reached the model or the store
        assert len(model.requests) == 3
        assert [s["session_id"] for s in (await alice.get("/api/sessions")).json()["sessions"]] == ["a1"]


def test_development_mode_serves_loopback_only() -> None:
    auth = Auth()
    assert auth.development
    assert auth.user_for(None, None, "127.0.0.1") == "local"
    assert auth.user_for(None, None, "::1") == "local"
    with pytest.raises(RequestError) as refused:
        auth.user_for(None, None, "10.1.2.3")
    assert refused.value.status == 403
    with pytest.raises(RequestError):
        auth.user_for(None, None, None)


def test_token_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_TOKENS", "t1:ann,t2:ben")
    auth = Auth.from_sources()
    assert auth.user_for("Bearer t2", None, "203.0.113.9") == "ben"
    with pytest.raises(RequestError) as bad:
        auth.user_for("Basic dDI=", None, "127.0.0.1")
    assert bad.value.status == 401
    monkeypatch.setenv("TOOLWIRE_TOKENS", "nocolon")
    with pytest.raises(ConfigError):
        Auth.from_sources()
    monkeypatch.delenv("TOOLWIRE_TOKENS")
    broken = tmp_path / "t"
    broken.write_text("only-one-field\n")
    with pytest.raises(ConfigError, match="TOKEN USER_ID"):
        Auth.from_sources(broken)
    assert "t1" not in repr(vars(Auth({"t1": "ann"})))  # only digests are kept
