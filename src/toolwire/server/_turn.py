"""Where a session's running turn begins in its event stream: what ``GET /api/chat/{id}/stream`` replays.

A turn is one assistant message on the AI SDK stream. It starts with the ``interaction-start`` of the run
that took the user's prompt (the one followed by ``user-turn-start``) and goes on through the runs that
continue the same message without a new prompt: a run answering a paused run's calls (after that run's
``paused`` end) and a takeover of a dead replica's run (after no end at all). It is open until a run of
it ends otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MARKERS = ("interaction-start", "interaction-end", "user-turn-start")
"""The event types of a session's own events that delimit its turns."""


@dataclass(frozen=True, slots=True)
class OpenTurn:
    """The open turn of a session's stream."""

    after: int
    """Replay the stream after this cursor: the turn's first event comes next."""
    live_from: int
    """The cursor of the first run still going; earlier ``interaction-end`` events in the turn are
    paused runs that the client continued (not the turn's end)."""


def open_turn(markers: Iterable[tuple[int, str, str | None]]) -> OpenTurn | None:
    """The open turn, from a stream's markers (cursor, event type, end status) newest first;
    ``None`` when the stream's last run ended (or it has none)."""
    start: int | None = None  # the oldest interaction-start reached in the turn
    live_from: int | None = None
    crossed_end = False
    prompted = False  # a user-turn-start was seen: the interaction-start before it begins the turn
    for cursor, kind, status in markers:
        if kind == "interaction-end":
            if start is None or status != "paused":
                break  # the last run ended, or the one before the turn ended the previous turn
            crossed_end = True
        elif kind == "interaction-start":
            start = cursor
            if not crossed_end:
                live_from = cursor
            if prompted:
                break
        elif kind == "user-turn-start":
            prompted = True
    if start is None or live_from is None:
        return None
    return OpenTurn(after=start - 1, live_from=live_from)
