"""``toolwire run`` when a call waits for a person: it lists what is awaited, exits 3 with the command to
resume, and a later ``run`` (a new process) answers it."""

from __future__ import annotations

from pathlib import Path

from .helpers import call, read_store, script, sqlite_url, text, toolwire

AGENT = "tests.cli.agents:approving"


def test_a_waiting_call_is_listed_and_answered_by_a_later_run(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    first = script(tmp_path, [[call("refund", {"txn": "T9"}, "call_7")]], "first.json")
    paused = toolwire(
        "run", "refund T9", "--session", "s1", "--agent", AGENT, "--model", first, "--store", store
    )
    assert paused.returncode == 3, paused.stderr
    assert "call_7: refund(" in paused.stderr and "approve or deny" in paused.stderr
    assert "toolwire run --session s1 --approve call_7" in paused.stderr
    rows = read_store(store, lambda s: s.tool_calls("s1"))
    assert [(r.tool_call_id, r.status) for r in rows] == [("call_7", "awaiting_approval")]

    second = script(tmp_path, [[*text("done")]], "second.json")
    refused = toolwire(
        "run", "--session", "s1", "--approve", "call_8", "--agent", AGENT, "--model", second, "--store", store
    )
    assert refused.returncode == 1 and "call_8" in refused.stderr  # not awaited: nothing written
    resumed = toolwire(
        "run", "--session", "s1", "--approve", "call_7", "--agent", AGENT, "--model", second, "--store", store
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "done" in resumed.stdout
    rows = read_store(store, lambda s: s.tool_calls("s1"))
    assert [(r.tool_call_id, r.status, r.output) for r in rows] == [("call_7", "ok", "refunded T9")]


def test_a_denial_with_a_reason_reaches_the_model(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    first = script(tmp_path, [[call("refund", {"txn": "T1"}, "c1")]], "first.json")
    assert (
        toolwire(
            "run", "refund T1", "--session", "s", "--agent", AGENT, "--model", first, "--store", store
        ).returncode
        == 3
    )
    second = script(tmp_path, [[*text("understood")]], "second.json")
    denied = toolwire(
        "run",
        "--session",
        "s",
        "--deny",
        "c1:not today",
        "--agent",
        AGENT,
        "--model",
        second,
        "--store",
        store,
    )
    assert denied.returncode == 0, denied.stderr
    rows = read_store(store, lambda s: s.tool_calls("s"))
    assert rows[0].status == "denied" and "not today" in str(rows[0].output)


def test_answers_need_a_session_and_something_to_do(tmp_path: Path) -> None:
    no_session = toolwire("run", "--approve", "c1", "--store", sqlite_url(tmp_path / "t.db"))
    nothing = toolwire("run", "--session", "s", "--store", sqlite_url(tmp_path / "t.db"))
    assert no_session.returncode == nothing.returncode == 1
    assert "--session" in no_session.stderr and "prompt" in nothing.stderr


def test_chat_asks_and_goes_on(tmp_path: Path) -> None:
    """In ``chat`` a waiting call is asked about at once: ``y`` approves; a typed reason denies."""
    store = sqlite_url(tmp_path / "t.db")
    turns = [
        [call("refund", {"txn": "T1"}, "c1")],
        [*text("refund done")],
        [call("refund", {"txn": "T2"}, "c2")],
        [*text("fine, no refund")],
    ]
    model = script(tmp_path, turns)
    done = toolwire(
        "chat", "--session", "c", "--agent", AGENT, "--model", model, "--store", store,
        stdin="refund T1\ny\nrefund T2\ncustomer changed their mind\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "refund done" in done.stdout and "fine, no refund" in done.stdout
    rows = read_store(store, lambda s: s.tool_calls("c"))
    assert [(r.tool_call_id, r.status) for r in rows] == [("c1", "ok"), ("c2", "denied")]
    assert "customer changed their mind" in str(rows[1].output)
