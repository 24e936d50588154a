"""A clone of the repository, alone in an empty folder, has everything its tests and benchmarks read.

The recorded provider traffic lives in ``tests/recordings`` (``tests/recordings/SOURCES.md`` says where each
file came from). Nothing under tests/, benchmarks/, scripts/, .ci/ or docs/ may reach for a path outside
the repository, such as a sibling folder of recordings next to the clone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cassettes import RECORDINGS
from tests.models import test_anthropic, test_bedrock, test_gemini, test_openai_chat, test_openai_responses

ROOT = Path(__file__).resolve().parents[1]
SCANNED_DIRS = ("tests", "benchmarks", "scripts", ".ci", "docs")
SCANNED_ROOT_FILES = ("README.md", "RELIABILITY.md", "BENCHMARKS.md", "pyproject.toml")
SKIPPED_DIRS = {"node_modules", "recordings", "__pycache__", ".venv"}

OUTSIDE_PATTERNS = {
    "a parent-relative path to a sibling folder": re.compile(r"\.\./+shared\b"),
    "a folder of recordings outside the repository": re.compile(r"\bshared[/\\]+fixtures\b"),
    "a pathlib join into a 'shared' folder": re.compile(r"""["']shared["']\s*/"""),
    "an absolute path of the development machine": re.compile(r"(?<![\w.:/])/work/"),
    "the shared folder beside the clone": re.compile(r"\bshared (?:folder|directory)\b"),
}
PARENTS_INDEX = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?\.parents\[(\d+)\]")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent\b)+)")


def _scanned_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED_ROOT_FILES if (ROOT / name).is_file()]
    for top in SCANNED_DIRS:
        for path in (ROOT / top).rglob("*"):
            rel = path.relative_to(ROOT)
            if (
                path.is_file()
                and not SKIPPED_DIRS.intersection(rel.parts)
                and path != Path(__file__).resolve()
            ):
                files.append(path)
    return sorted(files)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary files hold no paths worth checking


def _outside_references(rel: Path, text: str) -> list[str]:
    """Lines of ``text`` (the file at ``rel`` under the repository root) that point outside the repository."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for what, pattern in OUTSIDE_PATTERNS.items():
            if pattern.search(line):
                found.append(f"{rel}:{lineno}: {what}: {line.strip()}")
        # Path(__file__).parents[k] climbs k + 1 folders (as many as `.parent`s); the root is len(rel.parts) up
        hops = [int(m.group(1)) + 1 for m in PARENTS_INDEX.finditer(line)]
        hops += [m.group(1).count(".parent") for m in PARENT_CHAIN.finditer(line)]
        if any(n > len(rel.parts) for n in hops):
            found.append(f"{rel}:{lineno}: climbs above the repository root: {line.strip()}")
    return found


def test_the_scan_finds_what_it_should() -> None:
    depth2 = Path("tests/models/x.py")
    bad = [
        "FIXTURES = Path(__file__).resolve().parents[2] / 'shared' / 'fixtures'",
        'load("../shared/fixtures/x.yaml")',
        "see /work/shared/DESIGN.md",
        "See `DESIGN.md` in the shared folder",
        "ROOT = Path(__file__).parent.parent.parent.parent",
    ]
    good = [
        "ROOT = Path(__file__).resolve().parents[2]",
        "ROOT = Path(__file__).parent.parent.parent",
        'db = tmp_path / "shared.db"',
        "https://example.com/work/x",
    ]
    for line in bad:
        assert _outside_references(depth2, line), line
    for line in good:
        assert not _outside_references(depth2, line), line


def test_no_file_reaches_outside_the_repository() -> None:
    files = _scanned_files()
    assert any(p.name == "cassettes.py" for p in files)  # the scan covers the loader
    problems = []
    for path in files:
        text = _read_text(path)
        if text is not None:
            problems += _outside_references(path.relative_to(ROOT), text)
    assert problems == []


def _referenced_recordings() -> set[str]:
    """Recording paths the adapter tests, the replay tests and the golden files name."""
    referenced = {
        *test_openai_chat.FIXTURES,
        *test_openai_responses.FIXTURES,
        *test_anthropic.FIXTURES,
        *test_bedrock.FIXTURES,
        *test_gemini.FIXTURES,
    }
    literal = re.compile(r"""["']([\w.-]+/[^"'\s]+\.(?:yaml|chunks\.txt))["']""")
    for path in (ROOT / "tests").rglob("*.py"):
        if SKIPPED_DIRS.isdisjoint(path.relative_to(ROOT).parts) and path != Path(__file__).resolve():
            referenced.update(literal.findall(path.read_text(encoding="utf-8")))
    for path in (ROOT / "tests" / "golden").rglob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("fixture"), str):
            referenced.add(data["fixture"])
    return referenced


def test_every_referenced_recording_is_in_the_repository() -> None:
    assert RECORDINGS == ROOT / "tests" / "recordings"
    assert (RECORDINGS / "SOURCES.md").is_file()
    referenced = _referenced_recordings()
    assert len(referenced) >= 46
    missing = sorted(p for p in referenced if not (RECORDINGS / p).is_file())
    assert missing == []
    shipped = sorted(
        str(p.relative_to(RECORDINGS))
        for p in RECORDINGS.rglob("*")
        if p.is_file() and (p.suffix == ".yaml" or p.name.endswith(".chunks.txt"))
    )
    assert len(shipped) == 50
    assert set(shipped) <= referenced  # every shipped recording is used by some test


@pytest.mark.parametrize("name", ["LICENSE", "docs/design.md"])
def test_top_level_documents_are_in_the_repository(name: str) -> None:
    assert (ROOT / name).is_file()
