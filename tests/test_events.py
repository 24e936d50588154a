"""One event vocabulary: tool-call statuses defined once, every event field documented, one name table."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path
from typing import get_args

import pytest

from toolwire import Agent, ScriptedModel, TextPart, events, observability
from toolwire.errors import ConfigError
from toolwire.store.records import ToolCallRowStatus
from toolwire.store.schema import TOOL_CALL_STATUSES


def test_a_stored_call_status_is_pending_or_a_tool_call_status() -> None:
    assert get_args(ToolCallRowStatus) == ("pending", *get_args(events.ToolCallStatus))
    assert set(TOOL_CALL_STATUSES) == set(get_args(ToolCallRowStatus))  # the database CHECK constraint


def _event_classes() -> list[type[events.Envelope]]:
    classes = list(get_args(get_args(events.AgentEvent)[0]))
    assert len(classes) > 20
    return classes


def test_every_event_field_has_a_docstring() -> None:
    tree = ast.parse(Path(events.__file__).read_text())
    documented: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            body = node.body
            documented[node.name] = {
                stmt.target.id
                for stmt, after in zip(body, [*body[1:], None], strict=True)
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            }
    missing = []
    for cls in _event_classes():
        assert cls.__doc__, cls.__name__
        for f in dataclasses.fields(cls):
            owner = next(c.__name__ for c in cls.__mro__ if f.name in inspect.get_annotations(c))
            # ``type`` is every event's discriminator, documented once in the module docstring.
            if f.name != "type" and f.name not in documented[owner]:
                missing.append(f"{owner}.{f.name}")
    assert missing == []


def test_event_types_and_aliases_come_from_the_event_classes() -> None:
    types = {cls.__dataclass_fields__["type"].default for cls in _event_classes()}
    assert types == observability.EVENT_TYPES
    assert set(observability.ALIASES.values()) <= types


def test_the_documented_alias_table_is_the_alias_mapping() -> None:
    rows = re.findall(
        r"^``([a-z:]+)``\s+:class:`~toolwire\.events\.(\w+)`\s+``([a-z-]+)``$",
        observability.__doc__ or "",
        re.M,
    )
    table = {alias: kind for alias, _, kind in rows}
    assert table == observability.ALIASES
    for _, class_name, kind in rows:
        assert getattr(events, class_name).__dataclass_fields__["type"].default == kind


async def test_aliases_and_event_types_subscribe_alike_and_unknown_names_are_refused() -> None:
    agent = Agent(ScriptedModel([[TextPart("hi")]]))
    by_alias: list[str] = []
    by_type: list[str] = []
    agent.on("run:end", lambda e: by_alias.append(e.type))  # type: ignore[func-returns-value]
    agent.on("interaction-end", lambda e: by_type.append(e.type))  # type: ignore[func-returns-value]
    await agent.run("go")
    assert by_alias == by_type == ["interaction-end"]
    with pytest.raises(ConfigError, match="tool:begin"):
        agent.on("tool:begin", lambda e: None)
