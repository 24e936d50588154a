"""AG-UI front-end tools: the input's ``tools`` checked and made client-side (``external``) tools, and the
agent's twin that knows them for one run. Apart from the wire (:mod:`toolwire.server.ag_ui`) because it is
a tool registry concern: the agent's own registry, overlaid for one run, owning nothing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolwire.agent.agent import Agent
from toolwire.server.errors import RequestError
from toolwire.tools.function import Tool
from toolwire.tools.registry import ToolRegistry

MAX_FRONTEND_TOOLS = 128
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def frontend_tools(raw: Any, server_tools: set[str]) -> list[Tool]:
    """The input's ``tools``, checked, as client-side tools (a name the agent already has is refused)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RequestError("'tools' must be an array of {name, description, parameters}")
    if len(raw) > MAX_FRONTEND_TOOLS:
        raise RequestError(f"more than {MAX_FRONTEND_TOOLS} tools", status=413, kind="too_large")
    import jsonschema

    tools: list[Tool] = []
    for i, spec in enumerate(raw):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RequestError(f"tools[{i}] must be an object with a 'name'")
        name = spec["name"]
        if not _TOOL_NAME.fullmatch(name):
            raise RequestError(f"tools[{i}]: a tool name is letters, digits, '_' and '-' (at most 64)")
        if name in server_tools or any(t.name == name for t in tools):
            raise RequestError(f"tools[{i}]: {name!r} is already a tool of this agent")
        description = spec.get("description", "")
        parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(description, str) or not isinstance(parameters, dict):
            raise RequestError(f"tools[{i}]: 'description' must be a string, 'parameters' a JSON Schema")
        try:
            jsonschema.Draft202012Validator.check_schema(parameters)
        except jsonschema.SchemaError as exc:
            raise RequestError(f"tools[{i}]: 'parameters' is no JSON Schema: {exc.message}") from None
        tools.append(
            Tool(
                name=name,
                description=description,
                parameters=parameters,
                function=_runs_on_the_client,
                external=True,
                source="ag-ui",
            )
        )
    return tools


def _runs_on_the_client(**_: Any) -> Any:  # pragma: no cover - the loop never runs an external tool
    raise RuntimeError("a front-end tool runs on the AG-UI client")


class FrontendToolRegistry(ToolRegistry):
    """The agent's tools plus one run's front-end tools (the agent's own win: a clash is refused first)."""

    def __init__(self, base: ToolRegistry, frontend: Sequence[Tool]) -> None:
        super().__init__()
        self._base = base
        self._frontend = list(frontend)
        self._merge()

    def _merge(self) -> None:
        self._tools = {**{t.name: t for t in self._frontend}, **{t.name: t for t in self._base}}

    async def prepare(self) -> None:
        await self._base.prepare()
        self._merge()

    @property
    def sources(self) -> list[Any]:
        return self._base.sources

    async def aclose(self) -> None:
        """The agent's own registry owns its sources."""


def with_frontend_tools(agent: Agent[Any, Any], tools: Sequence[Tool]) -> Agent[Any, Any] | None:
    """A copy of ``agent`` that also knows ``tools`` (``None`` when there are none: run the agent itself)."""
    if not tools:
        return None
    twin = agent.override()
    twin.registry = FrontendToolRegistry(agent.registry, tools)
    return twin
