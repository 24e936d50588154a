"""A replica that is only paused (SIGSTOP: a GC pause, a stalled VM) past its run's lease, not dead: another
replica takes the run over and finishes the turn; when the first resumes, its lease is fenced. It runs no tool,
calls no model, writes no row and publishes no event of that turn again, and never re-claims the session.
The same split without any stop: PostgreSQL unreachable for longer than the lease while two healthy replicas
run (the one running the turn stops it when its lease runs out unrenewed)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.reliability.pg_outage import cuttable_link
from tests.scaleout.cluster import Cluster, Replica, cluster, postgres_url
from toolwire.store.history import INTERRUPTED_OUTPUT


async def _history(http: httpx.AsyncClient, replica: Replica, session_id: str) -> dict[str, Any]:
    answer = await http.get(f"{replica.url}/api/sessions/{session_id}/messages")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def _until_finished(
    http: httpx.AsyncClient, replica: Replica, session_id: str, roles: list[str]
) -> dict[str, Any]:
    """The history once no run holds the session and it has exactly ``roles``."""
    deadline = time.monotonic() + 40
    while True:
        history = await _history(http, replica, session_id)
        if not history["running"] and [m["role"] for m in history["messages"]] == roles:
            return history
        assert time.monotonic() < deadline, history
        await asyncio.sleep(0.1)


async def _rows(c: Cluster, query: str) -> list[Any]:
    url = make_url(c.store_url.split("&lease_ttl=")[0])
    schema = url.query["schema"]
    engine = create_async_engine(url.difference_update_query(["schema"]))
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text(f'SET search_path TO "{schema}"'))
            return list((await conn.execute(sa.text(query))).all())
    finally:
        await engine.dispose()


async def test_a_replica_stopped_past_its_lease_never_finishes_the_turn_again(tmp_path: Path) -> None:
    async with cluster(tmp_path, replicas=2, slow=2.5, lease=2.0) as c, httpx.AsyncClient(timeout=60) as http:
        await http.post(f"{c.url}/api/sessions", json={"session_id": "job"})
        posted = await http.post(f"{c.url}/api/sessions/job/messages", json={"text": "do the work"})
        assert posted.status_code == 202
        deadline = time.monotonic() + 30
        while (zombie := c.executing()) is None:
            assert time.monotonic() < deadline, "the tool never started"
            await asyncio.sleep(0.02)
        [survivor] = [r for r in c.replicas if r is not zombie]
        zombie.process.send_signal(signal.SIGSTOP)
        try:
            # The survivor notices the expired lease, records the call interrupted and finishes the turn.
            await _until_finished(http, survivor, "job", ["user", "assistant", "tool", "assistant"])
        finally:
            zombie.process.send_signal(signal.SIGCONT)
        assert c.model_calls() == [zombie.process.pid, survivor.process.pid]

        # Resumed, the zombie finds its lease lost (its tool's sleep ran out while it was stopped, so it
        # would finish the turn now); without fencing it ran the model again instead.
        log = tmp_path / f"replica-{zombie.port}.log"
        deadline = time.monotonic() + 20
        while "lost its lease" not in log.read_text():
            assert len(c.model_calls()) == 2, "the stopped replica called the model again"
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            await asyncio.sleep(0.05)
        [(owner, expires)] = await _rows(c, "SELECT lock_owner, lock_expires_at FROM toolwire_sessions")
        assert owner is None and expires is None, "the zombie's renewal claimed the free session again"

        # A next turn on the zombie itself: its event writer keeps order, so once this turn's end is in the
        # log, whatever the zombie had queued for the first turn has been written or refused.
        posted = await http.post(f"{zombie.url}/api/sessions/job/messages", json={"text": "again"})
        assert posted.status_code == 202, posted.text
        history = await _until_finished(
            http,
            zombie,
            "job",
            ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"],
        )

        # The first turn's tool ran once (the second turn's once), the model was called once per step.
        assert c.work_calls() == [zombie.process.pid, zombie.process.pid]
        assert len(c.model_calls()) == 4
        first_result = history["messages"][2]["parts"][0]
        assert first_result["is_error"] is True and first_result["output"] == INTERRUPTED_OUTPUT
        assert history["messages"][3]["parts"][0]["text"] == "The work was interrupted; I stopped there."
        statuses = await _rows(c, "SELECT status FROM toolwire_tool_calls ORDER BY id")
        assert [s for (s,) in statuses] == ["interrupted", "ok"]  # the survivor's row was not overwritten
        twice = await _rows(
            c,
            "SELECT seq, count(*) FROM toolwire_events WHERE stream = 'job' GROUP BY seq HAVING count(*) > 1",
        )
        assert twice == [], "seqs carried by more than one event"
        seqs = [
            s for (s,) in await _rows(c, "SELECT seq FROM toolwire_events WHERE stream = 'job' ORDER BY id")
        ]
        assert seqs == sorted(seqs)
        ends = await _rows(
            c,
            "SELECT body FROM toolwire_events WHERE stream = 'job' AND body LIKE '%\"interaction-end\"%' ORDER BY id",
        )
        assert len(ends) == 2  # one per turn: the zombie announced no end of the first turn


async def test_a_database_outage_longer_than_the_lease_splits_no_brain(tmp_path: Path) -> None:
    async with (
        cuttable_link(postgres_url()) as link,
        cluster(tmp_path, replicas=2, slow=4.0, lease=2.0, link=link) as c,
        httpx.AsyncClient(timeout=60) as http,
    ):
        await http.post(f"{c.url}/api/sessions", json={"session_id": "job"})
        posted = await http.post(f"{c.url}/api/sessions/job/messages", json={"text": "do the work"})
        assert posted.status_code == 202
        deadline = time.monotonic() + 30
        while (running := c.executing()) is None:
            assert time.monotonic() < deadline, "the tool never started"
            await asyncio.sleep(0.02)
        link.cut()  # both replicas lose the database while the tool runs
        try:
            # The replica running the turn cannot renew its lease: once the lease ran out (2 s), another
            # replica may take the run over as soon as the database is back, so it stops the run itself.
            log = tmp_path / f"replica-{running.port}.log"
            deadline = time.monotonic() + 20
            while "lost its lease" not in log.read_text():
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                await asyncio.sleep(0.05)
        finally:
            link.restore()
        history = await _until_finished(http, running, "job", ["user", "assistant", "tool", "assistant"])
        # A next turn on the same replica: its event writer keeps order (see above).
        posted = await http.post(f"{running.url}/api/sessions/job/messages", json={"text": "again"})
        assert posted.status_code == 202, posted.text
        history = await _until_finished(
            http,
            running,
            "job",
            ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"],
        )
        assert c.work_calls() == [running.process.pid, running.process.pid]  # once per turn
        assert len(c.model_calls()) == 4
        first_result = history["messages"][2]["parts"][0]
        assert first_result["is_error"] is True and first_result["output"] == INTERRUPTED_OUTPUT
        statuses = await _rows(c, "SELECT status FROM toolwire_tool_calls ORDER BY id")
        assert [s for (s,) in statuses] == ["interrupted", "ok"]
        twice = await _rows(
            c,
            "SELECT seq, count(*) FROM toolwire_events WHERE stream = 'job' GROUP BY seq HAVING count(*) > 1",
        )
        assert twice == [], "seqs carried by more than one event"
