"""The public types, as a user's type checker sees them: ``mypy --strict`` on ``tests/typing/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
TYPED = sorted((ROOT / "tests" / "typing").glob("*.py"))


@pytest.mark.parametrize("path", TYPED, ids=[p.name for p in TYPED])
def test_mypy_strict_accepts_the_typing_examples(path: Path) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(path.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
