"""Provider keys from ``./.env`` (never over variables already set) and the global ``--log-level``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import RefusingProvider, refusing_server
from tests.cli.helpers import command_env, sqlite_url, toolwire, unreachable_base_url
from tests.security.conftest import serve


def test_dotenv_in_the_current_directory_supplies_keys_but_never_overrides(
    tmp_path: Path, refusing_provider: RefusingProvider
) -> None:
    (tmp_path / ".env").write_text("OPENAI_COMPATIBLE_API_KEY=from-dotenv\n")
    args = ("run", "hi", "--model", "openai:gpt-4o", "--store", sqlite_url(tmp_path / "t.db"))
    at_provider = command_env(OPENAI_BASE_URL=refusing_provider.base_url)
    from_file = toolwire(*args, cwd=tmp_path, env=at_provider)
    assert from_file.returncode == 1 and "HTTP 401" in from_file.stderr
    already_set = toolwire(*args, cwd=tmp_path, env={**at_provider, "OPENAI_COMPATIBLE_API_KEY": "from-env"})
    assert already_set.returncode == 1
    elsewhere = toolwire(*args, cwd=tmp_path.parent, env=at_provider)  # only the current directory's file
    assert elsewhere.returncode == 1
    # (a loopback provider may run keyless: the last request carries no key at all)
    assert refusing_provider.authorizations == ["Bearer from-dotenv", "Bearer from-env", ""]


def test_dotenv_supplies_provider_keys_and_nothing_else(
    tmp_path: Path, refusing_provider: RefusingProvider
) -> None:
    """A ``./.env`` (a cloned repository's, a download's) cannot add a proxy every request goes through, a
    provider URL or a bearer token ``serve`` accepts: only the keys ``toolwire models`` lists are read."""
    with refusing_server() as proxy:
        proxy_url = proxy.base_url.removesuffix("/v1")
        (tmp_path / ".env").write_text(
            "OPENAI_COMPATIBLE_API_KEY=from-dotenv\n"
            f"HTTP_PROXY={proxy_url}\nhttp_proxy={proxy_url}\nALL_PROXY={proxy_url}\n"
            f"OPENAI_BASE_URL={proxy.base_url}\n"
            "TOOLWIRE_TOKENS=tok-eve:eve\n"
        )
        args = ("run", "hi", "--model", "openai:gpt-4o", "--store", sqlite_url(tmp_path / "t.db"))
        ran = toolwire(*args, cwd=tmp_path, env=command_env(OPENAI_BASE_URL=refusing_provider.base_url))
        assert ran.returncode == 1 and "HTTP 401" in ran.stderr
        assert proxy.authorizations == []
        assert refusing_provider.authorizations == ["Bearer from-dotenv"]
        assert "ignored ALL_PROXY, HTTP_PROXY, OPENAI_BASE_URL, TOOLWIRE_TOKENS, http_proxy" in ran.stderr

    # ``serve`` without tokens is the loopback development mode: a token from .env would have turned
    # it into a server that answers the .env author's bearer token (and 401 to its developer).
    async def development_mode() -> None:
        async with serve(tmp_path, tokens=None) as server, server.client() as client:
            assert (await client.get("/api/sessions")).status_code == 200
            assert "TOOLWIRE_TOKENS" in server.log_text()

    asyncio.run(development_mode())


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
