"""The transcript rules: the state and the handlers shared by live events and history replay.

:class:`~toolwire.transcript.Transcript` holds one :class:`Rules` and hands it each event (:meth:`Rules.apply`)
or the stored history (:meth:`Rules.restore`); keeping one set of handlers for both is what makes a resumed
transcript equal the live one. The rules are written down in docs/transcript.md.

:class:`Rules` is built in layers, one module per concern, each a class over the one below (a handler calls
only what sits under it): ``_rules_state`` (the indexes, the change report), ``_session_tree``,
``_notifications``, ``_tool_calls``, ``_bubbles``, ``_history_replay`` (``restore``), and this module, the
reading side and the event dispatch. Together they are the Python side of
src/toolwire/server/static/transcript.js, whose sections (reading, events, sessions, bubbles, tool calls,
notifications, resume) hold the same handlers; hold each module against its section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import assert_never

from toolwire.events import (
    AgentEvent,
    CompactionEvent,
    CustomDataEvent,
    ErrorEvent,
    FailoverEvent,
    InteractionEnd,
    InteractionStart,
    MediaEvent,
    MessagePersisted,
    OutputAvailable,
    OutputPartial,
    ReasoningDeltaEvent,
    ReasoningEndEvent,
    ReasoningStartEvent,
    SessionRenamed,
    StepFinish,
    StepStart,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallActive,
    ToolCallAwaiting,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolCallResolved,
    ToolInputAvailableEvent,
    ToolInputDeltaEvent,
    ToolInputStartEvent,
    ToolProgress,
    UserTurnStart,
)
from toolwire.transcript._history_replay import HistoryReplay
from toolwire.transcript._state import SessionState, first
from toolwire.transcript.types import (
    ToolNotification,
    TranscriptMessage,
    TranscriptSession,
    TranscriptToolCall,
)


class Rules(HistoryReplay):
    """Transcript state and the handlers that change it: O(1) amortized per event; clean-ups walk live state only.

    ``Rules(listeners)``: see :class:`~toolwire.transcript._rules_state.RulesState` for the state and the
    listeners it reports to.
    """

    # -- reading -------------------------------------------------------------------------------------

    @property
    def ops(self) -> int:
        return self._ops

    @property
    def notifications(self) -> Mapping[tuple[str, str], ToolNotification]:
        return MappingProxyType(self._notifications)

    def messages(self) -> list[TranscriptMessage]:
        self._ops += len(self._entries)
        return [entry.freeze() for entry in self._entries]

    def message(self, message_id: str) -> TranscriptMessage | None:
        entry = self._by_id.get(message_id)
        return entry.freeze() if entry is not None else None

    def pending_calls(self) -> dict[str, tuple[TranscriptToolCall, ...]]:
        self._ops += sum(len(calls) for calls in self._pending.values())
        return {
            sid: tuple(call for _, call in sorted(calls, key=first)) for sid, calls in self._pending.items()
        }

    def sessions(self) -> dict[str, TranscriptSession]:
        self._ops += len(self._sessions)
        return {
            s.id: TranscriptSession(
                session_id=s.id, parent_session_id=s.parent, children=tuple(s.children), title=s.title
            )
            for s in self._sessions.values()
            if s.id
        }

    # -- events --------------------------------------------------------------------------------------

    def apply_all(self, events: Iterable[AgentEvent]) -> None:
        apply = self.apply
        for event in events:
            apply(event)

    def apply(self, event: AgentEvent) -> None:
        """Consume one agent event of any session. Never raises on odd streams; see docs/transcript.md."""
        self._ops += 1
        state = self._enter(event)
        if state is None:
            return
        match event:
            case TextDeltaEvent():
                self._text(state, event.message_id, "assistant", event.delta)
            case ReasoningDeltaEvent():
                self._text(state, event.message_id, "reasoning", event.delta)
            case (
                ToolInputStartEvent()
                | ToolInputAvailableEvent()
                | ToolCallActive()
                | ToolCallHeartbeat()
                | ToolProgress()
                | ToolCallComplete()
                | ToolCallAwaiting()
                | ToolCallResolved()
            ):
                self._tool_event(state, event)
            case UserTurnStart():
                self._user_turn(state, event.message)
            case InteractionEnd():
                state.anon = None
                # The run's waiting calls get their bubble here (rule 4), a paused run's too: the person
                # answering sees what already ran. Calls waiting for a person stay until answered.
                self._flush(state.id)
                self._clear_notifications("interaction-end", state.id, awaiting=False)
            case InteractionStart():
                # This run answers, announces again or abandons what its sub-agents waited for.
                self._clear_notifications("interaction-start", state.id, awaiting=True, below=True)
            case StepFinish() | SessionRenamed():
                self._no_bubble(state, event)
            case SystemMessageEvent():
                self._note(
                    state, "system", text=event.text, level=event.level, tool_call_id=event.tool_call_id
                )
            case ErrorEvent():
                self._note(state, "system", text=event.message, level="error", tool_call_id=None)
            case FailoverEvent():
                self._failover(state, event)
            case CompactionEvent():
                text = "Earlier messages were summarised to fit the model's context window."
                self._note(state, "system", text=text, level="info", tool_call_id=None)
            case MediaEvent():
                entry = self._note(state, "media", text="", level=None, tool_call_id=event.tool_call_id)
                entry.content_type, entry.url, entry.data = event.content_type, event.url, event.data
            case (
                StepStart()
                | TextStartEvent()
                | TextEndEvent()
                | ReasoningStartEvent()
                | ReasoningEndEvent()
                | ToolInputDeltaEvent()
                | CustomDataEvent()
                | OutputPartial()
                | OutputAvailable()
                | MessagePersisted()
            ):
                pass  # registering the session (done in _enter) is all these need
            case _:
                assert_never(event)

    @staticmethod
    def _no_bubble(state: SessionState, event: StepFinish | SessionRenamed) -> None:
        """Events that change what a session is, not what it shows."""
        if isinstance(event, SessionRenamed):
            state.title = event.title  # the session's, not a bubble
        else:
            state.anon = None  # the step's text without message_id is closed

    def _tool_event(
        self,
        state: SessionState,
        event: ToolInputStartEvent
        | ToolInputAvailableEvent
        | ToolCallActive
        | ToolCallHeartbeat
        | ToolProgress
        | ToolCallComplete
        | ToolCallAwaiting
        | ToolCallResolved,
    ) -> None:
        match event:
            case ToolInputStartEvent():
                self._selected(
                    state, event.tool_call_id, event.message_id, event.tool_name, None, event.timestamp
                )
            case ToolInputAvailableEvent():
                self._selected(
                    state, event.tool_call_id, event.message_id, event.tool_name, event.args, event.timestamp
                )
            case ToolCallActive():
                at = event.started_at or event.timestamp
                self._active(state, event.tool_call_id, event.message_id, event.tool_name, event.args, at)
            case ToolCallHeartbeat():
                self._heartbeat(state, event.tool_call_id, event.tool_name, event.timestamp - event.elapsed)
            case ToolProgress():
                self._progress(state, event.tool_call_id, event.fraction, event.message)
            case ToolCallComplete():
                self._complete(
                    state,
                    event.tool_call_id,
                    event.message_id,
                    event.tool_name,
                    event.args,
                    event.output,
                    event.is_error,
                )
            case ToolCallAwaiting():
                self._awaiting(
                    state,
                    event.tool_call_id,
                    event.message_id,
                    event.tool_name,
                    event.args,
                    event.kind,
                    event.timestamp,
                )
            case ToolCallResolved():
                self._resolved(state, event.tool_call_id, event.message_id)
            case _:
                assert_never(event)
