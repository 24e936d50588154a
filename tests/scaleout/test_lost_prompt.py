"""A run killed after it opened and before its prompt was stored: the takeover must not tell the client
the turn completed with the previous turn's answer. It ends the turn as a typed failure (``error`` event
``TurnLostError``, retryable; ``interaction-end`` status ``error``) so the client sends it again. The
replica is SIGKILLed while its run is held right before the prompt write (a hook in the test's agent
module, waited on through a file: state, not time)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from tests.scaleout.cluster import cluster, fresh_schema
from tests.scaleout.streams import check_stream, follow
from toolwire import Agent, TextPart
from toolwire.agent.config import RunRequest, Takeover
from toolwire.agent.loop import AgentRun
from toolwire.errors import TurnLostError
from toolwire.events import ErrorEvent
from toolwire.messages import Message
from toolwire.models.scripted import ScriptedModel
from toolwire.store.records import SessionInfo, StepRecord
from toolwire.store.sql import SQLStore

# The store's prompt write blocks forever for the prompt "lose me", after saying so in a file.
LOSING_AGENT = """
import asyncio, os
from pathlib import Path
from toolwire import Agent, TextPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore

DIR = Path(os.environ["TW_DIR"])
_append = SQLStore.append_message

async def append_message(self, session_id, message, *, interaction_id, **fields):
    if message.role == "user" and message.text == "lose me":
        (DIR / f"storing-{os.getpid()}").write_text(interaction_id)
        await asyncio.Event().wait()  # held here until the test SIGKILLs this replica
    await _append(self, session_id, message, interaction_id=interaction_id, **fields)

SQLStore.append_message = append_message

def respond(request):
    return [TextPart(text="Answer to: " + request.messages[-1].text)]

def build():
    return Agent(ScriptedModel(respond))
"""


async def _poll(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)
    return value


async def _answered(http: httpx.AsyncClient, base: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        body = (await http.get(f"{base}/api/sessions/lost/messages")).json()
        if not body["running"] and body["messages"] and body["messages"][-1]["role"] == "assistant":
            return
        assert time.monotonic() < deadline, body
        await asyncio.sleep(0.05)


async def test_a_run_killed_before_its_prompt_was_stored_ends_as_a_typed_failure(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path, replicas=2, lease=1.0, agent_module=LOSING_AGENT) as c,
        httpx.AsyncClient(timeout=60) as http,
    ):
        dying, surviving = c.replicas
        first = await http.post(f"{dying.url}/api/sessions/lost/messages", json={"text": "first"})
        assert first.status_code == 202
        follower = asyncio.create_task(
            follow(http, surviving.url, "lost", after=first.json()["cursor"], ends=2)
        )

        await _answered(http, dying.url)
        second = await http.post(f"{dying.url}/api/sessions/lost/messages", json={"text": "lose me"})
        assert second.status_code == 202  # the run holds the session; its prompt is not stored yet
        held = await _poll(lambda: list(tmp_path.glob("storing-*")), "the prompt write was never reached")
        assert held[0].name == f"storing-{dying.process.pid}"
        dying.process.send_signal(signal.SIGKILL)
        assert dying.process.wait(10) == -signal.SIGKILL

        frames = await asyncio.wait_for(follower, 60)
        check_stream(frames)
        events = [e for _, e in frames]
        ends = [e for e in events if e["type"] == "interaction-end"]
        assert ends[0]["status"] == "completed" and ends[0]["output"] == "Answer to: first"
        taken = ends[1]
        # Not "completed" with the previous turn's answer: a typed failure the client can act on.
        assert taken["status"] == "error" and taken["output"] != "Answer to: first", taken
        [error] = [e for e in events if e["type"] == "error"]
        assert error["error_type"] == "TurnLostError" and error["retryable"] is True, error
        assert error["interaction_id"] == taken["interaction_id"]

        history = (await http.get(f"{surviving.url}/api/sessions/lost/messages")).json()
        assert not history["running"]
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]  # the lost prompt is gone

        # The client sends it again: answered on the surviving replica.
        again = await http.post(f"{surviving.url}/api/sessions/lost/messages", json={"text": "lose me too"})
        assert again.status_code == 202
        retried = await follow(http, surviving.url, "lost", after=again.json()["cursor"])
        assert retried[-1][1]["status"] == "completed"
        assert retried[-1][1]["output"] == "Answer to: lose me too"


async def _answered_turn(store: SQLStore, session_id: str, interaction_id: str, text: str) -> None:
    """A turn stored whole (prompt and answer) by ``interaction_id``."""
    await store.ensure_session(SessionInfo(id=session_id, user_session_id=session_id, user_id="u1"))
    await store.append_message(session_id, Message.user(text), interaction_id=interaction_id)
    answer = Message(role="assistant", parts=(TextPart(text=f"Answer to: {text}"),), session_id=session_id)
    now = time.time()
    step = StepRecord(
        session_id=session_id,
        interaction_id=interaction_id,
        step=1,
        message=answer,
        started_at=now,
        finished_at=now,
    )
    await store.begin_step(step)


async def test_only_a_turn_that_stored_nothing_is_judged_lost() -> None:
    """The same history (the last turn answered) taken over after three different dead runs: the run
    that answered it (died before releasing: completed with its answer), a takeover (it continued a turn
    that had stored its prompt: completed), and a new turn that stored nothing (lost)."""
    dead_runs = {
        "answered": ("another-host/1.1/int_answered", "completed"),
        "dead-takeover": ("another-host/1.1/takeover~int_later", "completed"),
        "lost": ("another-host/1.1/int_never_stored", "error"),
    }
    async with fresh_schema("tw_lost") as url:
        store = await SQLStore.open(url)
        try:
            for session_id, (owner, _) in dead_runs.items():
                await _answered_turn(store, session_id, "int_answered", "first")
                await store.lock_session(session_id, owner, ttl=0.3)
            await asyncio.sleep(0.4)  # the leases expire (a lease is a time by definition)
            agent = Agent(ScriptedModel([]), store=store)  # never called: nothing to continue
            for session_id, (owner, status) in dead_runs.items():
                run: AgentRun[str] = AgentRun(
                    agent.run_config(),
                    None,
                    session_id=session_id,
                    user_id="u1",
                    request=RunRequest(takeover=Takeover(dead_run_owner=owner)),
                )
                events = []
                try:
                    async for event in run:
                        events.append(event)
                except TurnLostError:
                    assert status == "error", session_id  # the run raises it after its end events
                assert run.result is not None and run.result.status == status, session_id
                if status == "completed":
                    assert run.result.output == "Answer to: first"
                    assert not any(isinstance(e, ErrorEvent) for e in events)
                else:
                    [error] = [e for e in events if isinstance(e, ErrorEvent)]
                    assert error.error_type == "TurnLostError" and error.retryable
                assert not await store.run_in_progress(session_id)
        finally:
            await store.close()
