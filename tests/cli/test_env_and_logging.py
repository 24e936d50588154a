"""Provider keys from ``./.env`` (never over variables already set) and the global ``--log-level``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import RefusingProvider
from tests.cli.helpers import command_env, sqlite_url, toolwire, unreachable_base_url


def test_dotenv_in_the_current_directory_supplies_keys_but_never_overrides(
    tmp_path: Path, refusing_provider: RefusingProvider
) -> None:
    (tmp_path / ".env").write_text(
        f"OPENAI_BASE_URL={refusing_provider.base_url}\nOPENAI_COMPATIBLE_API_KEY=from-dotenv\n"
    )
    args = ("run", "hi", "--model", "openai:gpt-4o", "--store", sqlite_url(tmp_path / "t.db"))
    from_file = toolwire(*args, cwd=tmp_path)
    assert from_file.returncode == 1 and "HTTP 401" in from_file.stderr  # the URL came from .env too
    already_set = toolwire(*args, cwd=tmp_path, env=command_env(OPENAI_COMPATIBLE_API_KEY="from-env"))
    assert already_set.returncode == 1
    assert refusing_provider.authorizations == ["Bearer from-dotenv", "Bearer from-env"]
    elsewhere = toolwire(*args, cwd=tmp_path.parent)  # only the current directory's file is read
    assert "HTTP 401" not in elsewhere.stderr


def test_log_level_is_global_and_set_by_the_command(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path / "t.db")
    debug = toolwire("--log-level", "debug", "sessions", "list", "--store", store)
    assert debug.returncode == 0 and "DEBUG asyncio: Using selector" in debug.stderr
    quiet = toolwire("sessions", "list", "--store", store)
    assert quiet.returncode == 0 and quiet.stderr == ""

    env = command_env(OPENAI_BASE_URL=unreachable_base_url())
    args = ("run", "hi", "--model", "openai:gpt-4o", "--store", store)
    default = toolwire(*args, env=env)
    assert "WARNING toolwire.agent: model request failed" in default.stderr
    errors_only = toolwire(*args, "--log-level", "ERROR", env=env)  # after the command works too
    assert errors_only.returncode == 1
    assert errors_only.stderr.splitlines() == [
        line for line in default.stderr.splitlines() if line.startswith("error:")
    ]
    bad = toolwire("--log-level", "loud", "sessions", "list")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_importing_the_cli_configures_no_logging() -> None:
    code = "import logging, toolwire.cli; print(logging.getLogger().handlers, logging.getLogger().level)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] 30"
