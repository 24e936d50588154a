"""Server faults with real processes and sockets: `toolwire serve` SIGKILLed while streaming to a client,
restarted on the same SQLite file; arbitrary bodies into POST /api/chat never crash the server and never
store a history that breaks the next request."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.test_process_faults import next_turn_on_every_adapter
from tests.reliability.wire_checks import adapters, unanswered_calls
from toolwire import Agent, TextPart, open_store
from toolwire.errors import ProviderHTTPError
from toolwire.models.scripted import ScriptedModel
from toolwire.server import Limits, create_app
from toolwire.store import INTERRUPTED_OUTPUT, MemoryStore, SessionInfo

ROOT = Path(__file__).parents[2]

AGENT_MODULE = '''
import asyncio, os
from pathlib import Path
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel

async def slow_report(topic: str) -> str:
    """Writes a long report."""
    Path(os.environ["TW_MARK"]).write_text("started")
    await asyncio.sleep(float(os.environ["TW_SLOW"]))
    return "report on " + topic

def build():
    if os.environ["TW_PHASE"] == "1":
        turns = [[TextPart(text="Working on it."),
                  ToolCallPart(tool_call_id="call_9", tool_name="slow_report", args={"topic": "q3"},
                               provider_metadata={"google": {"thoughtSignature": "c2ln"}})],
                 [TextPart(text="never reached")]]
    else:
        turns = [[TextPart(text="The report was interrupted; shall I retry?")]]
    return Agent(ScriptedModel(turns), tools=[slow_report])
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, db: Path, port: int, phase: str) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT / 'src'}",
        TW_PHASE=phase,
        TW_SLOW="60",
        TW_MARK=str(tmp_path / "started"),
    )
    command = [sys.executable, "-m", "toolwire.cli", "serve", "agentmod:build", "--port", str(port)]
    command += ["--store", f"sqlite+aiosqlite:///{db}"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def _wait_listening(port: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert child.poll() is None, (child.stderr.read() if child.stderr else b"").decode()[-2000:]
        assert time.monotonic() < deadline, "the server did not start"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            await asyncio.sleep(0.05)


async def test_sigkill_while_streaming_to_a_client_loses_nothing(tmp_path: Path) -> None:
    (tmp_path / "agentmod.py").write_text(AGENT_MODULE)
    db = tmp_path / "server.db"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Write the Q3 report"}]}
    server = _serve(tmp_path, db, port, "1")
    try:
        await _wait_listening(port, server)
        chunks: list[dict[str, Any]] = []

        async def kill_when_the_tool_runs() -> None:
            while not (
                (tmp_path / "started").exists() and any(c["type"] == "tool-input-available" for c in chunks)
            ):
                await asyncio.sleep(0.02)
            server.send_signal(signal.SIGKILL)

        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            killer = asyncio.create_task(kill_when_the_tool_runs())
            with pytest.raises(httpx.RemoteProtocolError):  # the server dies under the client
                async with client.stream(
                    "POST", "/api/chat", json={"id": "k1", "messages": [user]}
                ) as response:
                    assert response.status_code == 200
                    async for line in response.aiter_lines():
                        if line.startswith("data: {"):
                            chunks.append(json.loads(line[6:]))
            await asyncio.wait_for(killer, 5)
        assert server.wait(10) == -signal.SIGKILL
    finally:
        if server.poll() is None:
            server.kill()
    assert [c["type"] for c in chunks][:2] == ["start", "start-step"]

    restarted = _serve(tmp_path, db, port, "2")
    try:
        await _wait_listening(port, restarted)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            history = (await client.get("/api/sessions/k1/messages")).json()
            roles = [m["role"] for m in history["messages"]]
            # The call was stored before the tool ran; after the crash the history served to clients is
            # the repaired one, what the model will see: the call and its "interrupted" result.
            assert roles == ["user", "assistant", "tool"]
            interrupted = history["messages"][2]["parts"][0]
            assert interrupted["is_error"] is True and interrupted["output"] == INTERRUPTED_OUTPUT
            assert history["messages"][1]["parts"][1]["provider_metadata"] == {
                "google": {"thoughtSignature": "c2ln"}
            }
            second = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "What happened?"}]}
            response = await client.post("/api/chat", json={"id": "k1", "messages": [user, second]})
            assert response.status_code == 200
            deltas = [
                json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")
            ]
            text = "".join(c.get("delta", "") for c in deltas if c["type"] == "text-delta")
            assert text == "The report was interrupted; shall I retry?"
    finally:
        restarted.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        assert restarted.wait(20) in (0, -signal.SIGTERM)
    store = await open_store(f"sqlite+aiosqlite:///{db}")
    try:
        assert [r.status for r in await store.tool_calls("k1")] == ["interrupted"]
        loaded = await store.load_history("k1")
        assert loaded[2].tool_results[0].output == INTERRUPTED_OUTPUT
        assert [m.role for m in loaded] == ["user", "assistant", "tool", "user", "assistant"]
    finally:
        await store.close()
    for provider, body in (await next_turn_on_every_adapter(db, "k1", tmp_path)).items():
        assert unanswered_calls(provider, body) == [], provider


# -- fuzzing POST /api/chat -------------------------------------------------------------------------


class _ThreadServer:
    """One real server on loopback for the whole fuzz run (hypothesis drives it synchronously)."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.model = ScriptedModel([[TextPart(text="ok")]], repeat_last=True, record_requests=False)
        limits = Limits(max_body_bytes=200_000, max_messages=50, max_prompt_chars=20_000)
        self.app = create_app(Agent(self.model), store=self.store, limits=limits)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="error", access_log=False))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def _run(self) -> None:
        self.loop.run_until_complete(self.server.serve(sockets=[self.sock]))

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[_ThreadServer]:
    server = _ThreadServer()
    yield server
    server.stop()


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=40)}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "text": st.text(max_size=20)}),
    st.fixed_dictionaries({"type": st.just("step-start")}),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["tool-lookup", "tool-", "dynamic-tool", "tool-x y"]),
            "toolCallId": st.text(max_size=12) | st.integers(),
            "state": st.sampled_from(
                [
                    "input-streaming",
                    "input-available",
                    "output-available",
                    "output-error",
                    "output-denied",
                    "weird",
                ]
            ),
            "input": _json,
            "output": _json,
        },
        optional={"callProviderMetadata": _json, "toolName": st.text(max_size=8), "errorText": _json},
    ),
    st.fixed_dictionaries(
        {"type": st.just("file"), "url": st.text(max_size=20), "mediaType": st.text(max_size=10)}
    ),
    _json,
)
_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "tool", 3]),
        "parts": st.lists(_part, max_size=5) | _json,
    },
    optional={"id": st.text(max_size=10)},
)
_body = (
    st.fixed_dictionaries(
        {
            "id": st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True) | st.text(max_size=8),
            "messages": st.lists(_message, max_size=6) | _json,
        },
        optional={"trigger": st.sampled_from(["submit-message", "regenerate-message", "nope"])},
    )
    | _json
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_body)
def test_arbitrary_chat_bodies_never_crash_or_store_bad_history(
    fuzz_server: _ThreadServer, body: Any
) -> None:
    response = httpx.post(f"{fuzz_server.url}/api/chat", json=body, timeout=30)
    assert response.status_code in (200, 400, 404, 409, 413, 415), (response.status_code, response.text[:500])
    if response.status_code != 200:
        error = response.json()["error"]
        assert error["type"] != "internal" and error["message"]
        return
    assert response.text.rstrip().endswith("data: [DONE]")
    session_id = body["id"]
    history = fuzz_server.call(fuzz_server.store.load_history(session_id))
    for provider, factory in adapters(sent := []).items():
        with pytest.raises(ProviderHTTPError):  # the capturing transport answers 400 once it has the body
            fuzz_server.call(_next_turn(factory(), history, session_id))
        assert unanswered_calls(provider, sent[-1]) == [], (provider, body)


async def _next_turn(model: Any, history: list[Any], session_id: str) -> None:
    store = MemoryStore()
    await store.ensure_session(SessionInfo(id=session_id))
    for message in history:
        await store.append_message(session_id, message, interaction_id="copy")
    await Agent(model, store=store).run("next?", session_id=session_id)


@pytest.mark.parametrize(
    "text", ["\ud83d half an emoji", "nul \x00 byte", "bidi \u202e override", "ok" * 5000]
)
def test_hostile_strings_in_a_chat_are_stored_safely(fuzz_server: _ThreadServer, text: str) -> None:
    session_id = f"hostile{abs(hash(text)) % 10**8}"
    assistant = {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": text},
            {
                "type": "tool-lookup",
                "toolCallId": text[:20],
                "state": "output-available",
                "input": {"q": text},
                "output": text,
                "callProviderMetadata": {"google": {"thoughtSignature": text[:50]}},
            },
        ],
    }
    user = {"role": "user", "parts": [{"type": "text", "text": text}]}
    body = json.dumps({"id": session_id, "messages": [user, assistant, user]})  # lone surrogates stay escaped
    response = httpx.post(
        f"{fuzz_server.url}/api/chat", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    history = fuzz_server.call(fuzz_server.store.load_history(session_id))
    assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    for provider, factory in adapters(sent := []).items():
        with pytest.raises(ProviderHTTPError):
            fuzz_server.call(_next_turn(factory(), history, session_id))
        json.dumps(sent[-1], ensure_ascii=False).encode(
            "utf-8"
        )  # encodable: no lone surrogate reached the wire
        assert unanswered_calls(provider, sent[-1]) == [], provider
