"""Transcript conformance: the hand-written scenarios in tests/golden/transcript/ are the specification.

Each scenario file holds an event stream (toolwire ``event_to_dict`` dicts, or Agent C dicts), the
expected transcript, optional checkpoints mid-stream, and the stored history of the same conversation.
For every scenario with a history, the transcript rebuilt from history must equal the live one.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import toolwire
from toolwire import Agent, open_store
from toolwire.events import (
    AgentEvent,
    InteractionEnd,
    InteractionStart,
    ReasoningDeltaEvent,
    StepFinish,
    TextDeltaEvent,
    ToolCallActive,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolCallResolved,
    ToolInputAvailableEvent,
    ToolInputStartEvent,
    UserTurnStart,
    event_from_dict,
    event_to_dict,
)
from toolwire.messages import (
    FilePart,
    Message,
    MessageAdapter,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from toolwire.models.scripted import ScriptedModel
from toolwire.transcript import (
    MessageAdded,
    Transcript,
    TranscriptChange,
    change_to_dict,
    from_agent_c,
    merge_histories,
    message_to_dict,
    notification_to_dict,
    sessions_to_dict,
)

GOLDEN = Path(__file__).parent / "golden" / "transcript"
TOOL_CALL_EVENTS = (
    ToolInputStartEvent,
    ToolInputAvailableEvent,
    ToolCallActive,
    ToolCallHeartbeat,
    ToolCallComplete,
    ToolCallAwaiting,
    ToolCallResolved,
)
SCENARIOS = sorted(
    p for p in GOLDEN.glob("*.json") if "mapping" not in json.loads(p.read_text(encoding="utf-8"))
)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _steps(scenario: dict[str, Any]) -> list[list[AgentEvent]]:
    """The scenario's input, one entry per source event (an Agent C event maps to zero or more events)."""
    if "agent_c_events" in scenario:
        return [from_agent_c(raw, timestamp=raw.get("timestamp", 0.0)) for raw in scenario["agent_c_events"]]
    return [[event_from_dict(raw)] for raw in scenario["events"]]


def _events(scenario: dict[str, Any]) -> list[AgentEvent]:
    return [event for step in _steps(scenario) for event in step]


def _history(raw: list[dict[str, Any]]) -> list[Message]:
    return [MessageAdapter.validate_python(m) for m in raw]


def _messages(t: Transcript) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in t.messages]


def _notifications(t: Transcript) -> list[dict[str, Any]]:
    return [notification_to_dict(n) for n in t.active_tools.values()]


def _live(scenario: dict[str, Any]) -> tuple[Transcript, list[TranscriptChange]]:
    changes: list[TranscriptChange] = []
    transcript = Transcript(on_change=changes.append)
    checkpoints = {c["after"]: c for c in scenario.get("checkpoints", [])}
    for count, step in enumerate(_steps(scenario), start=1):
        transcript.apply_all(step)
        checkpoint = checkpoints.pop(count, None)
        if checkpoint is None:
            continue
        if "notifications" in checkpoint:
            assert _notifications(transcript) == checkpoint["notifications"], f"after event {count}"
        if "messages" in checkpoint:
            assert _messages(transcript) == checkpoint["messages"], f"after event {count}"
        if "pending_calls" in checkpoint:
            pending = {
                sid: [c.tool_call_id for c in calls] for sid, calls in transcript.pending_calls.items()
            }
            assert pending == checkpoint["pending_calls"], f"after event {count}"
    assert not checkpoints, "checkpoints beyond the end of the stream"
    return transcript, changes


def _awaiting(raw: list[dict[str, str]] | None) -> dict[tuple[str, str], Any]:
    """A golden file's ``awaiting`` list (the awaited rows of a paused run) as ``from_history`` takes it."""
    return {(a["session_id"], a["tool_call_id"]): a["kind"] for a in raw or []}


def _resumed(scenario: dict[str, Any]) -> Transcript:
    return Transcript.from_history(
        _history(scenario["history"]),
        parents=scenario.get("parents"),
        awaiting=_awaiting(scenario.get("awaiting")),
        ended=scenario.get("ended", False),
        titles=scenario.get("titles"),
    )


@pytest.fixture(params=SCENARIOS, ids=lambda p: p.stem)
def scenario(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _load(request.param)


def test_there_are_scenarios_for_every_required_case() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {
        "normal_text_then_tools",
        "tools_before_text",
        "interaction_ending_with_tools",
        "nested_sub_sessions",
        "system_and_media_between_select_and_complete",
        "lost_complete",
        "parallel_out_of_order",
        "reconnect_mid_interaction",
        "robustness",
        "top_level_switch",
        "agent_c_stream",
        "awaiting_approval_and_client_tool",
        "awaiting_in_sub_agent_then_new_prompt",
        "reused_call_ids",
        "turn_ending_without_text",
        "paused_step_shows_what_ran",
        "session_renamed",
    } <= names


def test_live_stream_builds_the_expected_transcript(scenario: dict[str, Any]) -> None:
    transcript, changes = _live(scenario)
    expected = scenario["expected"]
    assert _messages(transcript) == expected["messages"]
    assert _notifications(transcript) == expected["notifications"]
    assert sessions_to_dict(tuple(transcript.sessions.values())) == expected["sessions"]
    if "changes" in expected:
        assert [change_to_dict(c) for c in changes] == expected["changes"]
    if "pending_calls" in expected:
        pending = {sid: [c.tool_call_id for c in calls] for sid, calls in transcript.pending_calls.items()}
        assert pending == expected["pending_calls"]


def test_history_rebuilds_the_same_transcript(scenario: dict[str, Any]) -> None:
    if scenario.get("history") is None:
        pytest.fail("every toolwire scenario needs a history") if "events" in scenario else None
        return  # an Agent C stream has no toolwire history
    resumed = _resumed(scenario)
    expected = scenario["expected"]
    assert _messages(resumed) == [m for m in expected["messages"] if not m.get("ephemeral")]
    assert _notifications(resumed) == scenario.get("resumed_notifications", [])
    assert sessions_to_dict(tuple(resumed.sessions.values())) == expected["sessions"]
    live, _ = _live(scenario)
    assert live.snapshot().persistent() == resumed.snapshot()


def test_reconnect_resumes_from_history_plus_remaining_events(scenario: dict[str, Any]) -> None:
    resumes = scenario.get("resumes", [])
    if not resumes:
        return
    live, _ = _live(scenario)
    events = _events(scenario)
    for index, resume in enumerate(resumes):
        transcript = Transcript.from_history(
            _history(resume["history"]),
            parents=scenario.get("parents"),
            last_seq=resume.get("last_seq"),
            awaiting=_awaiting(resume.get("awaiting")),
            ended=resume.get("ended", False),
        )
        checkpoint = scenario.get("resumed_checkpoint")
        if index == 0 and checkpoint is not None:
            assert _messages(transcript) == checkpoint["messages"]
            assert _notifications(transcript) == checkpoint["notifications"]
        transcript.apply_all(events[resume["events_from"] :])
        assert transcript.snapshot().persistent() == live.snapshot().persistent(), resume


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list) and len(expected) == len(actual) and all(map(_subset, expected, actual))
        )
    return bool(expected == actual)


def test_golden_events_are_valid_event_dicts(scenario: dict[str, Any]) -> None:
    """Fields at their default may be left out, but every field given must survive the event round trip."""
    for raw in scenario.get("events", []):
        assert _subset(raw, event_to_dict(event_from_dict(raw))), raw


# -- Agent C ---------------------------------------------------------------------------------------------


def test_agent_c_mapping_table() -> None:
    cases = _load(GOLDEN / "agent_c_mapping.json")["mapping"]
    assert len(cases) >= 15
    for case in cases:
        mapped = [event_to_dict(e) for e in from_agent_c(case["agent_c"], timestamp=5.0)]
        assert len(mapped) == len(case["toolwire"]), case["agent_c"]
        for expected, actual in zip(case["toolwire"], mapped, strict=True):
            assert _subset(expected, actual), (case["agent_c"], actual)


def test_agent_c_timestamp_defaults_to_the_events_own_field() -> None:
    [event] = from_agent_c({"type": "text_delta", "session_id": "s", "content": "x", "timestamp": 42})
    assert event.timestamp == 42.0


def test_agent_c_mapping_never_raises_on_malformed_events() -> None:
    odd: list[dict[str, Any]] = [
        {},
        {"type": "tool_call", "active": False, "tool_calls": "nope", "tool_results": 3},
        {
            "type": "tool_call",
            "active": True,
            "tool_calls": [None, {"name": "x"}, {"id": "a", "function": 5}],
        },
        {
            "type": "tool_select_delta",
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{bad"}}],
        },
        {"type": "render_media"},
        {"type": "user_message", "message": 17},
        {"type": "completion", "running": False, "input_tokens": "many"},
        {"type": "interaction", "started": True},
    ]
    transcript = Transcript()
    for raw in odd:
        transcript.apply_all(from_agent_c(raw, timestamp=1.0))
    assert all(m.session_id == "" for m in transcript.messages)


# -- properties beyond the scenarios ------------------------------------------------------------------


def _calls_per_id(events: list[AgentEvent]) -> Counter[tuple[str, str]]:
    """How many calls each ``(session, call id)`` can name: one per message that names it, plus one call
    first seen without its message (the only one an event without ``message_id`` can start)."""
    messages: dict[tuple[str, str], set[str]] = {}
    for event in events:
        if isinstance(event, TOOL_CALL_EVENTS):
            messages.setdefault((event.session_id, event.tool_call_id), set()).add(
                getattr(event, "message_id", "")
            )
    return Counter({key: len(ids - {""}) + ("" in ids) for key, ids in messages.items()})


def test_mangled_streams_never_raise_nor_attach_a_call_twice() -> None:
    """Shuffled, duplicated and dropped events of every scenario: no exception, each call attached at most once."""
    rng = random.Random(7)
    for path in SCENARIOS:
        events = _events(_load(path))
        calls = _calls_per_id(events)
        for _ in range(40):
            mangled = [e for e in events if rng.random() > 0.1]
            mangled += rng.sample(events, k=len(events) // 4)
            rng.shuffle(mangled)
            transcript = Transcript()
            transcript.apply_all(mangled)
            attached = [(m.session_id, c.tool_call_id) for m in transcript.messages for c in m.tool_calls]
            pending = [
                (sid, c.tool_call_id) for sid, calls in transcript.pending_calls.items() for c in calls
            ]
            assert Counter(attached + pending) <= calls, path.stem


def test_replaying_the_whole_stream_after_resume_changes_nothing() -> None:
    for path in SCENARIOS:
        scenario = _load(path)
        if not scenario.get("history"):
            continue
        live, _ = _live(scenario)
        resumed = _resumed(scenario)
        # No last_seq: restored (sealed) messages and finished calls absorb the replayed events.
        resumed.apply_all(_events(scenario))
        assert resumed.snapshot().persistent() == live.snapshot().persistent(), path.stem


def test_user_files_show_as_media_bubbles_live_and_resumed() -> None:
    message = Message(
        role="user",
        parts=(TextPart(text="What is this?"), FilePart(media_type="image/png", url="https://x/cat.png")),
        id="u1",
        session_id="S",
    )
    live = Transcript()
    live.apply(UserTurnStart(session_id="S", seq=1, message=message))
    resumed = Transcript.from_history([message])
    expected = [
        {
            "id": "u1",
            "role": "user",
            "session_id": "S",
            "text": "What is this?",
            "tool_calls": [],
            "source_id": "u1",
        },
        {
            "id": "u1:file:1",
            "role": "media",
            "session_id": "S",
            "text": "",
            "tool_calls": [],
            "source_id": "u1",
            "content_type": "image/png",
            "url": "https://x/cat.png",
        },
    ]
    assert _messages(live) == expected
    assert live.snapshot() == resumed.snapshot()


def test_a_parent_cycle_in_the_envelopes_is_refused() -> None:
    transcript = Transcript()
    transcript.apply(InteractionStart(session_id="A", parent_session_id="B"))
    transcript.apply(InteractionStart(session_id="B", parent_session_id="A"))
    transcript.apply(TextDeltaEvent(session_id="B", id="", delta="hi", message_id="m"))
    sessions = transcript.sessions
    assert sessions["A"].parent_session_id == "B"
    assert sessions["B"].parent_session_id is None
    assert sessions["B"].children == ("A",)


def test_events_without_seq_are_never_dropped() -> None:
    transcript = Transcript()
    for _ in range(2):
        transcript.apply(TextDeltaEvent(session_id="S", id="", delta="ab", message_id="m"))
    assert transcript.messages[0].text == "abab"


def test_heartbeat_of_an_unseen_tool_shows_it_running() -> None:

    transcript = Transcript()
    transcript.apply(
        ToolCallHeartbeat(session_id="S", tool_call_id="c", tool_name="t", elapsed=3.0, timestamp=10.0)
    )
    [note] = transcript.active_tools.values()
    assert (note.status, note.started_at, note.tool_name) == ("executing", 7.0, "t")


# -- changes are observable ------------------------------------------------------------------------------


async def test_change_stream_yields_changes_in_order_and_ends_on_close() -> None:
    transcript = Transcript()
    stream = transcript.changes()
    transcript.apply(TextDeltaEvent(session_id="S", id="", delta="a", message_id="m"))
    transcript.apply(ToolInputStartEvent(session_id="S", tool_call_id="c", tool_name="t", timestamp=1.0))
    transcript.close()
    seen = [change_to_dict(c) async for c in stream]
    assert seen == [
        {"type": "message-added", "message_id": "m:0"},
        {"type": "notification-added", "session_id": "S", "tool_call_id": "c", "status": "preparing"},
    ]


async def test_change_stream_as_context_manager_and_concurrent_consumer() -> None:
    transcript = Transcript()
    got: list[TranscriptChange] = []

    async def consume() -> None:
        async with transcript.changes() as stream:
            async for change in stream:
                got.append(change)
                if len(got) == 2:
                    break

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    transcript.apply(TextDeltaEvent(session_id="S", id="", delta="a", message_id="m"))
    transcript.apply(TextDeltaEvent(session_id="S", id="", delta="b", message_id="m"))
    await asyncio.wait_for(task, 1)
    assert [type(c).__name__ for c in got] == ["MessageAdded", "MessageUpdated"]
    assert transcript._listeners == []  # leaving the block unsubscribed it


def test_unsubscribe_stops_delivery() -> None:
    transcript = Transcript()
    got: list[TranscriptChange] = []
    unsubscribe = transcript.subscribe(got.append)
    transcript.apply(TextDeltaEvent(session_id="S", id="", delta="a", message_id="m"))
    unsubscribe()
    transcript.apply(TextDeltaEvent(session_id="S", id="", delta="b", message_id="n"))
    assert got == [MessageAdded(message_id="m:0", index=0, session_id="S")]
    assert transcript.message("n:0") is not None and transcript.message("n:0").text == "b"  # type: ignore[union-attr]


# -- linear cost, measured by counting work ---------------------------------------------------------------


def _sub_session_flood(n: int) -> list[AgentEvent]:
    """A parent running one delegating tool while many nested sub-sessions stream text and call tools."""
    out: list[AgentEvent] = [
        InteractionStart(session_id="R", user_session_id="R", seq=1),
        UserTurnStart(
            session_id="R", user_session_id="R", seq=2, message=Message.user("go", id="u", session_id="R")
        ),
        TextDeltaEvent(
            session_id="R", user_session_id="R", seq=3, id="", delta="Delegating.", message_id="r1"
        ),
        ToolCallActive(session_id="R", user_session_id="R", seq=4, tool_call_id="d", tool_name="delegate"),
    ]
    sub = 0
    while len(out) < n - 3:
        sid, parent = f"S{sub}", ("R" if sub % 3 == 0 else f"S{sub - 1}")
        env: dict[str, Any] = {"session_id": sid, "parent_session_id": parent, "user_session_id": "R"}
        out.append(InteractionStart(**env, seq=1))
        out.append(UserTurnStart(**env, seq=2, message=Message.user("task", id=f"u{sub}", session_id=sid)))
        seq = 3
        for step in range(5):
            for _ in range(60):
                out.append(TextDeltaEvent(**env, seq=seq, id="", delta="tok ", message_id=f"{sid}m{step}"))
                seq += 1
            out.append(ToolInputStartEvent(**env, seq=seq, tool_call_id="call_1", tool_name="search"))
            out.append(ToolCallActive(**env, seq=seq + 1, tool_call_id="call_1", tool_name="search"))
            out.append(
                ToolCallComplete(**env, seq=seq + 2, tool_call_id="call_1", tool_name="search", output="r")
            )
            out.append(StepFinish(**env, seq=seq + 3, step=step, finish_reason="tool-calls"))
            seq += 4
        out.append(InteractionEnd(**env, seq=seq))
        sub += 1
    out = out[: n - 3]
    out.append(
        ToolCallComplete(session_id="R", user_session_id="R", seq=5, tool_call_id="d", tool_name="delegate")
    )
    out.append(
        TextDeltaEvent(session_id="R", user_session_id="R", seq=6, id="", delta="Done.", message_id="r2")
    )
    out.append(InteractionEnd(session_id="R", user_session_id="R", seq=7))
    return out


def test_work_is_linear_in_the_number_of_events() -> None:
    costs = {}
    for n in (10_000, 100_000):
        events = _sub_session_flood(n)
        assert len(events) == n
        transcript = Transcript(on_change=lambda change: None)
        transcript.apply_all(events)
        costs[n] = transcript.ops
        assert transcript.active_tools == {}
    # Counted work per event stays bounded by a small constant, and grows 10x for 10x the events.
    assert costs[10_000] <= 3 * 10_000
    assert costs[100_000] <= 10.5 * costs[10_000]


# -- live == resumed on random conversations ---------------------------------------------------------------


class _Conversation:
    """One random conversation written twice: as the loop's event stream and as the stored history.

    Steps mix text, reasoning and calls in random order; calls complete in random order; some calls
    delegate to a sub-session (two levels deep at most) that runs between their start and completion.
    Call ids restart at call_1 in every session. ``persists`` records, after every stored message, how
    far the stream and the history had got (a point a client can resume from).
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.events: list[AgentEvent] = []
        self.history: list[Message] = []
        self.parents: dict[str, str | None] = {"R": None}
        self.seq: dict[str, int] = {}
        self.persists: list[tuple[int, int, dict[str, int]]] = [(0, 0, {})]
        self.counter = 0

    def _next(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _emit(self, cls: Any, sid: str, **fields: Any) -> None:
        self.seq[sid] = self.seq.get(sid, 0) + 1
        event = cls(
            session_id=sid,
            parent_session_id=self.parents[sid],
            user_session_id="R",
            seq=self.seq[sid],
            **fields,
        )
        self.events.append(event)

    def _store(self, role: Any, sid: str, parts: list[Any], message_id: str) -> Message:
        message = Message(
            role=role, parts=tuple(parts), id=message_id, session_id=sid, created_at=float(self.counter)
        )
        self.history.append(message)
        self.persists.append((len(self.events), len(self.history), dict(self.seq)))
        return message

    def _text(self, sid: str, cls: Any, message_id: str) -> str:
        words = [self.rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(self.rng.randint(1, 6))]
        text = " ".join(words)
        cut = self.rng.randint(1, len(text))
        for chunk in (text[:cut], text[cut:]):
            if chunk:
                self._emit(cls, sid, id="p", delta=chunk, message_id=message_id)
        return text

    def session(self, sid: str, depth: int, turns: int) -> None:
        calls_made = 0
        for _ in range(turns):
            self._emit(InteractionStart, sid)
            user = self._store("user", sid, [TextPart(text=self._next("ask "))], self._next("u"))
            self._emit(UserTurnStart, sid, message=user)
            steps = self.rng.randint(1, 3)
            for step in range(steps):
                message_id = self._next("m")
                parts: list[Any] = []
                kinds = [
                    self.rng.choice(["text", "reasoning", "call"]) for _ in range(self.rng.randint(1, 4))
                ]
                if step == steps - 1 and self.rng.random() < 0.7:
                    kinds = [k for k in kinds if k != "call"] or ["text"]
                for kind in kinds:
                    if kind == "call":
                        calls_made += 1
                        call = ToolCallPart(
                            tool_call_id=f"call_{calls_made}", tool_name="t", args={"n": calls_made}
                        )
                        self._emit(ToolInputStartEvent, sid, tool_call_id=call.tool_call_id, tool_name="t")
                        self._emit(
                            ToolInputAvailableEvent, sid, tool_call_id=call.tool_call_id, tool_name="t",
                            args=call.args, message_id=message_id,
                        )  # fmt: skip
                        parts.append(call)
                    elif kind == "text":
                        parts.append(TextPart(text=self._text(sid, TextDeltaEvent, message_id)))
                    else:
                        parts.append(ReasoningPart(text=self._text(sid, ReasoningDeltaEvent, message_id)))
                self._store("assistant", sid, parts, message_id)
                calls = [p for p in parts if isinstance(p, ToolCallPart)]
                for call in calls:
                    self._emit(
                        ToolCallActive, sid, tool_call_id=call.tool_call_id, tool_name="t", args=call.args
                    )
                results: dict[str, ToolResultPart] = {}
                for call in self.rng.sample(calls, k=len(calls)):
                    if depth < 2 and self.rng.random() < 0.3:
                        child = self._next("S")
                        self.parents[child] = sid
                        self.session(child, depth + 1, 1)
                    result = ToolResultPart(
                        tool_call_id=call.tool_call_id, tool_name="t", output=self._next("r"),
                        is_error=self.rng.random() < 0.2,
                    )  # fmt: skip
                    results[call.tool_call_id] = result
                    self._emit(
                        ToolCallComplete, sid, tool_call_id=call.tool_call_id, tool_name="t", args=call.args,
                        output=result.output, is_error=result.is_error,
                    )  # fmt: skip
                if calls:
                    self._store("tool", sid, [results[c.tool_call_id] for c in calls], self._next("t"))
                self._emit(StepFinish, sid, step=step, finish_reason="stop", message_id=message_id)
            self._emit(InteractionEnd, sid)


def test_random_conversations_resume_to_the_live_transcript() -> None:
    for seed in range(150):
        conversation = _Conversation(seed)
        conversation.session("R", 0, turns=2)
        live = Transcript()
        live.apply_all(conversation.events)
        # the whole conversation ended: its last turn's interaction-end was published (rule 4)
        resumed = Transcript.from_history(conversation.history, parents=conversation.parents, ended=True)
        assert resumed.snapshot() == live.snapshot(), seed
        # Reconnect at a random persist point, replaying from a random earlier one.
        rng = random.Random(seed)
        at = rng.randrange(len(conversation.persists))
        events_from, _, last_seq = conversation.persists[rng.randrange(at + 1)]
        _, history_len, _ = conversation.persists[at]
        reconnected = Transcript.from_history(
            conversation.history[:history_len], parents=conversation.parents, last_seq=last_seq
        )
        reconnected.apply_all(conversation.events[events_from:])
        assert reconnected.snapshot() == live.snapshot(), (seed, at, events_from)


def test_merge_histories_interleaves_sub_sessions_where_they_happened() -> None:
    scenario = _load(GOLDEN / "nested_sub_sessions.json")
    history = _history(scenario["history"])
    per_session = [[m for m in history if m.session_id == sid] for sid in ("B", "R", "A")]
    assert merge_histories(per_session) == history
    resumed = Transcript.from_history(merge_histories(per_session), parents=scenario["parents"])
    assert _messages(resumed) == scenario["expected"]["messages"]


# -- through a real agent ---------------------------------------------------------------------------------


async def test_an_agent_whose_model_reuses_call_ids_shows_every_call_live_and_resumed(tmp_path: Path) -> None:
    """A local server numbering calls per response: ``call_0`` on every step and every turn (issue 28)."""

    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: {len(city)} °C"

    def asks(*cities: str) -> list[list[Part]]:
        steps: list[list[Part]] = [
            [ToolCallPart(tool_call_id="call_0", tool_name="weather", args={"city": c})] for c in cities
        ]
        return [[TextPart(text="Checking."), *steps[0]], *steps[1:], [TextPart(text="Done.")]]

    store = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'reused.db'}")
    model = ScriptedModel([*asks("Paris", "Rome"), *asks("Oslo")])
    agent = Agent(model, tools=[toolwire.tool(weather)], store=store)
    live = Transcript()
    async for event in agent.stream("Paris and Rome?", session_id="S"):
        live.apply(event)
    async for event in agent.stream("And Oslo?", session_id="S"):
        live.apply(event)
    resumed = Transcript.from_history(await store.raw_messages("S"))
    await store.close()

    shown = [
        (m.text, [(c.tool_call_id, c.args["city"], c.result) for c in m.tool_calls]) for m in live.messages
    ]
    assert shown == [
        ("Paris and Rome?", []),
        ("Checking.", [("call_0", "Paris", "Paris: 5 °C"), ("call_0", "Rome", "Rome: 4 °C")]),
        ("Done.", []),
        ("And Oslo?", []),
        ("Checking.", [("call_0", "Oslo", "Oslo: 4 °C")]),
        ("Done.", []),
    ]
    assert live.active_tools == {}
    assert resumed.snapshot() == live.snapshot().persistent()


# -- Agent C history (a resumed Agent C session) ------------------------------------------------------------

_ANTHROPIC_HISTORY = [
    {"role": "user", "content": "Find the Q3 report"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Need to search the files.", "signature": "sig"},
            {"type": "text", "text": "Searching now."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "Q3"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "report.pdf"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "The Q3 report is report.pdf."}]},
    {"role": "user", "content": [{"type": "text", "text": "Open it"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_9", "name": "open_file", "input": {"path": "report.pdf"}}
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_9", "content": [{"type": "text", "text": "opened"}]}
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Opened report.pdf."}]},
]
_OPENAI_HISTORY = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Find the Q3 report"},
    {
        "role": "assistant",
        "content": "Searching now.",
        "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "search", "arguments": '{"q":"Q3"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_1", "content": "report.pdf"},
    {"role": "assistant", "content": "The Q3 report is report.pdf."},
    {"role": "user", "content": [{"type": "text", "text": "Open it"}]},
    {
        "type": "function_call",
        "call_id": "call_9",
        "name": "open_file",
        "arguments": '{"path": "report.pdf"}',
    },
    {"type": "function_call_output", "call_id": "call_9", "output": "opened"},
    {"role": "assistant", "content": [{"type": "output_text", "text": "Opened report.pdf."}]},
]


@pytest.mark.parametrize(
    ("vendor", "messages"), [("anthropic", _ANTHROPIC_HISTORY), ("openai", _OPENAI_HISTORY)]
)
def test_an_agent_c_history_event_rebuilds_the_sessions_tool_calls(vendor: str, messages: list[Any]) -> None:
    """The ``agent_c_stream`` conversation, as Agent C's ``history`` event sends it to a resumed client:
    the same bubbles and tool calls (with their results) as the live stream showed, and the events that
    follow land on new bubbles."""
    history = {"type": "history", "session_id": "sess-1", "user_session_id": "sess-1", "vendor": vendor}
    resumed = Transcript.from_agent_c({**history, "messages": messages})
    live = _load(GOLDEN / "agent_c_stream.json")["expected"]["messages"]

    def shown(bubbles: list[dict[str, Any]]) -> list[tuple[str, str, list[Any]]]:
        return [
            (
                b["role"],
                b["text"],
                [(c["tool_call_id"], c["tool_name"], c["args"], c["result"]) for c in b["tool_calls"]],
            )
            for b in bubbles
            if b["session_id"] == "sess-1"
            and not b.get("ephemeral")
            and (vendor == "anthropic" or b["role"] != "reasoning")
        ]

    assert shown(_messages(resumed)) == shown(live)
    assert resumed.active_tools == {}
    assert from_agent_c({**history, "messages": messages}) == []  # the live mapping stays stateless

    env = {"session_id": "sess-1", "user_session_id": "sess-1"}
    for raw in (
        {"type": "interaction", "started": True, "id": "int-9", **env},
        {"type": "user_message", "message": "Thanks", **env},
        {"type": "completion", "running": True, **env},
        {"type": "text_delta", "content": "You're welcome.", **env},
        {"type": "completion", "running": False, "stop_reason": "end_turn", **env},
    ):
        resumed.apply_all(from_agent_c(raw, timestamp=1.0))
    texts = [m.text for m in resumed.messages]
    assert texts[-2:] == ["Thanks", "You're welcome."] and texts[:-2] == [t for _, t, _ in shown(live)]


def test_a_rename_sets_the_session_title_live_and_a_rebuilt_transcript_takes_the_stored_one() -> None:
    scenario = _load(GOLDEN / "session_renamed.json")
    events = _events(scenario)
    transcript = Transcript()
    transcript.apply_all(events[:7])  # a tool renamed the session during the run
    assert transcript.sessions["S"].title == "Trip to Lisbon"
    assert [m.role for m in transcript.messages] == ["user", "assistant"]  # no bubble for it
    transcript.apply_all(events[7:])  # renamed again after the run (PATCH, the CLI): the latest wins
    assert transcript.sessions["S"].title == "Lisbon in May"
    rebuilt = Transcript.from_history(
        _history(scenario["history"]), titles={"S": "Lisbon in May", "gone": "Not here"}
    )
    assert {sid: s.title for sid, s in rebuilt.sessions.items()} == {"S": "Lisbon in May"}
    assert Transcript.from_history(_history(scenario["history"])).sessions["S"].title is None
