"""The shared event log on PostgreSQL: what lets any replica serve any session's live stream.

Every published event is one row per stream that carries it (its session's and each ancestor's), in
``toolwire_events``. The row's ``BIGSERIAL`` id is the stream cursor (the SSE ``id``): it is the same
on every replica, survives restarts, and orders a stream because one process at a time writes a
stream (the holder of the session's run lease) and it writes in order. A batch of events is ONE
statement (a multi-row ``INSERT ... SELECT FROM unnest(...)``) that also sends ``NOTIFY`` with the
names of the streams it touched; ``NOTIFY`` is only a wake-up (its payload is a stream name, far under
PostgreSQL's 8000-byte limit), readers then read the table by cursor, so a lost wake-up delays, never
loses, an event.

The channel is named after the schema (``current_schema()``), so deployments sharing one database in
different schemas (``?schema=``) do not wake each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

# Any constant works; it only has to be the same in every process that creates the table.
_DDL_LOCK_KEY = 0x74775F6576656E74  # "tw_event"

_DDL = (
    """CREATE TABLE IF NOT EXISTS toolwire_events (
        id BIGSERIAL PRIMARY KEY,
        stream VARCHAR(255) NOT NULL,
        session_id VARCHAR(255) NOT NULL,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS ix_toolwire_events_stream ON toolwire_events (stream, id)",
    "CREATE INDEX IF NOT EXISTS ix_toolwire_events_session_seq ON toolwire_events (session_id, seq)",
    "CREATE INDEX IF NOT EXISTS ix_toolwire_events_created ON toolwire_events (created_at)",
)

# One round trip per batch: the rows in input order (ids follow it), and one NOTIFY per stream touched
# (delivered at commit). The NOTIFY rows come back with id -1, the rows refused by their fence as -n (n: the
# row's place, from 1), with id 0. Fencing: a row of a run (fence: the run's top-level session, $7, and its lease
# epoch, $8) is written only while a takeover has not fenced that epoch; the session row is read FOR SHARE, so
# a takeover fencing it at that moment is waited for and seen.
_INSERT = """
WITH src AS (
    SELECT t.*, (t.fs IS NULL OR coalesce(t.fe > (
        SELECT f.fenced_epoch FROM toolwire_sessions AS f WHERE f.id = t.fs FOR SHARE
    ), false)) AS ok
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $7::text[], $8::bigint[])
        WITH ORDINALITY AS t(s, e, q, b, fs, fe, n)
), ins AS (
    INSERT INTO toolwire_events (stream, session_id, seq, body, created_at)
    SELECT src.s, src.e, src.q, src.b, $5 FROM src WHERE src.ok
    ORDER BY src.n
    RETURNING id, stream
), note AS (
    SELECT pg_notify($6, d.stream) FROM (SELECT DISTINCT stream FROM ins) AS d
)
SELECT id FROM ins UNION ALL SELECT -1 FROM note UNION ALL SELECT -1 - src.n FROM src WHERE NOT src.ok
"""
_FETCH = "SELECT id, body FROM toolwire_events WHERE stream = $1 AND id > $2 ORDER BY id LIMIT $3"
_MAX_ID = "SELECT coalesce(max(id), 0) FROM toolwire_events WHERE stream = $1"
_AFTER_SEQ = (
    "SELECT id, session_id, seq FROM toolwire_events WHERE stream = $1 AND seq > $2 ORDER BY id LIMIT $3"
)
# A session's own turn markers (see ``toolwire.server._turn``), newest first, among its last $2 rows.
_MARKERS = """
SELECT id, kind, status FROM (
    SELECT id, body::jsonb ->> 'type' AS kind, body::jsonb ->> 'status' AS status
    FROM (SELECT id, body FROM toolwire_events WHERE stream = $1 AND session_id = $1
          ORDER BY id DESC LIMIT $2) AS tail
) AS typed
WHERE kind IN ('interaction-start', 'interaction-end', 'user-turn-start')
ORDER BY id DESC
"""
_MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM toolwire_events WHERE session_id = $1"
_PRUNE = "DELETE FROM toolwire_events WHERE created_at < $1"
_NOTIFY = "SELECT pg_notify($1, $2)"


@dataclass(frozen=True, slots=True)
class LogRow:
    """One event row to write: ``stream`` carries the event of ``session_id`` numbered ``seq``."""

    stream: str
    session_id: str
    seq: int
    body: str
    fence: tuple[str, int] | None = None
    """The run that published it: its top-level session and lease epoch. The row is refused once a takeover
    fenced that epoch (the run was a zombie: its seqs belong to the run that took it over)."""


class EventLog:
    """Statements on ``toolwire_events`` through raw asyncpg connections of the store's engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.channel = ""
        self.control = ""
        """The channel of commands between replicas (``cancel:<session id>``)."""

    async def create(self) -> None:
        """Create the table if missing (safe when replicas start at once) and learn the channel name."""
        async with self.engine.begin() as conn:
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_DDL_LOCK_KEY)))
            for statement in _DDL:
                await conn.execute(sa.text(statement))
            schema = (await conn.execute(sa.text("SELECT current_schema()"))).scalar_one()
        self.channel = f"toolwire_events:{schema}"
        self.control = f"toolwire_control:{schema}"

    async def dedicated(self) -> tuple[AsyncConnection, Any]:
        """A connection held for good (the writer, the listener) and its asyncpg connection."""
        conn = await self.engine.connect()
        raw = await conn.get_raw_connection()
        return conn, raw.driver_connection

    async def insert(self, driver: Any, rows: Sequence[LogRow], now: float) -> list[int | None]:
        """Write ``rows`` and wake every listener; the ids in ``rows`` order (``None``: refused by its fence)."""
        result = await driver.fetch(
            _INSERT,
            [r.stream for r in rows],
            [r.session_id for r in rows],
            [r.seq for r in rows],
            [r.body for r in rows],
            now,
            self.channel,
            [r.fence[0] if r.fence is not None else None for r in rows],
            [r.fence[1] if r.fence is not None else 0 for r in rows],
        )
        refused = {-1 - r[0] for r in result if r[0] < -1}
        ids = iter(sorted(r[0] for r in result if r[0] > 0))
        return [None if n in refused else next(ids) for n in range(1, len(rows) + 1)]

    async def _query(self, method: str, sql: str, *args: Any) -> Any:
        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            return await getattr(raw.driver_connection, method)(sql, *args)

    async def fetch(self, stream: str, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` rows of ``stream`` after cursor ``after``, in order."""
        rows = await self._query("fetch", _FETCH, stream, after, limit)
        return [(r[0], r[1]) for r in rows]

    async def max_id(self, stream: str) -> int:
        """The cursor of the last committed event of ``stream`` (0 when none)."""
        return int(await self._query("fetchval", _MAX_ID, stream))

    async def after_seq(self, stream: str, seq: int, limit: int) -> list[tuple[int, str, int]]:
        """The first ``limit`` rows of ``stream`` numbered above ``seq``, as (cursor, session id, seq)."""
        rows = await self._query("fetch", _AFTER_SEQ, stream, seq, limit)
        return [(r[0], r[1], r[2]) for r in rows]

    async def markers(self, session_id: str, limit: int) -> list[tuple[int, str, str | None]]:
        """The turn markers of ``session_id``'s own events among its last ``limit``, newest first."""
        rows = await self._query("fetch", _MARKERS, session_id, limit)
        return [(r[0], r[1], r[2]) for r in rows]

    async def max_seq(self, session_id: str) -> int:
        """The highest seq any run published for ``session_id`` (0 when none)."""
        return int(await self._query("fetchval", _MAX_SEQ, session_id))

    async def command(self, text: str) -> None:
        """Send ``text`` to every replica listening on the control channel."""
        await self._query("execute", _NOTIFY, self.control, text)

    async def prune(self, before: float) -> None:
        """Drop events older than ``before`` (epoch seconds)."""
        await self._query("execute", _PRUNE, before)
