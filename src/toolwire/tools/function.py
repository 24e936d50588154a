"""Function tools: a JSON schema from type hints and docstrings, validated arguments, context injection."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeAlias, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from toolwire.errors import ConfigError, ToolArgumentsError
from toolwire.models.base import ToolDefinition
from toolwire.tools.context import RunContext

ToolFunction = Callable[..., Any]
ApprovalPredicate: TypeAlias = Callable[[RunContext[Any], dict[str, Any]], bool | Awaitable[bool]]
"""``(ctx, args) -> bool`` (sync or async): whether this call must be approved. ``ctx.call`` is the call,
``args`` its validated arguments."""
ApprovalPolicy: TypeAlias = bool | ApprovalPredicate | Collection[str]
"""What a tool source (toolset, MCP server) takes as ``requires_approval``: every tool (``True``), a
predicate, or the names of the tools that need it (as the source lists them, before any prefix)."""


@dataclass(slots=True, kw_only=True)
class Tool:
    """A callable the model can use. Build one with :func:`tool` or pass a plain function to ``Agent(tools=...)``."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""
    function: ToolFunction
    args_model: type[BaseModel] | None = None
    """Validates arguments; ``None`` for tools that bring their own schema (MCP) and validate elsewhere."""
    context_param: str | None = None
    timeout: float | None = None
    sequential: bool = False
    """Run this tool alone: a step containing it runs all its calls one after another, in order."""
    title: str | None = None
    source: str = "function"
    strict: bool | None = None
    requires_approval: bool | ApprovalPredicate = False
    """Run only once a person approved the call: ``True``, or an :data:`ApprovalPredicate` deciding per
    call. The run pauses (``RunResult.pending``) after the step's other calls ran."""
    external: bool = False
    """A client-side tool: the model sees its schema, its body never runs here. The run pauses and the
    client supplies the output (``agent.run(session_id=..., tool_outputs={call_id: value})``)."""
    idempotent: bool = False
    """Safe to run again with the same arguments: a call cut off by its process's death is re-run by the
    run that takes over (server replicas on PostgreSQL) instead of ending as interrupted."""
    _is_async: bool = field(default=False, repr=False)
    _schema_validator: Any = field(default=None, repr=False)

    @property
    def gated(self) -> bool:
        """Whether a call of this tool may wait for a person (approval or a client's output)."""
        return self.external or self.requires_approval is not False

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters, strict=self.strict
        )

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments, or :class:`ToolArgumentsError` with a reason the model can act on."""
        if self.args_model is None:
            return self._validate_against_schema(args)
        try:
            model = self.args_model.model_validate(args)
        except ValidationError as exc:
            reasons = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: {reasons}", tool_name=self.name
            ) from exc
        return dict(model.__dict__)  # the fields' values (extras and private attributes live elsewhere)

    def _validate_against_schema(self, args: dict[str, Any]) -> dict[str, Any]:
        """Tools that bring their own JSON Schema (MCP) are checked against it before the call."""
        if not self.parameters:
            return args
        if self._schema_validator is None:
            import jsonschema

            self._schema_validator = jsonschema.Draft202012Validator(self.parameters)
        errors = sorted(self._schema_validator.iter_errors(args), key=lambda e: list(e.absolute_path))
        if errors:
            reasons = "; ".join(
                f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}" for e in errors
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {reasons}", tool_name=self.name)
        return args

    async def call(self, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        kwargs = dict(args)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self._is_async:
            # A string: the subscripted type would be built on every call (~1 µs).
            return await typing.cast("Callable[..., Awaitable[Any]]", self.function)(**kwargs)
        # Sync tools run in a worker thread so a slow tool never blocks the event stream.
        import asyncio

        return await asyncio.to_thread(self.function, **kwargs)


@overload
def tool(function: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    title: str | None = None,
    strict: bool | None = None,
    requires_approval: bool | ApprovalPredicate = False,
    external: bool = False,
    idempotent: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    title: str | None = None,
    strict: bool | None = None,
    requires_approval: bool | ApprovalPredicate = False,
    external: bool = False,
    idempotent: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a function (sync or async) into a :class:`Tool`. Usable bare (``@tool``) or with options.

    ``requires_approval`` (``True`` or ``(ctx, args) -> bool``) makes a call wait for a person's approval;
    ``external=True`` makes it a client-side tool whose body never runs here; ``idempotent=True`` lets
    a run taking over from a dead replica run an interrupted call again (see :class:`Tool`).
    """

    def wrap(fn: ToolFunction) -> Tool:
        return function_tool(
            fn,
            name=name,
            description=description,
            timeout=timeout,
            sequential=sequential,
            title=title,
            strict=strict,
            requires_approval=requires_approval,
            external=external,
            idempotent=idempotent,
        )

    return wrap(function) if function is not None else wrap


def function_tool(
    fn: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    title: str | None = None,
    strict: bool | None = None,
    requires_approval: bool | ApprovalPredicate = False,
    external: bool = False,
    idempotent: bool = False,
) -> Tool:
    """Build a :class:`Tool` from a function's signature, type hints and docstring."""
    if not callable(fn):
        raise ConfigError(f"a tool must be callable, got {fn!r}")
    check_approval(requires_approval, external, str(name or getattr(fn, "__name__", "?")))
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", tool_name):
        raise ConfigError(f"tool name {tool_name!r} must be 1-64 letters, digits, '_', '.' or '-'")
    summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolved forward references: report, do not guess
        raise ConfigError(f"cannot read type hints of tool {tool_name}: {exc}") from exc
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"tool {tool_name}: *args/**kwargs parameters are not supported")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        from pydantic import Field

        fields[param.name] = (annotation, Field(default, description=param_docs.get(param.name)))
    args_model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=schema,
        function=fn,
        args_model=args_model,
        context_param=context_param,
        timeout=timeout,
        sequential=sequential,
        title=title,
        strict=strict,
        requires_approval=requires_approval,
        external=external,
        idempotent=idempotent,
        _is_async=inspect.iscoroutinefunction(fn),
    )


def check_approval(requires_approval: object, external: bool, name: str) -> None:
    """Refuse what cannot work: a policy that is neither a bool nor a predicate, an approved client tool."""
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        raise ConfigError(f"tool {name}: requires_approval must be a bool or a function (ctx, args) -> bool")
    if external and requires_approval is not False:
        raise ConfigError(f"tool {name}: an external tool runs on the client, which asks its user itself")


def approval_for(policy: ApprovalPolicy, name: str) -> bool | ApprovalPredicate:
    """A tool source's ``requires_approval`` for its tool ``name`` (a name list becomes ``True``/``False``)."""
    if isinstance(policy, bool) or callable(policy):
        return policy
    names = {policy} if isinstance(policy, str) else set(policy)
    return name in names


def _is_context(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return origin is RunContext


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before any parameter section) and per-parameter descriptions.

    Understands Google style (``Args:`` / ``Parameters:`` sections) and reST ``:param name: text``.
    """
    params: dict[str, str] = {}
    for match in re.finditer(r":param\s+(?:\w+\s+)?(\w+):\s*(.+)", doc):
        params[match.group(1)] = match.group(2).strip()
    lines = doc.splitlines()
    summary_lines: list[str] = []
    in_args = False
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters|Params):", stripped):
            in_args = True
            continue
        if in_args:
            if re.fullmatch(r"(Returns?|Raises|Yields|Examples?|Notes?):", stripped):
                in_args = False
                continue
            arg = re.match(r"(\w+)(?:\s*\([^)]*\))?:\s*(.*)", stripped)
            if arg and line.startswith((" ", "\t")) and len(line) - len(line.lstrip()) <= 8:
                current = arg.group(1)
                params[current] = arg.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
            continue
        if stripped.startswith(":param") or re.fullmatch(r"(Returns?|Raises):", stripped):
            break
        summary_lines.append(line)
    return "\n".join(summary_lines).strip(), params
