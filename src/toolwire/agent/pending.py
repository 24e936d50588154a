"""Human in the loop: the calls a paused run waits for, and the answers that resume it.

A tool marked ``requires_approval`` (or a predicate saying so for this call) waits for a person's approval;
an ``external`` tool waits for the client to run it and send its output. When a step makes such calls, its
other calls run as usual, then the run pauses: the waiting calls are stored (``awaiting_*`` statuses), the
run ends with status ``paused`` and :attr:`~toolwire.agent.loop.RunResult.pending` lists them. The answers
come with the next run of the session, from any process::

    result = await agent.run("Refund order 42", session_id="s1")
    if result.status == "paused":
        call = result.pending[0]
        result = await agent.run(session_id="s1", approvals={call.tool_call_id: True})

A decision is keyed by the call's ``tool_call_id``, or by ``(session_id, tool_call_id)`` when the id alone is
ambiguous (a sub-agent may reuse its caller's ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

PendingKind: TypeAlias = Literal["approval", "output"]
"""``approval``: answer in ``approvals=``; ``output``: a client tool, answer in ``tool_outputs=``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """A tool call a paused run waits for."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments to approve, or to run the client tool with."""
    kind: PendingKind
    session_id: str
    """The session that made the call: a sub-agent's session for a call its sub-agent made."""
    message_id: str = ""
    """The assistant message that made the call."""

    @property
    def key(self) -> tuple[str, str]:
        """``(session_id, tool_call_id)``: unambiguous across a session and its sub-agents."""
        return (self.session_id, self.tool_call_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "args": self.args,
            "kind": self.kind,
            "session_id": self.session_id,
            "message_id": self.message_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingCall:
        kind = data.get("kind")
        return cls(
            tool_call_id=str(data["tool_call_id"]),
            tool_name=str(data.get("tool_name", "")),
            args=dict(data.get("args") or {}),
            kind="output" if kind == "output" else "approval",
            session_id=str(data["session_id"]),
            message_id=str(data.get("message_id", "")),
        )


@dataclass(frozen=True, slots=True)
class Denied:
    """A refusal with a reason, as an ``approvals=`` value; the model reads "denied by the user: reason"."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class ToolFailed:
    """A client tool that failed, as a ``tool_outputs=`` value; the model reads ``message`` as an error."""

    message: str


Approval: TypeAlias = bool | Denied
"""An answer to a call awaiting approval: ``True`` runs it, ``False`` or :class:`Denied` refuses it."""
DecisionKey: TypeAlias = str | tuple[str, str]
"""A call's ``tool_call_id``, or ``(session_id, tool_call_id)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    """Answers for a paused sub-agent, handed to the tool call that runs it (``ctx.resume``).

    The tool continues the sub-agent's session instead of starting one:
    ``agent.stream(session_id=resume.session_id, parent=ctx, approvals=resume.approvals,
    tool_outputs=resume.tool_outputs)`` (``Agent.as_tool`` does).
    """

    session_id: str
    """The paused sub-agent's session."""
    approvals: Mapping[DecisionKey, Approval] = field(default_factory=dict)
    """Keyed by ``(session_id, tool_call_id)``."""
    tool_outputs: Mapping[DecisionKey, Any] = field(default_factory=dict)
    """Keyed by ``(session_id, tool_call_id)``."""
