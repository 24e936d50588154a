// The chat page: history first (Transcript.fromHistory), then the native event stream from the history's
// cursor. Rendering is driven by the transcript's changes, batched per animation frame.

import { Transcript } from "./transcript.js";

const params = new URLSearchParams(location.search);
const token = params.get("token") || localStorage.getItem("toolwire.token") || "";
if (params.get("token")) localStorage.setItem("toolwire.token", token);

const $ = (id) => document.getElementById(id);
const view = { sessionId: null, transcript: null, source: null, dirty: false, open: new Map() };

async function api(path, options = {}) {
  const headers = { "content-type": "application/json", ...(options.headers || {}) };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(path, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  return { status: response.status, body };
}

function status(text) {
  $("status").textContent = text;
}

// -- loading a conversation -------------------------------------------------------------------------

async function open(sessionId) {
  if (view.source) view.source.close();
  view.sessionId = sessionId;
  history.replaceState(null, "", `?session=${encodeURIComponent(sessionId)}`);
  let loaded = await api(`/api/sessions/${encodeURIComponent(sessionId)}/messages`);
  if (loaded.status === 404) {
    const created = await api("/api/sessions", { method: "POST", body: JSON.stringify({ session_id: sessionId }) });
    if (created.status !== 201) return status(`cannot open ${sessionId}: ${created.body.error?.message || created.status}`);
    loaded = { status: 200, body: { messages: [], parents: {}, last_seq: {}, cursor: created.body.cursor } };
  }
  if (loaded.status !== 200) return status(`cannot load ${sessionId}: ${loaded.body.error?.message || loaded.status}`);
  const { messages, parents, last_seq: lastSeq, cursor } = loaded.body;
  view.transcript = Transcript.fromHistory(messages, { parents, lastSeq });
  view.transcript.subscribe(() => schedule());
  render();
  listen(sessionId, cursor);
  refreshSessions();
}

function listen(sessionId, cursor) {
  const query = new URLSearchParams({ after: String(cursor) });
  if (token) query.set("token", token);
  const source = new EventSource(`/api/sessions/${encodeURIComponent(sessionId)}/events?${query}`);
  view.source = source;
  source.onopen = () => status("connected");
  source.onerror = () => status("reconnecting…"); // EventSource resumes with Last-Event-ID by itself
  source.onmessage = (message) => {
    if (view.source !== source) return;
    const event = JSON.parse(message.data);
    if (event.type === "stream-reset") {
      open(sessionId); // the server could not resume from our cursor: reload the history
      return;
    }
    view.transcript.apply(event);
  };
}

async function refreshSessions() {
  const { status: code, body } = await api("/api/sessions");
  if (code !== 200) return;
  const list = $("sessions");
  list.replaceChildren();
  const known = body.sessions.map((s) => s.session_id);
  if (view.sessionId && !known.includes(view.sessionId)) known.unshift(view.sessionId);
  for (const id of known) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = `?session=${encodeURIComponent(id)}`;
    link.textContent = id;
    link.className = id === view.sessionId ? "current" : "";
    link.onclick = (e) => {
      e.preventDefault();
      open(id);
    };
    item.append(link);
    list.append(item);
  }
}

// -- rendering ----------------------------------------------------------------------------------------

function schedule() {
  if (view.dirty) return;
  view.dirty = true;
  requestAnimationFrame(() => {
    view.dirty = false;
    render();
  });
}

function element(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) if (value !== null && value !== undefined) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

function renderToolCall(call) {
  const box = element("div", { class: "tool-call", "data-testid": "tool-call", "data-tool-name": call.tool_name, "data-status": call.is_error ? "error" : "ok" });
  box.append(element("span", { class: "name" }, `${call.tool_name}`), element("span", {}, `(${json(call.args)})`));
  box.append(element("div", { class: "tool-result", "data-testid": "tool-result" }, `${call.is_error ? "✗ " : "→ "}${json(call.result)}`));
  return box;
}

function renderMessage(m) {
  const box = element("div", { class: "message", "data-testid": "message", "data-role": m.role, "data-session": m.session_id, "data-level": m.level, id: `m-${m.id}` });
  if (m.role === "media") {
    const src = m.url || (m.data ? `data:${m.content_type};base64,${m.data}` : null);
    if (src && (m.content_type || "").startsWith("image/")) box.append(element("img", { src, alt: m.content_type }));
    else box.textContent = `[${m.content_type || "file"}] ${m.url || ""}`;
  } else {
    box.append(element("div", { class: "text" }, m.text));
  }
  for (const call of m.tool_calls) box.append(renderToolCall(call));
  return box;
}

function render() {
  const t = view.transcript;
  if (!t) return;
  const root = view.sessionId;
  const sessions = t.sessions;
  const containers = new Map([[root, $("transcript")]]);
  const fresh = document.createDocumentFragment();
  containers.set(root, fresh);

  // A sub-session's group opens where its first bubble appears, inside its parent's group.
  const containerFor = (sid) => {
    if (containers.has(sid)) return containers.get(sid);
    const parent = sessions[sid]?.parent_session_id;
    if (!parent) return null; // another conversation's session
    const outer = containerFor(parent);
    if (!outer) return null;
    const group = element("details", { class: "subsession", "data-testid": "subsession", "data-session": sid });
    group.open = view.open.get(sid) ?? true;
    group.addEventListener("toggle", () => view.open.set(sid, group.open));
    group.append(element("summary", {}, `sub-agent session ${sid}`));
    outer.append(group);
    containers.set(sid, group);
    return group;
  };

  for (const m of t.messages) {
    const container = containerFor(m.session_id);
    if (container) container.append(renderMessage(m));
  }
  const pane = $("transcript");
  const atBottom = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 40;
  pane.replaceChildren(fresh);
  if (atBottom) pane.scrollTop = pane.scrollHeight;
  renderNotifications();
}

function renderNotifications() {
  const t = view.transcript;
  const box = $("notifications");
  box.replaceChildren();
  const now = Date.now() / 1000;
  for (const n of t ? t.activeTools : []) {
    const elapsed = Math.max(0, Math.floor(now - n.started_at));
    const label = n.status === "preparing" ? `preparing ${n.tool_name}` : `running ${n.tool_name} (${elapsed}s)`;
    const extra = n.progress_message ? ` — ${n.progress_message}` : "";
    box.append(element("span", { class: "notification", "data-testid": "notification", "data-tool-name": n.tool_name, "data-status": n.status, "data-session": n.session_id }, label + extra));
  }
}

setInterval(renderNotifications, 1000); // elapsed seconds keep ticking while a tool runs

// -- actions ------------------------------------------------------------------------------------------

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  if (!text || !view.sessionId) return;
  input.value = "";
  const sent = await api(`/api/sessions/${encodeURIComponent(view.sessionId)}/messages`, { method: "POST", body: JSON.stringify({ text }) });
  if (sent.status !== 202) status(sent.body.error?.message || `could not send (${sent.status})`);
  refreshSessions();
});

$("new-chat").addEventListener("click", () => open(`web-${crypto.randomUUID().slice(0, 8)}`));

(async () => {
  const wanted = params.get("session");
  if (wanted) return open(wanted);
  const { status: code, body } = await api("/api/sessions");
  if (code === 200 && body.sessions.length) return open(body.sessions[0].session_id);
  return open(`web-${crypto.randomUUID().slice(0, 8)}`);
})();
