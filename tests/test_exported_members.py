"""``__all__`` of the package and its subpackages: importable, sorted, typed, nothing private."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import toolwire

PACKAGE_DIR = Path(toolwire.__file__).parent

MUST_HAVE = {
    # running an agent
    "Agent",
    "AgentRun",
    "RunContext",
    "RunResult",
    "ToolExecution",
    "tool",
    "Tool",
    "Toolset",
    "ModelSettings",
    "infer_model",
    "ScriptedModel",
    "ReActDriver",
    "NativeToolDriver",
    "open_store",
    "Transcript",
    # messages and parts
    "Message",
    "Usage",
    "TextPart",
    "ReasoningPart",
    "ToolCallPart",
    "ToolResultPart",
    "FilePart",
    # events clients handle
    "AgentEvent",
    "TextDeltaEvent",
    "ToolCallActive",
    "ToolCallComplete",
    "InteractionEnd",
    "ErrorEvent",
    # errors
    "ToolwireError",
    "ConfigError",
    "MissingExtraError",
    "ProviderError",
    "ToolError",
    "StoreError",
    "SessionBusyError",
    "MaxStepsExceeded",
    "NoObjectGenerated",
}


def _subpackages() -> list[str]:
    found = [
        info.name
        for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="toolwire.")
        if info.ispkg and hasattr(importlib.import_module(info.name), "__all__")
    ]
    assert "toolwire.agent" in found and "toolwire.models" in found  # the walk found the packages
    return found


def test_every_name_in_all_is_importable() -> None:
    for name in toolwire.__all__:
        assert getattr(toolwire, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from toolwire import *", namespace)
    assert set(toolwire.__all__) <= namespace.keys()


def test_all_is_sorted_unique_and_public() -> None:
    exported = list(toolwire.__all__)
    assert exported == sorted(exported)
    assert len(exported) == len(set(exported))
    assert [n for n in exported if n.startswith("_")] == []


def test_the_common_names_are_exported() -> None:
    assert sorted(MUST_HAVE - set(toolwire.__all__)) == []


def test_every_export_is_visible_to_type_checkers() -> None:
    """Exports load lazily; the ``if TYPE_CHECKING:`` imports are what type checkers see, so they must
    name exactly ``__all__`` (a missing one would be ``Any`` or an error for users)."""
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text())
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.ImportFrom):
                    typed.update(alias.asname or alias.name for alias in stmt.names)
    assert typed == set(toolwire.__all__)


def test_the_version_is_the_installed_distribution() -> None:
    from importlib.metadata import version

    assert toolwire.__version__ == version("toolwire")


def test_import_toolwire_loads_no_submodule() -> None:
    """``import toolwire`` stays fast: nothing below it is imported until a name is used."""
    code = "import sys, toolwire; print(sorted(m for m in sys.modules if m.startswith('toolwire.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package", _subpackages())
def test_subpackage_all_names_exist(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), package
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == [], f"{package}.__all__ names what it does not have: {missing}"
