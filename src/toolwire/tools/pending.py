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

PendingKind: TypeAlias = Literal["approval", "output", "input"]
"""``approval``: answer in ``approvals=``; ``output``: a client tool, answer in ``tool_outputs=``;
``input``: the tool asked a question (:attr:`PendingCall.question`), answer in ``tool_outputs=``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """What a running tool asks a person (an MCP server's ``elicitation/create``): fill in a form whose
    fields ``requested_schema`` describes (a flat JSON Schema object of strings, numbers, booleans and
    enums), or visit ``url`` (``mode="url"``: the interaction happens out of band, answer ``accept`` once
    done)."""

    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: Mapping[str, Any] = field(default_factory=dict)
    url: str | None = None
    server: str = ""
    """Who asks: ``mcp:NAME`` for an MCP server."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "mode": self.mode,
            "requested_schema": dict(self.requested_schema),
            "url": self.url,
            "server": self.server,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        schema = data.get("requested_schema")
        url = data.get("url")
        return cls(
            message=str(data.get("message", "")),
            mode="url" if data.get("mode") == "url" else "form",
            requested_schema=dict(schema) if isinstance(schema, Mapping) else {},
            url=str(url) if url is not None else None,
            server=str(data.get("server", "")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ElicitationAnswer:
    """A person's answer to a :class:`Question`: ``accept`` (with ``content`` in form mode), ``decline``
    or ``cancel``. As a ``tool_outputs=`` value, a plain mapping means ``accept`` with that content, and
    ``{"action": "decline"}`` / ``{"action": "cancel"}`` (or ``{"action": "accept", "content": {...}}``)
    spell the others out (:func:`input_answer`)."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "content": dict(self.content) if self.content is not None else None}


_ACTIONS = ("accept", "decline", "cancel")


def input_answer(value: Any) -> ElicitationAnswer:
    """The answer a ``tool_outputs=`` value gives a call awaiting input; ``ValueError`` when it is none.

    A mapping holding only ``action`` (and ``content``) with a known action is that answer; any other
    mapping accepts with itself as the content (a form whose own fields are ``action`` and ``content`` must
    be answered in the explicit form).
    """
    if isinstance(value, ElicitationAnswer):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(
            'answer a question with the form\'s fields as an object, or {"action": "decline" | "cancel"}'
        )
    if value.get("action") in _ACTIONS and set(value) <= {"action", "content"}:
        content = value.get("content")
        if content is not None and not isinstance(content, Mapping):
            raise ValueError("an answer's content must be an object of the form's fields")
        action = value["action"]
        return ElicitationAnswer(action=action, content=dict(content) if content is not None else None)
    return ElicitationAnswer(action="accept", content=dict(value))


def checked_answer(question: Question | None, value: Any) -> ElicitationAnswer:
    """:func:`input_answer`, and an accepted form's content checked against the question's schema (its
    required fields given, no unknown field, each a string, number, integer, boolean or one of its enum);
    ``ValueError`` saying what is wrong, before anything runs."""
    answer = input_answer(value)
    if question is None or question.mode != "form" or answer.action != "accept":
        return answer
    schema = question.requested_schema
    listed, needed = schema.get("properties"), schema.get("required")
    properties: Mapping[str, Any] = listed if isinstance(listed, Mapping) else {}
    required: list[Any] = needed if isinstance(needed, list) else []
    content = dict(answer.content or {})
    problems = [f"{name!r} is required" for name in required if name not in content]
    for name, given in content.items():
        spec = properties.get(name) if properties else None
        if properties and not isinstance(spec, Mapping):
            problems.append(f"{name!r} is not a field of the form ({', '.join(map(repr, properties))})")
        elif isinstance(spec, Mapping):
            wrong = _field_problem(spec, given)
            if wrong:
                problems.append(f"{name!r} {wrong}")
    if problems:
        raise ValueError("; ".join(problems))
    return answer


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def _field_problem(spec: Mapping[str, Any], value: Any) -> str | None:
    options = spec.get("enum")
    if isinstance(options, list) and value not in options:
        return f"must be one of {', '.join(map(repr, options))}"
    kind = spec.get("type")
    wanted = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
    if wanted is None:
        return None
    if isinstance(value, bool) and kind != "boolean":  # JSON true is no number
        return f"must be a {kind}"
    if not isinstance(value, wanted) or (kind == "integer" and isinstance(value, float)):
        return f"must be a{'n' if kind == 'integer' else ''} {kind}"
    return None


AnsweredQuestion: TypeAlias = tuple[Question, ElicitationAnswer]
"""A question a call asked and the answer it got."""


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
    question: Question | None = None
    """For ``kind="input"``: what the tool asks."""
    reason: str | None = None
    """Why a call waits for approval that would otherwise have run (a pausing ``tool_calls`` limit)."""

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
            **({"question": self.question.to_dict()} if self.question is not None else {}),
            **({"reason": self.reason} if self.reason is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingCall:
        kind = data.get("kind")
        question = data.get("question")
        return cls(
            tool_call_id=str(data["tool_call_id"]),
            tool_name=str(data.get("tool_name", "")),
            args=dict(data.get("args") or {}),
            kind=kind if kind in ("output", "input") else "approval",
            session_id=str(data["session_id"]),
            message_id=str(data.get("message_id", "")),
            question=Question.from_dict(question) if isinstance(question, Mapping) else None,
            reason=str(data["reason"]) if data.get("reason") is not None else None,
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
    """Answers for a paused call, handed to the tool when it is called again (``ctx.resume``).

    A call running a sub-agent continues the sub-agent's session instead of starting one:
    ``agent.stream(session_id=resume.session_id, parent=ctx, approvals=resume.approvals,
    tool_outputs=resume.tool_outputs)`` (``Agent.as_tool`` does). A call that asked a question
    (``awaiting_input``) finds every answer it got so far in ``answers``, in the order it asked.
    """

    session_id: str
    """The paused sub-agent's session (for a call that asked a question: the call's own session)."""
    approvals: Mapping[DecisionKey, Approval] = field(default_factory=dict)
    """Keyed by ``(session_id, tool_call_id)``."""
    tool_outputs: Mapping[DecisionKey, Any] = field(default_factory=dict)
    """Keyed by ``(session_id, tool_call_id)``."""
    answers: tuple[AnsweredQuestion, ...] = ()
    """For a call that asked questions: each question and its answer, the last one new."""


def asked_of(output: Any) -> tuple[Question, tuple[AnsweredQuestion, ...]]:
    """The question an ``awaiting_input`` row holds (``{"question", "answered"}``) and the answers its call
    had before asking it."""
    data = output if isinstance(output, Mapping) else {}
    raw = data.get("question")
    question = Question.from_dict(raw) if isinstance(raw, Mapping) else Question(message="")
    answered: list[AnsweredQuestion] = []
    for item in data.get("answered") or ():
        if isinstance(item, Mapping) and isinstance(item.get("question"), Mapping):
            try:
                answer = input_answer(item.get("answer"))
            except ValueError:
                continue
            answered.append((Question.from_dict(item["question"]), answer))
    return question, tuple(answered)


def asked_output(question: Question, answered: Sequence[AnsweredQuestion]) -> dict[str, Any]:
    """What an ``awaiting_input`` row holds (read back by :func:`asked_of`)."""
    return {
        "question": question.to_dict(),
        "answered": [{"question": q.to_dict(), "answer": a.to_dict()} for q, a in answered],
    }


def held_reason(output: Any) -> str | None:
    """Why an ``awaiting_approval`` row waits when its tool does not ask (``{"reason": ...}``)."""
    reason = output.get("reason") if isinstance(output, Mapping) else None
    return reason if isinstance(reason, str) else None


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


_PENDING_KIND: dict[AwaitingKind, PendingKind] = {
    "approval": "approval",
    "output": "output",
    "input": "input",
}


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
                    kind=_PENDING_KIND[row.awaiting],
                    session_id=session_id,
                    message_id=row.message_id,
                    question=asked_of(row.output)[0] if row.awaiting == "input" else None,
                    reason=held_reason(row.output) if row.awaiting == "approval" else None,
                )
            )
    return pending
