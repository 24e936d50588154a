"""What models, tools and users write is printed as written: no rich markup, no ``:emoji:`` codes."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import call, script, sqlite_url, toolwire

MARKUP = "[bold]x[/bold] :fire:"
TOOL = "[red]t[/red]:fire:"


def test_model_output_tool_names_and_user_text_are_printed_literally(tmp_path: Path) -> None:
    model = script(
        tmp_path,
        [
            [{"type": "text", "text": f"Look {MARKUP} here"}, call(TOOL, {"q": "[b]:smile:"})],
            [{"type": "text", "text": f"done {MARKUP}"}],
        ],
    )
    store = sqlite_url(tmp_path / "t.db")
    run = toolwire("run", f"user says {MARKUP}", "--model", model, "--store", store)
    assert run.returncode == 0, run.stderr
    assert f"Look {MARKUP} here" in run.stdout and f"done {MARKUP}" in run.stdout
    assert f'▶ {TOOL}({{"q": "[b]:smile:"}})' in run.stderr  # piped: tool activity goes to stderr
    assert f"✗ {TOOL} → unknown tool '{TOOL}'" in run.stderr  # the model asked for a tool that is not there
    assert "🔥" not in run.stdout + run.stderr and "😄" not in run.stdout + run.stderr
    session_id = run.stderr.split("session ")[-1].strip()

    listed = toolwire("sessions", "list", "--store", store)
    assert f"user says {MARKUP}" in listed.stdout  # the title
    shown = toolwire("sessions", "show", session_id, "--store", store)
    assert f"user: user says {MARKUP}" in shown.stdout
    assert f"assistant: Look {MARKUP} here" in shown.stdout and f"▶ {TOOL}(" in shown.stdout
    assert "🔥" not in listed.stdout + shown.stdout


def test_a_model_name_in_an_error_is_printed_literally(tmp_path: Path) -> None:
    done = toolwire(
        "run", "hi", "--model", "nonsense:[bold]m[/bold]:fire:", "--store", sqlite_url(tmp_path / "t.db")
    )
    assert done.returncode == 1
    assert "'nonsense:[bold]m[/bold]:fire:'" in done.stderr and "🔥" not in done.stderr
