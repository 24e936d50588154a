"""``toolwire --help`` stays fast: the parser imports nothing heavy, each command imports what it uses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import script, sqlite_url, text

HEAVY = ("asyncio", "rich", "sqlalchemy", "httpx", "pydantic", "prompt_toolkit", "dotenv", "toolwire.agent")


def loaded_after(args: list[str]) -> set[str]:
    """Which of HEAVY running the command in-process imported."""
    code = (
        "import json, sys\n"
        "from toolwire.cli import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names = json.loads(done.stdout.splitlines()[-1])
    return {n for n in names if n in HEAVY}


def test_help_and_version_import_nothing_heavy() -> None:
    assert loaded_after(["--help"]) == set()
    assert loaded_after(["--version"]) == set()
    assert loaded_after(["run", "--help"]) == set()


def test_prompt_toolkit_is_imported_by_chat_only(tmp_path: Path) -> None:
    args = ["--model", script(tmp_path, [text("Hi.")]), "--store", sqlite_url(tmp_path / "t.db")]
    ran = loaded_after(["run", "hello", *args])
    assert {"asyncio", "rich", "toolwire.agent"} <= ran and "prompt_toolkit" not in ran
