"""The toolwire command, run as a real subprocess with a scripted model and a real SQLite file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import toolwire

SCRIPT = [
    [
        {"type": "text", "text": "Checking."},
        {
            "type": "tool-call",
            "tool_call_id": "call_1",
            "tool_name": "get_transaction_status",
            "args": {"transaction_id": "TXN_123"},
            "provider_metadata": {"google": {"thoughtSignature": "c2ln"}},
        },
    ],
    [{"type": "text", "text": "TXN_123 is settled."}],
]


def test_run_then_sessions_list_and_show(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    store = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    run = toolwire("run", "Status of TXN_123?", "--model", f"scripted:{script}", "--store", store)
    assert run.returncode == 0, run.stderr
    assert "get_transaction_status" in run.stderr and "TXN_123 is settled." in run.stdout
    session_id = run.stderr.split("session ")[-1].strip()
    listed = toolwire("sessions", "list", "--store", store)
    assert listed.returncode == 0 and session_id in listed.stdout
    shown = toolwire("sessions", "show", session_id, "--store", store)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    # the call and its result sit under the assistant message that made it
    call_line = next(i for i, line in enumerate(lines) if "get_transaction_status" in line)
    assert lines[call_line - 1].startswith("assistant: Checking.")
    assert '"authorized_by"' in lines[call_line + 1] or "authorized_by" in shown.stdout
    assert lines[-2].startswith("assistant: TXN_123 is settled.")


def test_bad_input_gives_one_line_errors_and_nonzero_exit(tmp_path: Path) -> None:
    store = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    bad_model = toolwire("run", "hi", "--model", "nonsense", "--store", store)
    assert bad_model.returncode == 1
    assert bad_model.stderr.strip().startswith("error:") and len(bad_model.stderr.strip().splitlines()) == 1
    missing = toolwire("sessions", "show", "no-such-session", "--store", store)
    assert missing.returncode == 1 and "no session 'no-such-session'" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    bad_script = toolwire("run", "hi", "--model", f"scripted:{broken}", "--store", store)
    assert bad_script.returncode == 1 and "cannot read scripted model file" in bad_script.stderr
    usage = toolwire("frobnicate")
    assert usage.returncode == 2


def test_version_from_the_script_and_from_python_m() -> None:
    from importlib.metadata import version

    expected = f"toolwire {version('toolwire')}"
    script = Path(sys.executable).with_name("toolwire")  # the console script installed beside python
    for command in (
        [str(script), "--version"],
        [sys.executable, "-m", "toolwire", "--version"],
        [sys.executable, "-m", "toolwire.cli", "--version"],  # what the server tests and benchmarks run
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected, command
