"""The shared event log's fence (PostgreSQL): a run's event rows are refused once a takeover fenced the
lease epoch they carry, and only then. Run N's last events, still queued when it has released the session
and run N+1 started (maybe on another replica), are written."""

from __future__ import annotations

import time

import pytest

from tests.store.test_fencing import TAKER, ZOMBIE
from tests.store.test_sql_store import SID, _info
from toolwire.store.event_log import EventLog, LogRow
from toolwire.store.sql import SQLStore

pytestmark = pytest.mark.parametrize(
    "target", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

FINISHED = "elsewhere~0/9.1/int_finished"


def _row(seq: int, epoch: int | None) -> LogRow:
    fence = (SID, epoch) if epoch is not None else None
    return LogRow(SID, SID, 1, seq, f'{{"type":"custom","seq":{seq}}}', fence=fence)


async def test_the_event_log_refuses_only_the_events_of_a_run_whose_lease_was_taken(store: SQLStore) -> None:
    log = EventLog(store.engine)
    await log.create()
    conn, driver = await log.dedicated()
    try:
        _, finished = await store.open_run(_info(user_id="u1"), FINISHED, ttl=60.0)
        await store.unlock_session(SID, FINISHED)  # run N ended normally ...
        _, zombie = await store.open_run(_info(user_id="u1"), ZOMBIE, ttl=0.0)  # ... N+1 started (lease: now)
        assert (finished.epoch, zombie.epoch) == (1, 2)
        # N's last events, queued until now, and N+1's: written (nobody took a lease yet).
        written = await log.insert(driver, [_row(5, 1), _row(6, 2)], time.time())
        assert None not in written

        await store.fence_expired(SID)  # a replica takes N+1's expired lease over: it fences it first
        _, taker = await store.open_run(_info(user_id="u1"), TAKER, ttl=60.0, takeover=True)
        assert taker.epoch == 3
        late = await log.insert(driver, [_row(7, 2), _row(7, 3), _row(8, None)], time.time())
        assert late[0] is None  # the zombie's: refused
        assert late[1] is not None and late[2] is not None  # the taker's; an event of no run
        assert late[1] < late[2]
        rows = await log.after_seq(SID, 1, 0, 10)
        assert [seq for _, _, seq in rows] == [5, 6, 7, 8]
        # Fencing is by the highest fenced epoch: an even older run's event arriving only now is refused
        # too (documented: only after it had released and a later run stalled for a whole lease).
        assert (await log.insert(driver, [_row(9, 1)], time.time())) == [None]
    finally:
        await conn.close()
