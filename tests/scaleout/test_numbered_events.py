"""A step's last events are numbered and counted in the stored ``last_seq`` by the step's write, and
published after it. A SIGTERM hand-over that stops the run in between must still publish them (once the
write committed): the next replica numbers after them, every stream stays contiguous, and the finished
call is seen complete (``ok``), not announced ``interrupted`` by the takeover. The write is held by a
hook in the test's agent module until the replica is seen draining (state, not time)."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from tests.scaleout.cluster import cluster
from tests.scaleout.streams import check_stream, follow

# The first write of a step's results waits until the test writes ``release``.
HELD_WRITE_AGENT = '''
import asyncio, os
from pathlib import Path
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore

DIR = Path(os.environ["TW_DIR"])
_finish_step = SQLStore.finish_step

async def finish_step(self, session_id, **fields):
    if fields.get("tool_message") is not None and not list(DIR.glob("writing-*")):
        (DIR / f"writing-{os.getpid()}").write_text(str(fields.get("last_seq")))
        while not (DIR / "release").exists():
            await asyncio.sleep(0.02)
    await _finish_step(self, session_id, **fields)

SQLStore.finish_step = finish_step

def work() -> str:
    """Does the work."""
    return "worked"

def respond(request):
    last = request.messages[-1]
    if last.role == "user":
        return [ToolCallPart(tool_call_id="call_1", tool_name="work", args={})]
    return [TextPart(text="Done: " + str(last.tool_results[0].output))]

def build():
    return Agent(ScriptedModel(respond), tools=[work])
'''


async def _poll(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)
    return value


async def test_a_hand_over_publishes_what_the_interrupted_write_numbered(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path, replicas=2, lease=6.0, agent_module=HELD_WRITE_AGENT) as c,
        httpx.AsyncClient(timeout=60) as http,
    ):
        leaving, staying = c.replicas
        created = await http.post(f"{staying.url}/api/sessions", json={"session_id": "numbered"})
        follower = asyncio.create_task(follow(http, staying.url, "numbered", after=created.json()["cursor"]))
        posted = await http.post(f"{leaving.url}/api/sessions/numbered/messages", json={"text": "go"})
        assert posted.status_code == 202

        async def writing() -> bool:
            return any(tmp_path.glob(f"writing-{leaving.process.pid}"))

        async def handing_over() -> bool:
            # Draining and the run stopped (its task ended) while its write is still held.
            try:
                health = (await http.get(f"{leaving.url}/api/health")).json()
            except httpx.ConnectError:
                return True  # already gone: it did not wait for the write
            return health["status"] == "draining" and health["runs"] == 0

        await _poll(writing, "the step's write was never reached")
        leaving.process.send_signal(signal.SIGTERM)  # the hand-over stops the run inside that write
        await _poll(handing_over, "the replica never stopped the run")
        (tmp_path / "release").write_text("go")
        assert leaving.process.wait(30) in (0, -signal.SIGTERM)

        frames = await asyncio.wait_for(follower, 60)
        check_stream(frames)  # no seq skipped: the takeover numbered after what was published
        events = [e for _, e in frames]
        completes = [e for e in events if e["type"] == "tool-call-complete"]
        assert [(e["tool_call_id"], e["status"], e["output"]) for e in completes] == [
            ("call_1", "ok", "worked")
        ]
        assert events[-1]["type"] == "interaction-end" and events[-1]["output"] == "Done: worked"
        log = (tmp_path / f"replica-{leaving.port}.log").read_text()
        assert "handed the run of session numbered over to another replica" in log


# The step's results are written, then the process stops before it publishes what the write counted (the
# test SIGKILLs it there): the write committed, its events never reached the log.
KILLED_AFTER_WRITE_AGENT = HELD_WRITE_AGENT.replace(
    """        while not (DIR / "release").exists():
            await asyncio.sleep(0.02)
    await _finish_step(self, session_id, **fields)""",
    """        await _finish_step(self, session_id, **fields)
        (DIR / f"written-{os.getpid()}").write_text("")
        while True:
            await asyncio.sleep(1)
    await _finish_step(self, session_id, **fields)""",
)


async def test_a_takeover_announces_the_completions_a_killed_run_counted_but_never_published(
    tmp_path: Path,
) -> None:
    """SIGKILL between a step's write and the publication of its events: the call finished and is stored
    ``ok``, but no client saw it complete. The takeover announces it (status ``ok``, its output) before the
    model continues, so a client's call does not stay running forever; no seq is published twice (the dead
    run's counted seqs stay a gap: a client that read the history already counts them)."""
    async with (
        cluster(tmp_path, replicas=2, lease=2.0, agent_module=KILLED_AFTER_WRITE_AGENT) as c,
        httpx.AsyncClient(timeout=60) as http,
    ):
        dying, staying = c.replicas
        created = await http.post(f"{staying.url}/api/sessions", json={"session_id": "killed"})
        follower = asyncio.create_task(follow(http, staying.url, "killed", after=created.json()["cursor"]))
        posted = await http.post(f"{dying.url}/api/sessions/killed/messages", json={"text": "go"})
        assert posted.status_code == 202

        async def written() -> bool:
            return any(tmp_path.glob(f"written-{dying.process.pid}"))

        await _poll(written, "the step's write never committed")
        dying.process.kill()
        dying.process.wait(10)

        frames = await asyncio.wait_for(follower, 60)
        events = [e for _, e in frames]
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(set(seqs)), seqs  # increasing, none twice
        # The one jump is to the takeover's start, which says where the never-published seqs begin: a
        # client tells it from a loss.
        jumps = [(a, b) for a, b in itertools.pairwise(events) if b["seq"] != a["seq"] + 1]
        assert [(b["type"], b["skipped_from"]) for _, b in jumps] == [
            ("interaction-start", jumps[0][0]["seq"] + 1)
        ]
        completes = [e for e in events if e["type"] == "tool-call-complete"]
        assert [(e["tool_call_id"], e["status"], e["output"]) for e in completes] == [
            ("call_1", "ok", "worked")
        ]
        assert completes[0]["message_id"]  # named by its assistant message, as the store keys it
        assert events[-1]["type"] == "interaction-end" and events[-1]["output"] == "Done: worked"
