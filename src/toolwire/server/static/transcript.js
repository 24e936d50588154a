// The transcript processor of the web page: a port of toolwire.transcript (Python), same rules, same ids.
//
// docs/transcript.md is the specification; tests/golden/transcript/*.json pins it, and
// tests/server/node/transcript.test.mjs runs this module against the same files as the Python tests,
// so the two implementations cannot drift. Works in the browser and in Node (plain ES module).
// Not ported: the Agent C event mapping (a Python-side adapter; the page only reads toolwire events).

const MAX_DEPTH = 256;
// The notification status of a call waiting for a person, by what it waits for (tool-call-awaiting `kind`).
const AWAITING = {
  approval: "awaiting-approval",
  output: "awaiting-output",
  subagent: "awaiting-subagent",
  input: "awaiting-input",
};
const isAwaiting = (notification) => Object.values(AWAITING).includes(notification.status);

class Entry {
  constructor({ id, role, sessionId, text = "", sourceId = "" }) {
    this.id = id;
    this.index = -1;
    this.role = role;
    this.sessionId = sessionId;
    this.sourceId = sourceId;
    this.text = text;
    this.calls = []; // [ordinal, call] sorted by ordinal: the order the model made the calls
    this.ephemeral = false;
    this.level = null;
    this.contentType = null;
    this.url = null;
    this.data = null;
    this.toolCallId = null;
  }

  freeze() {
    return {
      id: this.id,
      role: this.role,
      session_id: this.sessionId,
      text: this.text,
      tool_calls: this.calls.map(([, call]) => call),
      source_id: this.sourceId,
      ephemeral: this.ephemeral,
      level: this.level,
      content_type: this.contentType,
      url: this.url,
      data: this.data,
      tool_call_id: this.toolCallId,
    };
  }
}

class SessionState {
  constructor(id) {
    this.id = id;
    this.parent = null;
    this.children = [];
    this.userSessionId = "";
    this.highSeq = 0;
    this.lastSegment = null;
    this.anon = null;
    this.anonCount = 0;
    this.userCount = 0;
    this.notes = 0;
    this.flushes = 0; // bubbles opened for a turn's calls that found no answer bubble (rule 4): {id}:calls:{k}
    this.title = null; // the latest session-renamed title (a rebuilt transcript takes the stored ones)
  }
}

const key = (sessionId, id) => `${sessionId}\u0000${id}`;

function messageText(message) {
  return (message.parts || []).filter((p) => p.type === "text").map((p) => p.text || "").join("");
}

export class Transcript {
  constructor({ onChange } = {}) {
    this._entries = [];
    this._byId = new Map();
    this._sessions = new Map();
    this._sources = new Map();
    this._calls = new Map(); // (session, message id, call id) -> call, for calls whose message is known
    this._latestCalls = new Map(); // (session, call id) -> the latest call: what an event without message_id names
    this._notifications = new Map();
    this._pending = new Map();
    this._userIds = new Set();
    this._ordinal = 0;
    this._currentRoot = null;
    this._listeners = onChange ? [onChange] : [];
  }

  // -- reading ----------------------------------------------------------------------------------

  get messages() {
    return this._entries.map((e) => e.freeze());
  }

  message(id) {
    const entry = this._byId.get(id);
    return entry ? entry.freeze() : null;
  }

  /** The bubble at this position (a change's `index`; positions never move). Page helper, not in Python. */
  messageAt(index) {
    const entry = this._entries[index];
    return entry ? entry.freeze() : null;
  }

  /** What is known of the latest call with this id in the session (its args and title). Page helper, not in Python. */
  callInfo(sessionId, toolCallId) {
    const call = this._latestCalls.get(key(sessionId, toolCallId));
    return call ? { tool_name: call.toolName, args: call.args, title: call.title, message_id: call.messageId } : null;
  }

  get activeTools() {
    return [...this._notifications.values()];
  }

  get pendingCalls() {
    const out = {};
    for (const [sid, calls] of this._pending) {
      out[sid] = [...calls].sort((a, b) => a[0] - b[0]).map(([, c]) => c);
    }
    return out;
  }

  get sessions() {
    const out = {};
    for (const s of this._sessions.values()) {
      if (s.id) out[s.id] = { session_id: s.id, parent_session_id: s.parent, children: [...s.children], title: s.title };
    }
    return out;
  }

  subscribe(listener) {
    this._listeners.push(listener);
    return () => {
      const i = this._listeners.indexOf(listener);
      if (i >= 0) this._listeners.splice(i, 1);
    };
  }

  // -- events -----------------------------------------------------------------------------------

  applyAll(events) {
    for (const event of events) this.apply(event);
  }

  apply(event) {
    if (!event || typeof event !== "object" || typeof event.session_id !== "string") return;
    const state = this._enter(event);
    if (state === null) return;
    const ts = typeof event.timestamp === "number" ? event.timestamp : Date.now() / 1000;
    switch (event.type) {
      case "text-delta":
        this._text(state, event.message_id || "", "assistant", event.delta || "");
        break;
      case "reasoning-delta":
        this._text(state, event.message_id || "", "reasoning", event.delta || "");
        break;
      case "tool-input-start":
        this._selected(state, event.tool_call_id, event.message_id || "", event.tool_name, null, ts, event.title);
        break;
      case "tool-input-available":
        this._selected(state, event.tool_call_id, event.message_id || "", event.tool_name, event.args || {}, ts, event.title);
        break;
      case "tool-call-active":
        this._active(state, event.tool_call_id, event.message_id || "", event.tool_name, event.args || {}, event.started_at || ts);
        break;
      case "tool-call-heartbeat":
        this._heartbeat(state, event.tool_call_id, event.tool_name, ts - (event.elapsed || 0));
        break;
      case "tool-progress":
        this._progress(state, event.tool_call_id, event.fraction ?? null, event.message || "");
        break;
      case "tool-call-complete":
        this._complete(
          state, event.tool_call_id, event.message_id || "", event.tool_name, event.args || {}, event.output ?? null, !!event.is_error,
          { status: event.status || null, duration: typeof event.duration === "number" ? event.duration : null },
        );
        break;
      case "tool-call-awaiting":
        this._awaiting(state, event.tool_call_id, event.message_id || "", event.tool_name, event.args || {}, event.kind || "approval", ts);
        break;
      case "tool-call-resolved":
        this._resolved(state, event.tool_call_id, event.message_id || "");
        break;
      case "user-turn-start":
        this._userTurn(state, event.message || { parts: [] });
        break;
      case "interaction-end":
        state.anon = null;
        // The run's waiting calls get their bubble here (rule 4), a paused run's too: the person answering
        // sees what already ran. Calls waiting for a person stay until answered.
        this._flush(state.id);
        this._clearNotifications("interaction-end", state.id, { awaiting: false });
        break;
      case "interaction-start":
        // This run answers, announces again or abandons what its sub-agents waited for.
        this._clearNotifications("interaction-start", state.id, { awaiting: true, below: true });
        break;
      case "step-finish":
        state.anon = null;
        break;
      case "session-renamed": // a title is the session's, not a bubble
        state.title = event.title ?? null;
        break;
      case "system-message":
        this._note(state, "system", { text: event.text || "", level: event.level || "info", toolCallId: event.tool_call_id ?? null });
        break;
      case "error":
        this._note(state, "system", { text: event.message || "", level: "error", toolCallId: null });
        break;
      case "failover":
        this._failover(state, event);
        break;
      case "media": {
        const entry = this._note(state, "media", { text: "", level: null, toolCallId: event.tool_call_id ?? null });
        entry.contentType = event.content_type ?? null;
        entry.url = event.url ?? null;
        entry.data = event.data ?? null;
        break;
      }
      default:
        break; // registering the session (done in _enter) is all the other events need
    }
  }

  // -- sessions ---------------------------------------------------------------------------------

  _enter(event) {
    const state = this._session(event.session_id, event.parent_session_id || null, event.user_session_id || "");
    const seq = event.seq || 0;
    if (seq > 0) {
      if (seq <= state.highSeq) return null; // a replay: one ordered producer per session
      state.highSeq = seq;
    }
    if (state.id) this._switchRoot(state);
    return state;
  }

  _session(sessionId, parent, userSessionId) {
    let state = this._sessions.get(sessionId);
    if (!state) {
      if (parent && parent !== sessionId && !this._sessions.has(parent)) {
        this._sessions.set(parent, new SessionState(parent));
      }
      state = new SessionState(sessionId);
      this._sessions.set(sessionId, state);
    }
    if (parent && state.parent === null && sessionId && parent !== sessionId) this._link(state, parent);
    if (userSessionId && !state.userSessionId) state.userSessionId = userSessionId;
    return state;
  }

  _link(state, parent) {
    let ancestor = parent;
    for (let i = 0; i < MAX_DEPTH; i++) {
      if (ancestor === null) break;
      if (ancestor === state.id) return; // would make a cycle: the first parent wins
      const node = this._sessions.get(ancestor);
      ancestor = node ? node.parent : null;
    }
    const parentState = this._session(parent, null, "");
    state.parent = parent;
    parentState.children.push(state.id);
  }

  _registerChain(sessionId, parentOf) {
    const chain = [sessionId];
    for (let i = 0; i < MAX_DEPTH; i++) {
      const parent = parentOf[chain[chain.length - 1]];
      if (!parent || chain.includes(parent)) break;
      chain.push(parent);
    }
    let state = this._session(chain[chain.length - 1], null, "");
    for (let i = chain.length - 2; i >= 0; i--) state = this._session(chain[i], chain[i + 1], "");
    return state;
  }

  _root(state) {
    if (state.parent === null) return state.id;
    if (state.userSessionId) return state.userSessionId;
    let node = state;
    for (let i = 0; i < MAX_DEPTH; i++) {
      if (node.parent === null || node.userSessionId) break;
      node = this._sessions.get(node.parent);
    }
    return node.userSessionId || node.id;
  }

  _within(sessionId, ancestor) {
    let node = sessionId;
    for (let i = 0; i < MAX_DEPTH; i++) {
      if (node === null || node === undefined) return false;
      if (node === ancestor) return true;
      const state = this._sessions.get(node);
      node = state ? state.parent : null;
    }
    return false;
  }

  _switchRoot(state) {
    const root = this._root(state);
    if (root === this._currentRoot) return;
    const old = this._currentRoot;
    this._currentRoot = root;
    if (old === null || this._pending.size === 0) return;
    for (const sid of [...this._pending.keys()]) {
      if (this._root(this._sessions.get(sid)) === old) this._pending.delete(sid);
    }
  }

  // -- bubbles ----------------------------------------------------------------------------------

  _add(entry) {
    entry.index = this._entries.length;
    this._entries.push(entry);
    if (!this._byId.has(entry.id)) this._byId.set(entry.id, entry);
    this._emit({ type: "message-added", message_id: entry.id, index: entry.index, session_id: entry.sessionId });
  }

  _userTurn(state, message) {
    const parts = message.parts || [];
    // The previous turn's calls are drawn under that turn, not this one; a replayed turn changes nothing.
    if (!(parts.length && message.id && this._userIds.has(message.id))) this._flush(state.id);
    if (parts.length) {
      let messageId = message.id;
      if (!messageId) {
        messageId = `${state.id}:user:${state.userCount}`;
        state.userCount += 1;
      }
      if (this._userIds.has(messageId)) return;
      this._userIds.add(messageId);
      this._add(new Entry({ id: messageId, role: "user", sessionId: state.id, text: messageText(message), sourceId: messageId }));
      parts.forEach((part, index) => {
        if (part.type === "file") {
          const entry = new Entry({ id: `${messageId}:file:${index}`, role: "media", sessionId: state.id, sourceId: messageId });
          entry.contentType = part.media_type ?? null;
          entry.url = part.url ?? null;
          entry.data = part.data ?? null;
          this._add(entry);
        }
      });
    }
    state.lastSegment = null;
    state.anon = null;
    this._clearNotifications("user-turn-start", state.parent !== null ? state.id : null);
  }

  _text(state, sourceId, role, delta) {
    if (!delta) return;
    if (!sourceId) {
      if (state.anon === null) {
        state.anon = `${state.id}.m${state.anonCount}`;
        state.anonCount += 1;
      }
      sourceId = state.anon;
    }
    const k = key(state.id, sourceId);
    let source = this._sources.get(k);
    if (!source) {
      source = { current: null, count: 0, sealed: false };
      this._sources.set(k, source);
    } else if (source.sealed) {
      return;
    }
    let entry = source.current;
    if (entry && entry.role === role) {
      entry.text += delta;
      this._emit({ type: "message-updated", message_id: entry.id, index: entry.index, session_id: state.id, text_delta: delta });
      return;
    }
    entry = new Entry({ id: `${sourceId}:${source.count}`, role, sessionId: state.id, text: delta, sourceId });
    source.count += 1;
    source.current = entry;
    this._add(entry);
    state.lastSegment = entry;
    const waiting = this._pending.get(state.id);
    this._pending.delete(state.id);
    for (const [ordinal, call] of [...(waiting || [])].sort((a, b) => a[0] - b[0])) {
      call.before_text = true; // page field: made before this text, so drawn above it
      this._insertCall(entry, ordinal, call);
    }
  }

  // Rule 4's end: the calls of `subtree`'s sessions still waiting for an answer bubble get one of their own,
  // an empty assistant bubble `{session}:calls:{k}`, where the turn ends.
  _flush(subtree) {
    if (this._pending.size === 0) return;
    for (const sessionId of [...this._pending.keys()]) {
      if (!this._within(sessionId, subtree)) continue;
      const state = this._sessions.get(sessionId);
      const entry = new Entry({ id: `${sessionId}:calls:${state.flushes}`, role: "assistant", sessionId });
      state.flushes += 1;
      this._add(entry);
      state.lastSegment = entry;
      const waiting = this._pending.get(sessionId);
      this._pending.delete(sessionId);
      for (const [ordinal, call] of [...waiting].sort((a, b) => a[0] - b[0])) this._insertCall(entry, ordinal, call);
    }
  }

  _note(state, role, { text, level, toolCallId }) {
    const entry = new Entry({ id: `${state.id}:${role}:${state.notes}`, role, sessionId: state.id, text });
    state.notes += 1;
    entry.ephemeral = true;
    entry.level = level;
    entry.toolCallId = toolCallId;
    this._add(entry);
    return entry;
  }

  // The step goes to another model, which streams the message again from its start. What the failed model
  // streamed stays shown, but as ephemeral bubbles renamed `{id}:dropped` (the store never had it), so the
  // next model's bubbles take the message's ids from `:0` as history will; its calls are forgotten (they
  // never run) and their notifications removed; a warning note follows.
  _failover(state, event) {
    const messageId = event.message_id || "";
    const source = this._sources.get(key(state.id, messageId));
    // A sealed source is a stored message (restored from history): a replayed failover changes nothing.
    if (source && !source.sealed) {
      this._sources.delete(key(state.id, messageId));
      for (let i = this._entries.length - 1; i >= 0; i--) { // rare: a walk over the bubbles is fine
        const entry = this._entries[i];
        if (entry.sessionId !== state.id || entry.sourceId !== messageId || entry.ephemeral) continue;
        if (this._byId.get(entry.id) === entry) this._byId.delete(entry.id);
        entry.id = `${entry.id}:dropped`;
        entry.ephemeral = true;
        if (!this._byId.has(entry.id)) this._byId.set(entry.id, entry);
        if (state.lastSegment === entry) state.lastSegment = null;
        this._emit({ type: "message-updated", message_id: entry.id, index: entry.index, session_id: state.id });
      }
    }
    for (const [k, call] of [...this._calls]) {
      const [sessionId, toolCallId, callMessageId] = k.split("\u0000");
      if (sessionId !== state.id || callMessageId !== messageId || call.done) continue;
      this._calls.delete(k);
      const latestKey = key(state.id, toolCallId);
      if (this._latestCalls.get(latestKey) === call) this._latestCalls.delete(latestKey);
      const notification = this._notifications.get(latestKey);
      if (notification) {
        this._notifications.delete(latestKey);
        this._emit({ type: "notification-removed", notification, reason: "failover" });
      }
    }
    const dropped = event.dropped_output ? "; what it streamed was dropped" : "";
    const text =
      `Failover: ${event.from_provider}:${event.from_model} → ${event.to_provider}:${event.to_model}` +
      ` (${event.reason})${dropped}`;
    this._note(state, "system", { text, level: "warning", toolCallId: null });
  }

  _replay(state, message) {
    const at = message.created_at || 0;
    switch (message.role) {
      case "user":
        this._userTurn(state, message);
        break;
      case "assistant": {
        for (const part of message.parts || []) {
          if (part.type === "text") this._text(state, message.id, "assistant", part.text || "");
          else if (part.type === "reasoning") this._text(state, message.id, "reasoning", part.text || "");
          else if (part.type === "tool-call") {
            this._selected(state, part.tool_call_id, message.id, part.tool_name, part.args || {}, at, part.title);
            if (!part.provider_executed) this._active(state, part.tool_call_id, message.id, part.tool_name, part.args || {}, at);
          } else if (part.type === "tool-result") {
            this._complete(state, part.tool_call_id, message.id, part.tool_name, {}, part.output ?? null, !!part.is_error);
          }
        }
        const k = key(state.id, message.id);
        if (!this._sources.has(k)) this._sources.set(k, { current: null, count: 0, sealed: false });
        this._sources.get(k).sealed = true;
        break;
      }
      case "tool":
        // A tool message follows the assistant message whose calls it answers: with no message id, each
        // result names the latest call with its id, the one just made.
        for (const part of message.parts || []) {
          if (part.type === "tool-result") {
            this._complete(state, part.tool_call_id, "", part.tool_name, {}, part.output ?? null, !!part.is_error);
          }
        }
        break;
      case "system": {
        const entry = new Entry({ id: message.id, role: "system", sessionId: state.id, text: messageText(message), sourceId: message.id });
        entry.level = "info";
        this._add(entry);
        break;
      }
      default:
        break;
    }
  }

  // -- tool calls -------------------------------------------------------------------------------

  // The call an event names, and whether this event started it. With a message id: the call of that message
  // (a provider that numbers calls per response reuses call_0 in every message). Without: the latest call
  // with that id in the session, never an older one. A call first seen without its message adopts the id
  // the first event naming it brings. Returns [call, isNew].
  _call(state, toolCallId, messageId) {
    const latestKey = key(state.id, toolCallId);
    const latest = this._latestCalls.get(latestKey);
    const messageKey = `${latestKey}\u0000${messageId}`;
    if (messageId) {
      const call = this._calls.get(messageKey);
      if (call) return [call, false];
      if (latest && !latest.messageId && !latest.done) {
        latest.messageId = messageId;
        this._calls.set(messageKey, latest);
        return [latest, false];
      }
    } else if (latest) {
      return [latest, false];
    }
    this._ordinal += 1;
    const call = { ordinal: this._ordinal, messageId, toolName: "", args: null, done: false, title: null };
    this._latestCalls.set(latestKey, call);
    if (messageId) this._calls.set(messageKey, call);
    return [call, true];
  }

  _selected(state, toolCallId, messageId, toolName, args, at, title = null) {
    const k = key(state.id, toolCallId);
    const [call, isNew] = this._call(state, toolCallId, messageId);
    if (call.done) return;
    call.toolName = toolName || call.toolName;
    if (title) call.title = title;
    if (args !== null) call.args = args;
    const preparing = { session_id: state.id, tool_call_id: toolCallId, tool_name: call.toolName, status: "preparing", started_at: at, progress: null, progress_message: "" };
    if (!this._notifications.has(k)) this._notifyAdd(preparing);
    else if (isNew) this._notifyUpdate(preparing); // an older call with this id never completed: this one takes its place
  }

  _active(state, toolCallId, messageId, toolName, args, at) {
    const k = key(state.id, toolCallId);
    const [call, isNew] = this._liveCall(state, toolCallId, messageId, toolName, args);
    if (call === null) return;
    const current = this._notifications.get(k);
    if (!current) {
      this._notifyAdd(this._executing(state.id, toolCallId, call.toolName, at));
    } else if (current.status !== "executing" || isNew) {
      this._notifyUpdate({ ...current, status: "executing", started_at: at, tool_name: call.toolName });
    }
  }

  // The call with what an activation or a wait tells of it, and whether it is new; null once it finished.
  _liveCall(state, toolCallId, messageId, toolName, args) {
    const [call, isNew] = this._call(state, toolCallId, messageId);
    if (call.done) return [null, false];
    call.toolName = toolName || call.toolName;
    if (call.args === null && args && Object.keys(args).length) call.args = args;
    return [call, isNew];
  }

  _heartbeat(state, toolCallId, toolName, startedAt) {
    const k = key(state.id, toolCallId);
    const [call] = this._call(state, toolCallId, "");
    if (call.done || this._notifications.has(k)) return;
    call.toolName = toolName || call.toolName;
    this._notifyAdd(this._executing(state.id, toolCallId, call.toolName, startedAt));
  }

  _awaiting(state, toolCallId, messageId, toolName, args, kind, at) {
    const k = key(state.id, toolCallId);
    const [call, isNew] = this._liveCall(state, toolCallId, messageId, toolName, args);
    if (call === null) return;
    const status = AWAITING[kind] || AWAITING.approval;
    const current = this._notifications.get(k);
    const waiting = { session_id: state.id, tool_call_id: toolCallId, tool_name: call.toolName, status, started_at: at, progress: null, progress_message: "" };
    if (!current) {
      this._notifyAdd(waiting);
    } else if (isNew) {
      this._notifyUpdate(waiting); // it takes the place of an older call's with the same id
    } else if (current.status !== status) {
      this._notifyUpdate({ ...current, status, tool_name: call.toolName }); // it keeps the time it was selected at
    }
  }

  _resolved(state, toolCallId, messageId) {
    const k = key(state.id, toolCallId);
    const current = this._notifications.get(k);
    if (!current || !isAwaiting(current)) return;
    const call = messageId ? this._calls.get(`${k}\u0000${messageId}`) : undefined;
    if (call && call !== this._latestCalls.get(k)) return; // an older call's answer: the notification is a later call's
    this._notifications.delete(k);
    this._emit({ type: "notification-removed", notification: current, reason: "resolved" });
  }

  _progress(state, toolCallId, fraction, text) {
    const current = this._notifications.get(key(state.id, toolCallId));
    if (current) {
      this._notifyUpdate({
        ...current,
        progress: fraction !== null ? fraction : current.progress,
        progress_message: text || current.progress_message,
      });
    }
  }

  // `outcome` (page fields, not in the golden forms): the loop's status and duration of a live completion.
  _complete(state, toolCallId, messageId, toolName, args, output, isError, outcome = {}) {
    const k = key(state.id, toolCallId);
    const [call] = this._call(state, toolCallId, messageId);
    if (call.done) return;
    call.done = true;
    const notification = call === this._latestCalls.get(k) ? this._notifications.get(k) : undefined;
    if (notification) {
      this._notifications.delete(k);
      this._emit({ type: "notification-removed", notification, reason: "complete" });
    }
    const finished = {
      tool_call_id: toolCallId,
      tool_name: call.toolName || toolName,
      args: call.args !== null ? call.args : { ...args },
      result: output,
      is_error: isError,
      // page fields: what a tool card shows beyond the spec's call
      title: call.title,
      status: outcome.status || null,
      duration: outcome.duration ?? null,
      message_id: call.messageId,
    };
    const target = state.lastSegment;
    if (target === null) {
      if (!this._pending.has(state.id)) this._pending.set(state.id, []);
      this._pending.get(state.id).push([call.ordinal, finished]);
    } else {
      this._insertCall(target, call.ordinal, finished);
    }
  }

  _insertCall(entry, ordinal, call) {
    let position = entry.calls.length;
    while (position > 0 && entry.calls[position - 1][0] > ordinal) position -= 1;
    entry.calls.splice(position, 0, [ordinal, call]);
    this._emit({ type: "message-updated", message_id: entry.id, index: entry.index, session_id: entry.sessionId, tool_call: call });
  }

  // -- notifications ----------------------------------------------------------------------------

  _executing(sessionId, toolCallId, toolName, at) {
    return { session_id: sessionId, tool_call_id: toolCallId, tool_name: toolName, status: "executing", started_at: at, progress: null, progress_message: "" };
  }

  _notifyAdd(notification) {
    this._notifications.set(key(notification.session_id, notification.tool_call_id), notification);
    this._emit({ type: "notification-added", notification });
  }

  _notifyUpdate(notification) {
    this._notifications.set(key(notification.session_id, notification.tool_call_id), notification);
    this._emit({ type: "notification-updated", notification });
  }

  _clearNotifications(reason, subtree, { awaiting = null, below = false } = {}) {
    for (const [k, notification] of [...this._notifications]) {
      if (awaiting !== null && isAwaiting(notification) !== awaiting) continue;
      if (below && notification.session_id === subtree) continue;
      if (subtree === null || this._within(notification.session_id, subtree)) {
        this._notifications.delete(k);
        this._emit({ type: "notification-removed", notification, reason });
      }
    }
  }

  _emit(change) {
    for (const listener of [...this._listeners]) listener(change);
  }

  // -- resume -----------------------------------------------------------------------------------

  // `awaiting`: [{session_id, tool_call_id, kind}] of the calls a paused run left waiting. `ended`: no run is in
  // progress (none, or a paused one), so the last interaction-end was published (its waiting calls flush, rule 4).
  // `titles`: session id -> its stored title (the sessions table's), which session-renamed events keep live.
  static fromHistory(messages, { parents = null, lastSeq = null, awaiting = null, ended = false, titles = null, onChange = undefined } = {}) {
    const transcript = new Transcript({ onChange });
    const parentOf = { ...(parents || {}) };
    const last = new Map(messages.map((message, index) => [message.session_id || "", index]));
    const finished = []; // sessions past their last message: their run is over once another speaks
    const answered = new Set(); // sessions whose latest assistant message has a tool message already
    messages.forEach((message, index) => {
      const state = transcript._registerChain(message.session_id || "", parentOf);
      if (state.id) transcript._switchRoot(state);
      // History has no interaction-end: a sub-agent's run ended (and flushed) before anything outside its
      // subtree came next: its caller's tool message, a sibling's or a new turn.
      for (const done of finished.filter((s) => !transcript._within(state.id, s))) {
        finished.splice(finished.indexOf(done), 1);
        transcript._flush(done);
      }
      // A second tool message for one assistant message: its step paused in between, and the paused run's
      // interaction-end flushed what had finished.
      if (message.role === "tool") {
        if (answered.has(state.id)) transcript._flush(state.id);
        answered.add(state.id);
      } else if (message.role === "assistant" || message.role === "user") {
        answered.delete(state.id);
      }
      transcript._replay(state, message);
      if (last.get(state.id) === index && transcript._pending.has(state.id)) finished.push(state.id);
    });
    if (ended) for (const sessionId of [...transcript._pending.keys()]) transcript._flush(sessionId);
    for (const sid of Object.keys(parentOf)) transcript._registerChain(sid, parentOf);
    for (const [sid, seq] of Object.entries(lastSeq || {})) {
      const state = transcript._registerChain(sid, parentOf);
      state.highSeq = Math.max(state.highSeq, seq);
    }
    for (const [sid, title] of Object.entries(titles || {})) {
      const titled = transcript._sessions.get(sid); // no session is made up for a title
      if (titled) titled.title = title;
    }
    for (const waiting of awaiting || []) {
      const state = transcript._registerChain(waiting.session_id, parentOf);
      // The paused step is the session's last: its calls are the latest with their ids.
      transcript._awaiting(state, waiting.tool_call_id, "", "", null, waiting.kind, 0);
    }
    return transcript;
  }
}

/** Interleave per-session histories by created_at (ties keep the order of the histories). */
export function mergeHistories(histories) {
  const all = [];
  histories.forEach((history, h) => history.forEach((m, i) => all.push([m.created_at || 0, h, i, m])));
  all.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  return all.map((x) => x[3]);
}

// -- the golden-file forms (same as toolwire.transcript.types.*_to_dict) ----------------------------

export function messageToDict(m) {
  const out = {
    id: m.id,
    role: m.role,
    session_id: m.session_id,
    text: m.text,
    tool_calls: m.tool_calls.map((c) => ({ tool_call_id: c.tool_call_id, tool_name: c.tool_name, args: c.args, result: c.result, is_error: c.is_error })),
  };
  if (m.source_id) out.source_id = m.source_id;
  if (m.ephemeral) out.ephemeral = true;
  for (const name of ["level", "content_type", "url", "data", "tool_call_id"]) {
    if (m[name] !== null && m[name] !== undefined) out[name] = m[name];
  }
  return out;
}

export function notificationToDict(n) {
  const out = { session_id: n.session_id, tool_call_id: n.tool_call_id, tool_name: n.tool_name, status: n.status, started_at: n.started_at };
  if (n.progress !== null && n.progress !== undefined) out.progress = n.progress;
  if (n.progress_message) out.progress_message = n.progress_message;
  return out;
}

export function sessionsToDict(sessions) {
  const out = {};
  for (const s of Object.values(sessions)) {
    out[s.session_id] = { parent_session_id: s.parent_session_id, children: s.children };
    if (s.title !== null && s.title !== undefined) out[s.session_id].title = s.title;
  }
  return out;
}

export function changeToDict(change) {
  switch (change.type) {
    case "message-added":
      return { type: change.type, message_id: change.message_id };
    case "message-updated": {
      const out = { type: change.type, message_id: change.message_id };
      if (change.text_delta) out.text_delta = change.text_delta;
      if (change.tool_call) out.tool_call_id = change.tool_call.tool_call_id;
      return out;
    }
    case "notification-added":
    case "notification-updated":
      return { type: change.type, session_id: change.notification.session_id, tool_call_id: change.notification.tool_call_id, status: change.notification.status };
    default:
      return { type: change.type, session_id: change.notification.session_id, tool_call_id: change.notification.tool_call_id, reason: change.reason };
  }
}
