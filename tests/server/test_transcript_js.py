"""The page's JavaScript transcript against the golden scenarios, with Node's own test runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NODE_TESTS = Path(__file__).parent / "node" / "transcript.test.mjs"


def test_javascript_transcript_passes_the_golden_scenarios() -> None:
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup_node.sh installs it)"
    done = subprocess.run([node, "--test", str(NODE_TESTS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = {
        line.split()[1]: int(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith(("# pass", "# fail"))
    }
    assert summary["fail"] == 0 and summary["pass"] >= 25, summary
