"""``toolwire run`` when a call waits for a person: it lists what is awaited, exits 3 with the command to
resume, and a later ``run`` (a new process) answers it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .helpers import call, command_env, read_store, script, sqlite_url, text, toolwire

AGENT = "tests.cli.agents:approving"


def test_a_waiting_call_is_listed_and_answered_by_a_later_run(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    # One script for the session: the resuming process goes on at the turn after the ones already used.
    model = script(tmp_path, [[call("refund", {"txn": "T9"}, "call_7")], text("done")])
    paused = toolwire(
        "run", "refund T9", "--session", "s1", "--agent", AGENT, "--model", model, "--store", store
    )
    assert paused.returncode == 3, paused.stderr
    assert "call_7: refund(" in paused.stderr and "approve or deny" in paused.stderr
    assert "toolwire run --session s1 --approve call_7" in paused.stderr
    rows = read_store(store, lambda s: s.tool_calls("s1"))
    assert [(r.tool_call_id, r.status) for r in rows] == [("call_7", "awaiting_approval")]

    refused = toolwire(
        "run", "--session", "s1", "--approve", "call_8", "--agent", AGENT, "--model", model, "--store", store
    )
    assert refused.returncode == 1 and "call_8" in refused.stderr  # not awaited: nothing written
    resumed = toolwire(
        "run", "--session", "s1", "--approve", "call_7", "--agent", AGENT, "--model", model, "--store", store
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "done" in resumed.stdout
    rows = read_store(store, lambda s: s.tool_calls("s1"))
    assert [(r.tool_call_id, r.status, r.output) for r in rows] == [("call_7", "ok", "refunded T9")]


def test_a_denial_with_a_reason_reaches_the_model(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    model = script(tmp_path, [[call("refund", {"txn": "T1"}, "c1")], text("understood")])
    assert (
        toolwire(
            "run", "refund T1", "--session", "s", "--agent", AGENT, "--model", model, "--store", store
        ).returncode
        == 3
    )
    denied = toolwire(
        "run",
        "--session",
        "s",
        "--deny",
        "c1:not today",
        "--agent",
        AGENT,
        "--model",
        model,
        "--store",
        store,
    )
    assert denied.returncode == 0, denied.stderr
    rows = read_store(store, lambda s: s.tool_calls("s"))
    assert rows[0].status == "denied" and "not today" in str(rows[0].output)


def test_the_resume_hint_works_pasted_as_printed_and_speaks_no_python(tmp_path: Path) -> None:
    """The hint names the agent, model and store the run used and answers every waiting call."""
    store = sqlite_url(tmp_path / "t.db")
    turns = [
        [
            call("refund", {"txn": "T1"}, "c1"),
            call("refund", {"txn": "T2"}, "c2"),
            call("pick_colour", {}, "c3"),
        ],
        text("both refunded, colour noted"),
    ]
    model = script(tmp_path, turns)
    paused = toolwire("run", "refund T1 and T2", "--agent", AGENT, "--model", model, "--store", store)
    assert paused.returncode == 3, paused.stderr
    (hint,) = [line for line in paused.stderr.splitlines() if line.startswith("resume with: ")]
    # A wrong kind of answer is explained in the command's terms, not the library's keyword arguments.
    wrong = toolwire(*hint.removeprefix("resume with: toolwire ").split(), "--approve", "c3")
    assert wrong.returncode == 1 and "c3 (pick_colour) is a client tool: give its output" in wrong.stderr
    for said in (paused.stderr, wrong.stderr):
        assert "tool_outputs=" not in said and "approvals=" not in said and "api_key=" not in said

    on_path = dict(command_env(), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    pasted = subprocess.run(
        hint.removeprefix("resume with: "),
        shell=True,
        cwd=tmp_path,
        env=on_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.strip() == "both refunded, colour noted"
    session_id = paused.stderr.split("session ")[-1].split()[0]
    rows = read_store(store, lambda s: s.tool_calls(session_id))
    assert [(r.tool_call_id, r.status) for r in rows] == [("c1", "ok"), ("c2", "ok"), ("c3", "ok")]


def test_a_missing_key_names_its_variable_not_a_python_argument(tmp_path: Path) -> None:
    env = command_env()
    env.pop("GROQ_API_KEY", None)
    done = toolwire(
        "run", "hi", "--model", "groq:llama-3.3-70b", "--store", sqlite_url(tmp_path / "t.db"), env=env
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "error: no Groq API key: set GROQ_API_KEY (in the environment or ./.env)"


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


def test_chat_left_with_calls_waiting_prints_the_command_that_answers_them(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    model = script(tmp_path, [[call("refund", {"txn": "T1"}, "c1")], text("refunded after all")])
    left = toolwire("chat", "--agent", AGENT, "--model", model, "--store", store, stdin="refund T1\n")
    assert left.returncode == 0, left.stderr  # stdin ended at the approval question
    (hint,) = [line for line in left.stderr.splitlines() if line.startswith("resume with: toolwire ")]
    assert "--approve c1" in hint and f"--agent {AGENT}" in hint and "--store" in hint
    resumed = toolwire(*hint.removeprefix("resume with: toolwire ").split())
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "refunded after all"
