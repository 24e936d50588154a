"""``sessions list|show|delete`` and how ``run`` treats sessions: titles, counts, deleting, read-only
reading, a mistyped ``--session``, a failed first run."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.helpers import (
    call,
    command_env,
    read_store,
    script,
    sqlite_url,
    text,
    toolwire,
    unreachable_base_url,
)
from toolwire.store import Store

ANSWERED = [
    [{"type": "text", "text": "Checking."}, call("get_transaction_status", {"transaction_id": "TXN_123"})],
    text("Settled."),
]


def run_once(tmp_path: Path, store: str, prompt: str, *extra: str) -> str:
    done = toolwire("run", prompt, "--model", script(tmp_path, ANSWERED), "--store", store, *extra)
    assert done.returncode == 0, done.stderr
    return done.stderr.split("session ")[-1].strip()


def test_list_shows_title_date_and_message_count(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    first = run_once(tmp_path, store, "Status of   TXN_123?\nThanks")
    second = run_once(tmp_path, store, "Another question")
    listed = toolwire("sessions", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [second, first]  # newest first
    today = time.strftime("%Y-%m-%d")
    # user, assistant with the call, tool result, answer; the title is the first prompt on one line
    assert re.fullmatch(rf"{first}  {today} \d\d:\d\d +4 messages  Status of TXN_123\? Thanks", lines[1])
    assert lines[0].endswith("4 messages  Another question")


def test_delete_asks_first_unless_yes(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    keep, drop, quick = (run_once(tmp_path, store, p) for p in ("keep me", "drop me", "quick"))

    refused = toolwire("sessions", "delete", keep, "--store", store, stdin="n\n")
    assert refused.returncode == 1 and f"delete session {keep} (keep me, 4 messages)" in refused.stdout
    assert "not deleted" in refused.stdout
    no_terminal = toolwire("sessions", "delete", keep, "--store", store, stdin="")
    assert no_terminal.returncode == 1 and "not deleted" in no_terminal.stdout

    confirmed = toolwire("sessions", "delete", drop, "--store", store, stdin="y\n")
    assert confirmed.returncode == 0 and f"deleted session {drop}" in confirmed.stdout
    forced = toolwire("sessions", "delete", quick, "--yes", "--store", store)
    assert forced.returncode == 0 and f"deleted session {quick}" in forced.stdout

    async def left(s: Store) -> list[tuple[str, int]]:
        return [(sid, len(await s.raw_messages(sid))) for sid in (keep, drop, quick)]

    assert read_store(store, left) == [(keep, 4), (drop, 0), (quick, 0)]
    assert toolwire("sessions", "list", "--store", store).stdout.split()[0] == keep
    again = toolwire("sessions", "delete", drop, "--yes", "--store", store)
    assert again.returncode == 1 and f"no session {drop!r}" in again.stderr


def test_delete_refuses_a_session_a_run_is_using(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    # The tool holds until the SIGINT below, however slow the machine is (a 60 s count once finished first).
    model = script(tmp_path, [[call("hold", {})]])
    args = ["run", "count", "--session", "busy", "--model", model, "--store", store]
    running = subprocess.Popen(
        [sys.executable, "-m", "toolwire", *args, "--agent", "tests.cli.agents:slow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(),
    )
    try:
        assert running.stderr is not None
        while "holding until stopped" not in running.stderr.readline():  # piped: activity is on stderr
            assert running.poll() is None, running.stderr.read()
        busy = toolwire("sessions", "delete", "busy", "--yes", "--store", store)
        assert busy.returncode == 1 and "busy" in busy.stderr, busy.stderr
    finally:
        running.send_signal(signal.SIGINT)
        running.communicate(timeout=60)
    assert running.returncode == 130  # interrupted; the run was cancelled and the session kept

    async def status(s: Store) -> list[str]:
        return [r.status for r in await s.tool_calls("busy")]

    assert read_store(store, status) == ["cancelled"]
    assert toolwire("sessions", "delete", "busy", "--yes", "--store", store).returncode == 0


def test_reading_never_creates_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "there" / "t.db"
    store = sqlite_url(missing)
    listed = toolwire("sessions", "list", "--store", store)
    assert listed.returncode == 0 and listed.stdout.strip() == "no sessions"
    for command in (["show", "s1"], ["delete", "s1", "--yes"]):
        done = toolwire("sessions", *command, "--store", store)
        assert done.returncode == 1 and "no session 's1'" in done.stderr, done.stderr
    default = toolwire("sessions", "list", cwd=tmp_path)  # the default store, ./toolwire.db
    assert default.returncode == 0 and default.stdout.strip() == "no sessions"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_mistyped_session_says_it_starts_a_new_one(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    existing = run_once(tmp_path, store, "first")
    typo = toolwire(
        "run", "again", "--session", existing[:-1], "--model", script(tmp_path, ANSWERED), "--store", store
    )
    assert typo.returncode == 0
    assert f"no session {existing[:-1]!r} in the store: starting a new session" in typo.stderr
    resumed = toolwire(
        "run", "again", "--session", existing, "--model", script(tmp_path, ANSWERED), "--store", store
    )
    assert resumed.returncode == 0 and "starting a new session" not in resumed.stderr


def test_a_failed_first_run_leaves_no_session_but_a_failed_later_run_keeps_it(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    env = command_env(OPENAI_BASE_URL=unreachable_base_url())
    failed = toolwire(
        "run", "hi", "--session", "new-one", "--model", "openai:gpt-4o", "--store", store, env=env
    )
    assert failed.returncode == 1
    assert toolwire("sessions", "list", "--store", store).stdout.strip() == "no sessions"

    kept = run_once(tmp_path, store, "first")
    later = toolwire(
        "run", "second", "--session", kept, "--model", "openai:gpt-4o", "--store", store, env=env
    )
    assert later.returncode == 1

    async def texts(s: Store) -> list[str]:
        return [m.text for m in await s.raw_messages(kept) if m.role == "user"]

    assert read_store(store, texts) == ["first", "second"]


def test_show_puts_each_result_under_its_call_when_the_model_reuses_call_ids(tmp_path: Path) -> None:
    """A local server numbering calls per response sends call_1 on every step (issue 28): each stored
    result answers the latest call with its id, so every call shows its own result, not the last one's."""
    store = sqlite_url(tmp_path / "t.db")
    reused = [
        [call("get_transaction_status", {"transaction_id": "TXN_123"})],
        [call("get_transaction_status", {"transaction_id": "TXN_404"})],
        text("One settled, one unknown."),
    ]
    done = toolwire("run", "Both statuses?", "--model", script(tmp_path, reused), "--store", store)
    assert done.returncode == 0, done.stderr
    session = done.stderr.split("session ")[-1].strip()
    shown = toolwire("sessions", "show", session, "--store", store)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    first = lines.index('  ▶ get_transaction_status({"transaction_id":"TXN_123"})')
    second = lines.index('  ▶ get_transaction_status({"transaction_id":"TXN_404"})')
    assert "TXN_123" in lines[first + 1] and "✓" in lines[first + 1], lines
    assert "no transaction TXN_404" in lines[second + 1], lines
