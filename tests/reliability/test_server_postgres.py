"""Two server replicas on one PostgreSQL: a conversation continues on either, the same session is never
run twice at once, and a PostgreSQL restart while the servers run costs nothing."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.reliability.test_store_faults import POSTGRES_ENV, restart_postgres
from tests.server.conftest import live_server, parse_sse
from toolwire import Agent, RunContext, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store.sql import SQLStore

SIGNATURE = {"google": {"thoughtSignature": "cmVwbGljYQ=="}}


def lookup(txn: str) -> str:
    """Look up."""
    return f"{txn}: settled"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def _text(body: str) -> str:
    return "".join(f["data"].get("delta", "") for f in parse_sse(body) if isinstance(f["data"], dict))


@pytest.fixture
async def two_pools() -> AsyncIterator[tuple[SQLStore, SQLStore]]:
    """Two stores (two connection pools, as two replicas have) on one fresh PostgreSQL schema."""
    url = os.environ.get(POSTGRES_ENV)
    if not url or not shutil.which("pg_ctlcluster"):
        if os.environ.get("CI"):
            pytest.fail(
                f"{POSTGRES_ENV} and pg_ctlcluster are needed in CI (scripts/postgres.sh sets them up)"
            )
        pytest.skip("no local PostgreSQL cluster (runs in CI)")
    schema = f"tw_replicas_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(make_url(url).set(drivername="postgresql+asyncpg"), pool_pre_ping=True)
    async with admin.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    args = {"server_settings": {"search_path": schema}}
    first = await SQLStore.open(url, connect_args=args)
    second = await SQLStore.open(url, connect_args=args)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()


async def test_replicas_share_one_postgresql(two_pools: tuple[SQLStore, SQLStore]) -> None:
    # Each replica has its own agent, model, store connection pool and event hub; only the database is shared.
    pg_store, second_store = two_pools
    started = asyncio.Event()
    release = asyncio.Event()

    async def hold(ctx: RunContext[Any]) -> str:
        """Holds the session."""
        started.set()
        await release.wait()
        return "held"

    model_a = ScriptedModel(
        [
            [
                ToolCallPart(
                    tool_call_id="c1", tool_name="lookup", args={"txn": "T1"}, provider_metadata=SIGNATURE
                )
            ],
            [TextPart(text="T1 is settled.")],
            [ToolCallPart(tool_call_id="h1", tool_name="hold", args={})],
            [TextPart(text="released")],
        ]
    )
    model_b = ScriptedModel(
        [[TextPart(text="Still settled, per the earlier lookup.")], [TextPart(text="after")]]
    )
    app_a = create_app(Agent(model_a, tools=[lookup, hold]), store=pg_store)
    app_b = create_app(Agent(model_b, tools=[lookup, hold]), store=second_store)
    async with live_server(app_a) as a, live_server(app_b) as b, a.client() as ca, b.client() as cb:
        first = await ca.post("/api/chat", json={"id": "rep", "messages": [_user("T1?")]})
        assert _text(first.text) == "T1 is settled."
        second = await cb.post("/api/chat", json={"id": "rep", "messages": [_user("T1?"), _user("And now?")]})
        assert _text(second.text) == "Still settled, per the earlier lookup."
        sent = model_b.requests[-1].messages
        assert [c.provider_metadata for m in sent for c in m.tool_calls] == [SIGNATURE]
        assert [r.output for m in sent for r in m.tool_results] == ["T1: settled"]

        # A run holds the session on replica A; replica B refuses the same session with 409.
        assert (await ca.post("/api/sessions/rep/messages", json={"text": "hold it"})).status_code == 202
        await asyncio.wait_for(started.wait(), 10)
        busy = await cb.post("/api/sessions/rep/messages", json={"text": "me too"})
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "session_busy"

        restart_postgres()  # while A's tool runs and both pools hold connections
        release.set()
        for _ in range(500):
            if not app_a.state.toolwire.runs.running("rep"):
                break
            await asyncio.sleep(0.02)
        history = (await cb.get("/api/sessions/rep/messages")).json()
        roles = [m["role"] for m in history["messages"]]
        assert roles == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        after = await cb.post("/api/sessions/rep/messages", json={"text": "one more"})
        assert after.status_code == 202
        for _ in range(500):
            if not app_b.state.toolwire.runs.running("rep"):
                break
            await asyncio.sleep(0.02)
