"""Naming, renaming and deleting conversations on a real ``toolwire serve``, as the owner, as another
user and while a turn runs; and a cancelled turn's end reaching every watcher."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scaleout.streams import follow
from toolwire import open_store

from .conftest import idle as _finish
from .conftest import serve

pytestmark = pytest.mark.timeout(120)
ALICE, MALLORY = "tok-alice", "tok-mallory"
LONG_PROMPT = "lookup T7 and then plan a trip to Lisbon in May with a day in Sintra, trams, and pastries"


async def _titles(client: httpx.AsyncClient) -> dict[str, str | None]:
    rows = (await client.get("/api/sessions")).json()["sessions"]
    return {row["session_id"]: row["title"] for row in rows}


async def test_a_conversation_is_named_by_its_first_prompt_and_renamed_by_its_owner_only(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path) as server, server.client(ALICE) as alice, server.client(MALLORY) as mallory:
        assert (
            await alice.post("/api/sessions/trip/messages", json={"text": LONG_PROMPT})
        ).status_code == 202
        await _finish(alice, "trip")
        named = (await _titles(alice))["trip"]
        assert named == "lookup T7 and then plan a trip to Lisbon in May with a day\u2026"

        foreign = await mallory.patch("/api/sessions/trip", json={"title": "pwned"})
        missing = await alice.patch("/api/sessions/nobody-has-this", json={"title": "x"})
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json()["error"]["type"] == missing.json()["error"]["type"] == "not_found"
        for bad in ({}, {"title": "   "}, {"title": 7}, ["title"]):
            refused = await alice.patch("/api/sessions/trip", json=bad)
            assert refused.status_code == 400, bad
        renamed = await alice.patch("/api/sessions/trip", json={"title": "  Lisbon \n in   May "})
        assert renamed.status_code == 200 and renamed.json()["title"] == "Lisbon in May"

        # a later turn keeps the name the owner gave
        assert (
            await alice.post("/api/sessions/trip/messages", json={"text": "lookup T8"})
        ).status_code == 202
        await _finish(alice, "trip")
        assert (await _titles(alice))["trip"] == "Lisbon in May"
        assert "trip" not in await _titles(mallory)


async def test_deleting_removes_the_whole_conversation_for_its_owner_only(tmp_path: Path) -> None:
    async with (
        serve(tmp_path, env={"TW_SLOW": "30"}) as server,
        server.client(ALICE) as alice,
        server.client(MALLORY) as mallory,
    ):
        assert (
            await alice.post("/api/sessions/tree/messages", json={"text": "delegate x"})
        ).status_code == 202
        await _finish(alice, "tree")
        history = (await alice.get("/api/sessions/tree/messages")).json()
        assert history["parents"], "the turn ran a sub-agent session"

        assert (await mallory.delete("/api/sessions/tree")).status_code == 404
        assert (await alice.get("/api/sessions/tree/messages")).status_code == 200

        assert (await alice.post("/api/sessions/busy/messages", json={"text": "slow"})).status_code == 202
        busy = await alice.delete("/api/sessions/busy")
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "session_busy"
        assert (await alice.post("/api/sessions/busy/cancel")).json()["cancelled"] is True

        assert (await alice.delete("/api/sessions/tree")).status_code == 204
        assert (await alice.get("/api/sessions/tree/messages")).status_code == 404
        assert (await alice.delete("/api/sessions/tree")).status_code == 404
        assert set(await _titles(alice)) == {"busy"}
    store = await open_store(server.store_url)
    try:
        left = {s.id for s in await store.list_sessions(limit=100)}
        assert left == {"busy"}, "the sub-agent sessions went with their conversation"
        assert await store.raw_messages("tree") == []
        assert await store.tool_calls("tree") == []
    finally:
        await store.close()


async def test_every_watcher_sees_a_cancelled_turn_end(tmp_path: Path) -> None:
    """Cancelling publishes the turn's end (status cancelled): another tab's stream does not stay busy."""
    async with serve(tmp_path, env={"TW_SLOW": "30"}) as server, server.client(ALICE) as alice:
        created = (await alice.post("/api/sessions", json={"session_id": "watched"})).json()
        seen: list[dict[str, Any]] = []

        async def watch() -> None:
            url = f"/api/sessions/watched/events?after={created['cursor']}"
            async with alice.stream("GET", url, timeout=30) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        seen.append(json.loads(line[6:]))
                        if seen[-1]["type"] == "interaction-end":
                            return

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.3)
        assert (await alice.post("/api/sessions/watched/messages", json={"text": "slow"})).status_code == 202
        for _ in range(200):
            if any(e["type"] == "tool-call-active" for e in seen):
                break
            await asyncio.sleep(0.02)
        assert (await alice.post("/api/sessions/watched/cancel")).json()["cancelled"] is True
        await asyncio.wait_for(watcher, 10)
        end = seen[-1]
        assert end["type"] == "interaction-end" and end["status"] == "cancelled"
        assert end["seq"] > max(e["seq"] for e in seen[:-1])
        completes = [e for e in seen if e["type"] == "tool-call-complete"]
        assert [c["status"] for c in completes] == ["cancelled"]


async def test_u0000_is_answered_alike_on_sqlite_and_postgresql(tmp_path: Path, store_url: str) -> None:
    """PostgreSQL text cannot hold U+0000 (SQLite can): a first prompt holding one is stored and answered
    as written, its title shows U+FFFD instead; a title or a UI message id holding one is a 400 at the
    door. Both stores answer the same."""
    async with serve(tmp_path, store_url=store_url) as server, server.client(ALICE) as alice:
        posted = await alice.post("/api/sessions/nul/messages", json={"text": "secret a\u0000b"})
        assert posted.status_code == 202, posted.text
        done = await _finish(alice, "nul")
        assert [m["role"] for m in done["messages"]] == ["user", "assistant"]
        assert done["messages"][0]["parts"][0]["text"] == "secret a\u0000b"  # the prompt round-trips
        assert done["messages"][-1]["parts"][0]["text"] == "a\u0000b"
        assert (await _titles(alice))["nul"] == "secret a\ufffdb"

        renamed = await alice.patch("/api/sessions/nul", json={"title": "x\u0000y"})
        assert renamed.status_code == 400, renamed.text
        assert renamed.json()["error"]["type"] == "bad_request"
        assert (await _titles(alice))["nul"] == "secret a\ufffdb"

        user = {"id": "u\u00001", "role": "user", "parts": [{"type": "text", "text": "secret one"}]}
        answer = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "one"}]}
        follow = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "secret two"}]}
        imported = await alice.post("/api/chat", json={"id": "imp", "messages": [user, answer, follow]})
        assert imported.status_code == 400, imported.text
        assert (await alice.get("/api/sessions/imp/messages")).status_code == 404  # nothing written
        assert "Traceback" not in server.log_text()


async def test_a_rename_outside_a_run_is_one_numbered_event_every_watcher_sees(
    tmp_path: Path, store_url: str
) -> None:
    """``PATCH`` publishes ONE ``session-renamed`` numbered after the session's last event; the next turn
    numbers after it, and a rename while a turn runs is refused (409), so no number is used twice. On
    PostgreSQL the watcher follows another replica than the one renamed on."""
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(serve(tmp_path, store_url=store_url, env={"TW_SLOW": "60"}))
        b = a
        if store_url.startswith("postgresql"):
            b = await stack.enter_async_context(serve(tmp_path, store_url=store_url, env={"TW_SLOW": "60"}))
        alice = await stack.enter_async_context(a.client(ALICE))
        watcher = await stack.enter_async_context(b.client(ALICE))
        assert (
            await alice.post("/api/sessions/trip/messages", json={"text": "lookup T7"})
        ).status_code == 202
        loaded = await _finish(alice, "trip")
        last = loaded["last_seq"]["trip"]

        # From the cursor the history was read at: what is published after it is replayed, however late
        # the watcher subscribes.
        following = asyncio.create_task(follow(watcher, "", "trip", after=loaded["cursor"]))
        renamed = await alice.patch("/api/sessions/trip", json={"title": "Lisbon in May"})
        assert renamed.status_code == 200, renamed.text
        assert (
            await alice.post("/api/sessions/trip/messages", json={"text": "lookup T8"})
        ).status_code == 202
        frames = await asyncio.wait_for(following, 60)
        events = [event for _, event in frames]
        assert events[0]["type"] == "session-renamed", events[:3]
        assert events[0]["title"] == "Lisbon in May" and events[0]["tool_call_id"] is None
        assert [e["seq"] for e in events if e["session_id"] == "trip"] == list(
            range(last + 1, last + 1 + len(events))
        )
        assert (await _finish(alice, "trip"))["last_seq"]["trip"] == events[-1]["seq"]

        assert (await alice.post("/api/sessions/trip/messages", json={"text": "slow"})).status_code == 202
        await _running(alice, "trip")
        busy = await alice.patch("/api/sessions/trip", json={"title": "mid-run"})
        assert busy.status_code == 409, busy.text
        assert (await alice.post("/api/sessions/trip/cancel")).json()["cancelled"]
        await _finish(alice, "trip")
        assert (await _titles(alice))["trip"] == "Lisbon in May"


async def _running(client: httpx.AsyncClient, session_id: str) -> None:
    for _ in range(500):
        if (await client.get(f"/api/sessions/{session_id}/messages")).json().get("running"):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the turn did not start")
