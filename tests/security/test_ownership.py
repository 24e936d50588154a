"""Who owns a session, at the instant it is created and at every later door: attacks by a second user
against a real ``toolwire serve`` on loopback, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
import websockets
import websockets.exceptions

from toolwire import open_store

from .conftest import idle as _wait_idle
from .conftest import serve

pytestmark = pytest.mark.timeout(180)

ALICE, MALLORY = "tok-alice", "tok-mallory"


def _user(text: str, message_id: str = "u1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


async def _drain(ws: Any, seconds: float) -> list[str]:
    frames: list[str] = []
    try:
        async with asyncio.timeout(seconds):
            while True:
                frames.append(str(await ws.recv()))
    except (TimeoutError, websockets.exceptions.ConnectionClosed):
        pass
    return frames


async def test_a_socket_opened_first_never_sees_the_rightful_users_session(
    tmp_path: Any, store_url: str
) -> None:
    """Mallory opens a WebSocket on an id that does not exist yet and sends Alice a link to it."""
    async with serve(tmp_path, store_url=store_url) as server:
        async with websockets.connect(server.ws_url("/api/sessions/linked/ws", MALLORY)) as spy:
            async with server.client(ALICE) as alice:
                # Alice's page opens the link: the id is taken, so she is refused and starts elsewhere.
                assert (await alice.get("/api/sessions/linked/messages")).status_code == 404
                assert (await alice.post("/api/sessions", json={"session_id": "linked"})).status_code == 409
                posted = await alice.post(
                    "/api/sessions/linked/messages", json={"text": "secret alice-ledger-1"}
                )
                assert posted.status_code == 404
                chat = await alice.post(
                    "/api/chat", json={"id": "linked", "messages": [_user("secret alice-ledger-2")]}
                )
                assert chat.status_code == 404
                # Her own conversation, on a fresh id, runs; the spy's socket sees none of it.
                assert (
                    await alice.post("/api/sessions/own/messages", json={"text": "secret alice-ledger-3"})
                ).status_code == 202
                await _wait_idle(alice, "own")
            frames = await _drain(spy, 1.0)
            await spy.send(json.dumps({"type": "cancel"}))
            frames += await _drain(spy, 0.5)
        assert not any("alice-ledger" in f for f in frames), frames
        async with server.client(MALLORY) as mallory:
            # The squatted id is Mallory's own, empty conversation; Alice's session is invisible to her.
            assert (await mallory.get("/api/sessions/linked/messages")).json()["messages"] == []
            assert (await mallory.get("/api/sessions/own/messages")).status_code == 404
        store = await open_store(server.store_url)
        try:
            stored = json.dumps([m.text for m in await store.raw_messages("linked")])
            assert "alice-ledger" not in stored
            owner = await store.get_session("own")
            assert owner is not None and owner.user_id == "alice"
        finally:
            await store.close()


async def test_commands_on_a_socket_are_checked_when_they_run(tmp_path: Any, store_url: str) -> None:
    """A socket on someone else's session is refused at the handshake; commands on one's own work."""
    async with serve(tmp_path, store_url=store_url) as server:
        async with server.client(ALICE) as alice:
            assert (
                await alice.post("/api/sessions/a1/messages", json={"text": "secret a1-private"})
            ).status_code == 202
            await _wait_idle(alice, "a1")
        with pytest.raises(websockets.exceptions.InvalidStatus):
            async with websockets.connect(server.ws_url("/api/sessions/a1/ws", MALLORY)):
                pass
        async with websockets.connect(server.ws_url("/api/sessions/a1/ws", ALICE)) as ws:
            await ws.send(json.dumps({"type": "user-message", "text": "secret again"}))
            frames = await _drain(ws, 2.0)
        assert any('"accepted"' in f for f in frames)


async def test_sub_sessions_are_unpredictable_and_belong_to_the_parents_owner(
    tmp_path: Any, store_url: str
) -> None:
    async with serve(tmp_path, store_url=store_url) as server:
        async with server.client(MALLORY) as mallory:
            # The ids the sub-agent session would have had before: taken in advance by Mallory.
            for guess in ("a1.call_1", "a1.sub", "a1.c1"):
                assert (await mallory.post("/api/sessions", json={"session_id": guess})).status_code == 201
        async with server.client(ALICE) as alice:
            assert (
                await alice.post("/api/sessions/a1/messages", json={"text": "delegate secret-task"})
            ).status_code == 202
            history = await _wait_idle(alice, "a1")
        subs = list(history["parents"])
        assert len(subs) == 1 and re.fullmatch(r"a1\.sub_[0-9a-f]{16}", subs[0]), subs
        assert "helper says: secret-task" in json.dumps(history["messages"])
        store = await open_store(server.store_url)
        try:
            sub = await store.get_session(subs[0])
            assert sub is not None and sub.user_id == "alice" and sub.parent_session_id == "a1"
            for guess in ("a1.call_1", "a1.sub", "a1.c1"):
                assert await store.raw_messages(guess) == []
        finally:
            await store.close()
        async with server.client(MALLORY) as mallory:
            for path in (f"/api/sessions/{subs[0]}/messages", f"/api/sessions/{subs[0]}/events"):
                assert (await mallory.get(path)).status_code == 404


async def test_two_users_racing_to_create_one_id_never_write_into_each_other(
    tmp_path: Any, store_url: str
) -> None:
    """Both send a first request with an imported history for the same new id at the same instant."""
    trials = 12
    outcomes: dict[str, int] = {}
    async with serve(tmp_path, store_url=store_url) as server:
        async with server.client(ALICE) as alice, server.client(MALLORY) as mallory:
            for trial in range(trials):
                session = f"race-{trial}"

                def body(owner: str, session: str = session, trial: int = trial) -> dict[str, Any]:
                    return {
                        "id": session,
                        "messages": [
                            _user(f"imported by {owner}", f"m-{trial}"),
                            {
                                "id": f"a-{trial}",
                                "role": "assistant",
                                "parts": [{"type": "text", "text": f"{owner} data"}],
                            },
                            _user("hello", f"n-{trial}"),
                        ],
                    }

                first, second = await asyncio.gather(
                    alice.post("/api/chat", json=body("alice")),
                    mallory.post("/api/chat", json=body("mallory")),
                )
                codes = sorted((first.status_code, second.status_code))
                outcomes[str(codes)] = outcomes.get(str(codes), 0) + 1
                assert codes == [200, 404], codes
                winner = "alice" if first.status_code == 200 else "mallory"
                loser = "mallory" if winner == "alice" else "alice"
                client = alice if winner == "alice" else mallory
                history = await _wait_idle(client, session)
                texts = json.dumps(history["messages"])
                assert f"imported by {winner}" in texts and loser not in texts
        store = await open_store(server.store_url)
        try:
            for trial in range(trials):
                info = await store.get_session(f"race-{trial}")
                assert info is not None
                stored = json.dumps([m.text for m in await store.raw_messages(f"race-{trial}")])
                other = "mallory" if info.user_id == "alice" else "alice"
                assert other not in stored, stored
        finally:
            await store.close()
    assert sum(outcomes.values()) == trials


async def test_every_door_answers_404_for_another_users_session(tmp_path: Any, store_url: str) -> None:
    async with (
        serve(tmp_path, store_url=store_url) as server,
        server.client(ALICE) as alice,
        server.client(MALLORY) as mallory,
    ):
        assert (
            await alice.post("/api/sessions/a1/messages", json={"text": "lookup TXN-9"})
        ).status_code == 202
        await _wait_idle(alice, "a1")
        doors = [
            await mallory.get("/api/sessions/a1/messages"),
            await mallory.get("/api/sessions/a1/events"),
            await mallory.post("/api/sessions/a1/messages", json={"text": "mine"}),
            await mallory.post("/api/sessions/a1/cancel"),
            await mallory.post("/api/chat", json={"id": "a1", "messages": [_user("mine")]}),
        ]
        absent = [
            await mallory.get("/api/sessions/nobody/messages"),
            await mallory.get("/api/sessions/nobody/events"),
            await mallory.post("/api/sessions/nobody/cancel"),
        ]
        for response in doors + absent:
            assert response.status_code == 404, (response.request.url, response.status_code)
            assert "alice" not in response.text and "TXN-9" not in response.text
        # the same body for a foreign and an absent session
        assert doors[0].json()["error"]["type"] == absent[0].json()["error"]["type"] == "not_found"
        # creating a taken id: the same answer whoever holds it
        assert (await mallory.post("/api/sessions", json={"session_id": "m1"})).status_code == 201
        foreign = await mallory.post("/api/sessions", json={"session_id": "a1"})
        own = await mallory.post("/api/sessions", json={"session_id": "m1"})
        assert foreign.status_code == own.status_code == 409
        assert foreign.json()["error"]["type"] == own.json()["error"]["type"]
        assert [s["session_id"] for s in (await mallory.get("/api/sessions")).json()["sessions"]] == ["m1"]
