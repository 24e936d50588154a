"""The scripted model file as the README documents it, keeping its place across processes of one session."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.helpers import REPO, sqlite_url, toolwire


def readme_script() -> str:
    """The JSON block of the README's "Scripted models" section."""
    section = (REPO / "README.md").read_text().split("### Scripted models", 1)[1]
    found = re.search(r"^```json\n(.*?)^```", section, re.S | re.M)
    assert found is not None, "the README shows no scripted file"
    return found.group(1)


def test_the_readme_script_runs_and_keeps_its_place_across_processes(tmp_path: Path) -> None:
    (tmp_path / "demo.json").write_text(readme_script())
    store = sqlite_url(tmp_path / "t.db")
    common = ("--session", "s1", "--model", "scripted:demo.json", "--store", store)
    first = toolwire("run", "Status of TXN_123?", *common, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Let me look that up.\nTXN_123 is settled.\n"
    assert "get_transaction_status" in first.stderr  # the demo agent's tool ran
    second = toolwire("run", "Who authorized it?", *common, cwd=tmp_path)  # a new process, the same file
    assert second.returncode == 0, second.stderr
    assert second.stdout == "It was authorized by Dana Kim.\n"
