"""Storage behind the one hook: in memory, SQLite (embedded default) and PostgreSQL, one schema."""

from __future__ import annotations

from toolwire.store.base import DEFAULT_URL, SessionReader, Store
from toolwire.store.history import INTERRUPTED_OUTPUT, UNANSWERED_OUTPUT, repair_history
from toolwire.store.memory import MemoryStore
from toolwire.store.records import SessionInfo, StepRecord, StoredStep, ToolCallRecord


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
    "UNANSWERED_OUTPUT",
    "MemoryStore",
    "SessionInfo",
    "SessionReader",
    "StepRecord",
    "Store",
    "StoredStep",
    "ToolCallRecord",
    "open_store",
    "repair_history",
]
