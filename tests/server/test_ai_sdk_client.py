"""The real Vercel AI SDK client (``ai`` from npm: latest 6.x, strict 6.0.230, strict 5.0.200) against the server."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.fault_server import Behaviour, FaultServer, finish_frames, text_frames, tool_frames
from toolwire import Agent, RunContext, TextPart, ToolCallPart, tool
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore

from .conftest import live_server

NODE_DIR = Path(__file__).parent / "node"
SIGNATURE = {"google": {"thoughtSignature": "Q2lJQmNoZWNrc3VtLXRvb2x3aXJl"}}


def get_transaction_status(txn_id: str) -> dict[str, str]:
    """Status of a transaction."""
    return {"txn_id": txn_id, "status": "settled", "authorized_by": "Dana Ruiz"}


def _script() -> list[list[Any]]:
    return [
        [
            TextPart(text="Let me check."),
            ToolCallPart(
                tool_call_id="call_7",
                tool_name="get_transaction_status",
                args={"txn_id": "TXN_1"},
                provider_metadata=SIGNATURE,
                title="Transaction status",
            ),
        ],
        [TextPart(text="TXN_1 is settled.")],
        [TextPart(text="Dana Ruiz authorized it.")],
    ]


@pytest.mark.parametrize(
    ("package", "version"), [("ai6", None), ("ai6strict", "6.0.230"), ("ai5", "5.0.200")]
)
async def test_ai_sdk_client_round_trip(package: str, version: str | None) -> None:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    assert (NODE_DIR / "node_modules" / package).is_dir(), (
        "run npm ci in tests/server/node (scripts/setup_node.sh)"
    )
    model = ScriptedModel(_script())
    store = MemoryStore()
    app = create_app(Agent(model, tools=[get_transaction_status]), store=store)
    async with live_server(app) as server:
        args = [node, "ai_client.mjs", package, server.url, *([version] if version else [])]
        process = await asyncio.create_subprocess_exec(
            *args, cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-3000:]
    seen = json.loads(stdout)

    first = seen["first"]
    types = [c["type"] for c in first["chunks"]]
    assert types[0] == "start" and types[-1] == "finish"
    assert [s["state"] for s in first["states"]] == ["input-streaming", "input-available", "output-available"]
    tool_part = next(p for p in first["message"]["parts"] if p["type"] == "tool-get_transaction_status")
    assert tool_part["callProviderMetadata"] == SIGNATURE
    assert tool_part["output"]["authorized_by"] == "Dana Ruiz"
    if package == "ai5":
        assert "title" not in tool_part
    else:
        assert tool_part["title"] == "Transaction status"

    # convertToModelMessages keeps the signature as the call's provider options
    calls = [
        part
        for message in seen["modelMessages"]
        if message["role"] == "assistant"
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") == "tool-call"
    ]
    assert len(calls) == 1 and calls[0]["providerOptions"] == SIGNATURE

    second_text = "".join(
        p.get("text", "") for p in seen["second"]["message"]["parts"] if p["type"] == "text"
    )
    assert second_text == "Dana Ruiz authorized it."
    assert seen["modelMessages2"][-1]["role"] == "assistant"

    # what the provider would have been sent on the second turn: the call with its signature, and its result
    sent = model.requests[-1].messages
    sent_calls = [c for m in sent for c in m.tool_calls]
    assert [c.provider_metadata for c in sent_calls] == [SIGNATURE]
    assert [r.tool_call_id for m in sent for r in m.tool_results] == ["call_7"]


@pytest.mark.parametrize(
    ("package", "version"), [("ai6", None), ("ai6strict", "6.0.230"), ("ai5", "5.0.200")]
)
async def test_a_failover_reaches_the_ai_sdk_client_as_a_data_part(package: str, version: str | None) -> None:
    """The primary's stream is cut inside a tool call's arguments (real socket); the scripted fallback
    answers. Every chunk passes the package's own schema; the dropped call ends as an error part, the
    fallback's call runs, and a ``data-failover`` part stays in the message."""
    node = shutil.which("node")
    assert node is not None and (NODE_DIR / "node_modules" / package).is_dir(), "scripts/setup_node.sh"
    cut = Behaviour(
        frames=text_frames("Checking.")
        + tool_frames("call_cut", "get_transaction_status", '{"txn_id": "TXN_1"}'),
        cut_after=6,  # text streamed, the call started, its arguments cut
    )
    good = Behaviour(frames=text_frames("TXN_1 is settled.") + finish_frames("stop"))
    async with FaultServer([cut, good]) as faulty:
        primary = OpenAIChatModel("fault-model", api_key="k", base_url=faulty.base_url)
        model = FallbackModel(primary, ScriptedModel(_script()), breaker=None)
        app = create_app(Agent(model, tools=[get_transaction_status], retries=0), store=MemoryStore())
        async with live_server(app) as server:
            args = [node, "ai_client.mjs", package, server.url, *([version] if version else [])]
            process = await asyncio.create_subprocess_exec(
                *args, cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-3000:]
    first = json.loads(stdout)["first"]
    parts = first["message"]["parts"]
    failover = [p for p in parts if p["type"] == "data-failover"]
    assert len(failover) == 1 and failover[0]["data"]["from"] == "openai:fault-model"
    assert failover[0]["data"]["to"] == "scripted:scripted" and failover[0]["data"]["droppedOutput"]
    calls = {p["toolCallId"]: p for p in parts if p["type"] == "tool-get_transaction_status"}
    assert calls["call_cut"]["state"] == "output-error" and "dropped" in calls["call_cut"]["errorText"]
    assert calls["call_7"]["state"] == "output-available"
    assert calls["call_7"]["output"]["authorized_by"] == "Dana Ruiz"


@tool(title="Transaction status")
def titled_status(txn_id: str) -> dict[str, str]:
    """Status of a transaction."""
    return get_transaction_status(txn_id)


@pytest.mark.parametrize(("package", "version"), [("ai6", None), ("ai6strict", "6.0.230")])
async def test_the_tools_own_title_reaches_the_ai_sdk_client_part(package: str, version: str | None) -> None:
    """``@tool(title=...)``: the provider names no title, the client's tool part and the stored call carry
    the tool's (the AI SDK sets ``part.title`` from tool-input-start/-available)."""
    node = shutil.which("node")
    assert node is not None and (NODE_DIR / "node_modules" / package).is_dir(), "scripts/setup_node.sh"
    call = ToolCallPart(tool_call_id="call_7", tool_name="titled_status", args={"txn_id": "TXN_1"})
    model = ScriptedModel([[call], [TextPart(text="Settled.")], [TextPart(text="Dana Ruiz.")]])
    store = MemoryStore()
    app = create_app(Agent(model, tools=[titled_status]), store=store)
    async with live_server(app) as server:
        args = [node, "ai_client.mjs", package, server.url, *([version] if version else [])]
        process = await asyncio.create_subprocess_exec(
            *args, cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
        sessions = await store.list_sessions()
    assert process.returncode == 0, stderr.decode()[-3000:]
    first = json.loads(stdout)["first"]
    starts = [c for c in first["chunks"] if c["type"] in ("tool-input-start", "tool-input-available")]
    assert [c.get("title") for c in starts] == ["Transaction status", "Transaction status"]
    tool_part = next(p for p in first["message"]["parts"] if p["type"] == "tool-titled_status")
    assert tool_part["title"] == "Transaction status"
    stored = [c for s in sessions for m in await store.load_history(s.id) for c in m.tool_calls]
    assert [c.title for c in stored] == ["Transaction status"]


@tool
async def name_chat(ctx: RunContext[None], title: str) -> str:
    """Name this conversation."""
    ctx.system_message("The index is 2 days old.", level="warning")
    ctx.media("image/png", data=b"\x89PNG")
    return await ctx.rename(title)


@pytest.mark.parametrize(
    ("package", "version"), [("ai6", None), ("ai6strict", "6.0.230"), ("ai5", "5.0.200")]
)
async def test_a_tools_rename_system_message_and_media_reach_the_ai_sdk_client(
    package: str, version: str | None
) -> None:
    """A tool renames its session and speaks: the rename is stored, then a transient
    ``data-session-renamed`` chunk; the system message and the media stay in the message as ``data-*``
    parts. Every chunk passes the package's own schema."""
    node = shutil.which("node")
    assert node is not None and (NODE_DIR / "node_modules" / package).is_dir(), "scripts/setup_node.sh"
    call = ToolCallPart(tool_call_id="call_1", tool_name="name_chat", args={"title": "  Q3   report "})
    model = ScriptedModel([[call], [TextPart(text="Named.")], [TextPart(text="Yes.")]])
    store = MemoryStore()
    app = create_app(Agent(model, tools=[name_chat]), store=store)
    async with live_server(app) as server:
        args = [node, "ai_client.mjs", package, server.url, *([version] if version else [])]
        process = await asyncio.create_subprocess_exec(
            *args, cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
        sessions = await store.list_sessions()
    assert process.returncode == 0, stderr.decode()[-3000:]
    first = json.loads(stdout)["first"]
    [renamed] = [c for c in first["chunks"] if c["type"] == "data-session-renamed"]
    assert renamed["data"] == {"sessionId": sessions[0].id, "title": "Q3 report"} and renamed["transient"]
    assert [s.title for s in sessions] == ["Q3 report"]
    parts = {p["type"]: p for p in first["message"]["parts"]}
    assert "data-session-renamed" not in parts  # transient: onData only
    assert parts["data-system-message"]["data"] == {
        "level": "warning",
        "text": "The index is 2 days old.",
        "toolCallId": "call_1",
    }
    media = parts["data-media"]["data"]
    assert (media["contentType"], media["data"], media["toolCallId"]) == ("image/png", "iVBORw==", "call_1")
    assert parts["tool-name_chat"]["output"] == "Q3 report"
