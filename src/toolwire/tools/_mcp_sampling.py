"""An MCP server's ``sampling/createMessage`` requests, served by a toolwire model behind an approval policy.

The model is the one given as ``sampling_model=`` (a :class:`~toolwire.models.base.Model` or a model string),
else the model of the run whose tool call the server is serving (``RunContext.model``). The policy decides
first: ``"deny"`` (the default: a server cannot spend the user's tokens unless allowed), ``"allow"``, or a
callable given a :class:`SamplingRequest` that returns (or awaits) a bool. A refusal or a failure is answered
to the server as a JSON-RPC error that says why, never raised in the client.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from toolwire.messages import FilePart, Message, Part, TextPart
from toolwire.models.base import Model, ModelRequest, ModelSettings
from toolwire.tools._mcp_wire import describe, field_of
from toolwire.tools.context import RunContext

logger = logging.getLogger("toolwire.tools.mcp")


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingRequest:
    """What an MCP server asks the client's model (``sampling/createMessage``), as a policy sees it."""

    server: str
    """The source name of the asking server (``mcp:NAME``)."""
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    max_tokens: int
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    context: RunContext[Any] | None = None
    """The run context of the tool call the server is serving, when one is running."""


SamplingPolicy: TypeAlias = Literal["allow", "deny"] | Callable[[SamplingRequest], bool | Awaitable[bool]]
"""Whether a server's sampling request may use the model: ``"allow"``, ``"deny"`` or a predicate."""

_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "tool-calls": "toolUse"}
_INVALID_REQUEST = -32600
_INTERNAL_ERROR = -32603


class _SamplingRefused(Exception):  # a signal caught in this module, never raised to callers
    """A sampling request this client will not serve; the message is what the server is told."""


class Sampler:
    """The mcp SDK's sampling callback for one server."""

    def __init__(
        self,
        server: str,
        *,
        model: Model | str | None,
        policy: SamplingPolicy,
        serving: Callable[[], RunContext[Any] | None],
    ) -> None:
        if policy not in ("allow", "deny") and not callable(policy):
            raise ValueError(f"sampling_policy must be 'allow', 'deny' or a callable, not {policy!r}")
        self.server = server
        self.model = model
        self.policy = policy
        self.serving = serving

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageResult, ErrorData

        try:
            request = _request(self.server, params, self.serving())
            await self._check(request)
            model = self._model(request.context)
            response = await _sample(model, request)
        except _SamplingRefused as exc:
            logger.info("%s: sampling refused: %s", self.server, exc)
            return ErrorData(code=_INVALID_REQUEST, message=str(exc))
        except Exception as exc:  # the server is told; the client goes on
            logger.warning("%s: sampling failed: %s", self.server, describe(exc))
            return ErrorData(code=_INTERNAL_ERROR, message=f"toolwire: sampling failed: {describe(exc)}")
        if request.context is not None:
            request.context.data("mcp-sampling", {"server": self.server, "model": model.model_name})
        return CreateMessageResult.model_validate(
            {
                "role": "assistant",
                "content": {"type": "text", "text": response.text},
                "model": model.model_name,
                "stopReason": _STOP_REASONS.get(response.finish_reason, response.finish_reason),
            }
        )

    async def _check(self, request: SamplingRequest) -> None:
        if self.policy == "deny":
            raise _SamplingRefused(
                f"toolwire: sampling is not allowed for {self.server} (the client's sampling_policy is "
                "'deny', the default; sampling_policy='allow' or a callable allows it)"
            )
        if self.policy == "allow":
            return
        assert callable(self.policy)
        verdict = self.policy(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            raise _SamplingRefused(
                f"toolwire: the client's sampling_policy refused this request of {self.server}"
            )

    def _model(self, context: RunContext[Any] | None) -> Model:
        if isinstance(self.model, str):
            from toolwire.models import infer_model  # the resolver imports adapters: only when used

            self.model = infer_model(self.model)
        if self.model is not None:
            return self.model
        if context is not None and context.model is not None:
            return context.model
        raise _SamplingRefused(
            f"toolwire: no model to sample with for {self.server} (no sampling_model= is configured and no "
            "run's tool call is being served)"
        )


def _request(server: str, params: Any, context: RunContext[Any] | None) -> SamplingRequest:
    messages = tuple(
        Message(
            role="assistant" if m.role == "assistant" else "user",
            parts=tuple(_part(c) for c in (m.content if isinstance(m.content, list) else [m.content])),
        )
        for m in params.messages
    )
    return SamplingRequest(
        server=server,
        messages=messages,
        system_prompt=field_of(params, "system_prompt", "systemPrompt"),
        max_tokens=int(field_of(params, "max_tokens", "maxTokens")),
        temperature=params.temperature,
        stop_sequences=tuple(field_of(params, "stop_sequences", "stopSequences") or ()),
        context=context,
    )


def _part(content: Any) -> Part:
    kind = getattr(content, "type", None)
    if kind == "text":
        return TextPart(text=content.text)
    if kind in ("image", "audio"):
        return FilePart(media_type=field_of(content, "mime_type", "mimeType"), data=content.data)
    # tool use and tool results in sampling (2025-11-25) would need the server's tools run here
    raise _SamplingRefused(f"toolwire: sampling messages with {kind!r} content are not supported")


async def _sample(model: Model, request: SamplingRequest) -> Any:
    from toolwire.models import collect

    settings = ModelSettings(
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        stop=request.stop_sequences,
    )
    return await collect(
        model,
        ModelRequest(messages=request.messages, instructions=request.system_prompt, settings=settings),
    )
