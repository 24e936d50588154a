"""A new chat turn's start: the run's own store transaction claims the session (no separate claim).

``POST /api/chat`` with only the new message (``useChat``'s first request) hands the claim to the run:
its one ``open_run`` creates the session for the caller, or checks the caller owns it and that it is no
sub-agent's session, before the stream subscribes and before anything is written. These tests pin both
halves: the store is asked once, and every refusal the separate claim gave is still given.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store.records import OpenedHistory, SessionInfo
from toolwire.store.sql import SQLStore

from .conftest import live_server, parse_sse


class CountingStore(SQLStore):
    """A real SQLite store that lists which of its session-claiming calls the server made."""

    calls: list[str]

    async def ensure_session(self, info: SessionInfo) -> SessionInfo:
        self.calls.append("ensure_session")
        return await super().ensure_session(info)

    async def get_session(self, session_id: str) -> SessionInfo | None:
        self.calls.append("get_session")
        return await super().get_session(session_id)

    async def raw_messages(self, session_id: str) -> list[Any]:
        self.calls.append("raw_messages")
        return await super().raw_messages(session_id)

    async def open_run(
        self, info: SessionInfo, owner: str, **kwargs: Any
    ) -> tuple[SessionInfo, OpenedHistory]:
        self.calls.append("open_run top_level" if kwargs.get("top_level") else "open_run")
        return await super().open_run(info, owner, **kwargs)


async def _store(tmp_path: Path) -> CountingStore:
    store = await CountingStore.open(f"sqlite:///{tmp_path / 'chat.db'}")
    store.calls = []
    return store


def _chat(session_id: str, text: str) -> dict[str, Any]:
    return {
        "id": session_id,
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }


def _tokens(tmp_path: Path) -> str:
    path = tmp_path / "tokens"
    path.write_text("tok-alice alice\ntok-bob bob\n")
    return str(path)


async def test_a_new_chat_asks_the_store_once_to_start(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    model = ScriptedModel([[TextPart(text="hello")], [TextPart(text="again")]])
    app = create_app(Agent(model), store=store, tokens_file=_tokens(tmp_path))
    async with live_server(app) as server, server.client("tok-alice") as alice:
        first = await alice.post("/api/chat", json=_chat("c1", "hi"))
        assert first.status_code == 200
        frames = parse_sse(first.text)
        assert frames[-1]["data"] == "[DONE]"
        assert any(f["data"] != "[DONE]" and f["data"].get("delta") == "hello" for f in frames)
        # The session is claimed by the run's start alone: no separate claim, no read of its messages.
        assert store.calls == ["open_run top_level"]
        store.calls.clear()
        second = await alice.post("/api/chat", json=_chat("c1", "more"))
        assert second.status_code == 200 and parse_sse(second.text)[-1]["data"] == "[DONE]"
        assert store.calls == ["open_run top_level"]
    info = await store.get_session("c1")
    assert info is not None and info.user_id == "alice" and info.parent_session_id is None
    assert [m.text for m in await store.raw_messages("c1") if m.role == "user"] == ["hi", "more"]
    await store.close()


async def test_refusals_of_the_claim_are_kept(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.ensure_session(SessionInfo(id="a1", user_session_id="a1", user_id="alice"))
    await store.ensure_session(
        SessionInfo(id="a1-sub", parent_session_id="a1", user_session_id="a1", user_id="alice")
    )
    model = ScriptedModel([[TextPart(text="never")]])
    app = create_app(Agent(model), store=store, tokens_file=_tokens(tmp_path))
    async with (
        live_server(app) as server,
        server.client("tok-alice") as alice,
        server.client("tok-bob") as bob,
    ):
        # Another user's session, and a sub-session of another user: 404 alike, as for a missing one.
        for session_id in ("a1", "a1-sub"):
            refused = await bob.post("/api/chat", json=_chat(session_id, "mine now"))
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"]["type"] == "not_found"
            assert session_id in refused.json()["error"]["message"]
        # The owner's own sub-agent session takes no user messages.
        forbidden = await alice.post("/api/chat", json=_chat("a1-sub", "hi"))
        assert forbidden.status_code == 403 and forbidden.json()["error"]["type"] == "forbidden"
    assert model.requests == []  # nothing reached the model
    for session_id in ("a1", "a1-sub"):
        assert await store.raw_messages(session_id) == []
        assert not await store.run_in_progress(session_id)  # nor was the session locked
    await store.close()


async def test_a_stranger_gets_404_not_busy_while_the_owner_runs(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def hold() -> str:
        """Holds the session."""
        await release.wait()
        return "held"

    store = await _store(tmp_path)
    model = ScriptedModel(
        [[ToolCallPart(tool_call_id="h", tool_name="hold", args={})], [TextPart(text="done")]]
    )
    app = create_app(Agent(model, tools=[hold]), store=store, tokens_file=_tokens(tmp_path))
    async with (
        live_server(app) as server,
        server.client("tok-alice") as alice,
        server.client("tok-bob") as bob,
    ):
        async with alice.stream("POST", "/api/chat", json=_chat("a1", "hold")) as running:
            assert running.status_code == 200
            for _ in range(500):
                if app.state.toolwire.runs.running("a1"):
                    break
                await asyncio.sleep(0.01)
            assert app.state.toolwire.runs.running("a1")
            refused = await bob.post("/api/chat", json=_chat("a1", "mine now"))
            assert refused.status_code == 404  # not 409: that would tell bob the session exists
            busy = await alice.post("/api/chat", json=_chat("a1", "again"))
            assert busy.status_code == 409
            release.set()
            body = (await running.aread()).decode()
        assert parse_sse(body)[-1]["data"] == "[DONE]"
    await store.close()


async def test_two_users_racing_a_new_chat_id_never_write_into_each_other(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    trials = 8
    model = ScriptedModel([[TextPart(text="ok")] for _ in range(trials)])
    app = create_app(Agent(model), store=store, tokens_file=_tokens(tmp_path))
    async with (
        live_server(app) as server,
        server.client("tok-alice") as alice,
        server.client("tok-bob") as bob,
    ):
        for trial in range(trials):
            session_id = f"race-{trial}"
            first, second = await asyncio.gather(
                alice.post("/api/chat", json=_chat(session_id, "from alice")),
                bob.post("/api/chat", json=_chat(session_id, "from bob")),
            )
            assert sorted((first.status_code, second.status_code)) == [200, 404]
            winner, loser = ("alice", "bob") if first.status_code == 200 else ("bob", "alice")
            info = await store.get_session(session_id)
            assert info is not None and info.user_id == winner
            texts = [m.text for m in await store.raw_messages(session_id) if m.role == "user"]
            assert texts == [f"from {winner}"], (texts, loser)
    await store.close()
