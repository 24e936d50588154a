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
ambiguous (a sub-agent may reuse its caller's ids), or bound to the call a person was shown with
:attr:`PendingCall.shown` (a :class:`ShownCall`): a model may reuse a call id after the conversation was
edited, and a bound answer to the old call is then refused (``ResumeError``) instead of approving the new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from toolwire.events import AwaitingKind

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

    @property
    def shown(self) -> ShownCall:
        """The key of an answer bound to this very call (its assistant message), not only to its id."""
        return ShownCall(self.tool_call_id, message_id=self.message_id, session_id=self.session_id)

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


@dataclass(frozen=True, slots=True)
class ShownCall:
    """An answer's key bound to the call it was shown for: the call id and the assistant message that made
    it. Refused (``ResumeError``) when the awaited call with that id was made by another message."""

    tool_call_id: str
    message_id: str
    session_id: str | None = None
    """``None``: the id names one awaited call of the session tree."""


Approval: TypeAlias = bool | Denied
"""An answer to a call awaiting approval: ``True`` runs it, ``False`` or :class:`Denied` refuses it."""
DecisionKey: TypeAlias = str | tuple[str, str] | ShownCall
"""A call's ``tool_call_id``, ``(session_id, tool_call_id)``, or a :class:`ShownCall` bound to the call."""


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


def sub_agent_of(output: Any) -> tuple[str, tuple[PendingCall, ...]]:
    """The paused sub-agent an ``awaiting_subagent`` row holds (``{"session_id", "pending"}``): its session
    and what it waits for."""
    data = output if isinstance(output, Mapping) else {}
    raw = data.get("pending")
    pending = (
        tuple(PendingCall.from_dict(p) for p in raw if isinstance(p, Mapping))
        if isinstance(raw, list)
        else ()
    )
    return str(data.get("session_id", "")), pending


class AwaitingRow(Protocol):
    """The fields of a stored tool-call row (``toolwire.store.records.ToolCallRecord``) read here."""

    @property
    def tool_call_id(self) -> str: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def args(self) -> dict[str, Any]: ...
    @property
    def message_id(self) -> str: ...
    @property
    def awaiting(self) -> AwaitingKind | None: ...
    @property
    def output(self) -> Any: ...


def pending_of_rows(rows: Sequence[AwaitingRow], session_id: str) -> list[PendingCall]:
    """What a session's stored tool-call rows wait for, in row order: each awaiting call, or for a call
    whose sub-agent paused, that sub-agent's pending calls (``Agent.pending`` and every API that lists
    them read it here, without the session's messages)."""
    pending: list[PendingCall] = []
    for row in rows:
        if row.awaiting == "subagent":
            pending.extend(sub_agent_of(row.output)[1])
        elif row.awaiting is not None:
            pending.append(
                PendingCall(
                    tool_call_id=row.tool_call_id,
                    tool_name=row.tool_name,
                    args=row.args,
                    kind="output" if row.awaiting == "output" else "approval",
                    session_id=session_id,
                    message_id=row.message_id,
                )
            )
    return pending
