"""Transcript throughput: events/second for 10k and 100k events, mostly sub-session text deltas.

    python benchmarks/transcript_throughput.py [--repeat 3] [--no-listener]

A parent session runs one delegating tool while nested sub-sessions (three levels) stream text and
call tools, the shape that made per-event transcript scans slow. Also prints the counted work per event
(``Transcript.ops``), which tests/test_transcript.py checks for linearity without timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from toolwire.events import (
    AgentEvent,
    InteractionEnd,
    InteractionStart,
    StepFinish,
    TextDeltaEvent,
    ToolCallActive,
    ToolCallComplete,
    ToolInputStartEvent,
    UserTurnStart,
)
from toolwire.messages import Message
from toolwire.transcript import Transcript


def flood(n: int) -> list[AgentEvent]:
    root: dict[str, Any] = {"session_id": "R", "user_session_id": "R"}
    events: list[AgentEvent] = [
        InteractionStart(**root, seq=1),
        UserTurnStart(**root, seq=2, message=Message.user("go", id="u", session_id="R")),
        TextDeltaEvent(**root, seq=3, id="t", delta="Delegating.", message_id="r1"),
        ToolCallActive(**root, seq=4, tool_call_id="d", tool_name="delegate"),
    ]
    sub = 0
    while len(events) < n - 2:
        sid = f"S{sub}"
        env: dict[str, Any] = {
            "session_id": sid,
            "parent_session_id": "R" if sub % 3 == 0 else f"S{sub - 1}",
            "user_session_id": "R",
        }
        events.append(InteractionStart(**env, seq=1))
        events.append(UserTurnStart(**env, seq=2, message=Message.user("task", id=f"u{sub}", session_id=sid)))
        seq = 3
        for step in range(5):
            for _ in range(100):
                events.append(
                    TextDeltaEvent(**env, seq=seq, id="t", delta="token ", message_id=f"{sid}-{step}")
                )
                seq += 1
            events.append(ToolInputStartEvent(**env, seq=seq, tool_call_id="call_1", tool_name="search"))
            events.append(ToolCallActive(**env, seq=seq + 1, tool_call_id="call_1", tool_name="search"))
            events.append(ToolCallComplete(**env, seq=seq + 2, tool_call_id="call_1", tool_name="search"))
            events.append(StepFinish(**env, seq=seq + 3, step=step, finish_reason="tool-calls"))
            seq += 4
        events.append(InteractionEnd(**env, seq=seq))
        sub += 1
    events = events[: n - 2]
    events.append(ToolCallComplete(**root, seq=5, tool_call_id="d", tool_name="delegate"))
    events.append(InteractionEnd(**root, seq=6))
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-listener", action="store_true", help="measure without a change listener")
    args = parser.parse_args()
    for n in (10_000, 100_000):
        events = flood(n)
        rates: list[float] = []
        ops = 0
        for _ in range(args.repeat):
            transcript = Transcript(on_change=None if args.no_listener else (lambda change: None))
            started = time.perf_counter()
            transcript.apply_all(events)
            rates.append(n / (time.perf_counter() - started))
            ops = transcript.ops
        print(
            f"{n:>7} events: {statistics.median(rates):>10,.0f} events/s (median of {args.repeat}), "
            f"{ops / n:.2f} ops/event, {len(transcript.messages)} bubbles, {len(transcript.sessions)} sessions"
        )


if __name__ == "__main__":
    main()
