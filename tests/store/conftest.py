"""Store tests run on SQLite and, when ``TOOLWIRE_TEST_POSTGRES_URL`` is set, on PostgreSQL.

Without the variable the PostgreSQL cases are deselected on a developer machine, and FAIL in CI
(``CI`` set), so a CI run that lost its database cannot pass silently. ``scripts/postgres.sh`` starts
a local server and prints the variable.

Every test gets a fresh database: a new SQLite file, or a new PostgreSQL schema (dropped afterwards)
selected through ``search_path``, so tests never see each other's rows and schema creation is real.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from toolwire.store.sql import SQLStore

POSTGRES_ENV = "TOOLWIRE_TEST_POSTGRES_URL"
_HERE = Path(__file__).parent


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where a test's store lives: what ``SQLStore.open`` needs, also passed to worker processes."""

    engine: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    async def open(self) -> SQLStore:
        return await SQLStore.open(self.url, **self.options)

    def spec(self) -> dict[str, Any]:
        return {"url": self.url, "options": self.options}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(POSTGRES_ENV) or os.environ.get("CI"):
        return  # run them (in CI without the variable they fail in the fixture, loudly)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        ours = item.path.is_relative_to(_HERE)
        is_postgres = callspec is not None and callspec.params.get("target") == "postgres"
        (dropped if ours and is_postgres else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    if request.param == "sqlite":
        yield Target(engine="sqlite", url=f"sqlite+aiosqlite:///{tmp_path / 'store.db'}")
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.fail(
            f"{POSTGRES_ENV} is not set but CI is: the PostgreSQL store tests must run in CI. "
            f'Start a server with `export "$(bash scripts/postgres.sh)"` before pytest.'
        )
    schema = f"tw_test_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(make_url(url).set(drivername="postgresql+asyncpg"))
    try:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        yield Target(
            engine="postgres",
            url=url,
            options={"connect_args": {"server_settings": {"search_path": schema}}},
        )
    finally:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await admin.dispose()


@pytest.fixture
async def store(target: Target) -> AsyncIterator[SQLStore]:
    opened = await target.open()
    try:
        yield opened
    finally:
        await opened.close()
