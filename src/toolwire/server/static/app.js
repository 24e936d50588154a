// The chat page: history first (Transcript.fromHistory), then the native event stream from the history's
// cursor. The DOM is built once from the history; after that each transcript change re-renders only the
// bubble (or the notification bar) it names, batched per animation frame.

import { Transcript } from "./transcript.js";

const params = new URLSearchParams(location.search);
const token = params.get("token") || localStorage.getItem("toolwire.token") || "";
if (params.get("token")) localStorage.setItem("toolwire.token", token);

const TICK_MS = 250; // elapsed seconds are recomputed often enough that each value is visible for most of a second
const MAX_RECONNECTS = 30;

const $ = (id) => document.getElementById(id);
const view = {
  generation: 0, // bumped by every open(): a slow load or a late event of the previous conversation is dropped
  sessionId: null,
  transcript: null,
  source: null,
  reconnects: 0,
  open: new Map(), // sub-session id -> expanded?, kept across reloads of the same page
  bubbles: new Map(), // transcript index -> bubble element
  groups: new Map(), // session id -> element holding its bubbles
  added: [],
  updated: new Set(),
  notificationsDirty: false,
  frame: false,
};

async function api(path, options = {}) {
  const headers = { "content-type": "application/json", ...(options.headers || {}) };
  if (token) headers.authorization = `Bearer ${token}`;
  try {
    const response = await fetch(path, { ...options, headers });
    const body = await response.json().catch(() => ({}));
    return { status: response.status, body };
  } catch (error) {
    return { status: 0, body: { error: { type: "network", message: String(error) } } };
  }
}

function status(text) {
  $("status").textContent = text;
}

function errorText(reply) {
  return reply.body?.error?.message || `HTTP ${reply.status}`;
}

// crypto.randomUUID exists only in secure contexts (https, localhost); a LAN http address has just getRandomValues.
function newSessionId() {
  if (crypto.randomUUID) return `web-${crypto.randomUUID()}`;
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `web-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// -- loading a conversation -------------------------------------------------------------------------

async function open(sessionId) {
  const generation = ++view.generation;
  if (view.source) view.source.close();
  view.source = null;
  view.sessionId = sessionId;
  history.replaceState(null, "", `?session=${encodeURIComponent(sessionId)}`);
  status("loading…");
  let loaded = await api(`/api/sessions/${encodeURIComponent(sessionId)}/messages`);
  if (generation !== view.generation) return;
  if (loaded.status === 404) {
    // A new conversation: create it so its event stream can be opened before the first message.
    const created = await api("/api/sessions", { method: "POST", body: JSON.stringify({ session_id: sessionId }) });
    if (generation !== view.generation) return;
    if (created.status !== 201) return status(`cannot open ${sessionId}: ${errorText(created)}`);
    loaded = { status: 200, body: { messages: [], parents: {}, last_seq: {}, cursor: created.body.cursor } };
  }
  if (loaded.status !== 200) return status(`cannot load ${sessionId}: ${errorText(loaded)}`);
  const { messages, parents, last_seq: lastSeq, cursor } = loaded.body;
  const transcript = Transcript.fromHistory(messages, { parents, lastSeq });
  view.transcript = transcript;
  rebuild();
  transcript.subscribe((change) => changed(transcript, change));
  listen(sessionId, cursor, generation);
  refreshSessions();
}

function listen(sessionId, cursor, generation) {
  const query = new URLSearchParams({ after: String(cursor ?? 0) });
  if (token) query.set("token", token); // EventSource cannot send headers
  const source = new EventSource(`/api/sessions/${encodeURIComponent(sessionId)}/events?${query}`);
  view.source = source;
  const current = () => generation === view.generation && view.source === source;
  source.onopen = () => {
    if (!current()) return;
    view.reconnects = 0;
    status("connected");
  };
  source.onerror = () => {
    if (!current()) return;
    if (source.readyState !== EventSource.CLOSED) return status("reconnecting…"); // resumes with Last-Event-ID
    // The browser gave up (the server answered with an error): reload the history after a pause.
    source.close();
    if (view.reconnects >= MAX_RECONNECTS) return status("disconnected: reload the page to retry");
    view.reconnects += 1;
    status("reconnecting…");
    setTimeout(() => current() && open(sessionId), Math.min(10_000, 500 * 2 ** view.reconnects));
  };
  source.onmessage = (message) => {
    if (!current()) return;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (event.type === "stream-reset") return void open(sessionId); // cannot resume from our cursor
    view.transcript.apply(event);
    if (event.type === "interaction-end" && event.session_id === sessionId) refreshSessions(); // new title
  };
}

async function refreshSessions() {
  const reply = await api("/api/sessions");
  if (reply.status !== 200) return;
  const list = $("sessions");
  list.replaceChildren();
  const rows = [...reply.body.sessions];
  if (view.sessionId && !rows.some((s) => s.session_id === view.sessionId)) {
    rows.unshift({ session_id: view.sessionId, title: "New chat" });
  }
  appendSessions(list, rows, reply.body.next_cursor);
}

// The server lists conversations a page at a time; older ones are one click away.
function appendSessions(list, rows, nextCursor) {
  for (const row of rows) {
    const id = row.session_id;
    const link = element("a", { href: `?session=${encodeURIComponent(id)}`, title: id }, row.title || id);
    if (id === view.sessionId) link.className = "current";
    link.addEventListener("click", (e) => {
      e.preventDefault();
      open(id);
    });
    const item = element("li");
    item.append(link);
    list.append(item);
  }
  if (!nextCursor) return;
  const more = element("button", { type: "button", "data-testid": "older-sessions" }, "Older conversations");
  const item = element("li");
  item.append(more);
  list.append(item);
  more.addEventListener("click", async () => {
    const page = await api(`/api/sessions?cursor=${encodeURIComponent(nextCursor)}`);
    if (page.status !== 200) return status(`cannot list conversations: ${errorText(page)}`);
    item.remove();
    appendSessions(list, page.body.sessions.filter((s) => s.session_id !== view.sessionId), page.body.next_cursor);
  });
}

// -- rendering ----------------------------------------------------------------------------------------

function changed(transcript, change) {
  if (transcript !== view.transcript) return;
  if (change.type === "message-added") view.added.push(change.index);
  else if (change.type === "message-updated") view.updated.add(change.index);
  else view.notificationsDirty = true;
  if (view.frame) return;
  view.frame = true;
  requestAnimationFrame(flush);
}

function flush() {
  view.frame = false;
  const t = view.transcript;
  const pane = $("transcript");
  const atBottom = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 60;
  for (const index of view.added.splice(0)) {
    view.updated.delete(index); // a bubble added in this frame is drawn from its latest snapshot anyway
    place(index, t.messageAt(index));
  }
  for (const index of view.updated) {
    const bubble = view.bubbles.get(index);
    const message = t.messageAt(index);
    if (bubble && message) fill(bubble, message);
  }
  view.updated.clear();
  if (view.notificationsDirty) renderNotifications();
  view.notificationsDirty = false;
  if (atBottom) pane.scrollTop = pane.scrollHeight;
}

function rebuild() {
  view.bubbles.clear();
  view.groups = new Map([[view.sessionId, $("transcript")]]);
  view.added = [];
  view.updated.clear();
  $("transcript").replaceChildren();
  view.transcript.messages.forEach((message, index) => place(index, message));
  renderNotifications();
  $("transcript").scrollTop = $("transcript").scrollHeight;
}

// A sub-session's group opens where its first bubble appears, inside its parent's group.
function groupFor(sessionId) {
  const existing = view.groups.get(sessionId);
  if (existing) return existing;
  const parent = view.transcript.sessions[sessionId]?.parent_session_id;
  // A session with no known parent (should not happen on this stream) still shows, at the top level.
  const outer = parent && parent !== sessionId ? groupFor(parent) : $("transcript");
  const group = element("details", { class: "subsession", "data-testid": "subsession", "data-session": sessionId });
  group.open = view.open.get(sessionId) ?? true;
  group.addEventListener("toggle", () => view.open.set(sessionId, group.open));
  const summary = element("summary", {}, "sub-agent session ");
  summary.append(element("code", {}, sessionId));
  group.append(summary);
  outer.append(group);
  view.groups.set(sessionId, group);
  return group;
}

function place(index, message) {
  if (!message) return;
  const bubble = element("div", { class: "message", "data-testid": "message", "data-role": message.role, "data-session": message.session_id });
  fill(bubble, message);
  groupFor(message.session_id).append(bubble);
  view.bubbles.set(index, bubble);
}

function element(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) if (value !== null && value !== undefined) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

function json(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

function safeUrl(url) {
  return /^(https?:|data:|blob:|\/)/i.test(url || "") ? url : null; // never javascript: from model output
}

function fill(bubble, m) {
  if (m.level) bubble.setAttribute("data-level", m.level);
  else bubble.removeAttribute("data-level");
  const parts = [];
  if (m.role === "media") parts.push(renderMedia(m));
  else parts.push(element("div", { class: "text" }, m.text));
  for (const call of m.tool_calls) parts.push(renderToolCall(call));
  bubble.replaceChildren(...parts);
}

function renderMedia(m) {
  const type = m.content_type || "";
  const src = safeUrl(m.url) || (m.data ? `data:${type};base64,${m.data}` : null);
  if (src && type.startsWith("image/")) return element("img", { src, alt: type });
  if (src && (type.startsWith("audio/") || type.startsWith("video/"))) {
    return element(type.startsWith("audio/") ? "audio" : "video", { src, controls: "" });
  }
  const box = element("div", { class: "file" }, `[${type || "file"}] `);
  if (src) box.append(element("a", { href: src, target: "_blank", rel: "noopener" }, m.url || "download"));
  return box;
}

function renderToolCall(call) {
  const status = call.is_error ? "error" : "ok";
  const box = element("div", { class: "tool-call", "data-testid": "tool-call", "data-tool-name": call.tool_name, "data-status": status });
  const head = element("div", { class: "head" });
  head.append(element("span", { class: "name" }, call.tool_name), element("span", { class: "args" }, `(${json(call.args)})`));
  const result = element("div", { class: "tool-result", "data-testid": "tool-result" }, json(call.result));
  result.prepend(element("span", { class: "mark" }, call.is_error ? "error: " : "→ "));
  box.append(head, result);
  return box;
}

function notificationLabel(n) {
  if (n.status === "preparing") return `preparing ${n.tool_name}`;
  const elapsed = Math.max(0, Math.floor(Date.now() / 1000 - n.started_at));
  let label = `running ${n.tool_name} (${elapsed}s)`;
  if (typeof n.progress === "number") label += ` ${Math.round(n.progress * 100)}%`;
  if (n.progress_message) label += ` — ${n.progress_message}`;
  if (n.session_id !== view.sessionId) label += ` · ${n.session_id}`;
  return label;
}

function renderNotifications() {
  const box = $("notifications");
  box.replaceChildren();
  for (const n of view.transcript ? view.transcript.activeTools : []) {
    const note = element("span", { class: "notification", "data-testid": "notification", "data-tool-name": n.tool_name, "data-status": n.status, "data-session": n.session_id }, notificationLabel(n));
    note.notification = n;
    box.append(note);
  }
}

// Elapsed seconds keep ticking while a tool runs: only the labels' text changes, the elements stay.
setInterval(() => {
  for (const note of $("notifications").children) {
    const label = notificationLabel(note.notification);
    if (note.textContent !== label) note.textContent = label;
  }
}, TICK_MS);

// -- actions ------------------------------------------------------------------------------------------

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  if (!text || !view.sessionId) return;
  const sessionId = view.sessionId;
  input.value = "";
  const sent = await api(`/api/sessions/${encodeURIComponent(sessionId)}/messages`, { method: "POST", body: JSON.stringify({ text }) });
  if (sent.status === 202) return void refreshSessions();
  if (view.sessionId === sessionId && !input.value) input.value = text; // not sent: give the text back
  status(sent.body?.error?.type === "session_busy" ? "busy: wait for the current answer to finish" : `not sent: ${errorText(sent)}`);
});

$("new-chat").addEventListener("click", () => open(newSessionId()));

(async () => {
  const wanted = params.get("session");
  if (wanted) return open(wanted);
  const reply = await api("/api/sessions");
  if (reply.status === 200 && reply.body.sessions.length) return open(reply.body.sessions[0].session_id);
  return open(newSessionId());
})();
