"""The MCP client's core: one connection to a server, owned by one task, and what goes over it (tools,
resources, prompts; the server's notifications, sampling and elicitation requests). The public classes, the
transports, are in :mod:`toolwire.tools.mcp`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

from toolwire.errors import MissingExtraError, ToolExecutionError
from toolwire.models.base import Model
from toolwire.tools._mcp_asking import AskingCall, AskingCalls
from toolwire.tools._mcp_elicitation import (
    ElicitationHandler,
    Elicitor,
)
from toolwire.tools._mcp_sampling import Sampler, SamplingPolicy
from toolwire.tools._mcp_wire import (
    MCPPrompt,
    MCPPromptResult,
    MCPResource,
    MCPResourceContent,
    content_text,
    contents_output,
    describe,
    field_of,
    paginate,
    prompt,
    prompt_result,
    resource,
    resource_content,
    tool_output,
)
from toolwire.tools.context import RunContext
from toolwire.tools.function import ApprovalPolicy, Tool, approval_for

logger = logging.getLogger("toolwire.tools.mcp")


class MCPToolError(ToolExecutionError):
    """The MCP server answered a call with ``isError: true``, failed it, or went away during it."""


class _MCPServer:
    kind = "mcp"

    def __init__(
        self,
        *,
        name: str,
        prefix: str | None,
        timeout: float,
        connect_timeout: float,
        requires_approval: ApprovalPolicy = False,
        resources_as_tool: bool = False,
        sampling_model: Model | str | None = None,
        sampling_policy: SamplingPolicy = "deny",
        elicitation_handler: ElicitationHandler | None = None,
        input_timeout: float = 900.0,
    ) -> None:
        self.name = name
        self.prefix = prefix
        self.requires_approval = requires_approval
        """Which of the server's tools need a person's approval: all (``True``), a predicate
        ``(ctx, args) -> bool``, or tool names as the server lists them."""
        self.resources_as_tool = resources_as_tool
        """Whether the server's resources are offered to the model as one more tool, ``read_resource``."""
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._session: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._tools: list[Tool] | None = None
        self._lock = asyncio.Lock()
        self._was_connected = False
        self.restarts = 0
        """How many times the connection was re-established after a failure."""
        self._serving: list[RunContext[Any]] = []
        self.sampler = Sampler(
            self.source_name,
            model=sampling_model,
            policy=sampling_policy,
            serving=self._asker,
        )
        """Serves the server's ``sampling/createMessage`` requests (``sampling_model``, ``sampling_policy``)."""
        self.asking = AskingCalls(self.source_name, wait=input_timeout)
        """The calls that may ask a person a question through the run (no ``elicitation_handler``)."""
        self.elicitor = Elicitor(
            self.source_name,
            elicitation_handler,
            self._asker,
            self.asking,
        )
        """Answers the server's questions: the ``elicitation_handler``, or a person through the run."""
        self.tools_changed = False
        """Set when the server announced that its tools (or, with ``resources_as_tool``, its resources)
        changed; the next :meth:`list_tools` lists them again and clears it. A registry re-lists its
        sources that say so before a step (:meth:`~toolwire.tools.ToolRegistry.refresh`)."""

    def _asker(self) -> RunContext[Any] | None:
        """The call a server's request (a question, a sampling request) is made for. The SDK does not say
        which call a request belongs to, so it is the call being served that does not already wait for an
        answer (a server awaiting one cannot ask again in that call), the latest of its session; with calls
        of several sessions in flight it cannot be told and none is (a question is then declined, a sampling
        request served without a run): a person must never be asked for, nor see, someone else's call."""
        candidates = [c for c in self._serving if not self.asking.waits(c)]
        sessions = {c.session_id for c in candidates}
        if len(sessions) != 1:
            if len(sessions) > 1:
                logger.warning(
                    "%s made a request while calls of %d sessions were in flight: no run is asked (give each "
                    "user its own MCP server, or an elicitation_handler)",
                    self.source_name,
                    len(sessions),
                )
            return None
        return candidates[-1]

    @property
    def source_name(self) -> str:
        return f"mcp:{self.name}"

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    # -- connection ------------------------------------------------------------------------------

    async def _ensure(self) -> Any:
        async with self._lock:
            if self._session is not None and self._owner is not None and not self._owner.done():
                return self._session
            await self._shutdown()
            if self._was_connected:  # it died or was dropped: this is a restart
                self.restarts += 1
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Any] = loop.create_future()
            self._stop = asyncio.Event()
            self._owner = asyncio.create_task(self._hold(ready, self._stop), name=f"mcp:{self.name}")
            try:
                async with asyncio.timeout(self.connect_timeout):
                    self._session = await asyncio.shield(ready)
            except BaseException:
                await self._shutdown()
                raise
            self._was_connected = True
            self._tools = None
            return self._session

    async def _hold(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        try:
            from mcp import ClientSession  # in the try: a missing extra must fail ``ready``, not hang it

            async with AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport())
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        sampling_callback=self.sampler,
                        elicitation_callback=self.elicitor,
                        message_handler=self._on_message,
                    )
                )
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(_connect_error(self.source_name, exc))
            elif not isinstance(exc, asyncio.CancelledError):
                logger.info("%s: connection ended: %s", self.source_name, describe(exc))
        finally:
            self._session = None

    async def _on_message(self, message: Any) -> None:
        """Server notifications (and transport errors, which the requests waiting on them report)."""
        method = getattr(getattr(message, "root", message), "method", None)  # 1.x wraps it in ``root``
        if method == "notifications/tools/list_changed" or (
            method == "notifications/resources/list_changed" and self.resources_as_tool
        ):
            logger.info("%s: %s", self.source_name, method)
            self._tools = None
            self.tools_changed = True

    async def _shutdown(self) -> None:
        owner, self._owner = self._owner, None
        self._session = None
        if owner is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            async with asyncio.timeout(10):
                await asyncio.shield(owner)
        except (TimeoutError, asyncio.CancelledError, Exception):
            owner.cancel()
            with contextlib.suppress(BaseException):
                await owner

    async def _drop(self) -> None:
        """Forget a connection that failed; the next use reconnects (restarting a stdio server)."""
        async with self._lock:
            await self._shutdown()

    # -- ToolSource --------------------------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        session = await self._ensure()
        if self._tools is not None:
            return list(self._tools)
        self.tools_changed = False  # before listing: a change announced while it runs lists them again
        listed = await self._guarded("tools/list", lambda: paginate(session.list_tools, "tools"))
        tools = [self._tool(t) for t in listed]
        if self.resources_as_tool:
            tools.append(await self._resource_tool())
        if not self.tools_changed:
            self._tools = tools
        return list(tools)

    # -- resources and prompts ---------------------------------------------------------------------

    async def list_resources(self) -> list[MCPResource]:
        """The resources the server lists (every page)."""
        session = await self._ensure()
        listed = await self._guarded("resources/list", lambda: paginate(session.list_resources, "resources"))
        return [resource(r) for r in listed]

    async def read_resource(self, uri: str) -> list[MCPResourceContent]:
        """The contents of the resource at ``uri`` (text, or base64 ``blob``)."""
        session = await self._ensure()
        result = await self._guarded(f"resources/read {uri}", lambda: session.read_resource(uri))
        return [resource_content(c) for c in result.contents]

    async def list_prompts(self) -> list[MCPPrompt]:
        """The prompt templates the server lists (every page)."""
        session = await self._ensure()
        listed = await self._guarded("prompts/list", lambda: paginate(session.list_prompts, "prompts"))
        return [prompt(p) for p in listed]

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> MCPPromptResult:
        """The prompt ``name`` filled in with ``arguments``, as messages a run can take as its history."""
        session = await self._ensure()
        result = await self._guarded(
            f"prompts/get {name}", lambda: session.get_prompt(name, dict(arguments or {}))
        )
        return prompt_result(result)

    async def _resource_tool(self) -> Tool:
        """One tool reading any of the server's resources; its description lists them, so the model knows
        what there is to read."""
        resources = await self.list_resources()
        listing = "\n".join(
            f"- {r.uri}: {r.title or r.name}" + (f" ({r.description})" if r.description else "")
            for r in resources[:_LISTED_RESOURCES]
        )
        more = len(resources) - _LISTED_RESOURCES
        if more > 0:
            listing += f"\n- ... and {more} more"
        description = f"Read a resource of the MCP server {self.name} by its URI."
        if listing:
            description += f" Resources:\n{listing}"

        async def read_mcp_resource(uri: str) -> Any:
            return contents_output(await self.read_resource(uri))

        parameters = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The URI of the resource to read."}},
            "required": ["uri"],
            "additionalProperties": False,
        }
        return Tool(
            name=RESOURCE_TOOL,
            description=description,
            parameters=parameters,
            function=read_mcp_resource,
            source=self.source_name,
            requires_approval=approval_for(self.requires_approval, RESOURCE_TOOL),
            _is_async=True,
        )

    async def _guarded(self, what: str, request: Callable[[], Awaitable[Any]], *, timed: bool = True) -> Any:
        """A request to the server within ``timeout`` (``timed=False``: the request keeps its own); a
        failure drops the connection (the next use reconnects) and becomes an :class:`MCPToolError`
        naming the request."""
        try:
            async with asyncio.timeout(self.timeout if timed else None):
                return await request()
        except TimeoutError as exc:
            await self._drop()
            raise MCPToolError(f"{self.source_name} did not answer {what} within {self.timeout:g}s") from exc
        except Exception as exc:
            if _is_refusal(exc):  # the server answered with a JSON-RPC error: the connection is fine
                raise MCPToolError(f"{self.source_name} refused {what}: {describe(exc)}") from exc
            await self._drop()
            raise MCPToolError(f"{self.source_name} failed {what}: {describe(exc)}") from exc

    async def aclose(self) -> None:
        self.asking.close()
        async with self._lock:
            await self._shutdown()
            self._tools = None

    def _tool(self, spec: Any) -> Tool:
        name: str = spec.name
        schema = dict(field_of(spec, "input_schema", "inputSchema") or {"type": "object"})
        annotations = getattr(spec, "annotations", None)
        title = getattr(spec, "title", None) or (getattr(annotations, "title", None) if annotations else None)

        async def call_mcp_tool(**arguments: Any) -> Any:
            ctx = arguments.pop(_CONTEXT, None)
            return await self.call(name, arguments, ctx)

        return Tool(
            name=name,
            description=spec.description or "",
            parameters=schema,
            function=call_mcp_tool,
            context_param=_CONTEXT,
            title=title,
            source=self.source_name,
            requires_approval=approval_for(self.requires_approval, name),
            _is_async=True,
        )

    async def call(self, name: str, arguments: dict[str, Any], ctx: RunContext[Any] | None = None) -> Any:
        """Call ``name``; with ``ctx``, the server's progress notifications become ``tool-progress`` events
        and the images, audio and files of its result ``media`` events, and a question the server asks
        pauses the run (:class:`~toolwire.errors.ToolAwaitingInput`) unless an ``elicitation_handler``
        answers it."""
        if ctx is not None and ctx.call is not None and self.elicitor.handler is None:
            return await self.asking.call(
                ctx, self.timeout, lambda asking: self._call_asking(name, arguments, asking)
            )
        session = await self._ensure()
        progress = _progress_reporter(ctx) if ctx is not None else None
        if ctx is not None:  # what the server asks while it serves this call is asked on this run's behalf
            self._serving.append(ctx)
        try:
            result = await self._guarded(
                name, lambda: session.call_tool(name, arguments, progress_callback=progress)
            )
        finally:
            if ctx is not None:
                self._serving.remove(ctx)
        if field_of(result, "is_error", "isError"):
            raise MCPToolError(content_text(result.content) or f"{name} failed on {self.source_name}")
        output = tool_output(result)
        if ctx is not None:
            _show_media(ctx, output)
        return output

    async def _call_asking(self, name: str, arguments: dict[str, Any], asking: AskingCall) -> Any:
        """:meth:`call` for a call that may ask a person: it may outlive the run that made it (continued by
        the run that answers), so its events go to ``asking.ctx``, the run it belongs to now, and its
        timeout stops while a person is asked."""
        session = await self._ensure()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            await _progress_reporter(asking.ctx)(done, total, message)

        self._serving.append(asking.ctx)
        serving = asking.ctx
        try:

            async def request() -> Any:
                async with asyncio.timeout(self.timeout) as deadline:
                    asking.deadline = deadline
                    return await session.call_tool(name, arguments, progress_callback=progress)

            result = await self._guarded(name, request, timed=False)
        finally:
            self._serving.remove(serving)
        if field_of(result, "is_error", "isError"):
            raise MCPToolError(content_text(result.content) or f"{name} failed on {self.source_name}")
        output = tool_output(result)
        _show_media(asking.ctx, output)
        return output


RESOURCE_TOOL = "read_resource"
"""The name of the tool ``resources_as_tool=True`` adds (a ``prefix`` applies to it as to the others)."""

_LISTED_RESOURCES = 50
"""How many resources the resource tool's description names (a server may list thousands)."""

_CONTEXT = "toolwire:context"
"""The keyword the run context reaches an MCP tool's function under (not an identifier: no argument of the
server's schema can be passed as it)."""


def _progress_reporter(ctx: RunContext[Any]) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    """The mcp SDK's progress callback: each notification becomes a ``tool-progress`` event of the call."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        fraction = min(1.0, max(0.0, progress / total)) if total else None
        ctx.progress(fraction, message or (f"{progress:g}/{total:g}" if total else f"{progress:g}"))

    return report


def _show_media(ctx: RunContext[Any], output: Any) -> None:
    """A ``media`` event for each image, audio clip and file of the result (the model gets them too)."""
    for block in output if isinstance(output, list) else ():
        kind = block.get("type")
        if kind in ("image", "audio"):
            ctx.media(block["mimeType"] or "application/octet-stream", data=block["data"])
        elif kind == "resource" and "blob" in block:
            ctx.media(block["mimeType"] or "application/octet-stream", data=block["blob"])
        elif kind == "resource_link" and str(block.get("uri", "")).startswith(("http://", "https://")):
            ctx.media(block.get("mimeType") or "application/octet-stream", url=block["uri"])


def _is_refusal(exc: BaseException) -> bool:
    """A JSON-RPC error the server answered with (unknown resource, bad prompt arguments), as opposed to a
    connection that closed or timed out, which the SDK reports as errors of its own codes."""
    code = getattr(getattr(exc, "error", None), "code", None)
    return isinstance(code, int) and code not in _CONNECTION_CODES


_CONNECTION_CODES = frozenset({-32000, -32001})
"""The SDK's CONNECTION_CLOSED and REQUEST_TIMEOUT codes."""


def _connect_error(source: str, exc: BaseException) -> Exception:
    if isinstance(exc, ImportError):
        return MissingExtraError("mcp", "MCP servers", missing=exc.name)
    return MCPToolError(f"cannot connect to {source}: {describe(exc)}")
