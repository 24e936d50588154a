"""Resume: stored messages replayed through the live handlers, so a restored transcript equals the live one.

History has no interaction events, so :meth:`HistoryReplay.restore` infers where runs ended and paused,
then hands each message to the same bubble and call handlers the events use. Separate because it is the
one entry point besides events, and the only code that reads stored messages. The ``resume`` section of
src/toolwire/server/static/transcript.js (whose ``_replay`` sits at the end of its ``bubbles`` section).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from toolwire.events import AwaitingKind
from toolwire.messages import FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from toolwire.transcript._bubbles import BubbleRules
from toolwire.transcript._state import Entry, SessionState, Source


class HistoryReplay(BubbleRules):
    """Adds :meth:`restore`: the stored history of all sessions, in the order it happened."""

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
