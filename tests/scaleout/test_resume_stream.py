"""The AI SDK stream of a run keeps flowing across replicas: the real ``ai`` client
(``tests/server/node/resume_client.mjs``) posts its message through HAProxy, the replica executing the
tool is SIGKILLed, and ``chat.resumeStream()`` (``GET /api/chat/{id}/stream``, landing on a surviving
replica) replays the turn from the shared event log and follows the taken-over run to its end: the
interrupted result, then the model's final text, in the message the client already held, nothing twice."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tests.scaleout.cluster import cluster
from toolwire.store.history import INTERRUPTED_OUTPUT

NODE_DIR = Path(__file__).parents[1] / "server" / "node"


async def test_resume_stream_follows_the_taken_over_run(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    async with cluster(tmp_path, slow=600, lease=2.0) as c:
        gate = tmp_path / "gate"
        process = await asyncio.create_subprocess_exec(
            node,
            "resume_client.mjs",
            "ai6",
            c.url,
            "gate",
            "job",
            cwd=NODE_DIR,
            env=dict(os.environ, RESUME_GATE=str(gate)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        communicate = asyncio.create_task(process.communicate())
        deadline = time.monotonic() + 60
        # The client shows the call (its input is complete) and a replica's tool has started: the client
        # may see the call before the tool starts (its pending record is written first), so wait for both.
        victim = None
        while not Path(f"{gate}.running").exists() or (victim := c.executing()) is None:
            assert not communicate.done(), (await communicate)[1].decode()[-3000:]
            assert time.monotonic() < deadline, "the client never saw the tool start, or no tool started"
            await asyncio.sleep(0.05)
        assert victim is not None
        c.kill(victim)
        Path(f"{gate}.go").write_text("")
        stdout, stderr = await asyncio.wait_for(communicate, 60)
        assert process.returncode == 0, stderr.decode()[-3000:]
        seen: dict[str, Any] = json.loads(stdout)
        calls = c.model_calls()

    [_, partial] = seen["partial"]
    [user, answer] = seen["messages"]
    assert user["role"] == "user" and answer["role"] == "assistant"
    assert answer["id"] == partial["id"]  # the message the client held, completed (not a second one)
    assert seen["statusAfterResume"] == "ready" and seen["final"] == seen["messages"]
    texts = [p["text"] for p in answer["parts"] if p["type"] == "text"]
    assert texts == ["Working on it, " + "step by step. " * 4, "The work was interrupted; I stopped there."]
    [work] = [p for p in answer["parts"] if p["type"] == "tool-work"]
    assert work["state"] == "output-error" and work["errorText"] == INTERRUPTED_OUTPUT
    # The dead run's step (text, call), then the taken-over run's (the interrupted result, the answer).
    assert [p["type"] for p in answer["parts"]] == ["step-start", "text", "tool-work", "step-start", "text"]
    # The POST's stream broke with its replica; the resumed one completed.
    assert seen["statusBeforeResume"] == "error" and len(seen["errors"]) == 1
    # One resume on a surviving replica streamed the rest; the next found the turn over (204).
    gets = [r for r in seen["requests"] if r["method"] == "GET"]
    assert [(r["url"], r["status"]) for r in gets] == [
        ("/api/chat/job/stream", 200),
        ("/api/chat/job/stream", 204),
    ]
    assert len(calls) == 2 and calls[1] != victim.process.pid
