"""Subscribe, then delete: what a deleted conversation's streams do, and what whoever creates its id next
sees (issue 32, items 1 and 2), on a real ``toolwire serve`` over SQLite and PostgreSQL, and across two
replicas on PostgreSQL.

Mallory creates ``support-ticket-X``, runs a turn in it, watches it over SSE and a WebSocket, and deletes
it. Her streams must end there (a last ``session-deleted``, then the end), nothing of her conversation may be
replayed to anyone afterwards (by the cursor ``GET .../messages`` hands out, nor ``?after=0``), and when
Alice creates the same id, Mallory's streams carry none of Alice's turn.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets

from .conftest import Served, idle, serve
from .conftest import store_url as store_url  # a fixture, used by name

ALICE, MALLORY = "tok-alice", "tok-mallory"
SESSION = "support-ticket-X"


async def _sse(
    server: Served, token: str, path: str, frames: list[dict[str, Any]], opened: asyncio.Event
) -> None:
    """Read an SSE stream into ``frames`` until the server ends it."""
    async with server.client(token) as client, client.stream("GET", path, timeout=None) as response:
        assert response.status_code == 200
        opened.set()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                frames.append(json.loads(line[6:]))


async def _ws(url: str, frames: list[dict[str, Any]], opened: asyncio.Event) -> int | None:
    """Read a session's WebSocket into ``frames`` until the server closes it; its close code."""
    async with websockets.connect(url) as ws:
        opened.set()
        try:
            while True:
                frames.append(json.loads(await ws.recv())["event"])
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


async def _until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _texts(frames: list[dict[str, Any]]) -> str:
    return json.dumps(frames)


async def _replay(server: Served, path: str) -> list[dict[str, Any]]:
    """What Alice's SSE stream at ``path`` sends until a turn's end or a ``stream-reset`` (or its end)."""
    frames: list[dict[str, Any]] = []
    reader = asyncio.create_task(_sse(server, ALICE, path, frames, asyncio.Event()))
    await _until(
        lambda: any(f["type"] in ("interaction-end", "stream-reset") for f in frames) or reader.done(),
        f"the replay of {path}",
    )
    reader.cancel()
    return frames


async def _watch_then_delete(
    owner_server: Served, deleter_server: Served
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], asyncio.Task[None], asyncio.Task[int | None]]:
    """Mallory creates the session on ``owner_server``, runs a turn, watches it there over SSE and a
    WebSocket, and deletes it through ``deleter_server``; her two readers are returned, still running."""
    async with owner_server.client(MALLORY) as mallory:
        assert (await mallory.post("/api/sessions", json={"session_id": SESSION})).status_code == 201
        assert (
            await mallory.post(f"/api/sessions/{SESSION}/messages", json={"text": "secret mallory-private"})
        ).status_code == 202
        await idle(mallory, SESSION)
    sse_frames: list[dict[str, Any]] = []
    ws_frames: list[dict[str, Any]] = []
    sse_open, ws_open = asyncio.Event(), asyncio.Event()
    sse = asyncio.create_task(
        _sse(owner_server, MALLORY, f"/api/sessions/{SESSION}/events", sse_frames, sse_open)
    )
    ws = asyncio.create_task(
        _ws(owner_server.ws_url(f"/api/sessions/{SESSION}/ws", MALLORY), ws_frames, ws_open)
    )
    await asyncio.wait_for(asyncio.gather(sse_open.wait(), ws_open.wait()), 30)
    async with deleter_server.client(MALLORY) as deleter:
        assert (await deleter.delete(f"/api/sessions/{SESSION}")).status_code == 204
    return sse_frames, ws_frames, sse, ws


async def _alice_takes_the_id(server: Served) -> dict[str, Any]:
    """Alice creates the free id, runs a turn, and reads her stream from the history's cursor and from 0."""
    async with server.client(ALICE) as alice:
        created = await alice.post("/api/sessions", json={"session_id": SESSION})
        assert created.status_code == 201, created.text
        first_cursor = created.json()["cursor"]
        assert (
            await alice.post(f"/api/sessions/{SESSION}/messages", json={"text": "secret alice-private"})
        ).status_code == 202
        history = await idle(alice, SESSION)
        streams = {
            name: await _replay(server, f"/api/sessions/{SESSION}/events?after={after}")
            for name, after in (("created", first_cursor), ("zero", 0))
        }
        return {"history": history, **streams}


def _check(
    mallory_sse: list[dict[str, Any]], mallory_ws: list[dict[str, Any]], alice: dict[str, Any]
) -> None:
    # Mallory's streams ended with a last "session-deleted" and carry nothing of Alice's conversation.
    assert mallory_sse and mallory_sse[-1]["type"] == "session-deleted"
    assert mallory_ws and mallory_ws[-1]["type"] == "session-deleted"
    assert "alice-private" not in _texts(mallory_sse) + _texts(mallory_ws)
    # Alice's stream of the id, from the cursor she was handed, is her conversation alone, numbered from
    # 1; from 0 it is the same (PostgreSQL: cursors are the log's ids) or a reset (in-process cursors
    # start at the stream's creation), never the deleted conversation.
    for frames in (alice["created"], alice["zero"]):
        assert "mallory-private" not in _texts(frames)
        if frames == [{"type": "stream-reset"}] and frames is alice["zero"]:
            continue
        assert "alice-private" in _texts(frames)
        seqs = [f["seq"] for f in frames if f.get("session_id") == SESSION]
        assert seqs[0] == 1 and seqs == sorted(seqs)
    assert "mallory-private" not in _texts(alice["history"])


async def test_deleting_ends_every_subscription_and_the_next_owner_sees_nothing_of_it(
    tmp_path: Path, store_url: str
) -> None:
    async with serve(tmp_path, store_url=store_url) as server:
        sse_frames, ws_frames, sse, ws = await _watch_then_delete(server, server)
        # Both of Mallory's streams end at once (the SSE response completes, the socket closes 4409).
        await asyncio.wait_for(sse, 30)
        assert await asyncio.wait_for(ws, 30) == 4409
        alice = await _alice_takes_the_id(server)
    _check(sse_frames, ws_frames, alice)


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)  # replicas share a PostgreSQL store
async def test_a_delete_on_one_replica_ends_the_streams_of_every_replica(
    tmp_path: Path, store_url: str
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        serve(tmp_path / "a", store_url=store_url) as a,
        serve(tmp_path / "b", store_url=store_url) as b,
    ):
        # Mallory watches on A and deletes through B; Alice then creates the id on B.
        sse_frames, ws_frames, sse, ws = await _watch_then_delete(a, b)
        await asyncio.wait_for(sse, 30)
        assert await asyncio.wait_for(ws, 30) == 4409
        alice = await _alice_takes_the_id(b)
    _check(sse_frames, ws_frames, alice)


async def test_an_owner_who_deletes_and_recreates_an_id_starts_a_new_stream(
    tmp_path: Path, store_url: str
) -> None:
    """The owner's own re-created conversation replays nothing of the deleted one, and its seqs start at
    1 on a stream of its own (a client that kept the old cursor is told to reload)."""
    async with serve(tmp_path, store_url=store_url) as server, server.client(ALICE) as alice:
        assert (
            await alice.post(f"/api/sessions/{SESSION}/messages", json={"text": "secret first-life"})
        ).status_code == 202
        old = await idle(alice, SESSION)
        assert (await alice.delete(f"/api/sessions/{SESSION}")).status_code == 204
        assert (
            await alice.post(f"/api/sessions/{SESSION}/messages", json={"text": "secret second-life"})
        ).status_code == 202
        await idle(alice, SESSION)
        frames = await _replay(server, f"/api/sessions/{SESSION}/events?after=0")
        assert "first-life" not in _texts(frames)
        assert "second-life" in _texts(frames) or frames == [{"type": "stream-reset"}]
        # The old life's cursor is not a position in the new stream.
        stale = await _replay(server, f"/api/sessions/{SESSION}/events?after={old['cursor']}")
        assert "first-life" not in _texts(stale)


def _ui(role: str, text: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


async def test_an_edit_drops_the_replaced_turns_from_every_replay(tmp_path: Path, store_url: str) -> None:
    """An AI SDK edit (``sendMessage({text, messageId})``) replaces a turn: the replaced turn's events
    are no longer replayed (from the cursor a client held before it, nor from 0), the new turn's are."""
    async with serve(tmp_path, store_url=store_url) as server, server.client(ALICE) as alice:
        chat = "/api/chat"
        first = [_ui("user", "secret kept-turn", "u1")]
        assert (await alice.post(chat, json={"id": SESSION, "messages": first})).status_code == 200
        before = (await idle(alice, SESSION))["cursor"]
        second = [*first, _ui("assistant", "kept-turn", "a1"), _ui("user", "secret replaced-turn", "u2")]
        assert (await alice.post(chat, json={"id": SESSION, "messages": second})).status_code == 200
        edited = [*first, _ui("assistant", "kept-turn", "a1"), _ui("user", "secret edited-turn", "u2")]
        response = await alice.post(chat, json={"id": SESSION, "messages": edited, "messageId": "u2"})
        assert response.status_code == 200
        history = json.dumps((await idle(alice, SESSION))["messages"])
        assert "replaced-turn" not in history and "edited-turn" in history
        for after in (before, 0):
            frames = await _replay(server, f"/api/sessions/{SESSION}/events?after={after}")
            assert "replaced-turn" not in _texts(frames), after
