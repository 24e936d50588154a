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

MARKER_KINDS = ("interaction-start", "interaction-end", "user-turn-start")
"""The event types stored with their ``kind`` (and an end's ``status``) as columns: a session's turn markers
(``toolwire.server._turn``), read without parsing any event body."""

_DDL = (
    """CREATE TABLE IF NOT EXISTS toolwire_events (
        id BIGSERIAL PRIMARY KEY,
        stream VARCHAR(255) NOT NULL,
        session_id VARCHAR(255) NOT NULL,
        incarnation BIGINT NOT NULL DEFAULT 0,
        seq BIGINT NOT NULL,
        kind VARCHAR(32),
        status VARCHAR(32),
        body TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )""",
    # A table made by an earlier release: the columns added since (its rows keep incarnation 0, which no
    # session has, and no marker columns; they age out with ``retain_seconds``).
    "ALTER TABLE toolwire_events ADD COLUMN IF NOT EXISTS incarnation BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE toolwire_events ADD COLUMN IF NOT EXISTS kind VARCHAR(32)",
    "ALTER TABLE toolwire_events ADD COLUMN IF NOT EXISTS status VARCHAR(32)",
    "DROP INDEX IF EXISTS ix_toolwire_events_stream",
    "DROP INDEX IF EXISTS ix_toolwire_events_session_seq",
    "CREATE INDEX IF NOT EXISTS ix_toolwire_events_stream_life ON toolwire_events (stream, incarnation, id)",
    # Only the marker rows: a resume finds a turn's start reading a few index entries, whatever the turn's
    # length (it parsed up to 10,000 bodies before).
    """CREATE INDEX IF NOT EXISTS ix_toolwire_events_markers ON toolwire_events (stream, incarnation, id)
        WHERE kind IS NOT NULL""",
    "CREATE INDEX IF NOT EXISTS ix_toolwire_events_session_life ON toolwire_events (session_id, incarnation, seq)",
    "CREATE INDEX IF NOT EXISTS ix_toolwire_events_created ON toolwire_events (created_at)",
    # One row per event and stream: a batch written again because its commit's acknowledgement was lost
    # (the connection dropped after the commit) adds nothing. A table of an earlier release may hold such
    # repeats: they go first (once, when the index is made).
    """DO $$ BEGIN
        IF to_regclass('ux_toolwire_events_seq') IS NULL THEN
            DELETE FROM toolwire_events AS a USING toolwire_events AS b
                WHERE a.id > b.id AND a.stream = b.stream AND a.incarnation = b.incarnation
                    AND a.session_id = b.session_id AND a.seq = b.seq;
            CREATE UNIQUE INDEX ux_toolwire_events_seq ON toolwire_events (stream, incarnation, session_id, seq);
        END IF;
    END $$""",
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
    FROM unnest(
        $1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $10::text[],
        $11::bigint[]
    ) WITH ORDINALITY AS t(s, e, i, q, k, st, b, fs, fe, n)
), ins AS (
    INSERT INTO toolwire_events (stream, session_id, incarnation, seq, kind, status, body, created_at)
    SELECT src.s, src.e, src.i, src.q, src.k, src.st, src.b, $8 FROM src WHERE src.ok
    ORDER BY src.n
    ON CONFLICT (stream, incarnation, session_id, seq) DO NOTHING
    RETURNING id, stream, session_id, seq
), note AS (
    SELECT pg_notify($9, d.stream) FROM (SELECT DISTINCT stream FROM ins) AS d
)
SELECT id, stream, session_id, seq FROM ins
UNION ALL SELECT -1, NULL, NULL, NULL FROM note
UNION ALL SELECT -1 - src.n, NULL, NULL, NULL FROM src WHERE NOT src.ok
"""
# The ids of rows a batch written again found already there (their first write committed unacknowledged).
_WRITTEN = """
SELECT e.id, e.stream, e.session_id, e.seq FROM toolwire_events AS e
JOIN unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) AS k(s, i, e, q)
    ON e.stream = k.s AND e.incarnation = k.i AND e.session_id = k.e AND e.seq = k.q
"""
# Up to $4 rows after cursor $3, each with its body while the bodies before it add up to less than $5
# bytes, then without (``NULL``): a page never holds much more than $5 bytes of bodies, however large the
# events, and the first row always comes whole (so a reader always makes progress).
_FETCH = """
SELECT id, CASE WHEN total - size < $5 THEN body END, size
FROM (
    SELECT id, body, octet_length(body) AS size, sum(octet_length(body)) OVER (ORDER BY id) AS total
    FROM toolwire_events WHERE stream = $1 AND incarnation = $2 AND id > $3 ORDER BY id LIMIT $4
) AS page
ORDER BY id
"""
_MAX_ID = "SELECT coalesce(max(id), 0) FROM toolwire_events WHERE stream = $1 AND incarnation = $2"
_AFTER_SEQ = """SELECT id, session_id, seq FROM toolwire_events
    WHERE stream = $1 AND incarnation = $2 AND seq > $3 ORDER BY id LIMIT $4"""
# A session's own turn markers (see ``toolwire.server._turn``), newest first: from the partial index.
_MARKERS = """SELECT id, kind, status FROM toolwire_events
    WHERE stream = $1 AND incarnation = $2 AND kind IS NOT NULL AND session_id = $1
    ORDER BY id DESC LIMIT $3"""
_MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM toolwire_events WHERE session_id = $1 AND incarnation = $2"
_PRUNE = "DELETE FROM toolwire_events WHERE created_at < $1"
_NOTIFY = "SELECT pg_notify($1, $2)"

PURGE_EVENTS = "DELETE FROM toolwire_events WHERE stream = ANY(:ids)"
"""What deleting a conversation removes of its events: every row of its sessions' streams (any
incarnation), in the deleting transaction (``SQLStore.delete_session``)."""


def control_channel(schema: str) -> str:
    """The channel of commands between replicas in ``schema``."""
    return f"toolwire_control:{schema}"


def end_command(session_id: str, incarnation: int) -> str:
    """The command that ends every subscription of ``session_id``'s stream of ``incarnation`` or older."""
    return f"end:{incarnation}:{session_id}"


@dataclass(frozen=True, slots=True)
class LogRow:
    """One event row to write: ``stream`` carries the event of ``session_id`` numbered ``seq``, in the
    conversation's ``incarnation``; ``kind`` and ``status`` are set for turn markers only."""

    stream: str
    session_id: str
    incarnation: int
    seq: int
    body: str
    kind: str | None = None
    status: str | None = None
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
        self.control = control_channel(schema)

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
            [r.incarnation for r in rows],
            [r.seq for r in rows],
            [r.kind for r in rows],
            [r.status for r in rows],
            [r.body for r in rows],
            now,
            self.channel,
            [r.fence[0] if r.fence is not None else None for r in rows],
            [r.fence[1] if r.fence is not None else 0 for r in rows],
        )
        refused = {-1 - r[0] for r in result if r[0] < -1}
        ids = {(r[1], r[2], r[3]): r[0] for r in result if r[0] > 0}
        out = [
            None if n in refused else ids.get((row.stream, row.session_id, row.seq))
            for n, row in enumerate(rows, 1)
        ]
        again = [row for n, row in enumerate(rows, 1) if n not in refused and out[n - 1] is None]
        if again:  # written before: their rows' ids, so this replica still delivers them in order
            found = await driver.fetch(
                _WRITTEN,
                [r.stream for r in again],
                [r.incarnation for r in again],
                [r.session_id for r in again],
                [r.seq for r in again],
            )
            ids.update({(r[1], r[2], r[3]): r[0] for r in found})
            out = [
                None if n in refused else ids.get((row.stream, row.session_id, row.seq))
                for n, row in enumerate(rows, 1)
            ]
        return out

    async def _query(self, method: str, sql: str, *args: Any) -> Any:
        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            return await getattr(raw.driver_connection, method)(sql, *args)

    async def fetch(
        self, stream: str, incarnation: int, after: int, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, str]], bool]:
        """Rows of a stream after cursor ``after``, in order: at most ``limit``, and only while their bodies
        add up to less than ``max_bytes`` (the first one always). Also whether rows were left out for size."""
        rows = await self._query("fetch", _FETCH, stream, incarnation, after, limit, max_bytes)
        out = [(r[0], r[1]) for r in rows if r[1] is not None]
        return out, len(out) < len(rows)

    async def max_id(self, stream: str, incarnation: int) -> int:
        """The cursor of the last committed event of a stream (0 when none)."""
        return int(await self._query("fetchval", _MAX_ID, stream, incarnation))

    async def after_seq(
        self, stream: str, incarnation: int, seq: int, limit: int
    ) -> list[tuple[int, str, int]]:
        """The first ``limit`` rows of a stream numbered above ``seq``, as (cursor, session id, seq)."""
        rows = await self._query("fetch", _AFTER_SEQ, stream, incarnation, seq, limit)
        return [(r[0], r[1], r[2]) for r in rows]

    async def markers(
        self, session_id: str, incarnation: int, limit: int
    ) -> list[tuple[int, str, str | None]]:
        """The last ``limit`` turn markers of ``session_id``'s own events, newest first."""
        rows = await self._query("fetch", _MARKERS, session_id, incarnation, limit)
        return [(r[0], r[1], r[2]) for r in rows]

    async def max_seq(self, session_id: str, incarnation: int) -> int:
        """The highest seq any run published for ``session_id`` in ``incarnation`` (0 when none)."""
        return int(await self._query("fetchval", _MAX_SEQ, session_id, incarnation))

    async def command(self, text: str) -> None:
        """Send ``text`` to every replica listening on the control channel."""
        await self._query("execute", _NOTIFY, self.control, text)

    async def prune(self, before: float) -> None:
        """Drop events older than ``before`` (epoch seconds)."""
        await self._query("execute", _PRUNE, before)
