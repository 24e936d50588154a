"""The tool registry: one effective tool set aggregated from sources in a fixed priority order.

Priority (highest first), documented and tested:

1. Python function tools (``@tool`` or plain functions) passed to ``Agent(tools=[...])``;
2. toolsets (:class:`Toolset`: a group of tools with shared setup/teardown);
3. MCP servers (:class:`~toolwire.tools.mcp.MCPServerStdio`, :class:`~toolwire.tools.mcp.MCPServerHTTP`).

Within one level, sources keep the order they were given. A name defined twice resolves to the
higher-priority definition, with one warning per name. Any source may be given a ``prefix``
(``"github_"``) that is prepended to its tool names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from toolwire.errors import ConfigError
from toolwire.models.base import ToolDefinition
from toolwire.tools.function import ApprovalPolicy, Tool, approval_for, function_tool

logger = logging.getLogger("toolwire.tools")

PRIORITY = {"function": 0, "toolset": 1, "mcp": 2}


@runtime_checkable
class ToolSource(Protocol):
    """Something that provides tools at run time (a toolset, an MCP server)."""

    kind: str
    """``"toolset"`` or ``"mcp"``: decides the priority level."""
    prefix: str | None

    @property
    def source_name(self) -> str: ...

    async def list_tools(self) -> list[Tool]:
        """The tools as they are now (connecting/setting up on first use)."""

    async def aclose(self) -> None: ...


class Toolset:
    """A group of tools sharing setup and teardown (a connection pool, a client, a temp dir).

    Subclass and override :meth:`setup` / :meth:`teardown`, and mark methods with ``@tool``-style
    registration via :meth:`tools`; or pass functions directly: ``Toolset([f, g], name="files")``.
    ``requires_approval`` (``True``, a predicate ``(ctx, args) -> bool``, or tool names) makes calls of
    its tools wait for a person's approval; a tool marked by ``@tool(...)`` itself keeps its own setting.
    """

    kind = "toolset"

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        name: str | None = None,
        prefix: str | None = None,
        requires_approval: ApprovalPolicy = False,
    ) -> None:
        self.name = name or type(self).__name__
        self.prefix = prefix
        self.requires_approval = requires_approval
        """Which of its tools need a person's approval (a tool's own setting wins)."""
        self._given = list(tools)
        self._ready = False

    @property
    def source_name(self) -> str:
        return f"toolset:{self.name}"

    async def setup(self) -> None:
        """Called once, before the first tool of this set is listed."""

    async def teardown(self) -> None:
        """Called by :meth:`aclose`."""

    def tools(self) -> Sequence[Tool | Callable[..., Any]]:
        """The tools of this set; override to build them from state made in :meth:`setup`."""
        return self._given

    async def list_tools(self) -> list[Tool]:
        if not self._ready:
            await self.setup()
            self._ready = True
        tools = [t if isinstance(t, Tool) else function_tool(t) for t in self.tools()]
        if self.requires_approval is False:
            return tools
        return [
            t if t.gated else replace(t, requires_approval=approval_for(self.requires_approval, t.name))
            for t in tools
        ]

    async def aclose(self) -> None:
        if self._ready:
            self._ready = False
            await self.teardown()


class ToolRegistry:
    """The effective tool set of an agent, rebuilt from its sources by :meth:`prepare` at each run start."""

    def __init__(self, items: Iterable[Tool | Callable[..., Any] | ToolSource] = ()) -> None:
        self._functions: list[Tool] = []
        self._sources: list[ToolSource] = []
        for item in items:
            self.add(item)
        self._warned: set[str] = set()
        self._tools: dict[str, Tool] = {}
        self._resolve([])

    def add(self, item: Tool | Callable[..., Any] | ToolSource) -> None:
        if isinstance(item, ToolSource):
            if item.kind not in PRIORITY:
                raise ConfigError(f"unknown tool source kind {item.kind!r}")
            self._sources.append(item)
        elif isinstance(item, Tool):
            self._functions.append(item)
        elif callable(item):
            self._functions.append(function_tool(item))
        else:
            raise ConfigError(f"not a tool, function or tool source: {item!r}")

    async def prepare(self) -> None:
        """List every source's tools (connecting on first use) and resolve the effective set."""
        listed: list[tuple[ToolSource, list[Tool]]] = []
        for source in self._sources:
            listed.append((source, await source.list_tools()))
        self._resolve(listed)

    async def refresh(self) -> bool:
        """Resolve the effective set again when a source says its tools changed (an MCP server's
        ``notifications/tools/list_changed``: its ``tools_changed`` attribute); True when it did."""
        if not any(getattr(source, "tools_changed", False) for source in self._sources):
            return False
        await self.prepare()
        return True

    def _resolve(self, listed: list[tuple[ToolSource, list[Tool]]]) -> None:
        candidates: list[tuple[int, int, Tool]] = [(0, i, t) for i, t in enumerate(self._functions)]
        order = 0
        for source, tools in listed:
            for tool in tools:
                order += 1
                name = f"{source.prefix}{tool.name}" if source.prefix else tool.name
                candidates.append(
                    (PRIORITY[source.kind], order, replace(tool, name=name, source=source.source_name))
                )
        candidates.sort(key=lambda c: (c[0], c[1]))
        effective: dict[str, Tool] = {}
        for _, _, tool in candidates:
            kept = effective.get(tool.name)
            if kept is None:
                effective[tool.name] = tool
            elif tool.name not in self._warned:
                self._warned.add(tool.name)
                logger.warning(
                    "tool %r is defined by %s and %s; using the one from %s (higher priority)",
                    tool.name,
                    kept.source,
                    tool.source,
                    kept.source,
                )
        self._tools = effective

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def sources(self) -> list[ToolSource]:
        return list(self._sources)

    def definitions(
        self, *, enabled: Sequence[str] | None = None, exclude: Sequence[str] = ()
    ) -> list[ToolDefinition]:
        unknown = [n for n in [*(enabled or ()), *exclude] if n not in self._tools]
        if unknown:
            raise ConfigError(f"unknown tool name(s) in enabled_tools/exclude_tools: {', '.join(unknown)}")
        return [
            t.definition()
            for t in self._tools.values()
            if (enabled is None or t.name in enabled) and t.name not in exclude
        ]

    async def aclose(self) -> None:
        for source in self._sources:
            await source.aclose()
