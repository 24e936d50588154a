"""PostgreSQL restarted between runs and while a tool runs: the agent keeps working, nothing is lost."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.store.sql import SQLStore

POSTGRES_ENV = "TOOLWIRE_TEST_POSTGRES_URL"


def restart_postgres() -> None:
    """Restart the cluster the tests' database URL names (by its port): a machine may run several, and
    restarting another one (the first listed) both misses the fault and breaks whoever uses that one."""
    port = str(make_url(os.environ[POSTGRES_ENV]).port or 5432)
    clusters = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True)
    version, name = next(
        line.split()[:2] for line in clusters.stdout.splitlines() if line.split()[2:3] == [port]
    )
    subprocess.run(["pg_ctlcluster", version, name, "restart"], check=True, capture_output=True, timeout=60)


@pytest.fixture
async def pg_store() -> AsyncIterator[SQLStore]:
    url = os.environ.get(POSTGRES_ENV)
    if not url or not shutil.which("pg_ctlcluster"):
        if os.environ.get("CI"):
            pytest.fail(
                f"{POSTGRES_ENV} and pg_ctlcluster are needed in CI (scripts/postgres.sh sets them up)"
            )
        pytest.skip("no local PostgreSQL cluster to restart (runs in CI)")
    schema = f"tw_restart_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(make_url(url).set(drivername="postgresql+asyncpg"), pool_pre_ping=True)
    async with admin.begin() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    store = await SQLStore.open(url, connect_args={"server_settings": {"search_path": schema}})
    try:
        yield store
    finally:
        await store.close()
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()


async def test_postgresql_restarts_between_runs_and_during_a_tool_run(pg_store: SQLStore) -> None:
    agent = Agent(ScriptedModel([[TextPart(text="first")]]), store=pg_store)
    assert (await agent.run("one", session_id="pg")).output == "first"

    restart_postgres()  # every pooled connection is now dead
    agent = Agent(ScriptedModel([[TextPart(text="second")]]), store=pg_store)
    assert (await agent.run("two", session_id="pg")).output == "second"

    def restart_db() -> str:
        """Restart the database while this tool runs."""
        restart_postgres()
        return "restarted"

    model = ScriptedModel(
        [[ToolCallPart(tool_call_id="r1", tool_name="restart_db", args={})], [TextPart(text="third")]]
    )
    result = await Agent(model, tools=[restart_db], store=pg_store).run("three", session_id="pg")
    assert result.output == "third"
    rows = await pg_store.tool_calls("pg")
    assert [(r.tool_call_id, r.status, r.output) for r in rows] == [("r1", "ok", "restarted")]
    roles = [m.role for m in await pg_store.load_history("pg")]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "tool", "assistant"]
