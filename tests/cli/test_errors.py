"""A failed command prints its error once, on stderr, without a traceback, and exits non-zero."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli.conftest import RefusingProvider
from tests.cli.helpers import command_env, error_lines, sqlite_url, toolwire, unreachable_base_url


def assert_one_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, done
    assert done.stdout == ""
    errors = error_lines(done.stderr)
    assert len(errors) == 1, done.stderr
    assert all(f in errors[0] for f in fragments), errors
    assert "Traceback" not in done.stderr


def test_a_missing_key_is_one_line_on_stderr(tmp_path: Path) -> None:
    done = toolwire("run", "hi", "--model", "openai:gpt-4o", "--store", sqlite_url(tmp_path / "t.db"))
    assert_one_error(done, "no OpenAI API key", "OPENAI_API_KEY")
    assert done.stderr.strip() == errors_only(done.stderr)
    assert not (tmp_path / "t.db").exists()  # refused before the store was opened


def test_bad_credentials_are_one_line_on_stderr(tmp_path: Path, refusing_provider: RefusingProvider) -> None:
    store = sqlite_url(tmp_path / "t.db")
    env = command_env(OPENAI_BASE_URL=refusing_provider.base_url)
    done = toolwire("run", "hi", "--model", "openai:gpt-4o", "--store", store, env=env)
    assert_one_error(done, "HTTP 401", "Incorrect API key provided")
    assert refusing_provider.authorizations  # it was asked
    # the failed first run left no session behind
    assert toolwire("sessions", "list", "--store", store).stdout.strip() == "no sessions"


def test_an_unreachable_url_is_one_error_line_after_the_retry_warnings(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    env = command_env(OPENAI_BASE_URL=unreachable_base_url())
    done = toolwire("run", "hi", "--model", "openai:gpt-4o", "--store", store, env=env)
    assert_one_error(done, "connection failed")
    retries = [line for line in done.stderr.splitlines() if not line.startswith("error:")]
    assert retries and all(line.startswith("WARNING toolwire.") and "retry" in line for line in retries)
    assert toolwire("sessions", "list", "--store", store).stdout.strip() == "no sessions"


def test_a_turn_error_in_chat_is_printed_once_and_the_chat_goes_on(
    tmp_path: Path, refusing_provider: RefusingProvider
) -> None:
    store = sqlite_url(tmp_path / "t.db")
    env = command_env(OPENAI_BASE_URL=refusing_provider.base_url)
    done = toolwire("chat", "--model", "openai:gpt-4o", "--store", store, env=env, stdin="first\nsecond\n")
    assert done.returncode == 0, done.stderr
    assert len(error_lines(done.stderr)) == 2 and len(refusing_provider.authorizations) == 2
    assert "HTTP 401" not in done.stdout and "Traceback" not in done.stderr
    assert "session " not in done.stderr  # both first turns failed: no session was kept
    assert toolwire("sessions", "list", "--store", store).stdout.strip() == "no sessions"


def errors_only(stderr: str) -> str:
    return "\n".join(error_lines(stderr))
