"""A run survives the death of its replica: SIGKILL the replica executing a tool, another replica notices
the expired lease, records the call as interrupted and continues the run; the clients' streams on the
other replicas complete with no event lost or repeated. Two replicas racing to take over: one wins."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.wire_checks import adapters, unanswered_calls
from tests.scaleout.cluster import Cluster, Replica, cluster, fresh_schema
from tests.scaleout.streams import Frame, check_stream, follow
from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.agent.config import RunRequest, Takeover
from toolwire.agent.loop import AgentRun
from toolwire.errors import ProviderHTTPError
from toolwire.events import ToolCallComplete
from toolwire.messages import Message
from toolwire.models.scripted import ScriptedModel
from toolwire.server.hub import EventHub
from toolwire.server.runs import RunManager
from toolwire.store.history import INTERRUPTED_OUTPUT
from toolwire.store.records import SessionInfo, StepRecord, ToolCallRecord
from toolwire.store.sql import SQLStore


async def _valid_for_every_provider(store: SQLStore, session_id: str, user_id: str) -> None:
    """The next request built from the stored history, by every adapter, answers every tool call."""
    sent: list[Any] = []
    for provider, factory in adapters(sent).items():
        with pytest.raises(ProviderHTTPError):  # the capturing transport answers 400 once it has the body
            await Agent(factory(), store=store).run("Did it work?", session_id=session_id, user_id=user_id)
        assert unanswered_calls(provider, sent[-1]) == [], provider


async def _long_turn(
    c: Cluster, http: httpx.AsyncClient, session_id: str
) -> tuple[dict[int, asyncio.Task[list[Frame]]], Replica]:
    """A turn whose tool runs for long, followed on every replica's stream; the replica running it."""
    created = await http.post(f"{c.url}/api/sessions", json={"session_id": session_id})
    start = created.json()["cursor"]
    followers = {
        r.port: asyncio.create_task(follow(http, r.url, session_id, after=start)) for r in c.replicas
    }
    posted = await http.post(f"{c.url}/api/sessions/{session_id}/messages", json={"text": "do the long work"})
    assert posted.status_code == 202
    deadline = time.monotonic() + 30
    while (executing := c.executing()) is None:
        assert time.monotonic() < deadline, "the tool never started"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # the tool is running: its start has been streamed
    return followers, executing


async def test_sigkill_mid_tool_the_run_finishes_on_another_replica(tmp_path: Path) -> None:
    async with cluster(tmp_path, slow=600, lease=2.0) as c, httpx.AsyncClient(timeout=60) as http:
        followers, victim = await _long_turn(c, http, "job")
        assert len(c.model_calls()) == 1
        c.kill(victim)
        killed_at = time.monotonic()
        followers.pop(victim.port).cancel()
        streams = await asyncio.wait_for(asyncio.gather(*followers.values()), 30)
        took = time.monotonic() - killed_at

        # Both surviving replicas streamed the same events: the dead run's, then the continuation's,
        # with no seq lost or repeated and cursors increasing.
        assert streams[0] == streams[1]
        frames = streams[0]
        check_stream(frames)
        events = [e for _, e in frames]
        types = [e["type"] for e in events]
        assert types.count("interaction-start") == 2 and types.count("interaction-end") == 1
        assert types.index("tool-call-active") < types.index("interaction-start", 1)
        [complete] = [e for e in events if e["type"] == "tool-call-complete"]
        assert complete["status"] == "interrupted" and complete["output"] == INTERRUPTED_OUTPUT
        assert events[-1]["status"] == "completed"
        assert events[-1]["output"] == "The work was interrupted; I stopped there."
        # Exactly one replica continued the run (the other lost the race), within the bound.
        calls = c.model_calls()
        assert len(calls) == 2 and calls[1] != victim.process.pid
        assert took < 10

        history = (await http.get(f"{c.url}/api/sessions/job/messages")).json()
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert history["running"] is False
        [result] = history["messages"][2]["parts"]
        assert result["is_error"] is True and result["output"] == INTERRUPTED_OUTPUT
        health = [(await http.get(f"{r.url}/api/health")).json() for r in c.replicas if r is not victim]
        assert sorted(h["taken_over"] for h in health) == [0, 1]
        store = await SQLStore.open(c.store_url)
        try:
            await _valid_for_every_provider(store, "job", "local")
        finally:
            await store.close()


async def _expired_run(store: SQLStore, session_id: str) -> None:
    """A session whose run died mid-tool on another host: a pending call and a lease that expired."""
    await store.ensure_session(SessionInfo(id=session_id, user_session_id=session_id, user_id="u1"))
    await store.append_message(session_id, Message.user("look it up"), interaction_id="int_dead")
    call = ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "x"})
    assistant = Message(role="assistant", parts=(call,), session_id=session_id)
    record = ToolCallRecord(
        session_id=session_id,
        tool_call_id="c1",
        tool_name="lookup",
        message_id=assistant.id,
        step=1,
        args={"q": "x"},
        status="pending",
        interaction_id="int_dead",
    )
    now = time.time()
    await store.begin_step(
        StepRecord(
            session_id=session_id,
            interaction_id="int_dead",
            step=1,
            message=assistant,
            tool_calls=(record,),
            finish_reason="tool-calls",
            started_at=now,
            finished_at=now,
        )
    )
    await store.lock_session(session_id, "another-host/1.1/int_dead", ttl=0.3)


def lookup(q: str) -> str:
    """Looks up."""
    return "found"


async def test_two_replicas_racing_to_take_over_one_run_exactly_one_wins() -> None:
    async with fresh_schema("tw_race") as url:
        first, second = await SQLStore.open(url), await SQLStore.open(url)
        try:
            managers: list[RunManager] = []
            models: list[ScriptedModel] = []
            for store in (first, second):
                model = ScriptedModel(lambda _request: [TextPart(text="It was interrupted.")])
                models.append(model)
                managers.append(RunManager(Agent(model, tools=[lookup], store=store), EventHub()))
            sessions = [f"race-{i}" for i in range(6)]
            for session_id in sessions:
                await _expired_run(first, session_id)
            await asyncio.sleep(0.4)
            assert sorted(s for s, *_ in await second.expired_runs()) == sessions
            for session_id in sessions:
                won = await asyncio.gather(*(m.take_over(session_id, "u1") for m in managers))
                assert sorted(won) == [False, True], session_id
            for manager in managers:  # the winners' runs finish
                for _ in range(200):
                    if manager.count() == 0:
                        break
                    await asyncio.sleep(0.02)
                assert manager.count() == 0
            assert len(models[0].requests) + len(models[1].requests) == len(sessions)
            for session_id in sessions:
                history = await first.load_history(session_id)
                assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
                assert history[2].tool_results[0].output == INTERRUPTED_OUTPUT
                assert not await first.run_in_progress(session_id)
            assert await first.expired_runs() == []
            await _valid_for_every_provider(first, sessions[0], "u1")
        finally:
            await first.close()
            await second.close()


async def test_a_takeover_runs_an_idempotent_tool_again_instead_of_interrupting_it() -> None:
    ran: list[str] = []

    def lookup(q: str) -> str:
        """Looks up."""
        ran.append(q)
        return f"found {q}"

    async with fresh_schema("tw_again") as url:
        store = await SQLStore.open(url)
        try:
            await _expired_run(store, "again")
            await asyncio.sleep(0.4)

            def respond(request: Any) -> list[TextPart]:
                return [TextPart(text=f"It says: {request.messages[-1].tool_results[0].output}")]

            model = ScriptedModel(respond)
            agent = Agent(model, tools=[tool(idempotent=True)(lookup)], store=store)
            run: AgentRun[str] = AgentRun(
                agent.run_config(),
                None,
                session_id="again",
                user_id="u1",
                request=RunRequest(takeover=Takeover()),
            )
            events = [event async for event in run]
            assert ran == ["x"]  # run again, once
            completes = [e for e in events if isinstance(e, ToolCallComplete)]
            assert [(e.tool_call_id, e.status, e.output) for e in completes] == [("c1", "ok", "found x")]
            assert run.result is not None and run.result.output == "It says: found x"
            history = await store.load_history("again")
            assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
            assert history[2].tool_results[0].output == "found x"
            [row] = await store.tool_calls("again")
            assert row.status == "ok"
        finally:
            await store.close()


async def test_sigterm_hands_a_running_turn_over_to_another_replica(tmp_path: Path) -> None:
    # A long lease (60 s): the run continues elsewhere quickly only because the draining replica
    # expired its lease on purpose.
    async with cluster(tmp_path, slow=600, lease=60.0) as c, httpx.AsyncClient(timeout=60) as http:
        followers, leaving = await _long_turn(c, http, "drain")
        leaving.process.terminate()  # SIGTERM: drain
        assert leaving.process.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
        stopped_at = time.monotonic()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(followers.pop(leaving.port), 5)  # its stream ended with the process
        streams = await asyncio.wait_for(asyncio.gather(*followers.values()), 60)
        assert time.monotonic() - stopped_at < 30  # well before the 60 s lease would have run out
        assert streams[0] == streams[1]
        frames = streams[0]
        check_stream(frames)
        types = [e["type"] for _, e in frames]
        assert types.count("interaction-start") == 2 and types.count("interaction-end") == 1
        [complete] = [e for _, e in frames if e["type"] == "tool-call-complete"]
        assert complete["status"] == "interrupted"  # handed over, not cancelled
        log = (tmp_path / f"replica-{leaving.port}.log").read_text()
        assert "handed the run of session drain over to another replica" in log
        calls = c.model_calls()
        assert len(calls) == 2 and calls[1] != leaving.process.pid


async def test_cancel_on_a_replica_that_does_not_run_the_turn(tmp_path: Path) -> None:
    async with cluster(tmp_path, slow=600, lease=60.0) as c, httpx.AsyncClient(timeout=60) as http:
        followers, running = await _long_turn(c, http, "stop")
        other = next(r for r in c.replicas if r is not running)
        answer = await http.post(f"{other.url}/api/sessions/stop/cancel")
        assert answer.json() == {"session_id": "stop", "cancelled": True}
        streams = await asyncio.wait_for(asyncio.gather(*followers.values()), 30)
        assert streams[0] == streams[1] == streams[2]
        check_stream(streams[0])
        events = [e for _, e in streams[0]]
        [complete] = [e for e in events if e["type"] == "tool-call-complete"]
        assert complete["status"] == "cancelled"
        assert events[-1]["type"] == "interaction-end" and events[-1]["status"] == "cancelled"
        history = (await http.get(f"{c.url}/api/sessions/stop/messages")).json()
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool"]
        again = await http.post(f"{other.url}/api/sessions/stop/cancel")
        assert again.json()["cancelled"] is False  # nothing runs any more
