"""Every Python code block in README.md and docs/*.md runs as written, as a script.

Each block runs in its own process (``_fake_openai.py``), in an empty folder that can resolve the npm
packages the test suite installs (``tests/server/node``), so ``npx -y @modelcontextprotocol/...``
starts the real reference server without a download. The hosted model is replaced at the network
edge only. Shell blocks are the README's two set-up commands, which CI itself runs; blocks without a
language are command synopses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
NODE = ROOT / "tests" / "server" / "node"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# What a block must print, keyed by a phrase it contains: the example reached its tools and answer.
EXPECTED = {
    "def get_transaction_status": ["Answer: ", "settled", "interaction-end"],
    "server-filesystem": ["approve? refund {'transaction_id': 'TXN_123'}", "Answer: refunded TXN_123"],
    "def test_a_refund_waits_for_approval": ["refund test passed"],
    "Transcript(on_change=render_change)": ["MessageAdded", "TranscriptSession"],
    "refund order A7": ["state: TASK_STATE_INPUT_REQUIRED", "Answer: Refunded A7."],
    "refund order B9": ["status: paused", "Answer: Refunded B9."],
    "trigger-sampling-request": ["A haiku about tools."],
    "def research_step": ["paused toolwire:usage_limit requests 2 3", "Answer: Here is what I found."],
    "trigger-elicitation-request": [
        "status: paused | asks: Please provide inputs",
        "Name: Ada",
        "Answer: Signed up.",
    ],
    "everything.list_resources()": ["resources, the first: demo://", "Read a resource of the MCP server"],
}


def _blocks() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        for index, match in enumerate(_BLOCK.finditer(document.read_text())):
            found.append((f"{document.relative_to(ROOT)}#{index + 1}", match.group(1)))
    return found


BLOCKS = _blocks()


def test_the_documents_have_examples_and_each_expectation_names_one() -> None:
    assert len(BLOCKS) >= 3
    for phrase in EXPECTED:
        assert sum(phrase in code for _, code in BLOCKS) == 1, phrase


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_the_example_runs_as_written(where: str, code: str, tmp_path: Path) -> None:
    example = tmp_path / "example.py"
    example.write_text(code)
    (tmp_path / "package.json").write_text((NODE / "package.json").read_text())
    (tmp_path / "node_modules").symlink_to(NODE / "node_modules")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), npm_config_offline="true")
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_fake_openai.py")), str(example)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    for phrase, expected in EXPECTED.items():
        if phrase in code:
            for text in expected:
                assert text in done.stdout, f"{where} did not print {text!r}:\n{done.stdout[-3000:]}"
