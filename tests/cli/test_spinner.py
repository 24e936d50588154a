"""Spinners while the model loads and decides: on a terminal only (a real pseudo-terminal, pexpect)."""

from __future__ import annotations

from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import spawn, sqlite_url, toolwire


def test_a_spinner_shows_while_the_model_decides_on_a_terminal(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    child = spawn("run", "hello", "--agent", "tests.cli.agents:thinking", "--store", store)
    child.expect("thinking…")  # the model takes a second before its first word
    child.expect("Done thinking.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_no_spinner_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    done = toolwire("run", "hello", "--agent", "tests.cli.agents:thinking", "--store", store)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done thinking.\n"
    assert "thinking…" not in done.stderr and "loading" not in done.stderr


@pytest.mark.live
def test_the_embedded_model_shows_loading_then_thinking(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    child = spawn("run", "What's the status of TXN_123?", "--model", "local", "--store", store)
    child.expect("loading the model…")
    child.expect("thinking…")
    child.expect("get_transaction_status")
    child.expect(pexpect.EOF, timeout=240)
    child.close()
    assert child.exitstatus == 0
