"""A replica that got SIGTERM takes no new turn: from the moment it drains, every way a turn comes in
(native messages, a WebSocket's ``user-message``, ``POST /api/chat`` with or without earlier messages,
answers to a paused call) is refused with 503 and ``Retry-After``, nothing stored and no tool run; the
client's retry on the other replica works. The drain lasts while its held run's tool finishes cancelling
(the test releases it), so the turns really arrive during the drain."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

from tests.scaleout.cluster import Replica, cluster

# ``hold`` runs until the test writes ``release``, also once cancelled: the replica's hand-over waits
# for it, so the replica stays draining as long as the test needs. ``approve_me`` waits for a person.
DRAIN_AGENT = '''
import asyncio, os
from pathlib import Path
from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.models.scripted import ScriptedModel

DIR = Path(os.environ["TW_DIR"])

async def _released() -> None:
    while not (DIR / "release").exists():
        await asyncio.sleep(0.05)

async def hold() -> str:
    """Holds until released."""
    (DIR / "holding").write_text(str(os.getpid()))
    try:
        await _released()
    except asyncio.CancelledError:
        await _released()  # the drain lasts until the test has sent its turns
        raise
    return "released"

def approve_me() -> str:
    """Needs a person's approval."""
    (DIR / f"approved-ran-{os.getpid()}").write_text("ran")
    return "approved and done"

def respond(request):
    last = request.messages[-1]
    if last.role == "user":
        name = {"hold": "hold", "ask": "approve_me"}.get(last.text)
        if name is not None:
            return [ToolCallPart(tool_call_id="call_" + str(len(request.messages)), tool_name=name, args={})]
        return [TextPart(text="Hello from " + str(os.getpid()))]
    return [TextPart(text="Done: " + str(last.tool_results[0].output))]

def build():
    return Agent(ScriptedModel(respond), tools=[hold, tool(requires_approval=True)(approve_me)])
'''


async def _poll(check: Any, what: str, timeout: float = 30.0) -> Any:
    """Wait until ``check()`` returns something truthy (a state, never a fixed delay)."""
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)
    return value


async def _awaiting(http: httpx.AsyncClient, base: str, session_id: str) -> list[dict[str, Any]]:
    body = (await http.get(f"{base}/api/sessions/{session_id}/messages")).json()
    return [] if body["running"] else list(body["awaiting"])


async def _answered(http: httpx.AsyncClient, base: str, session_id: str) -> bool:
    body = (await http.get(f"{base}/api/sessions/{session_id}/messages")).json()
    messages = body["messages"]
    return not body["running"] and bool(messages) and messages[-1]["role"] == "assistant"


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["type"] == "draining"


def _chat(chat_id: str, *texts: str) -> dict[str, Any]:
    roles = ["user", "assistant"]
    messages = [
        {"id": f"{chat_id}-{i}", "role": roles[i % 2], "parts": [{"type": "text", "text": text}]}
        for i, text in enumerate(texts)
    ]
    return {"id": chat_id, "messages": messages, "trigger": "submit-message"}


async def test_a_draining_replica_refuses_every_new_turn_and_the_retry_works(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path, replicas=2, lease=60.0, agent_module=DRAIN_AGENT) as c,
        httpx.AsyncClient(timeout=30) as http,
    ):
        leaving, staying = c.replicas
        base = leaving.url
        # Before the drain, on the leaving replica: a paused call, an open WebSocket, a held run.
        assert (
            await http.post(f"{base}/api/sessions/paused/messages", json={"text": "ask"})
        ).status_code == 202
        [waiting] = await _poll(lambda: _awaiting(http, base, "paused"), "the call never waited")
        socket_url = base.replace("http://", "ws://") + "/api/sessions/ws1/ws"
        async with websockets.connect(socket_url) as ws:
            assert (
                await http.post(f"{base}/api/sessions/held/messages", json={"text": "hold"})
            ).status_code == 202
            await _poll(lambda: _exists(tmp_path / "holding"), "the held tool never started")

            leaving.process.send_signal(signal.SIGTERM)
            await _poll(lambda: _draining(http, leaving), "the replica never said it drains")

            _refused(await http.post(f"{base}/api/sessions/new1/messages", json={"text": "hi"}))
            _refused(await http.post(f"{base}/api/sessions/held2/messages", json={"text": "again"}))
            answer = {"approvals": {waiting["tool_call_id"]: True}}
            _refused(await http.post(f"{base}/api/sessions/paused/messages", json=answer))
            _refused(await http.post(f"{base}/api/chat", json=_chat("chat1", "hi")))
            _refused(await http.post(f"{base}/api/chat", json=_chat("chat2", "hi", "Hello", "more")))
            await ws.send(json.dumps({"type": "user-message", "text": "hi"}))
            reply = await _ws_reply(ws)
            assert reply["type"] == "error" and reply["error"]["type"] == "draining", reply
            assert leaving.process.poll() is None  # all of it while the replica was still draining

            (tmp_path / "release").write_text("go")
            assert leaving.process.wait(30) in (0, -signal.SIGTERM)

        # Nothing of the refused turns was stored or run.
        for refused in ("new1", "chat1", "chat2"):
            missing = await http.get(f"{staying.url}/api/sessions/{refused}/messages")
            assert missing.status_code == 404, (refused, missing.text)
        assert (await http.get(f"{staying.url}/api/sessions/ws1/messages")).json()["messages"] == []
        assert list(tmp_path.glob("approved-ran-*")) == []
        assert await _awaiting(http, staying.url, "paused") == [waiting]

        # The clients' retries, on the other replica, work.
        other = staying.url
        assert (
            await http.post(f"{other}/api/sessions/new1/messages", json={"text": "hi"})
        ).status_code == 202
        assert (await http.post(f"{other}/api/sessions/paused/messages", json=answer)).status_code == 202
        chat = await http.post(f"{other}/api/chat", json=_chat("chat2", "hi", "Hello", "more"))
        assert chat.status_code == 200 and '"finish"' in chat.text
        for session_id in ("new1", "paused", "chat2"):
            await _poll(lambda s=session_id: _answered(http, other, s), f"{session_id} was never answered")
        assert [p.name for p in tmp_path.glob("approved-ran-*")] == [f"approved-ran-{staying.process.pid}"]


async def _exists(path: Path) -> bool:
    return path.exists()


async def _draining(http: httpx.AsyncClient, replica: Replica) -> bool:
    health = await http.get(f"{replica.url}/api/health")
    return health.status_code == 503 and health.json()["status"] == "draining"


async def _ws_reply(ws: Any) -> dict[str, Any]:
    """The next command reply on the socket (event frames are skipped)."""
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if "event" not in frame:
            return dict(frame)
