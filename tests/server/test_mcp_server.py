"""toolwire as an MCP server, driven by the official ``mcp`` client: ``toolwire mcp`` as a real stdio
subprocess, and ``/mcp`` of a live server over streamable HTTP. The agent is one tool (answer + session id,
a second call continuing the session, progress notifications); ``--expose-tools``; a call waiting for
approval asked through elicitation (approve, deny) or, without it, returned with how to answer; another
user's session refused; bad input an MCP error, not a crash."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.cli.helpers import REPO, command_env
from tests.server.mcp_agents import build
from toolwire.server import Limits, create_app
from toolwire.store import MemoryStore, open_store

from .conftest import LiveServer, live_server

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
Elicit = Any  # the client's elicitation callback


@asynccontextmanager
async def stdio_session(db: Path, *extra: str, elicit: Elicit = None) -> AsyncIterator[ClientSession]:
    """``toolwire mcp`` started by the official client, as an MCP host starts it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolwire", "mcp", "tests.server.mcp_agents:build", "--store", f"sqlite:///{db}", *extra],
        cwd=str(REPO),
        env=command_env(),
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as s,
    ):
        await s.initialize()
        yield s


@asynccontextmanager
async def http_session(
    server: LiveServer, token: str | None, *, elicit: Elicit = None
) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


def _answering(action: str, content: dict[str, Any] | None = None) -> tuple[Elicit, list[str]]:
    """An elicitation callback that answers every form alike, and the questions it was asked."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return elicit, asked


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_stdio_answers_with_the_session_continues_it_and_reports_tool_progress(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with stdio_session(db) as session:
        listed = await session.list_tools()
        first = await session.call_tool("support", {"prompt": "progress 3"}, progress_callback=on_progress)
        session_id = first.structured_content["session_id"] if first.structured_content else ""
        second = await session.call_tool("support", {"prompt": "lookup T4", "session_id": session_id})
    assert [t.name for t in listed.tools] == ["support"]  # the agent alone without --expose-tools
    assert first.is_error is False and _text(first) == "answered: reported 3"
    assert first.structured_content == {
        "session_id": session_id,
        "status": "completed",
        "answer": "answered: reported 3",
        "awaiting": [],
    }
    assert progress == ['running reporter({"count": 3})', "step 1", "step 2", "step 3", "reporter ok"]
    assert second.structured_content is not None and second.structured_content["session_id"] == session_id
    assert "settled" in _text(second)
    store = await open_store(f"sqlite:///{db}")
    try:
        info = await store.get_session(session_id)
        stored = [m.role for m in await store.raw_messages(session_id)]
    finally:
        await store.close()
    assert info is not None and info.user_id == "local"  # the user of `toolwire run` and a dev-mode server
    assert stored == ["user", "assistant", "tool", "assistant"] * 2


async def test_stdio_without_elicitation_returns_the_waiting_call_and_takes_approvals(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    async with stdio_session(db) as session:
        paused = await session.call_tool("support", {"prompt": "refund A9"})
        assert paused.structured_content is not None
        session_id = paused.structured_content["session_id"]
        answered = await session.call_tool(
            "support", {"session_id": session_id, "approvals": {"call_r": True}}
        )
    assert paused.structured_content["status"] == "paused"
    assert paused.structured_content["awaiting"] == [
        {
            "tool_call_id": "call_r",
            "tool_name": "refund",
            "args": {"order": "A9"},
            "kind": "approval",
            "session_id": session_id,
        }
    ]
    assert f'call support again with {{"session_id": "{session_id}", "approvals": {{"call_r": true}}}}' in (
        _text(paused)
    )
    assert answered.structured_content is not None
    assert answered.structured_content["status"] == "completed"
    assert _text(answered) == "answered: refunded A9"


async def test_stdio_elicits_the_approval_and_resumes_the_run(tmp_path: Path) -> None:
    elicit, asked = _answering("accept", {"approve": True})
    async with stdio_session(tmp_path / "mcp.db", elicit=elicit) as session:
        result = await session.call_tool("support", {"prompt": "refund A9"})
    assert asked == ['Allow refund({"order": "A9"})?']
    assert result.structured_content is not None and result.structured_content["status"] == "completed"
    assert _text(result) == "answered: refunded A9"


async def test_stdio_expose_tools_lists_and_runs_the_agents_own_tools(tmp_path: Path) -> None:
    elicit, asked = _answering("decline")
    async with stdio_session(tmp_path / "mcp.db", "--expose-tools", elicit=elicit) as session:
        listed = await session.list_tools()
        looked_up = await session.call_tool("lookup", {"txn": "T7"})
        refused = await session.call_tool("refund", {"order": "A1"})  # needs approval: declined
        bad_args = await session.call_tool("lookup", {"txn": 5})
    tools = {t.name: t for t in listed.tools}
    assert sorted(tools) == ["lookup", "refund", "reporter", "support"]
    assert tools["lookup"].input_schema["required"] == ["txn"]
    assert looked_up.is_error is False and _text(looked_up) == '{"txn": "T7", "status": "settled"}'
    assert asked == ['Allow refund({"order": "A1"})?']
    assert refused.is_error is True and "not approved" in _text(refused)
    assert bad_args.is_error is True and "invalid arguments for lookup" in _text(bad_args)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "give a 'prompt'"),
        ({"prompt": 3}, "'prompt' must be a non-empty string"),
        ({"prompt": "hi", "colour": "red"}, "unknown argument(s): colour"),
        ({"prompt": "hi", "session_id": "no spaces allowed"}, "'session_id' is 1-200 characters"),
        ({"approvals": {"call_r": True}}, "answers need the 'session_id'"),
        ({"session_id": "s1", "approvals": {"call_r": "yes"}}, "must be true, false or"),
        ({"session_id": "never-made", "approvals": {"call_r": True}}, "no session 'never-made'"),
    ],
)
async def test_bad_input_is_an_mcp_error_and_the_server_keeps_serving(
    arguments: dict[str, Any], message: str
) -> None:
    app = create_app(build(), store=MemoryStore())
    async with live_server(app) as server, http_session(server, None) as session:
        with pytest.raises(MCPError) as refused:
            await session.call_tool("support", arguments)
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("nope", {})
        still = await session.call_tool("support", {"prompt": "hello"})
    assert refused.value.code == types.INVALID_PARAMS and message in refused.value.message
    assert unknown.value.code == types.INVALID_PARAMS and "unknown tool 'nope'" in unknown.value.message
    assert _text(still) == "Hi! How can I help?"


async def test_http_elicitation_approve_and_deny_resume_the_run_and_dismissing_leaves_it_waiting() -> None:
    app = create_app(build(), store=MemoryStore(), tokens=TOKENS)
    approve, approve_asked = _answering("accept", {"approve": True})
    deny, deny_asked = _answering("accept", {"approve": False, "reason": "too big"})
    dismiss, dismiss_asked = _answering("cancel")
    async with live_server(app) as server:
        async with http_session(server, "tok-alice", elicit=approve) as session:
            approved = await session.call_tool("support", {"prompt": "refund A9"})
        async with http_session(server, "tok-alice", elicit=deny) as session:
            denied = await session.call_tool("support", {"prompt": "refund B2"})
        async with http_session(server, "tok-alice", elicit=dismiss) as session:
            dismissed = await session.call_tool("support", {"prompt": "refund C3"})
        store = await app.state.toolwire.store()
        assert denied.structured_content is not None
        calls = await store.tool_calls(denied.structured_content["session_id"])
    assert approve_asked == ['Allow refund({"order": "A9"})?']
    assert deny_asked == ['Allow refund({"order": "B2"})?']
    assert _text(approved) == "answered: refunded A9"
    assert _text(denied) == "answered: Tool call denied by the user: too big"
    assert [(c.tool_name, c.status) for c in calls] == [("refund", "denied")]
    assert dismiss_asked == ['Allow refund({"order": "C3"})?']
    assert dismissed.structured_content is not None and dismissed.structured_content["status"] == "paused"
    assert [a["tool_call_id"] for a in dismissed.structured_content["awaiting"]] == ["call_r"]
    assert "call support again with" in _text(dismissed)


async def test_http_sessions_belong_to_the_callers_user() -> None:
    app = create_app(build(), store=MemoryStore(), tokens=TOKENS)
    async with live_server(app) as server:
        async with http_session(server, "tok-alice") as alice:
            own = await alice.call_tool("support", {"prompt": "secret alice-ledger-7731"})
            assert own.structured_content is not None
            alice_session = own.structured_content["session_id"]
            paused = await alice.call_tool("support", {"prompt": "refund A9"})
            assert paused.structured_content is not None
        async with http_session(server, "tok-bob") as bob:
            with pytest.raises(MCPError) as continued:
                await bob.call_tool("support", {"prompt": "hello", "session_id": alice_session})
            with pytest.raises(MCPError) as answered:
                await bob.call_tool(
                    "support",
                    {"session_id": paused.structured_content["session_id"], "approvals": {"call_r": True}},
                )
        async with server.client() as anonymous:
            unauthenticated = await anonymous.post(
                "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"accept": "*/*"}
            )
        store = await app.state.toolwire.store()
        info = await store.get_session(alice_session)
        alice_calls = await store.tool_calls(paused.structured_content["session_id"])
    for refused in (continued.value, answered.value):
        assert refused.code == types.INVALID_PARAMS and "no session" in refused.message
        assert "7731" not in refused.message
    assert info is not None and info.user_id == "alice"
    assert [c.status for c in alice_calls] == ["awaiting_approval"]  # bob's answer reached nothing
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"]["type"] == "unauthorized"


async def test_an_mcp_session_id_is_bound_to_the_user_that_opened_it() -> None:
    app = create_app(build(), store=MemoryStore(), tokens=TOKENS)
    async with live_server(app) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        opened = await http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            headers={"authorization": "Bearer tok-alice", "accept": "application/json, text/event-stream"},
        )
        mcp_session = opened.headers["mcp-session-id"]
        hijack = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={
                "authorization": "Bearer tok-bob",
                "accept": "application/json, text/event-stream",
                "mcp-session-id": mcp_session,
                "mcp-protocol-version": "2025-06-18",
            },
        )
    assert opened.status_code == 200
    assert hijack.status_code == 404


async def test_mcp_keeps_the_servers_body_limit_and_origin_check() -> None:
    app = create_app(build(), store=MemoryStore(), limits=Limits(max_body_bytes=10_000))
    accept = {"accept": "application/json, text/event-stream"}
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 20_000}}
    async with live_server(app) as server, server.client() as http:
        too_big = await http.post("/mcp", json=big, headers=accept)
        # Development mode: a page of another origin must not drive the local agent (DNS rebinding, CSRF).
        foreign = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={**accept, "origin": "https://evil.example"},
        )
    assert too_big.status_code == 413
    assert foreign.status_code == 403
