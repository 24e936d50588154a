"""A rename from outside a run (``PATCH /api/sessions/{id}``, ``toolwire sessions rename``) as ONE
numbered ``session-renamed`` event, like a tool's ``ctx.rename`` inside a run.

A session's events are numbered by the run that emits them, from the stored ``last_seq`` on. A rename
outside a run therefore takes the session's lock as a run would (so its number can never collide with a
run's: while a run holds the session, :class:`~toolwire.errors.SessionBusyError`, a 409 at the server;
rename from a tool inside the run instead), stores the title, raises ``last_seq`` by one and returns the
event with that number, for the caller to publish. The next run numbers after it. The lock is held for
three short writes; its owner names this process, so a lock left by a killed process is reclaimed at once
(elsewhere it expires after :data:`RENAME_LOCK_TTL`).
"""

from __future__ import annotations

from uuid import uuid4

from toolwire.events import SessionRenamed
from toolwire.store._locks import lock_owner
from toolwire.store.base import Store

RENAME_LOCK_TTL = 30.0
"""Seconds the rename's lock lasts if its process dies between taking and releasing it."""


async def rename_session(store: Store, session_id: str, title: str) -> SessionRenamed | None:
    """Store ``title`` (already normalised: :func:`toolwire._text.session_title`) and number its event;
    ``None`` when the session does not exist. Raises :class:`~toolwire.errors.SessionBusyError` while a
    run holds the session."""
    if await store.get_session(session_id) is None:
        return None
    owner = lock_owner(f"rename_{uuid4().hex[:16]}")
    await store.lock_session(session_id, owner, ttl=RENAME_LOCK_TTL)
    try:
        info = await store.get_session(session_id)  # read under the lock: no run numbers meanwhile
        if info is None or not await store.set_title(session_id, title):
            return None
        seq = info.last_seq + 1
        await store.raise_last_seq(session_id, seq)
    finally:
        await store.unlock_session(session_id, owner)
    return SessionRenamed(
        session_id=info.id,
        parent_session_id=info.parent_session_id,
        user_session_id=info.user_session_id or info.id,
        seq=seq,
        title=title,
    )
