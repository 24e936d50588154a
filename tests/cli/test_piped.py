"""Piped, ``toolwire run`` writes the answer alone to stdout: tool activity and notes go to stderr."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import call, script, sqlite_url, text, toolwire


def test_piped_run_writes_only_the_answer_to_stdout(tmp_path: Path) -> None:
    model = script(
        tmp_path,
        [
            [{"type": "reasoning", "text": "I should count."}, call("slow_count", {"steps": 1})],
            text("Counted to one."),
        ],
    )
    done = toolwire(
        "run", "count to one", "--agent", "tests.cli.agents:slow", "--model", model,
        "--store", sqlite_url(tmp_path / "t.db"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Counted to one.\n"
    assert '▶ slow_count({"steps": 1})' in done.stderr and "✓ slow_count → counted to 1" in done.stderr
    assert "I should count." in done.stderr and "session sess_" in done.stderr
