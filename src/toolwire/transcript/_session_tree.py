"""The session tree of the transcript: registering sessions, linking parents, roots and subtrees.

The layer every other one stands on: events name a session (and its parent), and the clean-ups ask
which sessions lie in a subtree or share a root. Separate because it is about what sessions are, not
what they show. The ``sessions`` section of src/toolwire/server/static/transcript.js.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolwire.events import AgentEvent
from toolwire.transcript._rules_state import RulesState
from toolwire.transcript._state import MAX_DEPTH, SessionState


class SessionTree(RulesState):
    """Sessions by id, their parents and children, and the top-level conversation in view."""

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
