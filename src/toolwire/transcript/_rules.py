"""The transcript rules: the state and the handlers shared by live events and history replay.

:class:`~toolwire.transcript.Transcript` holds one :class:`Rules` and hands it each event (:meth:`Rules.apply`)
or the stored history (:meth:`Rules.restore`); keeping one set of handlers for both is what makes a resumed
transcript equal the live one. The rules are written down in docs/transcript.md. This file is the Python
side of src/toolwire/server/static/transcript.js: same sections, same handlers, in the same order.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, assert_never

from toolwire.events import (
    AgentEvent,
    AwaitingKind,
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
from toolwire.messages import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.transcript._state import MAX_DEPTH, CallState, Entry, Listener, SessionState, Source, first
from toolwire.transcript.types import (
    AWAITING_NOTIFICATION,
    AWAITING_STATUSES,
    MessageAdded,
    MessageUpdated,
    NotificationAdded,
    NotificationRemoved,
    NotificationStatus,
    NotificationUpdated,
    RemovalReason,
    ToolNotification,
    TranscriptChange,
    TranscriptMessage,
    TranscriptRole,
    TranscriptSession,
    TranscriptToolCall,
)


class Rules:
    """Transcript state and the handlers that change it: O(1) amortized per event; clean-ups walk live state only.

    ``listeners`` is the owner's list of change listeners, shared, not copied: the owner subscribes and
    unsubscribes, the rules only report to whoever is in it.
    """

    def __init__(self, listeners: list[Listener]) -> None:
        self._entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self._sessions: dict[str, SessionState] = {}
        self._sources: dict[tuple[str, str], Source] = {}
        self._calls: dict[tuple[str, str, str], CallState] = {}
        """Calls by ``(session_id, message_id, tool_call_id)``, for the calls whose message is known."""
        self._latest_calls: dict[tuple[str, str], CallState] = {}
        """The latest call per ``(session_id, tool_call_id)``: what an event without ``message_id`` names."""
        self._notifications: dict[tuple[str, str], ToolNotification] = {}
        self._pending: dict[str, list[tuple[int, TranscriptToolCall]]] = {}
        self._user_ids: set[str] = set()
        self._ordinal = 0
        self._current_root: str | None = None
        self._tree_version = 0
        self._listeners = listeners
        self._ops = 0

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

    # -- sessions ------------------------------------------------------------------------------------

    def _enter(self, event: AgentEvent) -> SessionState | None:
        """Register the event's session; drop replays (seq not above the session's highest)."""
        state = self._session(event.session_id, event.parent_session_id, event.user_session_id)
        if event.seq > 0:
            # One producer per session over one ordered channel: a seq at or below the highest seen is a
            # replay (reconnect, duplicate delivery), never a late original, so dropping it loses nothing.
            if event.seq <= state.high_seq:
                return None
            state.high_seq = event.seq
        if state.id:
            self._switch_root(state)
        return state

    def _session(self, session_id: str, parent: str | None, user_session_id: str) -> SessionState:
        state = self._sessions.get(session_id)
        if state is None:
            if parent and parent != session_id and parent not in self._sessions:
                self._sessions[parent] = SessionState(parent)  # parents first: the same order history gives
            state = self._sessions[session_id] = SessionState(session_id)
        if parent and state.parent is None and session_id and parent != session_id:
            self._link(state, parent)
        if user_session_id and not state.user_session_id:
            state.user_session_id = user_session_id
            self._tree_version += 1  # roots cached below this session may end here now
        return state

    def _link(self, state: SessionState, parent: str) -> None:
        ancestor: str | None = parent
        for _ in range(MAX_DEPTH):  # refuse a link that would make a cycle
            self._ops += 1
            if ancestor is None:
                break
            if ancestor == state.id:
                return
            node = self._sessions.get(ancestor)
            ancestor = node.parent if node is not None else None
        parent_state = self._session(parent, None, "")
        state.parent = parent
        parent_state.children.append(state.id)
        self._tree_version += 1

    def _register_chain(self, session_id: str, parent_of: Mapping[str, str | None]) -> SessionState:
        """Register a session and its ancestors top-down, so children appear in the order a stream shows."""
        chain = [session_id]
        for _ in range(MAX_DEPTH):
            self._ops += 1
            parent = parent_of.get(chain[-1])
            if not parent or parent in chain:
                break
            chain.append(parent)
        state = self._session(chain[-1], None, "")
        for index in range(len(chain) - 2, -1, -1):
            state = self._session(chain[index], chain[index + 1], "")
        return state

    def _root(self, state: SessionState) -> str:
        if state.parent is None:
            return state.id
        if state.user_session_id:
            return state.user_session_id
        if state.root_version != self._tree_version:
            node = state
            for _ in range(MAX_DEPTH):
                self._ops += 1
                if node.parent is None or node.user_session_id:
                    break
                node = self._sessions[node.parent]
            state.root = node.user_session_id or node.id
            state.root_version = self._tree_version
        return state.root

    def _within(self, session_id: str, ancestor: str) -> bool:
        node: str | None = session_id
        for _ in range(MAX_DEPTH):
            self._ops += 1
            if node is None:
                return False
            if node == ancestor:
                return True
            state = self._sessions.get(node)
            node = state.parent if state is not None else None
        return False

    def _switch_root(self, state: SessionState) -> None:
        root = self._root(state)
        if root == self._current_root:
            return
        old, self._current_root = self._current_root, root
        if old is None or not self._pending:
            return
        # The view moved to another conversation: calls still waiting for a bubble of the old one
        # would land on a stale bubble much later, so they are dropped.
        for session_id in list(self._pending):
            self._ops += 1
            if self._root(self._sessions[session_id]) == old:
                del self._pending[session_id]

    # -- bubbles -------------------------------------------------------------------------------------

    def _add(self, entry: Entry) -> None:
        entry.index = len(self._entries)
        self._entries.append(entry)
        self._by_id.setdefault(entry.id, entry)
        if self._listeners:
            self._emit(MessageAdded(message_id=entry.id, index=entry.index, session_id=entry.session_id))

    def _user_turn(self, state: SessionState, message: Message) -> None:
        if not (message.parts and message.id in self._user_ids):  # a replayed turn changes nothing
            self._flush(state.id)  # the previous turn's calls are drawn under that turn, not this one
        if message.parts:
            message_id = message.id
            if not message_id:
                message_id = f"{state.id}:user:{state.user_count}"
                state.user_count += 1
            if message_id in self._user_ids:
                return  # a replayed user turn (already shown, e.g. restored from history) changes nothing
            self._user_ids.add(message_id)
            self._add(
                Entry(
                    id=message_id, role="user", session_id=state.id, text=message.text, source_id=message_id
                )
            )
            for index, part in enumerate(message.parts):
                self._ops += 1
                if isinstance(part, FilePart):
                    entry = Entry(
                        id=f"{message_id}:file:{index}",
                        role="media",
                        session_id=state.id,
                        source_id=message_id,
                    )
                    entry.content_type, entry.url, entry.data = part.media_type, part.url, part.data
                    self._add(entry)
        state.last_segment = None
        state.anon = None
        # A top-level user turn means nothing can still run; a sub-agent's own user turn happens while
        # the parent's delegating tool runs, so it only clears its own subtree.
        self._clear_notifications("user-turn-start", state.id if state.parent is not None else None)

    def _text(self, state: SessionState, source_id: str, role: TranscriptRole, delta: str) -> None:
        if not delta:
            return
        if not source_id:
            if state.anon is None:
                state.anon = f"{state.id}.m{state.anon_count}"
                state.anon_count += 1
            source_id = state.anon
        key = (state.id, source_id)
        source = self._sources.get(key)
        if source is None:
            source = self._sources[key] = Source()
        elif source.sealed:
            return
        entry = source.current
        if entry is not None and entry.role == role:
            entry.chunks.append(delta)
            entry.snapshot = None
            if self._listeners:
                self._emit(
                    MessageUpdated(
                        message_id=entry.id, index=entry.index, session_id=state.id, text_delta=delta
                    )
                )
            return
        entry = Entry(
            id=f"{source_id}:{source.count}", role=role, session_id=state.id, text=delta, source_id=source_id
        )
        source.count += 1
        source.current = entry
        self._add(entry)
        state.last_segment = entry
        waiting = self._pending.pop(state.id, None)
        for ordinal, call in sorted(waiting or (), key=first):
            self._ops += 1
            self._insert_call(entry, ordinal, call)

    def _flush(self, subtree: str) -> None:
        """Rule 4's end: the calls of ``subtree``'s sessions that still wait for an answer bubble get one of
        their own, an empty assistant bubble ``{session}:calls:{k}``, where the turn ends."""
        if not self._pending:
            return
        for session_id in list(self._pending):
            self._ops += 1
            if not self._within(session_id, subtree):
                continue
            state = self._sessions[session_id]
            entry = Entry(
                id=f"{session_id}:calls:{state.flushes}", role="assistant", session_id=session_id, text=""
            )
            state.flushes += 1
            self._add(entry)
            state.last_segment = entry
            for ordinal, call in sorted(self._pending.pop(session_id), key=first):
                self._insert_call(entry, ordinal, call)

    def _note(
        self,
        state: SessionState,
        role: TranscriptRole,
        *,
        text: str,
        level: str | None,
        tool_call_id: str | None,
    ) -> Entry:
        entry = Entry(id=f"{state.id}:{role}:{state.notes}", role=role, session_id=state.id, text=text)
        state.notes += 1
        entry.ephemeral = True
        entry.level = level
        entry.tool_call_id = tool_call_id
        self._add(entry)
        return entry

    def _failover(self, state: SessionState, event: FailoverEvent) -> None:
        """The step goes to another model, which streams the message again from its start. What the failed
        model streamed stays shown, but as ephemeral bubbles renamed ``{id}:dropped`` (the store never
        had it), so the next model's bubbles take the message's ids from ``:0`` as history will; its calls
        are forgotten (they never run) and their notifications removed; a warning note follows."""
        message_id = event.message_id
        source = self._sources.get((state.id, message_id))
        # A sealed source is a stored message (restored from history): a replayed failover changes nothing.
        if source is not None and not source.sealed:
            del self._sources[(state.id, message_id)]
            for entry in reversed(self._entries):  # rare: a walk over the bubbles is fine
                self._ops += 1
                if entry.session_id != state.id or entry.source_id != message_id or entry.ephemeral:
                    continue
                if self._by_id.get(entry.id) is entry:
                    del self._by_id[entry.id]
                entry.id = f"{entry.id}:dropped"
                entry.ephemeral, entry.snapshot = True, None
                self._by_id.setdefault(entry.id, entry)
                if state.last_segment is entry:
                    state.last_segment = None
                if self._listeners:
                    self._emit(MessageUpdated(message_id=entry.id, index=entry.index, session_id=state.id))
        for key, call in list(self._calls.items()):
            self._ops += 1
            if key[0] != state.id or key[1] != message_id or call.done:
                continue
            del self._calls[key]
            if self._latest_calls.get((state.id, key[2])) is call:
                del self._latest_calls[(state.id, key[2])]
            notification = self._notifications.pop((state.id, key[2]), None)
            if notification is not None and self._listeners:
                self._emit(NotificationRemoved(notification=notification, reason="failover"))
        dropped = "; what it streamed was dropped" if event.dropped_output else ""
        text = (
            f"Failover: {event.from_provider}:{event.from_model} → {event.to_provider}:{event.to_model}"
            f" ({event.reason}){dropped}"
        )
        self._note(state, "system", text=text, level="warning", tool_call_id=None)

    def _replay(self, state: SessionState, message: Message) -> None:
        """One stored message through the same handlers the live events use."""
        at = message.created_at
        match message.role:
            case "user":
                self._user_turn(state, message)
            case "assistant":
                for part in message.parts:
                    self._ops += 1
                    match part:
                        case TextPart():
                            self._text(state, message.id, "assistant", part.text)
                        case ReasoningPart():
                            self._text(state, message.id, "reasoning", part.text)
                        case ToolCallPart():
                            call_id, name = part.tool_call_id, part.tool_name
                            self._selected(state, call_id, message.id, name, part.args, at)
                            if not part.provider_executed:
                                self._active(state, call_id, message.id, name, part.args, at)
                        case ToolResultPart():
                            self._complete(
                                state,
                                part.tool_call_id,
                                message.id,
                                part.tool_name,
                                {},
                                part.output,
                                part.is_error,
                            )
                        case FilePart():
                            pass  # live, model files are ephemeral media (MediaEvent has no message_id)
                source = self._sources.setdefault((state.id, message.id), Source())
                source.sealed = True
            case "tool":
                for result in message.tool_results:
                    self._ops += 1
                    # A tool message follows the assistant message whose calls it answers: with no
                    # message id, each result names the latest call with its id, the one just made.
                    self._complete(
                        state, result.tool_call_id, "", result.tool_name, {}, result.output, result.is_error
                    )
            case "system":
                entry = Entry(
                    id=message.id, role="system", session_id=state.id, text=message.text, source_id=message.id
                )
                entry.level = "info"
                self._add(entry)

    # -- tool calls ----------------------------------------------------------------------------------

    def _call(self, state: SessionState, tool_call_id: str, message_id: str) -> tuple[CallState, bool]:
        """The call an event names, and whether this event started it.

        With ``message_id``: the call of that message (a provider that numbers calls per response reuses
        ``call_0`` in every message, so the id alone names several calls). Without: the latest call with
        that id in the session, never an older one, so a completion cannot attach to a call that finished
        steps ago. A call first seen without its message adopts the id the first event naming it brings.
        """
        latest_key = (state.id, tool_call_id)
        latest = self._latest_calls.get(latest_key)
        if message_id:
            call = self._calls.get((state.id, message_id, tool_call_id))
            if call is not None:
                return call, False
            if latest is not None and not latest.message_id and not latest.done:
                latest.message_id = message_id
                self._calls[(state.id, message_id, tool_call_id)] = latest
                return latest, False
        elif latest is not None:
            return latest, False
        self._ordinal += 1
        call = CallState(self._ordinal, message_id)
        self._latest_calls[latest_key] = call
        if message_id:
            self._calls[(state.id, message_id, tool_call_id)] = call
        return call, True

    def _selected(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any] | None,
        at: float,
    ) -> None:
        key = (state.id, tool_call_id)
        call, new = self._call(state, tool_call_id, message_id)
        if call.done:
            return  # a replayed or late selection of a finished call
        call.tool_name = tool_name or call.tool_name
        if args is not None:
            call.args = args
        current = self._notifications.get(key)
        preparing = ToolNotification(
            session_id=state.id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            status="preparing",
            started_at=at,
        )
        if current is None:
            self._notify_add(preparing)
        elif new:
            # The notification is an older call's with the same id that never completed: this call takes
            # its place (notifications are keyed by (session, call id): one per id is shown).
            self._notify_update(preparing)

    def _active(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any],
        at: float,
    ) -> None:
        key = (state.id, tool_call_id)
        call, new = self._live_call(state, tool_call_id, message_id, tool_name, args)
        if call is None:
            return
        current = self._notifications.get(key)
        if current is None:
            self._notify_add(self._executing(state.id, tool_call_id, call.tool_name, at))
        elif current.status != "executing" or new:
            self._notify_update(replace(current, status="executing", started_at=at, tool_name=call.tool_name))

    def _live_call(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any] | None,
    ) -> tuple[CallState | None, bool]:
        """The call with what an activation or a wait tells of it, and whether this event started it;
        ``None`` once it finished (a late or replayed event of a finished call changes nothing)."""
        call, new = self._call(state, tool_call_id, message_id)
        if call.done:
            return None, False
        call.tool_name = tool_name or call.tool_name
        if call.args is None and args:
            call.args = args
        return call, new

    def _heartbeat(self, state: SessionState, tool_call_id: str, tool_name: str, started_at: float) -> None:
        key = (state.id, tool_call_id)
        call, _ = self._call(state, tool_call_id, "")
        if call.done or key in self._notifications:
            return
        # A heartbeat for a tool we never saw start (joined mid-run): it is running, so show it.
        call.tool_name = tool_name or call.tool_name
        self._notify_add(self._executing(state.id, tool_call_id, call.tool_name, started_at))

    def _awaiting(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any] | None,
        kind: AwaitingKind,
        at: float,
    ) -> None:
        key = (state.id, tool_call_id)
        call, new = self._live_call(state, tool_call_id, message_id, tool_name, args)
        if call is None:
            return
        status: NotificationStatus = AWAITING_NOTIFICATION[kind]
        current = self._notifications.get(key)
        waiting = ToolNotification(
            session_id=state.id,
            tool_call_id=tool_call_id,
            tool_name=call.tool_name,
            status=status,
            started_at=at,
        )
        if current is None:
            self._notify_add(waiting)
        elif new:
            self._notify_update(waiting)  # it takes the place of an older call's with the same id
        elif current.status != status:  # it keeps the time it was selected at
            self._notify_update(replace(current, status=status, tool_name=call.tool_name))

    def _resolved(self, state: SessionState, tool_call_id: str, message_id: str) -> None:
        key = (state.id, tool_call_id)
        current = self._notifications.get(key)
        if current is None or current.status not in AWAITING_STATUSES:
            return
        named = self._calls.get((state.id, message_id, tool_call_id)) if message_id else None
        if named is not None and named is not self._latest_calls.get(key):
            return  # the answer of an older call with this id: the notification is a later call's
        del self._notifications[key]
        if self._listeners:
            self._emit(NotificationRemoved(notification=current, reason="resolved"))

    def _progress(self, state: SessionState, tool_call_id: str, fraction: float | None, text: str) -> None:
        current = self._notifications.get((state.id, tool_call_id))
        if current is not None:
            progress = fraction if fraction is not None else current.progress
            self._notify_update(
                replace(current, progress=progress, progress_message=text or current.progress_message)
            )

    def _complete(
        self,
        state: SessionState,
        tool_call_id: str,
        message_id: str,
        tool_name: str,
        args: dict[str, Any],
        output: Any,
        is_error: bool,
    ) -> None:
        key = (state.id, tool_call_id)
        call, _ = self._call(state, tool_call_id, message_id)
        if call.done:
            return  # duplicate completion: attach once
        call.done = True
        if call is self._latest_calls[key]:  # an older call's completion leaves a later call's notification
            notification = self._notifications.pop(key, None)
            if notification is not None and self._listeners:
                self._emit(NotificationRemoved(notification=notification, reason="complete"))
        finished = TranscriptToolCall(
            tool_call_id=tool_call_id,
            tool_name=call.tool_name or tool_name,
            args=call.args if call.args is not None else dict(args),
            result=output,
            is_error=is_error,
        )
        target = state.last_segment
        if target is None:
            # No assistant/reasoning bubble in this turn yet (tools before any text): the call waits
            # for the session's next one.
            self._pending.setdefault(state.id, []).append((call.ordinal, finished))
        else:
            self._insert_call(target, call.ordinal, finished)

    def _insert_call(self, entry: Entry, ordinal: int, call: TranscriptToolCall) -> None:
        position = bisect.bisect_right(entry.calls, ordinal, key=first)
        self._ops += 1 + len(entry.calls) - position  # the shift; calls usually complete in order, so ~1
        entry.calls.insert(position, (ordinal, call))
        entry.snapshot = None
        if self._listeners:
            self._emit(
                MessageUpdated(
                    message_id=entry.id, index=entry.index, session_id=entry.session_id, tool_call=call
                )
            )

    # -- notifications -------------------------------------------------------------------------------

    @staticmethod
    def _executing(session_id: str, tool_call_id: str, tool_name: str, at: float) -> ToolNotification:
        status: NotificationStatus = "executing"
        return ToolNotification(
            session_id=session_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            status=status,
            started_at=at,
        )

    def _notify_add(self, notification: ToolNotification) -> None:
        self._notifications[notification.key] = notification
        if self._listeners:
            self._emit(NotificationAdded(notification=notification))

    def _notify_update(self, notification: ToolNotification) -> None:
        self._notifications[notification.key] = notification
        if self._listeners:
            self._emit(NotificationUpdated(notification=notification))

    def _clear_notifications(
        self,
        reason: RemovalReason,
        subtree: str | None,
        *,
        awaiting: bool | None = None,
        below: bool = False,
    ) -> None:
        """Drop leftover notifications: all (``subtree=None``) or those of a session and its sub-sessions
        (``below``: its sub-sessions only); ``awaiting``: only those of calls waiting for a person
        (``True``) or only the others (``False``)."""
        if not self._notifications:
            return
        for key, notification in list(self._notifications.items()):
            self._ops += 1
            if awaiting is not None and (notification.status in AWAITING_STATUSES) != awaiting:
                continue
            if below and notification.session_id == subtree:
                continue
            if subtree is None or self._within(notification.session_id, subtree):
                del self._notifications[key]
                if self._listeners:
                    self._emit(NotificationRemoved(notification=notification, reason=reason))

    def _emit(self, change: TranscriptChange) -> None:
        for listener in list(self._listeners):
            self._ops += 1
            listener(change)

    # -- resume --------------------------------------------------------------------------------------

    def restore(
        self,
        messages: Iterable[Message],
        *,
        parents: Mapping[str, str | None] | None = None,
        last_seq: Mapping[str, int] | None = None,
        awaiting: Mapping[tuple[str, str], AwaitingKind] | None = None,
        ended: bool = False,
        titles: Mapping[str, str | None] | None = None,
    ) -> None:
        """Replay stored messages (all sessions, in the order they happened) through the live handlers;
        ``titles``: the stored titles of the sessions seen (what their last ``session-renamed`` said);
        ``awaiting``: the calls a paused run left waiting, as ``tool-call-awaiting`` would show them;
        ``ended``: no run is in progress (none, or a paused one), so the last ``interaction-end`` was published."""
        parent_of = dict(parents or {})
        stored = list(messages)
        last = {message.session_id or "": index for index, message in enumerate(stored)}
        finished: list[str] = []  # sessions past their last message, their run over once another speaks
        answered: set[str] = set()  # sessions whose latest assistant message has a tool message already
        for index, message in enumerate(stored):
            self._ops += 1
            state = self._register_chain(message.session_id or "", parent_of)
            if state.id:
                self._switch_root(state)
            # History has no interaction-end: a sub-agent's run ended (and flushed, rule 4) before anything
            # outside its subtree came next: its caller's tool message, a sibling's or a new turn.
            for done in [s for s in finished if not self._within(state.id, s)]:
                finished.remove(done)
                self._flush(done)
            # A second tool message for one assistant message: its step paused in between, and the
            # paused run's interaction-end flushed what had finished.
            if message.role == "tool":
                if state.id in answered:
                    self._flush(state.id)
                answered.add(state.id)
            elif message.role in ("assistant", "user"):
                answered.discard(state.id)
            self._replay(state, message)
            if last[state.id] == index and state.id in self._pending:
                finished.append(state.id)
        if ended:
            for session_id in list(self._pending):
                self._flush(session_id)
        for session_id in parent_of:
            self._register_chain(session_id, parent_of)
        for session_id, seq in (last_seq or {}).items():
            state = self._register_chain(session_id, parent_of)
            state.high_seq = max(state.high_seq, seq)
        for session_id, title in (titles or {}).items():
            if (titled := self._sessions.get(session_id)) is not None:  # no session is made up for a title
                titled.title = title
        for (session_id, tool_call_id), kind in (awaiting or {}).items():
            # The paused step is the session's last: its calls are the latest with their ids.
            state = self._register_chain(session_id, parent_of)
            self._awaiting(state, tool_call_id, "", "", None, kind, 0.0)
