"""``--model a,b,c`` (or ``--model`` repeated) runs on a ``FallbackModel``: the first model, then the next."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.cli.helpers import script, sqlite_url, text, toolwire
from toolwire.cli._turns import model_spec


def _dead_server() -> str:
    with socket.socket() as probe:  # a port nothing listens on: connection refused, a failover error
        probe.bind(("127.0.0.1", 0))
        return f"openai-compatible:gone@http://127.0.0.1:{probe.getsockname()[1]}/v1"


def test_the_option_as_written_becomes_one_model_or_a_list() -> None:
    assert model_spec(None) is None
    assert model_spec(["local"]) == "local"
    assert model_spec(["openai:gpt-4o, anthropic:claude-sonnet-4-5", "local"]) == [
        "openai:gpt-4o",
        "anthropic:claude-sonnet-4-5",
        "local",
    ]


@pytest.mark.parametrize("form", ["commas", "repeated"])
def test_a_run_fails_over_from_a_dead_server_to_the_next_model(tmp_path: Path, form: str) -> None:
    scripted = script(tmp_path, [text("Answered by the fallback.")])
    models = [_dead_server(), scripted]
    options = (
        ["--model", ",".join(models)] if form == "commas" else ["--model", models[0], "--model", models[1]]
    )
    done = toolwire("run", "hi", *options, "--store", sqlite_url(tmp_path / "t.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Answered by the fallback." in done.stdout
    assert "failover" in done.stdout + done.stderr
