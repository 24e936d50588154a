"""Chaos: three replicas behind HAProxy on one PostgreSQL under a steady load of tool-calling
conversations while, one after another, a replica is SIGKILLed (then restarted), one is SIGSTOPped past
its lease (then continued), one is SIGTERMed (then restarted) and PostgreSQL is restarted.

Each client follows its conversation's native SSE stream through HAProxy, reconnecting with
``Last-Event-ID`` (a stream silent for longer than ``STALL`` seconds is taken for a stopped replica), and
re-sends a turn refused with 503 ``draining`` after its ``Retry-After``. Once the load has stopped and every
run has settled, the test asserts what the issue (32) asks: no event lost or duplicated per conversation,
no non-idempotent call executed twice, every turn ended ``completed`` or with a typed error, and every
stored history valid on all five adapters."""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.models import sdk_types
from tests.reliability.test_store_faults import restart_postgres
from tests.reliability.wire_checks import adapters, unanswered_calls
from tests.scaleout.cluster import Cluster, Replica, cluster, postgres_url
from toolwire.errors import ProviderHTTPError
from toolwire.messages import Message
from toolwire.models.base import ModelRequest, ToolDefinition
from toolwire.store.sql import SQLStore

CONVERSATIONS = 10
MAX_TURNS = 40
"""Per conversation: the load stops earlier, when the faults are over; this only bounds it."""
LEASE = 2.0
STALL = 4.0
"""Seconds of silence after which a client takes its stream for dead (a SIGSTOPped replica keeps the
connection open) and reconnects; the server pings only every 15 s, so idle streams reconnect too."""
TURN_BOUND = 90.0
"""Seconds a turn may take from its first send to its end, takeovers and the PostgreSQL restart included."""

# Every turn: ``charge`` (not idempotent, the default) and ``lookup`` (idempotent) in one step, a second
# ``charge`` in the next step, then the answer. The model answers from the history alone, so whichever
# replica runs a step answers the same, and a call's id names its place in the history: a call executed
# twice under one id is one call run twice. An interrupted result does not stop the turn, so a zombie
# replica that resumes mid-tool goes on to the next step, as a real one would.
CHAOS_AGENT = '''
import asyncio, json, os, time
from pathlib import Path
from toolwire import Agent, RunContext, TextPart, ToolCallPart, tool
from toolwire.models.scripted import ScriptedModel

DIR = Path(os.environ["TW_DIR"])
SLOW = float(os.environ["TW_SLOW"])


def _executed(ctx: RunContext, name: str) -> None:
    line = {"tool": name, "session": ctx.session_id, "call": ctx.tool_call_id,
            "interaction": ctx.interaction_id, "pid": os.getpid(), "at": time.time()}
    with open(DIR / "executions", "a") as f:
        f.write(json.dumps(line) + "\\n")


async def charge(ctx: RunContext, amount: int) -> str:
    """Charges the card (not idempotent)."""
    _executed(ctx, "charge")
    await asyncio.sleep(SLOW)
    return f"charged {amount}"


@tool(idempotent=True)
async def lookup(ctx: RunContext, item: str) -> str:
    """Looks an item up (safe to run again)."""
    _executed(ctx, "lookup")
    await asyncio.sleep(SLOW / 2)
    return f"{item}: in stock"


def respond(request):
    messages = request.messages
    turn_start = max(i for i, m in enumerate(messages) if m.role == "user")
    rounds = sum(1 for m in messages[turn_start:] if m.role == "tool")
    call = f"call_{len(messages)}"
    if rounds == 0:
        return [TextPart(text="Checking stock and charging. "),
                ToolCallPart(tool_call_id=call + "_charge", tool_name="charge", args={"amount": 1}),
                ToolCallPart(tool_call_id=call + "_lookup", tool_name="lookup", args={"item": "tea"})]
    if rounds == 1:
        return [ToolCallPart(tool_call_id=call + "_charge", tool_name="charge", args={"amount": 2})]
    return [TextPart(text="All done, " + "step by step. " * 3)]


def build():
    return Agent(ScriptedModel(respond, chunk_size=12), tools=[charge, lookup])
'''

TOOLS = (
    ToolDefinition(
        name="charge",
        description="Charges the card.",
        parameters={"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
    ),
    ToolDefinition(
        name="lookup",
        description="Looks an item up.",
        parameters={"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
    ),
)


@dataclass
class Received:
    """What one client received on its conversation's stream, in order, across reconnects."""

    frames: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """(cursor, event); a ``stream-reset`` is kept as ``{"type": "stream-reset", "last_seq": L}`` with the
    seq up to which the history it reloaded covered the conversation."""
    cursor: int = 0
    reconnects: int = 0


@dataclass
class Conversation:
    session_id: str
    received: Received = field(default_factory=Received)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    outcomes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Per prompt: the status of the ``interaction-end`` that ended its turn and the error type, if any."""
    draining_refusals: int = 0
    busy_refusals: int = 0
    lost_posts: int = 0

    def events(self) -> list[dict[str, Any]]:
        return [e for _, e in self.received.frames if e["type"] != "stream-reset"]

    def outcome(self, prompt: str) -> tuple[str, str | None] | None:
        """How the turn that took ``prompt`` ended, once its ``interaction-end`` arrived."""
        events = self.events()
        starts = [
            i for i, e in enumerate(events) if e["type"] == "interaction-start" and e["prompt"] == prompt
        ]
        if not starts:
            return None
        error: str | None = None
        for event in events[starts[0] + 1 :]:
            if event["type"] == "error":
                error = event["error_type"]
            elif event["type"] == "interaction-end":
                return event["status"], error
        return None

    def ended(self, prompt: str) -> bool:
        return self.outcome(prompt) is not None

    def started(self, prompt: str) -> bool:
        return any(e["type"] == "interaction-start" and e["prompt"] == prompt for e in self.events())

    async def changes(self, until: Callable[[], bool], timeout: float) -> bool:
        """Whether ``until()`` held within ``timeout`` seconds, checked at each event received."""
        deadline = time.monotonic() + timeout
        while not until():
            self.changed.clear()
            if until():
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                return until()
        return True


async def _follow(conversation: Conversation, http: httpx.AsyncClient, base: str) -> None:
    """Reads the conversation's stream forever (the test cancels it), reconnecting after every break."""
    received = conversation.received
    url = f"{base}/api/sessions/{conversation.session_id}/events"
    while True:
        try:
            headers = {"last-event-id": str(received.cursor)}
            async with http.stream(
                "GET", url, headers=headers, timeout=httpx.Timeout(5, read=STALL)
            ) as response:
                if response.status_code != 200:  # no replica answers right now (HAProxy's 503)
                    await asyncio.sleep(0.2)
                    continue
                cursor: int | None = None
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        cursor = int(line[4:])
                    elif line.startswith("data: ") and cursor is not None:
                        event = json.loads(line[6:])
                        if event["type"] == "stream-reset":
                            history = await http.get(
                                f"{base}/api/sessions/{conversation.session_id}/messages"
                            )
                            body = history.json()
                            last_seq = body["last_seq"].get(conversation.session_id, 0)
                            received.frames.append((cursor, {"type": "stream-reset", "last_seq": last_seq}))
                            received.cursor = body["cursor"]
                            break
                        received.frames.append((cursor, event))
                        received.cursor = cursor
                        cursor = None
                        conversation.changed.set()
        except httpx.HTTPError:
            pass
        received.reconnects += 1


async def _send(conversation: Conversation, http: httpx.AsyncClient, base: str, prompt: str) -> None:
    """Sends ``prompt`` until a replica took it: again after 503 ``draining`` (its ``Retry-After``), after
    409 ``session_busy`` (the previous turn is still being taken over) and after a lost answer, unless the
    stream shows the lost attempt was taken."""
    url = f"{base}/api/sessions/{conversation.session_id}/messages"
    deadline = time.monotonic() + TURN_BOUND
    while not conversation.started(prompt):
        assert time.monotonic() < deadline, f"{conversation.session_id}: {prompt!r} was never taken"
        try:
            answer = await http.post(url, json={"text": prompt}, timeout=5)
        except httpx.HTTPError:  # the replica died or stopped with the request: was it taken?
            conversation.lost_posts += 1
            await conversation.changes(lambda: conversation.started(prompt), 1.0)
            continue
        if answer.status_code == 202:
            return
        kind = (
            answer.json().get("error", {}).get("type")
            if answer.headers.get("content-type", "").startswith("application/json")
            else None
        )
        if answer.status_code == 503 and kind == "draining":
            conversation.draining_refusals += 1
            await asyncio.sleep(float(answer.headers["retry-after"]))  # what the server asks of clients
        elif answer.status_code == 409 and kind == "session_busy":
            conversation.busy_refusals += 1
            await conversation.changes(lambda: conversation.started(prompt), 1.0)
        elif answer.status_code in (502, 503, 504):  # HAProxy had no replica or lost the one it chose
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"{answer.status_code} {answer.text}")


async def _converse(
    conversation: Conversation,
    http: httpx.AsyncClient,
    base: str,
    load: asyncio.Event,
    turns_done: Counter[str],
) -> None:
    """Turns one after another while ``load`` is set (at least one, at most ``MAX_TURNS``)."""
    created = await http.post(f"{base}/api/sessions", json={"session_id": conversation.session_id})
    assert created.status_code == 201, created.text
    for turn in range(1, MAX_TURNS + 1):
        if turn > 1 and not load.is_set():
            return
        prompt = f"{conversation.session_id} turn {turn}"
        await _send(conversation, http, base, prompt)
        ended = await conversation.changes(functools.partial(conversation.ended, prompt), TURN_BOUND)
        outcome = conversation.outcome(prompt)
        assert ended and outcome is not None, f"{conversation.session_id}: {prompt!r} never ended (hanging)"
        conversation.outcomes[prompt] = outcome
        turns_done[conversation.session_id] += 1


async def _health(http: httpx.AsyncClient, replica: Replica) -> dict[str, Any]:
    try:
        body: dict[str, Any] = (await http.get(f"{replica.url}/api/health", timeout=2)).json()
        return body
    except (httpx.HTTPError, ValueError):
        return {}


async def _taken_over(http: httpx.AsyncClient, replicas: list[Replica]) -> int:
    return sum([int((await _health(http, r)).get("taken_over", 0)) for r in replicas])


async def _wait(condition: Callable[[], Awaitable[bool]], timeout: float, what: str) -> float:
    """Seconds until ``condition()`` held (polled every 0.1 s), failing after ``timeout``."""
    started = time.monotonic()
    while not await condition():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def _busiest(http: httpx.AsyncClient, c: Cluster, *, besides: Replica | None = None) -> Replica:
    """A replica running turns right now (the one running most), other than ``besides``."""
    found: list[Replica] = []

    async def running() -> bool:
        counts = [
            (int((await _health(http, r)).get("runs", 0)), i)
            for i, r in enumerate(c.replicas)
            if r is not besides
        ]
        count, index = max(counts)
        found[:] = [c.replicas[index]] if count else []
        return bool(found)

    await _wait(running, 30, "a replica running turns")
    return found[0]


_WATCHED: dict[str, Conversation] = {}
"""The test's conversations by session, so a stall can say what each stalled client last received."""


async def _progress(turns_done: Counter[str], sessions: list[str], timeout: float, what: str) -> None:
    """Every conversation finishes one more turn: the cluster has recovered from the last fault."""
    before = dict(turns_done)

    async def moved() -> bool:
        return all(turns_done[s] > before.get(s, 0) for s in sessions)

    try:
        await _wait(moved, timeout, f"every conversation moves on after {what}")
    except AssertionError as stall:  # say which conversations stalled, and where their streams stand
        stalled = [s for s in sessions if turns_done[s] <= before.get(s, 0)]
        raise AssertionError(f"{stall}; stalled: {[_where(s) for s in stalled]}") from None


def _where(session_id: str) -> str:
    conversation = _WATCHED.get(session_id)
    if conversation is None:
        return session_id
    received = conversation.received
    tail = [(e.get("seq"), e["type"]) for _, e in received.frames[-8:]]
    return (
        f"{session_id}: cursor {received.cursor}, reconnects {received.reconnects}, busy "
        f"{conversation.busy_refusals}, lost posts {conversation.lost_posts}, last events {tail}"
    )


def _check_stream(conversation: Conversation) -> tuple[list[str], list[tuple[int, str]]]:
    """Lost and conflicting seqs in what the client received: seqs contiguous from 1 (a ``stream-reset``
    followed by a history reload explains a jump), no (session, seq) carrying two different events."""
    lost: list[str] = []
    conflicts: list[tuple[int, str]] = []
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    expected = 1
    for _cursor, event in conversation.received.frames:
        if event["type"] == "stream-reset":
            expected = max(expected, event["last_seq"] + 1)
            continue
        key = (event["session_id"], event["seq"])
        if key in seen:
            if seen[key] != event:
                conflicts.append((event["seq"], f"{seen[key]['type']} / {event['type']}"))
            continue
        seen[key] = event
        if event["seq"] > expected and not _skips_to(event, expected):
            lost.append(f"{conversation.session_id}: seqs {expected}..{event['seq'] - 1}")
        expected = max(expected, event["seq"] + 1)
    return lost, conflicts


def _skips_to(event: dict[str, Any], expected: int) -> bool:
    """Whether ``event`` says the seqs from ``expected`` up to its own were never published: the start of a
    run taking a dead replica's turn over, whose ``skipped_from`` marks the documented gap (RELIABILITY.md,
    `test_numbered_events`): the dead run counted those seqs in the store (a client that read the history
    counts them too, so they are never reused) and died before publishing them; the takeover announces the
    calls they completed again. Any other jump is a loss."""
    skipped = event.get("skipped_from")
    return event.get("type") == "interaction-start" and skipped == expected


def _log_gaps_explained(rows: list[tuple[int, int, str]]) -> bool:
    """The shared log's seqs are 1..n, but for the jumps a takeover's start marks (see :func:`_skips_to`)."""
    expected = 1
    for _, seq, body in rows:
        if seq != expected and not (seq > expected and _skips_to(json.loads(body), expected)):
            return False
        expected = seq + 1
    return True


async def _event_log(store_url: str, session_id: str) -> list[tuple[int, int, str]]:
    """The shared event log's rows of a conversation's own stream: (cursor, seq, body)."""
    schema = store_url.split("schema=")[1].split("&")[0]
    engine = create_async_engine(make_url(postgres_url()).set(drivername="postgresql+asyncpg"))
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                sa.text(
                    f'SELECT id, seq, body FROM "{schema}".toolwire_events '
                    "WHERE stream = :s AND session_id = :s ORDER BY id"
                ),
                {"s": session_id},
            )
            return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]
    finally:
        await engine.dispose()


def _answered_once(history: list[Message]) -> list[str]:
    """Tool calls without exactly one result, and results without a call."""
    wrong: list[str] = []
    for i, message in enumerate(history):
        if not message.tool_calls:
            continue
        results: Counter[str] = Counter()
        for later in history[i + 1 :]:
            if later.role != "tool":
                break
            results.update(r.tool_call_id for r in later.tool_results)
        calls = Counter(c.tool_call_id for c in message.tool_calls)
        if results != calls:
            wrong.append(f"message {i}: calls {dict(calls)} results {dict(results)}")
    return wrong


async def _valid_on_every_adapter(history: list[Message], session_id: str) -> None:
    """The next request built from the stored history by each wire family fits the official SDK's request
    type and answers every tool call."""
    request = ModelRequest(messages=[*history, Message.user("Anything else?")], tools=TOOLS)
    checks: dict[str, Callable[[dict[str, Any]], None]] = {
        "openai-chat": sdk_types.check_openai_chat,
        "openai-responses": sdk_types.check_openai_responses,
        "anthropic": sdk_types.check_anthropic,
        "gemini": sdk_types.check_gemini,
        "bedrock": lambda body: sdk_types.check_bedrock(body, model_id="m", stream=True),
    }
    sent: list[Any] = []
    for provider, factory in adapters(sent).items():
        model = factory()
        with pytest.raises(ProviderHTTPError):  # the capturing transport answers 400 once it has the body
            async for _part in model.stream(request):
                pass
        await model.aclose()
        checks[provider](sent[-1])
        assert unanswered_calls(provider, sent[-1]) == [], (session_id, provider)


def _fault(replica: Replica) -> str:
    """Which process a fault hit and when (the wall clock's last 1,000 s, as the executions log has it)."""
    return f"pid {replica.process.pid} at {time.time() % 1000:.2f}"


async def _faults(
    c: Cluster, http: httpx.AsyncClient, turns_done: Counter[str], measured: dict[str, Any]
) -> None:
    """The four faults, one after another, each once the cluster has recovered from the one before."""
    sessions = list(turns_done)

    # 1. SIGKILL a replica running turns; another takes its runs over once their leases expire.
    victim = await _busiest(http, c)
    survivors = [r for r in c.replicas if r is not victim]
    before = await _taken_over(http, survivors)
    measured["faults"] = {"sigkill": _fault(victim)}
    c.kill(victim)

    async def kill_taken_over() -> bool:
        return await _taken_over(http, survivors) > before

    measured["sigkill_takeover_s"] = round(await _wait(kill_taken_over, 30, "a takeover after SIGKILL"), 2)
    await c.restart(victim)
    await _progress(turns_done, sessions, 60, "the SIGKILL")

    # 2. SIGSTOP a replica running turns past its lease: until its runs were taken over and every
    # conversation finished a turn without it; then SIGCONT: it wakes as a zombie that still believes it
    # holds the runs it had.
    zombie = await _busiest(http, c)
    others = [r for r in c.replicas if r is not zombie]
    before = await _taken_over(http, others)
    measured["faults"]["sigstop"] = _fault(zombie)
    zombie.process.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:

        async def stop_taken_over() -> bool:
            return await _taken_over(http, others) > before

        measured["sigstop_takeover_s"] = round(
            await _wait(stop_taken_over, 30, "a takeover after SIGSTOP"), 2
        )
        await _progress(turns_done, sessions, 60, "the SIGSTOP (while stopped)")
        measured["sigstop_runs_taken"] = await _taken_over(http, others) - before
    finally:
        zombie.process.send_signal(signal.SIGCONT)
    measured["faults"]["sigcont"] = _fault(zombie)
    measured["sigstop_stopped_s"] = round(time.monotonic() - stopped_at, 2)
    await _progress(turns_done, sessions, 60, "the SIGCONT")

    # 3. SIGTERM a replica running turns: it refuses new turns (503 draining) and hands its runs over.
    leaving = await _busiest(http, c, besides=zombie)  # a second process: the zombie's writes stay its own
    survivors = [r for r in c.replicas if r is not leaving]
    before = await _taken_over(http, survivors)
    measured["faults"]["sigterm"] = _fault(leaving)
    leaving.process.terminate()
    term_at = time.monotonic()

    async def handed_over() -> bool:
        return await _taken_over(http, survivors) > before

    await _wait(handed_over, 30, "a hand-over after SIGTERM")
    measured["sigterm_handover_s"] = round(time.monotonic() - term_at, 2)
    assert await asyncio.to_thread(leaving.process.wait, 30) in (0, -signal.SIGTERM)
    measured["sigterm_exit_s"] = round(time.monotonic() - term_at, 2)
    await c.restart(leaving)
    await _progress(turns_done, sessions, 60, "the SIGTERM")

    # 4. Restart PostgreSQL (shared with others: it is back, and answering, before the test goes on).
    restart_at = time.monotonic()
    measured["faults"]["postgres_restart"] = f"at {time.time() % 1000:.2f}"
    await asyncio.to_thread(restart_postgres)
    admin = create_async_engine(make_url(postgres_url()).set(drivername="postgresql+asyncpg"))

    async def answers() -> bool:
        try:
            async with admin.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
            return True
        except Exception:
            return False

    try:
        await _wait(answers, 60, "PostgreSQL answering after its restart")
    finally:
        await admin.dispose()
    measured["postgres_restart_s"] = round(time.monotonic() - restart_at, 2)
    await _progress(turns_done, sessions, 60, "the PostgreSQL restart")


async def _settled(c: Cluster, http: httpx.AsyncClient, sessions: list[str]) -> bool:
    """No replica runs anything and no conversation is held."""
    if any([(await _health(http, r)).get("runs", 1) for r in c.replicas]):
        return False
    for session_id in sessions:
        if (await http.get(f"{c.url}/api/sessions/{session_id}/messages")).json()["running"]:
            return False
    return True


@pytest.mark.postgres
async def test_chaos_kill_stop_term_and_a_postgres_restart_under_load(tmp_path: Path) -> None:
    sessions = [f"chaos-{i}" for i in range(CONVERSATIONS)]
    conversations = [Conversation(s) for s in sessions]
    _WATCHED.clear()
    _WATCHED.update({v.session_id: v for v in conversations})
    measured: dict[str, Any] = {}
    limits = httpx.Limits(max_connections=4 * CONVERSATIONS + 10)
    async with (
        cluster(tmp_path, slow=0.6, lease=LEASE, agent_module=CHAOS_AGENT) as c,
        httpx.AsyncClient(timeout=10, limits=limits) as http,
    ):
        load = asyncio.Event()
        load.set()
        turns_done: Counter[str] = Counter({s: 0 for s in sessions})
        followers = [asyncio.create_task(_follow(v, http, c.url)) for v in conversations]
        clients = [asyncio.create_task(_converse(v, http, c.url, load, turns_done)) for v in conversations]
        started = time.monotonic()
        try:
            await _progress(turns_done, sessions, 60, "the start")
            await _faults(c, http, turns_done, measured)
            load.clear()  # each conversation finishes the turn it is in
            await asyncio.wait_for(asyncio.gather(*clients), TURN_BOUND + 10)
            measured["load_s"] = round(time.monotonic() - started, 1)
            await _wait(lambda: _settled(c, http, sessions), 60, "every run settled")
            logs = {s: await _event_log(c.store_url, s) for s in sessions}

            async def caught_up() -> bool:
                return all(
                    not logs[v.session_id] or v.received.cursor >= logs[v.session_id][-1][0]
                    for v in conversations
                )

            await _wait(caught_up, 30, "every client read its conversation's whole log")
        finally:
            for task in [*clients, *followers]:
                task.cancel()
            await asyncio.gather(*clients, *followers, return_exceptions=True)
        history = {}
        store = await SQLStore.open(c.store_url)
        try:
            for session_id in sessions:
                history[session_id] = await store.load_history(session_id)
        finally:
            await store.close()

    _measure(measured, conversations, logs, tmp_path)
    for conversation in conversations:  # the evidence, kept beside the replicas' logs for a failure's reader
        (tmp_path / f"received-{conversation.session_id}.json").write_text(
            json.dumps(conversation.received.frames)
        )
        rows = [[cursor, seq, json.loads(body)] for cursor, seq, body in logs[conversation.session_id]]
        (tmp_path / f"log-{conversation.session_id}.json").write_text(json.dumps(rows))
    print(f"\nchaos measured: {json.dumps(measured)}")
    problems = await _violations(conversations, logs, history, tmp_path)
    assert not problems, "\n".join(problems)


async def _violations(
    conversations: list[Conversation],
    logs: dict[str, list[tuple[int, int, str]]],
    history: dict[str, list[Message]],
    directory: Path,
) -> list[str]:
    """Every property the chaos must keep that did not hold, each with its evidence."""
    problems: list[str] = []
    # No non-idempotent call executed twice.
    executions = [json.loads(line) for line in (directory / "executions").read_text().splitlines()]
    charges: dict[tuple[str, str], list[str]] = {}
    for e in executions:
        if e["tool"] == "charge":
            charges.setdefault((e["session"], e["call"]), []).append(
                f"pid {e['pid']} at {e['at'] % 1000:.2f} in {e['interaction']}"
            )
    problems += [f"charge executed twice: {key} by {by}" for key, by in charges.items() if len(by) > 1]
    # No event lost or duplicated: per client (seqs contiguous from 1 unless a reset explains a jump, no
    # (session, seq) carrying two different events), and in the shared log (one row per seq, 1..n).
    for conversation in conversations:
        lost, conflicts = _check_stream(conversation)
        problems += [f"lost by the client: {x}" for x in lost]
        if conflicts:
            problems.append(
                f"{conversation.session_id}: {len(conflicts)} seqs carry two different events, "
                f"at {_runs_of(conflicts)} (first: {conflicts[0][1]})"
            )
    for session_id, rows in logs.items():
        seqs = [seq for _, seq, _ in rows]
        if not _log_gaps_explained(rows):
            problems.append(
                f"{session_id}: the event log's seqs are not 1..n: {_runs_of([(q, '') for q in seqs])}"
            )
    # Every turn ended completed, or with a typed error (an error event naming its type); none hangs (each
    # client waited for its turn's end, bounded).
    for conversation in conversations:
        for prompt, (status, error_type) in conversation.outcomes.items():
            if not (status == "completed" or (status in ("error", "cancelled") and error_type)):
                problems.append(f"{prompt!r} ended {status} without a typed error")
        for event in conversation.events():
            if event["type"] == "interaction-end" and event["status"] not in (
                "completed",
                "error",
                "cancelled",
            ):
                problems.append(f"{conversation.session_id}: an interaction ended {event['status']}")
    # Every stored history: each tool call has exactly one result; the next request of every wire family
    # fits the official SDK's type and answers every call.
    for session_id, messages in history.items():
        problems += [f"{session_id}: {x}" for x in _answered_once(messages)]
        try:
            await _valid_on_every_adapter(messages, session_id)
        except AssertionError as exc:
            problems.append(f"{session_id}: an invalid next request: {exc}")
    return problems


def _runs_of(items: list[tuple[int, str]]) -> list[str]:
    """The seqs of ``items`` as ascending runs (``"1-40"``), to show where a stream repeats or skips."""
    runs: list[str] = []
    first = previous = None
    for seq, _ in items:
        if previous is not None and seq == previous + 1:
            previous = seq
            continue
        if first is not None:
            runs.append(f"{first}-{previous}")
        first = previous = seq
    if first is not None:
        runs.append(f"{first}-{previous}")
    return runs


def _measure(
    measured: dict[str, Any],
    conversations: list[Conversation],
    logs: dict[str, list[tuple[int, int, str]]],
    directory: Path,
) -> None:
    measured["turns"] = sum(len(v.outcomes) for v in conversations)
    measured["outcomes"] = dict(Counter(f"{s}:{e}" for v in conversations for s, e in v.outcomes.values()))
    measured["events"] = sum(len(rows) for rows in logs.values())
    measured["log_repeated_seqs"] = sum(
        len(rows) - len({seq for _, seq, _ in rows}) for rows in logs.values()
    )
    measured["reconnects"] = sum(v.received.reconnects for v in conversations)
    measured["stream_resets"] = sum(
        1 for v in conversations for _, e in v.received.frames if e["type"] == "stream-reset"
    )
    measured["draining_refusals"] = sum(v.draining_refusals for v in conversations)
    measured["busy_refusals"] = sum(v.busy_refusals for v in conversations)
    measured["lost_posts"] = sum(v.lost_posts for v in conversations)
    executions = [json.loads(line) for line in (directory / "executions").read_text().splitlines()]
    charged = Counter((e["session"], e["call"]) for e in executions if e["tool"] == "charge")
    measured["charges"] = len(charged)
    measured["charged_twice"] = sum(1 for n in charged.values() if n > 1)
