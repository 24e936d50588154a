"""A run paused on one replica is answered on another: two real ``python -m toolwire serve`` processes on
one PostgreSQL schema (``tests.security.agents:build``: ``refund A1`` makes a Gemini-signed call that waits
for approval).

Replica A runs the turn until it pauses; the decision goes to replica B, over the native API or as the real
AI SDK client's re-submission (``tests/server/node/hitl_client.mjs`` with ``HITL_SECOND_URL``), with A still
up or SIGKILLed first. Both processes append their model requests and tool runs to one file
(``TW_RECORD``): the tool runs exactly once, in B, and B's continuation request is A's first request plus
the call (its ``thoughtSignature`` included) and the approved result, field by field.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.security.agents import SIGNATURE
from tests.security.conftest import Served, idle, serve
from tests.security.conftest import store_url as store_url  # a fixture, used by name
from toolwire.messages import Message, ToolResultPart, messages_from_json

NODE_DIR = Path(__file__).parent / "node"
ALICE = "tok-alice"


def _kill(replica: Served) -> None:
    replica.process.kill()  # SIGKILL: no shutdown, nothing flushed
    replica.process.wait(10)


def _records(path: Path) -> tuple[list[tuple[int, list[Message]]], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    requests = [(e["pid"], messages_from_json(json.dumps(e["model"]))) for e in lines if "model" in e]
    return requests, [e for e in lines if "tool" in e]


def _resumed_on_b(path: Path, a: Served, b: Served) -> None:
    """One refund, run by B; B's continuation request is A's request plus the signed call and its result."""
    requests, runs = _records(path)
    assert [(r["tool"], r["order"], r["pid"]) for r in runs] == [("refund", "A1", b.process.pid)]
    assert [pid for pid, _ in requests] == [a.process.pid, b.process.pid]
    (_, first), (_, second) = requests
    assert second[: len(first)] == first
    assistant, results = second[len(first) :]
    assert assistant.role == "assistant" and assistant.session_id == first[-1].session_id
    (call,) = assistant.tool_calls
    assert call.tool_call_id == "call_1"
    assert call.tool_name == "refund"
    assert call.args == {"order": "A1"}
    assert call.provider_metadata == SIGNATURE
    assert [p.type for p in assistant.parts] == ["tool-call"]
    assert results.role == "tool"
    (result,) = results.parts
    assert isinstance(result, ToolResultPart)
    assert (result.tool_call_id, result.tool_name, result.output, result.is_error) == (
        "call_1",
        "refund",
        "refunded A1",
        False,
    )


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("a_killed", [False, True], ids=["a-up", "a-sigkilled"])
async def test_native_decision_on_the_other_replica(tmp_path: Path, store_url: str, a_killed: bool) -> None:
    env = {"TW_RECORD": str(tmp_path / "record.jsonl")}
    async with (
        serve(tmp_path, store_url=store_url, env=env) as a,
        serve(tmp_path, store_url=store_url, env=env) as b,
    ):
        async with a.client(ALICE) as on_a:
            assert (
                await on_a.post("/api/sessions/s1/messages", json={"text": "refund A1"})
            ).status_code == 202
            paused = await idle(on_a, "s1")
        assert [(w["tool_call_id"], w["kind"]) for w in paused["awaiting"]] == [("call_1", "approval")], (
            paused
        )
        if a_killed:
            _kill(a)
        async with b.client(ALICE) as on_b:
            answer = {"approvals": {"call_1": True}}
            assert (await on_b.post("/api/sessions/s1/messages", json=answer)).status_code == 202
            done = await idle(on_b, "s1")
            replay = await on_b.post("/api/sessions/s1/messages", json=answer)
        assert replay.status_code == 409 and replay.json()["error"]["type"] == "not_awaited"
        assert done["awaiting"] == []
        assert done["messages"][-1]["parts"][-1]["text"] == "answered: refunded A1 signed=True"
        _resumed_on_b(tmp_path / "record.jsonl", a, b)


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("a_killed", [False, True], ids=["a-up", "a-sigkilled"])
async def test_ai_sdk_resubmission_on_the_other_replica(
    tmp_path: Path, store_url: str, a_killed: bool
) -> None:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    gate = tmp_path / "gate"
    env = {"TW_RECORD": str(tmp_path / "record.jsonl")}
    async with (
        serve(tmp_path, store_url=store_url, env=env, tokens=None) as a,
        serve(tmp_path, store_url=store_url, env=env, tokens=None) as b,
    ):
        client_env = dict(os.environ, HITL_PROMPT="refund A1", HITL_SECOND_URL=b.url, HITL_GATE=str(gate))
        process = await asyncio.create_subprocess_exec(
            node,
            "hitl_client.mjs",
            "ai6",
            a.url,
            "approve",
            cwd=NODE_DIR,
            env=client_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2400):  # the first turn, on A, until it pauses
            if gate.with_suffix(".paused").exists() or process.returncode is not None:
                break
            await asyncio.sleep(0.025)
        assert gate.with_suffix(".paused").exists()
        if a_killed:
            _kill(a)
        gate.with_suffix(".go").touch()
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, stderr.decode()[-3000:]
        seen = json.loads(stdout)
        assert seen["error"] is None, seen["error"]

        _, second = seen["requests"]
        assert second["messages"][-1]["role"] == "assistant"
        (asked,) = [p for p in seen["paused"][-1]["parts"] if p["type"] == "tool-refund"]
        assert (asked["state"], asked["callProviderMetadata"]) == ("approval-requested", SIGNATURE)
        assert [m["role"] for m in seen["messages"]] == ["user", "assistant"]
        final = seen["messages"][-1]
        (part,) = [p for p in final["parts"] if p["type"] == "tool-refund"]
        assert (part["state"], part["output"]) == ("output-available", "refunded A1")
        assert "".join(p.get("text", "") for p in final["parts"]) == "answered: refunded A1 signed=True"
        _resumed_on_b(tmp_path / "record.jsonl", a, b)
