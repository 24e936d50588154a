"""The AI SDK's resumable stream (``GET /api/chat/{id}/stream``) with the real client (``ai`` from npm,
``tests/server/node/resume_client.mjs``) on one server with a SQLite store: the client stops reading its
POST response while a tool runs (the server's run goes on), ``chat.resumeStream()`` replays the running
turn from its start and follows it live, and the message ends as an uninterrupted run's. 204 when the
session runs nothing; another user's session is 404, like a missing one."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store.sql import SQLStore

from .conftest import live_server

NODE_DIR = Path(__file__).parent / "node"
VERSIONS: dict[str, str | None] = {"ai6": None, "ai6strict": "6.0.230", "ai5": "5.0.200"}


@tool
async def crunch(rows: int) -> str:
    """Crunches rows, slowly."""
    await asyncio.sleep(1.5)
    return f"{rows} rows crunched"


def _agent(store: SQLStore) -> Agent[Any]:
    script: list[list[TextPart | ToolCallPart]] = [
        [
            TextPart(text="Crunching them now."),
            ToolCallPart(tool_call_id="call_1", tool_name="crunch", args={"rows": 7}),
        ],
        [TextPart(text="All 7 rows are crunched.")],
    ]
    return Agent(ScriptedModel(script, chunk_size=4), tools=[crunch], store=store)


async def _drive(tmp_path: Path, scenario: str, name: str, package: str = "ai6") -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path}/{name}.db")
    version = VERSIONS[package]
    async with live_server(create_app(_agent(store))) as server:
        process = await asyncio.create_subprocess_exec(
            node,
            "resume_client.mjs",
            package,
            server.url,
            scenario,
            "chat-1",
            *([version] if version else []),
            cwd=NODE_DIR,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-3000:]
    seen: dict[str, Any] = json.loads(stdout)
    assert seen["errors"] == [], seen["errors"]
    return seen


def _without_ids(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "parts": message["parts"]}


async def test_resume_stream_after_the_client_stopped_reading(tmp_path: Path) -> None:
    plain = await _drive(tmp_path, "plain", "plain")
    seen = await _drive(tmp_path, "stop", "stop")

    # The client held a partial answer (the tool still running) when it stopped reading.
    [_, partial] = seen["partial"]
    assert [p["type"] for p in partial["parts"]][-1] == "tool-crunch"
    assert seen["statusBeforeResume"] == "ready" and seen["statusAfterResume"] == "ready"
    # Resumed: the same message (same id: replaced, not added), ending as the uninterrupted run's.
    [_, answer] = seen["messages"]
    assert answer["id"] == partial["id"]
    assert [_without_ids(m) for m in seen["messages"]] == [_without_ids(m) for m in plain["final"]]
    [tool_part] = [p for p in answer["parts"] if p["type"] == "tool-crunch"]
    assert tool_part["state"] == "output-available" and tool_part["output"] == "7 rows crunched"
    assert answer["parts"][-1]["text"] == "All 7 rows are crunched."
    # The last resumeStream() found no running turn: 204, nothing changed.
    gets = [r for r in seen["requests"] if r["method"] == "GET"]
    assert [r["url"] for r in gets] == ["/api/chat/chat-1/stream"] * 2
    assert [r["status"] for r in gets] == [200, 204]
    assert seen["final"] == seen["messages"]


@pytest.mark.parametrize("package", ["ai6", "ai6strict", "ai5"])
async def test_resume_stream_after_a_reload(tmp_path: Path, package: str) -> None:
    """A reloaded page resumes with its stored messages (the partial answer is not among them): the turn
    comes back whole, as one new message, on every client version."""
    plain = await _drive(tmp_path, "plain", "plain", package)
    seen = await _drive(tmp_path, "reload", "reload", package)
    assert seen["partial"][-1]["role"] == "assistant"
    assert [_without_ids(m) for m in seen["messages"]] == [_without_ids(m) for m in plain["final"]]
    assert seen["messages"][-1]["id"] == seen["partial"][-1]["id"]
    assert [r["status"] for r in seen["requests"] if r["method"] == "GET"] == [200, 204]


async def test_resume_stream_refusals(tmp_path: Path) -> None:
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path}/s.db")
    app = create_app(_agent(store), tokens={"tok-ann": "ann", "tok-bob": "bob"})
    async with live_server(app) as server, server.client("tok-ann") as ann, server.client("tok-bob") as bob:
        body = {
            "id": "ann-chat",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        }
        async with ann.stream("POST", "/api/chat", json=body) as posted:
            assert posted.status_code == 200
            # While the turn runs: its owner re-attaches; another user and a missing chat are 404 alike.
            async with ann.stream("GET", "/api/chat/ann-chat/stream") as resumed:
                assert resumed.status_code == 200
                assert resumed.headers["x-vercel-ai-ui-message-stream"] == "v1"
                frames = [line async for line in resumed.aiter_lines() if line.startswith("data: ")]
            foreign = await bob.get("/api/chat/ann-chat/stream")
            missing = await bob.get("/api/chat/nobody/stream")
            assert foreign.status_code == missing.status_code == 404
            assert (
                foreign.json()["error"] == missing.json()["error"]
                or foreign.json().keys() == missing.json().keys()
            )
            [_ async for _ in posted.aiter_bytes()]
        chunks = [json.loads(f[6:]) for f in frames if f != "data: [DONE]"]
        assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
        assert frames[-1] == "data: [DONE]"
        assert (await ann.get("/api/chat/ann-chat/stream")).status_code == 204  # idle now
        assert (await bob.get("/api/chat/ann-chat/stream")).status_code == 404
        assert (
            await httpx.AsyncClient(base_url=server.url).get("/api/chat/ann-chat/stream")
        ).status_code == 401
