"""Storage behind the one hook: SQLite (embedded default) and PostgreSQL share one schema."""

from __future__ import annotations

from toolwire.store.base import (
    INTERRUPTED_OUTPUT,
    MemoryStore,
    SessionInfo,
    StepRecord,
    Store,
    ToolCallRecord,
    repair_history,
)

DEFAULT_URL = "sqlite+aiosqlite:///./toolwire.db"


async def open_store(url: str = DEFAULT_URL) -> Store:
    """Open a store: ``memory://``, ``sqlite+aiosqlite:///path`` or ``postgresql+asyncpg://...``.

    The schema is created if missing.
    """
    if url in ("memory", "memory://"):
        return MemoryStore()
    from toolwire.store.sql import SQLStore

    return await SQLStore.open(url)


__all__ = [
    "DEFAULT_URL",
    "INTERRUPTED_OUTPUT",
    "MemoryStore",
    "SessionInfo",
    "StepRecord",
    "Store",
    "ToolCallRecord",
    "open_store",
    "repair_history",
]
