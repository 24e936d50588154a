"""A rename from outside a run (``PATCH /api/sessions/{id}``, ``toolwire sessions rename``) as ONE
numbered ``session-renamed`` event, like a tool's ``ctx.rename`` inside a run.

A session's events are numbered by the run that emits them, from the stored ``last_seq`` on. A rename
outside a run therefore takes the session's lock as a run would (so its number can never collide with a
run's: while a run holds the session, :class:`~toolwire.errors.SessionBusyError`, a 409 at the server;
rename from a tool inside the run instead), stores the title, raises ``last_seq`` by one and returns the
event with that number, for the caller to publish. The next run numbers after it. The lock is held for
three short writes; its owner names this process, so a lock left by a killed process is reclaimed at once
(elsewhere it expires after :data:`RENAME_LOCK_TTL`).

A server publishes the event through its hub. A rename from no server (the CLI) writes it into the replicas'
shared event log itself (:func:`log_rename`, PostgreSQL), which is where every replica's watchers read it;
a store without one (SQLite) has no other process watching live: servers read the title on their next read.
"""

from __future__ import annotations

import json
import time
from uuid import uuid4

from toolwire.events import SessionRenamed, event_to_dict
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


async def log_rename(store: Store, event: SessionRenamed) -> bool:
    """Write ``event`` (from :func:`rename_session`, outside any server) into the replicas' shared event log,
    on the streams of its session and each ancestor in its conversation's incarnation, as a server's hub
    would: every live watcher on every replica receives it. ``False`` when the store has no shared log."""
    replication = store.replication()
    if replication is None:
        return False
    from toolwire.store.event_log import EventLog, LogRow  # only PostgreSQL stores get here

    streams, parent = [event.session_id], event.parent_session_id
    while parent and parent not in streams:  # the streams a sub-agent session's events also reach
        streams.append(parent)
        info = await store.get_session(parent)
        parent = info.parent_session_id if info is not None else None
    root = await store.get_session(event.user_session_id or event.session_id)
    if root is None:  # deleted meanwhile: nobody watches it any more
        return False
    log = EventLog(replication.engine)
    await log.create()  # learns the channel the replicas listen on
    body = json.dumps(event_to_dict(event), separators=(",", ":"))
    rows = [LogRow(s, event.session_id, root.incarnation, event.seq, body) for s in streams]
    conn, driver = await log.dedicated()
    try:
        await log.insert(driver, rows, time.time())
    finally:
        await conn.close()
    return True
