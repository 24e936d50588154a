"""``toolwire sessions rename ID TITLE``: the same rename as ``PATCH /api/sessions/{id}`` (issue 28 item 2),
one numbered ``session-renamed`` event; on PostgreSQL live watchers of a running server see it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.helpers import call, command_env, read_store, script, sqlite_url, text, toolwire
from tests.scaleout.streams import follow
from tests.security.conftest import idle, serve, store_url
from toolwire.store import SessionInfo, Store

__all__ = ["store_url"]  # the fixture, used by name

ALICE = "tok-alice"


def test_rename_stores_the_title_and_numbers_one_event(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    turns = [[call("get_transaction_status", {"transaction_id": "TXN_1"})], text("Settled.")]
    done = toolwire("run", "Status of TXN_1?", "--model", script(tmp_path, turns), "--store", store)
    assert done.returncode == 0, done.stderr
    session_id = done.stderr.split("session ")[-1].strip()

    async def info(s: Store) -> SessionInfo | None:
        return await s.get_session(session_id)

    before = read_store(store, info)
    assert before is not None
    renamed = toolwire("sessions", "rename", session_id, "  Lisbon \n in May ", "--store", store)
    assert renamed.returncode == 0, renamed.stderr
    assert f"renamed session {session_id}: Lisbon in May" in renamed.stdout
    after = read_store(store, info)
    assert after is not None and after.title == "Lisbon in May"
    assert after.last_seq == before.last_seq + 1  # the event's number: the next run numbers after it
    assert "Lisbon in May" in toolwire("sessions", "list", "--store", store).stdout

    blank = toolwire("sessions", "rename", session_id, "   ", "--store", store)
    assert blank.returncode == 1 and "must not be blank" in blank.stderr
    missing = toolwire("sessions", "rename", "nope", "x", "--store", store)
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr
    assert read_store(store, info) == after  # refused renames write nothing


@pytest.mark.timeout(120)
async def test_a_cli_rename_reaches_the_live_watchers_of_a_server(tmp_path: Path, store_url: str) -> None:
    """On PostgreSQL the CLI writes the event into the replicas' log, so a watcher of a running server gets
    it live, numbered right after the last turn; SQLite has no shared log: the title is read later."""
    async with serve(tmp_path, store_url=store_url) as server, server.client(ALICE) as alice:
        posted = await alice.post("/api/sessions/trip/messages", json={"text": "lookup T7"})
        assert posted.status_code == 202, posted.text
        loaded = await idle(alice, "trip")
        last = loaded["last_seq"]["trip"]
        following = asyncio.create_task(follow(alice, "", "trip", after=loaded["cursor"]))
        renamed = await asyncio.to_thread(
            toolwire, "sessions", "rename", "trip", "Lisbon in May", "--store", store_url, env=command_env()
        )
        assert renamed.returncode == 0, renamed.stderr
        posted = await alice.post("/api/sessions/trip/messages", json={"text": "lookup T8"})
        assert posted.status_code == 202, posted.text
        events = [event for _, event in await asyncio.wait_for(following, 60)]
        rows = (await alice.get("/api/sessions")).json()["sessions"]
        assert {r["session_id"]: r["title"] for r in rows}["trip"] == "Lisbon in May"
        seqs = [e["seq"] for e in events if e["session_id"] == "trip"]
        if store_url.startswith("postgresql"):
            assert events[0]["type"] == "session-renamed" and events[0]["title"] == "Lisbon in May"
            assert seqs == list(range(last + 1, last + 1 + len(seqs)))
        else:  # the turn after it numbers after the rename all the same
            assert seqs[0] == last + 2
