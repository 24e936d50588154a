"""The exception tree: documented in one place, and one error for a missing optional extra."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import toolwire
from toolwire import errors
from toolwire.errors import ConfigError, MissingExtraError, ToolwireError


def _all_subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _all_subclasses(sub)
    return found


def test_the_errors_docstring_shows_every_library_error() -> None:
    for info in pkgutil.walk_packages(toolwire.__path__, prefix="toolwire."):
        if not info.name.endswith(".__main__"):  # every module, so every error class is defined
            importlib.import_module(info.name)
    library = {c for c in _all_subclasses(ToolwireError) if c.__module__.startswith("toolwire.")}
    assert len(library) > 20
    missing = sorted(c.__name__ for c in library if f" {c.__name__}" not in (errors.__doc__ or ""))
    assert missing == []


def test_a_missing_extra_names_the_pip_command_and_is_an_import_error() -> None:
    error = MissingExtraError("mcp", "MCP servers", missing="mcp")
    assert (
        str(error)
        == "the 'mcp' extra is needed for MCP servers: pip install \"toolwire[mcp]\" (no module named 'mcp')"
    )
    assert error.extra == "mcp"
    assert isinstance(error, ImportError) and isinstance(error, ConfigError)
    with pytest.raises(ImportError):  # code guarding an optional import keeps working
        raise error
