"""``toolwire sessions list|show|rename|delete``. Reading never creates a database: a SQLite file that does not
exist holds no sessions, and is left not existing."""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from rich.text import Text

from toolwire._text import session_title
from toolwire.cli._output import clip, console, read_line, render_transcript
from toolwire.errors import ToolwireError
from toolwire.messages import Message, Usage
from toolwire.pricing import total_cost
from toolwire.store import DEFAULT_URL, SessionInfo, SessionReader, Store, open_store
from toolwire.store._rename import log_rename
from toolwire.store._rename import rename_session as _rename
from toolwire.transcript import Transcript, merge_histories

TITLE_CHARS = 60


def _sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL; ``None`` for other stores (and in-memory SQLite)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None  # open_store says what is wrong with it
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else Path(database)


def _shown(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


async def _open_existing(url: str | None) -> Store | None:
    """The store at ``url``, or ``None`` when it is a SQLite file that does not exist."""
    url = url or DEFAULT_URL
    path = _sqlite_file(url)
    if path is not None and not path.is_file():
        return None
    return await open_store(url)


def _no_session(session_id: str, url: str | None) -> ToolwireError:
    return ToolwireError(f"no session {session_id!r} in {_shown(url or DEFAULT_URL)}")


async def list_sessions(args: argparse.Namespace) -> int:
    store = await _open_existing(args.store)
    if store is None:
        console.print("no sessions")
        return 0
    try:
        sessions = await store.list_sessions(limit=args.limit)
        if not sessions:
            console.print("no sessions")
        for info in sessions:
            messages = await store.raw_messages(info.id)
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated_at))
            count = f"{len(messages)} message{'' if len(messages) == 1 else 's'}"
            line = Text.assemble(
                info.id, "  ", (when, "dim"), "  ", f"{count:>12}", "  ", _title(info.title, messages)
            )
            if info.parent_session_id:
                line.append(f"  (sub-session of {info.parent_session_id})", style="dim")
            console.print(line, soft_wrap=True)
    finally:
        await store.close()
    return 0


def _title(title: str | None, messages: Sequence[Message]) -> Text:
    """The stored title, else the first prompt (sessions written before titles existed)."""
    text = title or next((m.text for m in messages if m.role == "user" and m.text), "")
    text = " ".join(text.split())
    return Text(clip(text, TITLE_CHARS)) if text else Text("(untitled)", style="dim")


@asynccontextmanager
async def _stored_session(args: argparse.Namespace) -> AsyncIterator[tuple[Store, SessionInfo]]:
    """The store and ``args.session_id``'s row in it; an error when there is no such session."""
    store = await _open_existing(args.store)
    if store is None:
        raise _no_session(args.session_id, args.store)
    try:
        info = await store.get_session(args.session_id)
        if info is None:
            raise _no_session(args.session_id, args.store)
        yield store, info
    finally:
        await store.close()


async def show_session(args: argparse.Namespace) -> int:
    async with _stored_session(args) as (store, info):
        if info.title:
            console.print(Text.assemble(("title:", "bold"), " ", info.title), soft_wrap=True)
        tree = await store.list_sessions(user_session_id=info.user_session_id or info.id, limit=_TREE_LIMIT)
        subs = [s for s in tree if s.id.startswith(f"{info.id}.")]  # its sub-agents, at any depth
        await _show_transcript(store, info, subs)
        own = await _priced(store, [info])
        lines = [f"usage: {own}"]
        for record in await store.compactions(info.id):  # what the requests send instead of older turns
            cost = total_cost([(record.provider, record.model, record.usage)])
            priced = "" if cost is None else f", ${cost:.6f}"
            lines.append(
                f"compaction: messages before {record.first_kept_message_id} summarised by {record.model} "
                f"({record.tokens_before} -> {record.tokens_after} tokens{priced}): {record.summary}"
            )
        if subs:
            lines.append(f"sub-agents: {await _priced(store, subs)}")
            lines.append(f"total: {await _priced(store, [info, *subs])}")
        console.print(Text("\n".join(lines), style="dim"), soft_wrap=True)
    return 0


_TREE_LIMIT = 100_000


async def _show_transcript(store: Store, info: SessionInfo, subs: Sequence[SessionInfo]) -> None:
    """The conversation as the page shows it: one ``Transcript.from_history`` of the same history (its
    sub-agents' merged in, the calls a paused run waits for shown waiting, ``ended`` unless a run is in
    progress) and each failed turn's stored error after the turn it ended."""
    sessions = [info, *subs]
    running = await store.run_in_progress(info.id)
    awaiting = {
        (s.id, r.tool_call_id): r.awaiting
        for s in sessions
        for r in await store.tool_calls(s.id)
        if r.awaiting
    }
    # A live or paused run's calls are as stored (pending, awaited); otherwise repaired, as the model reads it.
    raw = running or bool(awaiting)
    histories = [await (store.raw_messages(s.id) if raw else store.load_history(s.id)) for s in sessions]
    messages = merge_histories(histories)
    parents = {s.id: s.parent_session_id for s in subs}
    transcript = Transcript.from_history(messages, parents=parents, awaiting=awaiting, ended=not running)
    created = {(m.session_id, m.id): m.created_at for m in messages}
    prompts = [  # the conversation's own prompts, by when they were sent: a turn's error goes before the next
        (created.get((m.session_id, m.source_id), 0.0), index)
        for index, m in enumerate(transcript.messages)
        if m.role == "user" and m.session_id == info.id
    ]
    notes: dict[int, list[str]] = {}
    for error in await store.turn_errors(info.id):
        at = next((index for sent, index in prompts if sent > error.created_at), len(transcript.messages))
        model = f" (model {error.provider}:{error.model})" if error.model else ""
        notes.setdefault(at, []).append(f"the answer failed{model}: {error.message or error.error_type}")
    render_transcript(transcript, console, agents={s.id: s.agent_name for s in subs}, notes=notes)


async def _priced(store: SessionReader, sessions: Sequence[SessionInfo]) -> str:
    """Usage totals of ``sessions`` and their cost, priced per answering model from the usage kept on
    every stored step (an empty answer's too: it was billed)."""
    usage = Usage()
    steps: list[tuple[str | None, str | None, Usage]] = []
    for info in sessions:
        usage = usage + info.usage
        steps.extend((s.provider, s.model, s.usage) for s in await store.steps(info.id))
    cost = total_cost(steps)
    priced = ", cost unknown (no price for a model)" if cost is None else f", cost ${cost:.6f}"
    return f"{usage.input_tokens} input + {usage.output_tokens} output tokens, {usage.requests} request(s){priced}"


async def delete_session(args: argparse.Namespace) -> int:
    async with _stored_session(args) as (store, info):
        if not args.yes:
            messages = await store.raw_messages(info.id)
            title = _title(info.title, messages).plain
            question = f"delete session {info.id} ({title}, {len(messages)} messages) and its sub-agent sessions? [y/N] "
            if not _confirm(question):
                console.print("not deleted (--yes deletes without asking)")
                return 1
        if not await store.delete_session(info.id):  # deleted meanwhile
            raise _no_session(info.id, args.store)
        console.print(Text(f"deleted session {info.id}"), soft_wrap=True)
    return 0


async def rename_session(args: argparse.Namespace) -> int:
    """The same rename as ``PATCH /api/sessions/{id}``: ONE numbered ``session-renamed`` event (refused
    while a run holds the session), into the replicas' event log on PostgreSQL so live watchers see it."""
    title = session_title(args.title)
    if title is None:
        raise ToolwireError("the title must not be blank nor contain U+0000")
    async with _stored_session(args) as (store, info):
        renamed = await _rename(store, info.id, title)
        if renamed is None:  # deleted meanwhile
            raise _no_session(info.id, args.store)
        await log_rename(store, renamed)
        console.print(Text(f"renamed session {info.id}: {title}"), soft_wrap=True)
    return 0


def _confirm(question: str) -> bool:
    try:
        answer = read_line(question)
    except EOFError:  # nobody to ask (stdin is not a terminal): --yes says it
        console.print()
        return False
    return answer.strip().lower() in ("y", "yes")
