"""``toolwire chat`` on a real pseudo-terminal: line editing, history, Ctrl-C and Ctrl-D, tool progress."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect

from tests.cli.helpers import call, read_store, script, spawn, sqlite_url, text, toolwire
from toolwire.store import Store

PROMPT = "you>"
UP, LEFT = "\x1b[A", "\x1b[D"


def leave(child: pexpect.spawn, key: str) -> str:
    """Press ``key`` at the prompt; the chat ends with the session id. Returns it."""
    child.expect(PROMPT)
    child.send(key)
    child.expect(r"session (sess_\w+)")
    session_id = str(child.match.group(1))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return session_id


def test_ctrl_c_mid_turn_cancels_the_turn_keeps_the_chat_and_shows_progress(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    model = script(tmp_path, [[call("slow_count", {"steps": 300})], text("Still here.")])
    child = spawn("chat", "--agent", "tests.cli.agents:slow", "--model", model, "--store", store)
    child.expect(PROMPT)
    child.sendline("count to 300")
    child.expect(re.escape('▶ slow_count({"steps": 300})'))
    child.expect("slow_count: counting 1 of 300")  # progress messages, each shown once
    child.expect("slow_count: counting 2 of 300")
    child.sendintr()
    child.expect("turn cancelled")
    child.expect(PROMPT)
    child.sendline("are you there?")
    child.expect("Still here.")
    session_id = leave(child, "\x04")  # Ctrl-D

    async def stored(s: Store) -> tuple[list[str], list[tuple[str, str]], str | None]:
        calls = [(r.tool_name, r.status) for r in await s.tool_calls(session_id)]
        info = await s.get_session(session_id)
        texts = [f"{m.role}: {m.text}" for m in await s.raw_messages(session_id)]
        return texts, calls, info.title if info else None

    texts, calls, title = read_store(store, stored)
    assert calls == [("slow_count", "cancelled")]  # the loop recorded the cancelled turn
    assert texts == [
        "user: count to 300",
        "assistant: ",
        "tool: ",
        "user: are you there?",
        "assistant: Still here.",
    ]
    assert title == "count to 300"


def test_ctrl_c_at_the_prompt_leaves_with_the_session_id(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    child = spawn("chat", "--model", script(tmp_path, [text("Hello there.")]), "--store", store)
    child.expect(PROMPT)
    child.sendline("hi")
    child.expect("Hello there.")
    session_id = leave(child, "\x03")  # Ctrl-C, which prompt_toolkit reads as a key at the prompt
    listed = toolwire("sessions", "list", "--store", store)
    assert listed.stdout.split()[0] == session_id


def test_line_editing_and_history_of_the_continued_session(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    model = script(tmp_path, [text("One."), text("Two."), text("Three.")])  # the session's whole script
    first = toolwire("run", "first question", "--model", model, "--store", store)
    session_id = first.stderr.split("session ")[-1].strip()
    child = spawn("chat", "--session", session_id, "--model", model, "--store", store)
    child.expect(PROMPT)
    child.send("hello wrld" + LEFT * 3 + "o\r")  # edited in the middle of the line
    child.expect("Two.")
    child.expect(PROMPT)
    child.send(UP * 2 + "\r")  # two back: the prompt of the earlier `run`, from the stored session
    child.expect("Three.")
    assert leave(child, "\x04") == session_id

    async def prompts(s: Store) -> list[str]:
        return [m.text for m in await s.raw_messages(session_id) if m.role == "user"]

    assert read_store(store, prompts) == ["first question", "hello world", "first question"]


def test_without_a_terminal_chat_reads_lines(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    done = toolwire(
        "chat", "--model", script(tmp_path, [text("A."), text("B.")]), "--store", store, stdin="one\n\ntwo\n"
    )
    assert done.returncode == 0, done.stderr
    assert "A." in done.stdout and "B." in done.stdout
    assert re.search(r"session sess_\w+$", done.stderr.strip())


def test_chat_c_continues_the_last_session(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    older = toolwire(
        "run", "older", "--model", script(tmp_path, [text("Old.")], "old.json"), "--store", store
    )
    model = script(tmp_path, [text("First."), text("Continued.")], "latest.json")
    latest = toolwire("run", "latest", "--model", model, "--store", store)
    assert older.returncode == latest.returncode == 0, older.stderr + latest.stderr
    session_id = latest.stderr.split("session ")[-1].strip()
    done = toolwire("chat", "-c", "--model", model, "--store", store, stdin="go on\n")
    assert done.returncode == 0, done.stderr
    assert f"continuing session {session_id} (latest)" in done.stderr
    assert "Continued." in done.stdout and done.stderr.strip().endswith(f"session {session_id}")

    async def prompts(s: Store) -> list[str]:
        return [m.text for m in await s.raw_messages(session_id) if m.role == "user"]

    assert read_store(store, prompts) == ["latest", "go on"]
    both = toolwire("chat", "-c", "--session", session_id, "--store", store, stdin="")
    assert both.returncode == 1 and "not both" in both.stderr
