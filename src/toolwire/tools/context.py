"""The run context a tool receives when one of its parameters is annotated ``RunContext``."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeAlias

from typing_extensions import TypeVar

from toolwire._fast_init import fast_frozen_init, fast_replace
from toolwire._text import session_title
from toolwire.errors import ToolArgumentsError
from toolwire.events import (
    AgentEvent,
    CustomDataEvent,
    MediaEvent,
    SessionRenamed,
    SystemMessageEvent,
    ToolProgress,
)
from toolwire.messages import Message, ToolCallPart
from toolwire.tools.pending import Resume

if TYPE_CHECKING:
    from toolwire.models.base import Model
    from toolwire.store.base import Store

DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's ``deps`` (``Agent(..., deps_type=Db)``; a bare ``RunContext`` means any)."""


ToolEmitted: TypeAlias = (
    type[ToolProgress]
    | type[SystemMessageEvent]
    | type[MediaEvent]
    | type[CustomDataEvent]
    | type[SessionRenamed]
)
"""The kinds of event a running tool emits in its run's stream (numbered when the loop publishes them)."""


class EventSink(Protocol):
    """Where tool-originated events go (the running step's stream), and the run a sub-agent joins."""

    @property
    def owner(self) -> str | None:
        """The user the run acts for: a sub-agent run started by a tool acts for the same user."""
        ...

    @property
    def store(self) -> Store | None:
        """The run's store: a sub-agent without a store of its own records beside its caller."""
        ...

    def emit(self, kind: ToolEmitted, /, **fields: Any) -> None:
        """An event of ``kind`` with these fields (``tool_call_id`` included)."""
        ...

    def forward(self, event: AgentEvent) -> None:
        """A sub-agent's event, forwarded unchanged (it keeps its own session envelope)."""
        ...


class _NullSink:
    owner: str | None = None
    store: Store | None = None

    def emit(self, kind: ToolEmitted, /, **fields: Any) -> None:
        pass

    def forward(self, event: AgentEvent) -> None:
        pass


@fast_frozen_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """Run state and the current call, plus ways for a running tool to speak in the event stream."""

    deps: DepsT
    session_id: str
    user_session_id: str
    interaction_id: str
    parent_session_id: str | None = None
    step: int = 0
    call: ToolCallPart | None = None
    messages: Sequence[Message] = ()
    """The history as the model saw it in this step."""
    agent_name: str | None = None
    model: Model | None = None
    """The model the run uses (an MCP server's sampling requests are served by it unless configured)."""
    sink: EventSink = field(default_factory=_NullSink, repr=False, compare=False)
    resumes: Mapping[str, Resume] = field(default_factory=dict, repr=False, compare=False)
    """Answers for paused sub-agents, by the tool call that runs each (read through :attr:`resume`)."""

    def for_call(self, call: ToolCallPart) -> RunContext[DepsT]:
        return fast_replace(self, call=call)

    @property
    def tool_call_id(self) -> str | None:
        return self.call.tool_call_id if self.call is not None else None

    @property
    def resume(self) -> Resume | None:
        """For a call that runs a sub-agent which paused: the answers to continue it with, else ``None``."""
        if not self.resumes or self.call is None:
            return None
        return self.resumes.get(self.call.tool_call_id)

    def progress(self, fraction: float | None = None, message: str = "") -> None:
        """Report progress (``fraction`` in 0..1 when known)."""
        self.sink.emit(ToolProgress, tool_call_id=self.tool_call_id, fraction=fraction, message=message)

    def system_message(self, text: str, level: Literal["info", "warning", "error"] = "info") -> None:
        self.sink.emit(SystemMessageEvent, tool_call_id=self.tool_call_id, text=text, level=level)

    def media(self, content_type: str, *, url: str | None = None, data: bytes | str | None = None) -> None:
        """Show media (an image, audio, ...) by URL or inline bytes."""
        if isinstance(data, bytes):
            data = base64.b64encode(data).decode()
        self.sink.emit(
            MediaEvent, tool_call_id=self.tool_call_id, content_type=content_type, url=url, data=data
        )

    def data(self, name: str, payload: Any) -> None:
        """A custom, application-defined event."""
        self.sink.emit(CustomDataEvent, tool_call_id=self.tool_call_id, name=name, data=payload)

    async def rename(self, title: str) -> str:
        """Rename this run's conversation, as ``PATCH /api/sessions/{id}`` does: stored first, then a
        ``session-renamed`` event every subscriber sees. Returns the title as stored (whitespace collapsed,
        at most 200 characters); a blank title or one holding U+0000 raises :class:`ToolArgumentsError`."""
        stored = session_title(title)
        if stored is None:
            raise ToolArgumentsError("a title must be non-empty text without U+0000")
        store = self.sink.store
        if store is not None:
            await store.set_title(self.session_id, stored)
        self.sink.emit(SessionRenamed, tool_call_id=self.tool_call_id, title=stored)
        return stored

    def forward(self, event: AgentEvent) -> None:
        """Forward an event of another session (a sub-agent run) into this stream."""
        self.sink.forward(event)
