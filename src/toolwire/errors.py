"""The toolwire exception tree: every error the library raises on purpose is a :class:`ToolwireError`.

::

    ToolwireError
    ├── ConfigError
    │   ├── MissingExtraError (extra; also an ImportError)
    │   └── MissingKeyError (variables, in_code)
    ├── UnsupportedContentError
    ├── ProviderError (provider, model, status, code, retryable, body)
    │   ├── ProviderHTTPError
    │   │   └── ContextLengthExceeded (limit, requested)
    │   ├── ProviderConnectionError
    │   └── ProviderProtocolError
    ├── ToolError
    │   ├── ToolNotFoundError
    │   ├── ToolArgumentsError
    │   ├── ToolTimeoutError
    │   ├── ToolBlockedError
    │   ├── SubAgentPaused (session_id, pending; a signal, never a result)
    │   ├── ToolAwaitingInput (question, answered; a signal, never a result)
    │   └── ToolExecutionError
    │       └── MCPToolError                (toolwire.tools.mcp)
    ├── DriverError
    │   ├── DecisionExtractionFailed
    │   ├── DecisionValidationFailed
    │   │   └── RepeatedCall                (toolwire.agent.drivers._react_parse)
    │   └── DecisionTimeout
    ├── StepAborted
    ├── ResumeError (tool_call_ids)
    ├── TurnLostError (retryable; a taken-over turn whose prompt was never stored)
    ├── MaxStepsExceeded
    ├── UsageLimitExceeded (limit, allowed, would_be, per)
    ├── NoObjectGenerated (raw_output, errors, usage, finish_reason)
    ├── StoreError
    │   ├── SessionBusyError
    │   ├── LeaseLostError
    │   └── SessionAccessError
    │       └── SubSessionError
    └── RequestError (status, kind)         (toolwire.server.errors)

Foreign exceptions are translated at the boundary with ``raise ... from exc``. Two ``ValueError``
subclasses are internal signals that never reach callers: ``OutputValidationError``
(``toolwire.agent.output``; an invalid output is re-prompted, then :class:`NoObjectGenerated`) and
``PartialJSONError`` (``toolwire._partial_json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolwire.messages import Usage
    from toolwire.tools.pending import PendingCall


class ToolwireError(Exception):
    """Root of every error toolwire raises on purpose."""


class ConfigError(ToolwireError):
    """Bad configuration: unknown model string, missing extra, missing API key."""


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed; the message says which extra to install.

    Also an :class:`ImportError`, so ``except ImportError`` around an optional import still works.
    """

    def __init__(self, extra: str, feature: str, *, missing: str | None = None) -> None:
        detail = f" (no module named {missing!r})" if missing else ""
        super().__init__(
            f'the {extra!r} extra is needed for {feature}: pip install "toolwire[{extra}]"{detail}'
        )
        self.extra = extra
        """The name of the extra, e.g. ``"mcp"``."""


class MissingKeyError(ConfigError):
    """A provider's key or credentials are not set.

    ``str()`` names both ways to give one: the environment ``variables`` and, for Python callers,
    ``in_code`` (``pass api_key=``); :meth:`without_code` leaves the latter out (what the command prints).
    """

    def __init__(
        self, problem: str, *, variables: Sequence[str] = (), in_code: str = "pass api_key="
    ) -> None:
        self.problem = problem
        """What is missing, and for which host."""
        self.variables = tuple(variables)
        """The environment variables a key is read from, in order."""
        self.in_code = in_code
        super().__init__(
            f"{self.without_code()}, or {in_code}" if self.variables else f"{problem}: {in_code}"
        )

    def without_code(self) -> str:
        """The message for someone who configures through the environment (the command, a server)."""
        return f"{self.problem}: set {' / '.join(self.variables)}" if self.variables else self.problem


class UnsupportedContentError(ToolwireError):
    """A message part cannot be represented on the target provider's wire format."""


class ProviderError(ToolwireError):
    """A model provider failed. ``retryable`` is computed from the status / kind."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        model: str = "",
        status: int | None = None,
        code: str | None = None,
        retryable: bool = False,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.code = code
        self.retryable = retryable
        self.body = body
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f"{self.provider}:{self.model}" if self.provider else "provider"
        status = f" HTTP {self.status}" if self.status is not None else ""
        code = f" [{self.code}]" if self.code else ""
        return f"{where}{status}{code}: {self.message}"


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status."""


class ContextLengthExceeded(ProviderHTTPError):
    """The request does not fit the model's context window: the provider refused it as too long (OpenAI's
    ``context_length_exceeded``, Anthropic's "prompt is too long", Gemini's "exceeds the maximum number of
    tokens", Bedrock's ``ValidationException``, llama.cpp's and Ollama's messages; the embedded model's too,
    with no HTTP status). Not retryable as it is: the same request fails again until it is made shorter or
    sent to a model with a larger window."""

    def __init__(
        self, message: str, *, limit: int | None = None, requested: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.limit = limit
        """The model's window in tokens, when the provider stated it."""
        self.requested = requested
        """The tokens the request needed, when the provider stated it."""


class ProviderConnectionError(ProviderError):
    """The provider could not be reached, or the connection broke or timed out."""


class ProviderProtocolError(ProviderError):
    """The provider sent something that does not follow its own wire format, or an error event mid-stream."""


class ToolError(ToolwireError):
    """A tool call could not be executed as asked."""

    def __init__(self, message: str, *, tool_name: str = "", tool_call_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id


class ToolNotFoundError(ToolError):
    """The model asked for a tool that is not registered."""


class ToolArgumentsError(ToolError):
    """The arguments are not valid JSON or do not match the tool's schema."""


class ToolTimeoutError(ToolError):
    """The tool ran past its timeout and was cancelled."""


class ToolBlockedError(ToolError):
    """An interceptor blocked the call."""


class ToolExecutionError(ToolError):
    """The tool raised; the original exception is ``__cause__``."""


class SubAgentPaused(ToolError):
    """Raised by a tool whose sub-agent run paused (``Agent.as_tool`` does): the call waits with it.

    Not an error result: the executor records the call as ``awaiting_subagent`` and the caller's run pauses
    too, listing the sub-agent's pending calls. Resuming hands the tool the answers as ``ctx.resume``.
    """

    def __init__(self, session_id: str, pending: Sequence[PendingCall], **kwargs: Any) -> None:
        super().__init__(f"the sub-agent in session {session_id} waits for {len(pending)} call(s)", **kwargs)
        self.session_id = session_id
        """The paused sub-agent's session."""
        self.pending = list(pending)
        """Its pending calls (its own sub-agents' included)."""


class ToolAwaitingInput(ToolError):
    """Raised by a tool that needs a person's answer to go on (an MCP server's elicitation): the call waits.

    Not an error result: the executor records the call as ``awaiting_input`` with ``question`` (a
    :class:`~toolwire.tools.pending.Question`) and the answers it already had (``answered``), and the run
    pauses. The answer comes like a client tool's output (``tool_outputs=``); the tool is then called again
    with every answer so far in ``ctx.resume.answers`` (an MCP call still open in this process is continued
    instead of made again).
    """

    def __init__(self, question: Any, answered: Sequence[Any] = (), **kwargs: Any) -> None:
        super().__init__(f"the tool asks: {getattr(question, 'message', question)}", **kwargs)
        self.question = question
        """What the tool asks (a :class:`~toolwire.tools.pending.Question`)."""
        self.answered = list(answered)
        """The questions it asked before in this call and their answers (``(Question, ElicitationAnswer)``)."""


class DriverError(ToolwireError):
    """A driver could not turn model output into a decision."""

    def __init__(self, message: str, *, raw_output: str = "", attempts: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.raw_output = raw_output
        self.attempts = attempts


class DecisionExtractionFailed(DriverError):
    """No JSON decision could be extracted from the model's output."""


class DecisionValidationFailed(DriverError):
    """A decision was extracted but does not match the decision schema or names an unknown tool."""


class DecisionTimeout(DriverError):
    """The model did not finish a decision within the driver's time bound (its generation was stopped)."""


class StepAborted(ToolwireError):
    """A model step failed after partial output; nothing of it was stored as a valid message."""


class ResumeError(ToolwireError):
    """Answers that cannot be applied to the session (nothing was written): a decision for a call that is
    not awaited (or awaits the other kind of answer, or whose id is ambiguous), or a run with neither a
    prompt nor answers."""

    def __init__(self, message: str, *, tool_call_ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.tool_call_ids = list(tool_call_ids)
        """The offending calls' ids, if any."""


class TurnLostError(ToolwireError):
    """A run taken over after its process died before it stored the user's prompt: the turn is lost (the
    history still ends with the previous answer), so it ends as this error and the client sends the
    message again."""

    retryable = True


class MaxStepsExceeded(ToolwireError):
    """The run reached ``max_steps`` while the model still asked for tools."""


class UsageLimitExceeded(ToolwireError):
    """A usage limit (``toolwire.UsageLimits``) would be passed: the run ended before the model request (or
    the tool calls) that would pass it; what it did until then is stored."""

    def __init__(
        self, message: str, *, limit: str, allowed: Any, would_be: Any, per: str, pause: bool = False
    ) -> None:
        super().__init__(message)
        self.pause = pause
        """Whether the limit pauses the run for a person to extend it (``UsageLimits(pause=True)``)
        instead of ending it."""
        self.limit = limit
        """Which limit: ``requests``, ``input_tokens``, ``output_tokens``, ``tool_calls`` or ``cost``."""
        self.allowed = allowed
        self.would_be = would_be
        """The usage had the run gone on."""
        self.per = per
        """``run`` or ``session``."""


class NoObjectGenerated(ToolwireError):
    """The model did not produce a valid structured output within ``output_retries`` re-prompts."""

    def __init__(
        self,
        message: str,
        *,
        raw_output: str = "",
        errors: list[str] | None = None,
        usage: Usage | None = None,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.raw_output = raw_output
        """The last raw output (text or final-result arguments)."""
        self.errors = errors or []
        """The validation errors of the last attempt, one per failed check (``"path: message"``)."""
        self.usage = usage
        """Tokens the run spent, every attempt included (``None`` when not known)."""
        self.finish_reason = finish_reason
        """Why the model stopped the last attempt (``stop``, ``length``, ``tool-calls``, ...)."""


class StoreError(ToolwireError):
    """The store failed to read or write."""

    unreachable: bool = False
    """The database could not be reached (refused or dropped connection, restarting server): the same
    write may succeed later. A run holding a lease retries its writes then, within the lease."""


class SessionBusyError(StoreError):
    """Another run is already in progress on the same session."""


class LeaseLostError(StoreError):
    """The run no longer holds its session: another run took its lease over (the lease expired while this
    process was stopped or cut from the database), so this run's write was refused and the run stops,
    writing and publishing nothing more. Not a failure of the turn: the other run continues it."""


class SessionAccessError(StoreError):
    """The session belongs to another user (or another conversation): nothing was read or written.

    The message never names the owner, so it can be shown to the caller.
    """


class SubSessionError(SessionAccessError):
    """A run that must start a conversation's own session (``top_level=True``) was given a sub-agent's
    session, of the same user: nothing was read or written."""
