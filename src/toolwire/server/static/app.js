// The chat page: history first (Transcript.fromHistory), then the native event stream from the history's
// cursor. The DOM is built once from the history; after that each transcript change re-renders only the
// bubble (or the notification bar) it names, batched per animation frame.
//
// Every URL is relative, so the app works mounted under a path prefix (/chat/). The page's CSP allows only
// its own scripts and styles: no inline script or style, no eval. Assistant text is markdown (vendor/marked),
// sanitised by vendor/purify.min.js (DOMPurify, loaded as a classic script before this module).

import { Transcript } from "./transcript.js";
import { Marked } from "./vendor/marked.esm.js";

const params = new URLSearchParams(location.search);
const token = params.get("token") || localStorage.getItem("toolwire.token") || "";
if (params.get("token")) localStorage.setItem("toolwire.token", token);

const TICK_MS = 250; // elapsed seconds are recomputed often enough that each value is visible for most of a second
const MAX_RECONNECTS = 30;
const TITLES_KEY = "toolwire.titles"; // session id -> title from its first message, for servers that store none
const MAX_TITLES = 500;
const TITLE_LENGTH = 60;

const $ = (id) => document.getElementById(id);
const narrow = matchMedia("(max-width: 720px)");
const view = {
  generation: 0, // bumped by every open(): a slow load or a late event of the previous conversation is dropped
  listing: 0, // bumped by every refreshSessions(): a slow answer never overwrites a newer list
  sessionId: null,
  transcript: null,
  source: null,
  reconnects: 0,
  rows: new Map(), // session id -> its row of GET api/sessions
  open: new Map(), // sub-session id -> expanded?, kept across reloads of the same page
  bubbles: new Map(), // transcript index -> bubble element
  groups: new Map(), // session id -> list holding its bubbles
  lastText: new Map(), // session id -> index of its latest assistant bubble (read aloud when its text ends)
  running: new Set(), // tool calls whose start was read aloud
  added: [],
  updated: new Set(),
  spoken: [], // for the live region at the end of the frame: texts, and {index, top} for a bubble's text
  notificationsDirty: false,
  frame: false,
  busy: false, // a turn of this conversation is running
  awaiting: false, // ... and nothing of its next step has arrived yet: "Thinking…"
  manage: "unknown", // can this server rename and delete conversations? "unknown" | "yes" | "no"
};

// -- markdown -----------------------------------------------------------------------------------------

const escapeHtml = (text) =>
  String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// Raw HTML in an answer is shown as text; images become links (the CSP loads no foreign image anyway).
// DOMPurify then removes whatever is left that could run or navigate somewhere unsafe.
const markdown = new Marked(
  { gfm: true, breaks: false, async: false },
  {
    renderer: {
      html: ({ text }) => escapeHtml(text),
      image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
    },
  },
);
const PURIFY = {
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math", "iframe"],
  FORBID_ATTR: ["style", "class", "id", "name"],
  RETURN_DOM_FRAGMENT: true,
};
const purify = globalThis.DOMPurify;
if (purify?.addHook) {
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.getAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
}

function renderMarkdown(text) {
  const box = element("div", { class: "text markdown" });
  if (!purify?.sanitize) {
    box.className = "text"; // no sanitiser loaded: plain text, never unsanitised HTML
    box.textContent = text;
    return box;
  }
  const html = purify.sanitize(markdown.parse(text), PURIFY);
  for (const wide of html.querySelectorAll("pre, table")) wide.tabIndex = 0; // they scroll: reachable by keyboard
  box.append(html);
  return box;
}

// -- the server ---------------------------------------------------------------------------------------

async function api(path, options = {}) {
  const headers = { "content-type": "application/json", ...(options.headers || {}) };
  if (token) headers.authorization = `Bearer ${token}`;
  try {
    const response = await fetch(path, { ...options, headers }); // relative: works under a path prefix
    const body = await response.json().catch(() => ({}));
    return { status: response.status, body };
  } catch (error) {
    return { status: 0, body: { error: { type: "network", message: String(error) } } };
  }
}

const sessionPath = (sessionId, rest = "") => `api/sessions/${encodeURIComponent(sessionId)}${rest}`;

// A server without PATCH/DELETE api/sessions/{id} answers 405, or a 404 that is not its JSON "no session".
const unsupported = (reply) => reply.status === 405 || reply.status === 501 || (reply.status === 404 && reply.body?.error?.type !== "not_found");

function status(text) {
  $("status").textContent = text;
}

function notice(text) {
  $("notice").textContent = text;
}

function errorText(reply) {
  return reply.body?.error?.message || `HTTP ${reply.status}`;
}

function announce(text) {
  if (!text) return;
  view.spoken.push(text);
  schedule();
}

// crypto.randomUUID exists only in secure contexts (https, localhost); a LAN http address has just getRandomValues.
function newSessionId() {
  if (crypto.randomUUID) return `web-${crypto.randomUUID()}`;
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `web-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// -- titles -------------------------------------------------------------------------------------------

function localTitles() {
  try {
    return JSON.parse(localStorage.getItem(TITLES_KEY) || "{}") || {};
  } catch {
    return {};
  }
}

function storeTitles(titles) {
  const ids = Object.keys(titles);
  for (const id of ids.slice(0, Math.max(0, ids.length - MAX_TITLES))) delete titles[id];
  try {
    localStorage.setItem(TITLES_KEY, JSON.stringify(titles));
  } catch {
    // storage full or disabled: titles fall back to ids
  }
}

function rememberTitle(sessionId, text) {
  const titles = localTitles();
  if (titles[sessionId]) return;
  const line = text.replace(/\s+/g, " ").trim();
  if (!line) return;
  titles[sessionId] = line.length > TITLE_LENGTH ? shorten(line) : line;
  storeTitles(titles);
}

// Cut at a word where there is one in the second half, never mid-word or after a comma.
function shorten(line) {
  let cut = line.slice(0, TITLE_LENGTH - 1);
  const space = cut.lastIndexOf(" ");
  if (space > TITLE_LENGTH / 2) cut = cut.slice(0, space);
  return `${cut.replace(/[\s,.;:]+$/, "")}…`;
}

function forgetTitle(sessionId) {
  const titles = localTitles();
  delete titles[sessionId];
  storeTitles(titles);
}

// The server's title (set by PATCH) first, then the first message sent from this browser.
function titleOf(sessionId) {
  return view.rows.get(sessionId)?.title || localTitles()[sessionId] || null;
}

function renderTitle() {
  const title = (view.sessionId && titleOf(view.sessionId)) || "New chat";
  $("title").textContent = title;
  document.title = `${title} · toolwire`;
}

// -- loading a conversation -------------------------------------------------------------------------

async function open(sessionId) {
  const generation = ++view.generation;
  if (view.source) view.source.close();
  view.source = null;
  view.sessionId = sessionId;
  closeEditors();
  history.replaceState(null, "", `?session=${encodeURIComponent(sessionId)}`);
  renderTitle();
  status("loading…");
  let loaded = await api(sessionPath(sessionId, "/messages"));
  if (generation !== view.generation) return;
  if (loaded.status === 404) {
    // A new conversation: create it so its event stream can be opened before the first message.
    const created = await api("api/sessions", { method: "POST", body: JSON.stringify({ session_id: sessionId }) });
    if (generation !== view.generation) return;
    if (created.status !== 201) return status(`cannot open ${sessionId}: ${errorText(created)}`);
    loaded = { status: 200, body: { messages: [], parents: {}, last_seq: {}, cursor: created.body.cursor } };
  }
  if (loaded.status !== 200) {
    clearTranscript();
    return status(`cannot load ${sessionId}: ${errorText(loaded)}`);
  }
  const { messages, parents, last_seq: lastSeq, cursor, running, awaiting } = loaded.body;
  // A paused run's calls wait for a person: shown (with Approve / Deny) as the live events showed them.
  // Nothing running or waiting: the last turn ended, so its calls that found no answer stay under it (rule 4).
  const ended = !running && !(awaiting || []).length;
  const transcript = Transcript.fromHistory(messages, { parents, lastSeq, awaiting: awaiting || [], ended });
  view.transcript = transcript;
  const first = messages.find((m) => m.role === "user" && m.session_id === sessionId);
  if (first) rememberTitle(sessionId, (first.parts || []).filter((p) => p.type === "text").map((p) => p.text).join(" "));
  view.busy = !!running;
  view.awaiting = !!running;
  notice("");
  rebuild();
  renderTitle();
  transcript.subscribe((change) => changed(transcript, change));
  listen(sessionId, cursor, generation);
  if (!running) runClientTools();
  refreshSessions();
  probeManage(sessionId);
}

function listen(sessionId, cursor, generation) {
  const query = new URLSearchParams({ after: String(cursor ?? 0) });
  if (token) query.set("token", token); // EventSource cannot send headers
  const source = new EventSource(`${sessionPath(sessionId, "/events")}?${query}`);
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
    if (event.type === "session-deleted") return void deletedElsewhere(sessionId, source);
    view.transcript.apply(event);
    follow(event);
  };
}

// The server ended the stream because the conversation was deleted (here or in another tab): stop
// following it. Reloading it would find nothing, and opening an id that is not found creates it again.
function deletedElsewhere(sessionId, source) {
  source.close();
  view.source = null;
  forgetTitle(sessionId);
  view.rows.delete(sessionId);
  refreshSessions();
  status("deleted");
  notice("This conversation was deleted.");
}

// The turn's state as a person sees it: Thinking… until output arrives, Stop while it runs.
function follow(event) {
  const own = event.session_id === view.sessionId;
  switch (event.type) {
    case "user-turn-start":
      if (own) {
        view.busy = true;
        view.awaiting = true;
      }
      break;
    case "text-delta":
    case "reasoning-delta":
    case "tool-input-start":
      view.awaiting = false;
      break;
    case "step-finish":
    case "tool-call-complete":
      view.awaiting = view.busy; // the model is called again next (running tools show as notifications)
      break;
    case "text-end": // read out once drawn: the bubble the text went to, as it is then
      if (view.lastText.has(event.session_id)) view.spoken.push({ index: view.lastText.get(event.session_id), top: own });
      break;
    case "interaction-end":
      if (!own) break;
      view.busy = false;
      view.awaiting = false;
      notice(""); // a "busy" notice is stale once the turn is over
      if (event.status === "paused") {
        announce("Waiting for you: approve or deny the tool call below.");
        runClientTools();
      } else if (event.status && event.status !== "completed") announce(`The answer ended: ${event.status}.`);
      refreshSessions();
      break;
    default:
      return;
  }
  schedule();
}

async function refreshSessions() {
  const listing = ++view.listing;
  const reply = await api("api/sessions");
  if (reply.status !== 200 || listing !== view.listing) return;
  const list = $("sessions");
  list.replaceChildren();
  const rows = [...reply.body.sessions];
  if (view.sessionId && !rows.some((s) => s.session_id === view.sessionId)) {
    rows.unshift({ session_id: view.sessionId, title: null });
  }
  appendSessions(list, rows, reply.body.next_cursor);
  renderTitle();
}

// The server lists conversations a page at a time; older ones are one click away.
function appendSessions(list, rows, nextCursor) {
  for (const row of rows) {
    const id = row.session_id;
    view.rows.set(id, row);
    const label = titleOf(id) || (id === view.sessionId ? "New chat" : id);
    const link = element("a", { href: `?session=${encodeURIComponent(id)}`, title: id }, label);
    if (id === view.sessionId) {
      link.className = "current";
      link.setAttribute("aria-current", "page");
    }
    link.addEventListener("click", (e) => {
      e.preventDefault();
      if (narrow.matches) setSidebar(false);
      open(id);
    });
    const item = element("li");
    item.append(link);
    list.append(item);
  }
  if (!nextCursor) return;
  const more = element("button", { type: "button", class: "older", "data-testid": "older-sessions" }, "Older conversations");
  const item = element("li");
  item.append(more);
  list.append(item);
  more.addEventListener("click", async () => {
    const page = await api(`api/sessions?cursor=${encodeURIComponent(nextCursor)}`);
    if (page.status !== 200) return status(`cannot list conversations: ${errorText(page)}`);
    const had = list.children.length - 1;
    item.remove();
    appendSessions(list, page.body.sessions.filter((s) => s.session_id !== view.sessionId), page.body.next_cursor);
    list.children[had]?.querySelector("a, button")?.focus(); // the keyboard goes on from the first older one
  });
}

// -- rendering ----------------------------------------------------------------------------------------

function changed(transcript, change) {
  if (transcript !== view.transcript) return;
  if (change.type === "message-added") view.added.push(change.index);
  else if (change.type === "message-updated") view.updated.add(change.index);
  else {
    view.notificationsDirty = true;
    const n = change.notification;
    const call = `${n.session_id}\u0000${n.tool_call_id}`;
    if (change.type !== "notification-removed" && n.status === "executing" && !view.running.has(call)) {
      view.running.add(call); // said once, not at every progress report
      announce(`Running ${n.tool_name}.`);
    } else if (change.type === "notification-removed" && change.reason === "complete") {
      announce(`${n.tool_name} finished.`);
    }
  }
  if (change.type === "message-added" || change.type === "message-updated") {
    const message = transcript.messageAt(change.index);
    if (message?.role === "assistant") view.lastText.set(message.session_id, change.index);
  }
  schedule();
}

function schedule() {
  if (view.frame) return;
  view.frame = true;
  requestAnimationFrame(flush);
}

function flush() {
  view.frame = false;
  const t = view.transcript;
  if (!t) return;
  const pane = $("transcript-pane");
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
  renderActivity();
  const said = view.spoken.splice(0).map(spoken).filter(Boolean);
  if (said.length) $("announcer").textContent = said.join(" ");
  if (atBottom) pane.scrollTop = pane.scrollHeight;
}

function spoken(item) {
  if (typeof item === "string") return item;
  const text = view.bubbles.get(item.index)?.querySelector(".text")?.textContent.replace(/\s+/g, " ").trim();
  return text && (item.top ? text : `Sub-agent: ${text}`);
}

function clearTranscript() {
  view.transcript = null;
  view.busy = false;
  view.awaiting = false;
  view.bubbles.clear();
  $("transcript").replaceChildren();
  $("notifications").replaceChildren();
  renderActivity();
}

function rebuild() {
  view.bubbles.clear();
  view.lastText.clear();
  view.spoken = view.spoken.filter((item) => typeof item === "string"); // bubbles of the conversation left
  view.groups = new Map([[view.sessionId, $("transcript")]]);
  view.added = [];
  view.updated.clear();
  $("transcript").replaceChildren();
  view.transcript.messages.forEach((message, index) => place(index, message));
  renderNotifications();
  renderActivity();
  $("transcript-pane").scrollTop = $("transcript-pane").scrollHeight;
}

// Send while idle, Stop while a turn runs; "Thinking…" until the next output arrives.
function renderActivity() {
  const send = $("send");
  const stop = $("stop");
  const focused = document.activeElement;
  send.hidden = view.busy;
  stop.hidden = !view.busy;
  if (!view.busy) stop.disabled = false;
  if (focused === send && view.busy) stop.focus();
  if (focused === stop && !view.busy) $("input").focus();
  const tools = view.transcript ? view.transcript.activeTools.length : 0;
  $("thinking").hidden = !(view.busy && view.awaiting && tools === 0);
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
  const list = element("ol", { class: "messages" });
  group.append(summary, list);
  const item = element("li", { class: "entry group" });
  item.append(group);
  outer.append(item);
  view.groups.set(sessionId, list);
  return list;
}

function speaker(message) {
  const top = message.session_id === view.sessionId;
  if (message.role === "user") return top ? "You:" : "Task for the sub-agent:";
  if (message.role === "assistant") return top ? "Assistant:" : "Sub-agent:";
  if (message.role === "reasoning") return "Reasoning:";
  if (message.role === "media") return "Attachment:";
  return message.level === "error" ? "Error:" : "Note:";
}

function place(index, message) {
  if (!message) return;
  const item = element("li", { class: "entry", "data-role": message.role });
  const bubble = element("div", { class: "message", "data-testid": "message", "data-role": message.role, "data-session": message.session_id });
  fill(bubble, message);
  item.append(element("span", { class: "sr-only" }, `${speaker(message)} `), bubble);
  groupFor(message.session_id).append(item);
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
  else if (m.role === "assistant") parts.push(renderMarkdown(m.text));
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

const WAITING = {
  "awaiting-approval": "waits for your approval",
  "awaiting-output": "waits for this client",
  "awaiting-subagent": "waits for its sub-agent",
};

function notificationLabel(n) {
  if (n.status === "preparing") return `preparing ${n.tool_name}`;
  if (WAITING[n.status]) return `${n.tool_name} ${WAITING[n.status]}${n.session_id !== view.sessionId ? ` · ${n.session_id}` : ""}`;
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
    if (n.status === "awaiting-approval") box.append(approvalControls(n));
  }
}

// -- calls waiting for a person -------------------------------------------------------------------------

// Approve runs the call; Deny refuses it, with the reason typed (the model reads it).
function approvalControls(n) {
  const form = element("form", { class: "approval", "data-testid": "approval", "data-tool-call-id": n.tool_call_id });
  const reason = element("input", { type: "text", "data-testid": "deny-reason", placeholder: "Reason (optional)", "aria-label": `Reason to deny ${n.tool_name}` });
  const approve = element("button", { type: "button", "data-testid": "approve" }, "Approve");
  const deny = element("button", { type: "button", "data-testid": "deny" }, "Deny");
  approve.addEventListener("click", () => answer({ approvals: { [n.tool_call_id]: true } }, `Approved ${n.tool_name}.`));
  deny.addEventListener("click", () => {
    const why = reason.value.trim();
    answer({ approvals: { [n.tool_call_id]: why ? { denied: why } : false } }, `Denied ${n.tool_name}.`);
  });
  form.addEventListener("submit", (e) => e.preventDefault());
  form.append(approve, deny, reason);
  return form;
}

// Client tools this page runs itself, in the browser; their output goes back as the call's result.
const CLIENT_TOOLS = {
  browser_time_zone: () => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
};
const answered = new Set(); // calls already answered from this page (an answer is sent once)

function runClientTools() {
  if (!view.transcript || view.busy) return;
  const outputs = {};
  for (const n of view.transcript.activeTools) {
    const run = CLIENT_TOOLS[n.tool_name];
    const key = `${n.session_id}\u0000${n.tool_call_id}`;
    if (n.status !== "awaiting-output" || !run || answered.has(key)) continue;
    answered.add(key);
    try {
      outputs[n.tool_call_id] = run();
    } catch (error) {
      outputs[n.tool_call_id] = { failed: String(error) };
    }
  }
  if (Object.keys(outputs).length) answer({ tool_outputs: outputs }, "");
}

async function answer(body, said) {
  const sessionId = view.sessionId;
  if (!sessionId || view.busy) return;
  view.busy = true;
  view.awaiting = true;
  renderActivity();
  if (said) announce(said);
  const sent = await api(sessionPath(sessionId, "/messages"), { method: "POST", body: JSON.stringify(body) });
  if (view.sessionId !== sessionId || sent.status === 202) return;
  view.busy = false;
  view.awaiting = false;
  renderActivity();
  notice(`Not sent: ${errorText(sent)}`);
}

// Elapsed seconds keep ticking while a tool runs: only the labels' text changes, the elements stay.
setInterval(() => {
  for (const note of $("notifications").querySelectorAll(".notification")) {
    const label = notificationLabel(note.notification);
    if (note.textContent !== label) note.textContent = label;
  }
}, TICK_MS);

// -- sending and stopping -----------------------------------------------------------------------------

function autosize() {
  const input = $("input");
  input.style.height = "auto"; // CSSOM, which the CSP allows (a style attribute in markup it would not)
  input.style.height = `${Math.min(input.scrollHeight + 2, 200)}px`;
}

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  if (!text || !view.sessionId || !view.transcript) return;
  const sessionId = view.sessionId;
  const before = { busy: view.busy, awaiting: view.awaiting };
  const firstTurn = !view.transcript.messages.some((m) => m.role === "user" && m.session_id === sessionId);
  input.value = "";
  autosize();
  notice("");
  view.busy = true;
  view.awaiting = true;
  renderActivity();
  announce("Thinking…");
  const sent = await api(sessionPath(sessionId, "/messages"), { method: "POST", body: JSON.stringify({ text }) });
  if (view.sessionId !== sessionId) return;
  if (sent.status === 202) {
    if (firstTurn) rememberTitle(sessionId, text);
    renderTitle();
    return void refreshSessions();
  }
  if (!input.value) input.value = text; // not sent: give the text back
  autosize();
  const busy = sent.body?.error?.type === "session_busy";
  view.busy = busy || before.busy;
  view.awaiting = before.awaiting;
  renderActivity();
  notice(busy ? "Busy: wait for the current answer to finish, or press Stop." : `Not sent: ${errorText(sent)}`);
});

$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("input").addEventListener("input", autosize);

$("stop").addEventListener("click", async () => {
  const sessionId = view.sessionId;
  if (!sessionId) return;
  const stop = $("stop");
  stop.disabled = true; // a disabled button loses the focus: it goes back to the message box below
  announce("Stopping…");
  const reply = await api(sessionPath(sessionId, "/cancel"), { method: "POST" });
  if (view.sessionId !== sessionId) return;
  stop.disabled = false;
  if (document.activeElement === stop || document.activeElement === document.body) $("input").focus();
  if (reply.status !== 200) return notice(`Cannot stop: ${errorText(reply)}`);
  view.busy = false;
  view.awaiting = false;
  renderActivity();
  notice(reply.body?.cancelled ? "Stopped." : "");
  announce(reply.body?.cancelled ? "Stopped." : "");
  // The stopped turn as the server stored it: no tool is left showing as running.
  await open(sessionId);
  if (view.sessionId === sessionId) notice(reply.body?.cancelled ? "Stopped." : "");
});

// -- renaming and deleting ----------------------------------------------------------------------------

// One harmless request tells whether the server has PATCH api/sessions/{id}: an empty change (no title)
// must be refused (400) or ignored; a server without the route answers 404 (not JSON) or 405.
async function probeManage(sessionId) {
  if (view.manage !== "unknown") return renderManage();
  const reply = await api(sessionPath(sessionId), { method: "PATCH", body: "{}" });
  if (view.manage === "unknown" && reply.status !== 0) view.manage = unsupported(reply) ? "no" : "yes";
  renderManage();
}

function renderManage() {
  $("manage").hidden = view.manage !== "yes" || !$("rename-form").hidden;
}

function notSupported(what) {
  view.manage = "no";
  closeEditors();
  notice(`This server cannot ${what} conversations.`);
}

function closeEditors({ focus = null } = {}) {
  $("rename-form").hidden = true;
  $("confirm-delete").hidden = true;
  $("title").hidden = false;
  renderManage();
  if (focus && !$(focus).hidden) $(focus).focus();
}

$("rename").addEventListener("click", () => {
  $("confirm-delete").hidden = true;
  $("rename-input").value = $("title").textContent;
  $("title").hidden = true;
  $("rename-form").hidden = false;
  renderManage();
  $("rename-input").focus();
  $("rename-input").select();
});

$("rename-cancel").addEventListener("click", () => closeEditors({ focus: "rename" }));

$("rename-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const sessionId = view.sessionId;
  const title = $("rename-input").value.replace(/\s+/g, " ").trim();
  if (!title || !sessionId) return;
  const reply = await api(sessionPath(sessionId), { method: "PATCH", body: JSON.stringify({ title }) });
  if (view.sessionId !== sessionId) return;
  if (unsupported(reply)) return notSupported("rename");
  if (reply.status < 200 || reply.status > 299) return notice(`Not renamed: ${errorText(reply)}`);
  view.rows.set(sessionId, { ...(view.rows.get(sessionId) || { session_id: sessionId }), title: reply.body?.title || title });
  notice("");
  closeEditors({ focus: "rename" });
  renderTitle();
  announce(`Renamed to ${titleOf(sessionId)}.`);
  refreshSessions();
});

$("delete").addEventListener("click", () => {
  closeEditors();
  $("confirm-delete-text").textContent = `Delete “${$("title").textContent}”? This cannot be undone.`;
  $("confirm-delete").hidden = false;
  $("delete-no").focus();
});

$("delete-no").addEventListener("click", () => closeEditors({ focus: "delete" }));

$("delete-yes").addEventListener("click", async () => {
  const sessionId = view.sessionId;
  if (!sessionId) return;
  const reply = await api(sessionPath(sessionId), { method: "DELETE" });
  if (view.sessionId !== sessionId) return;
  if (unsupported(reply)) return notSupported("delete");
  if (reply.status === 409) return notice("Stop the answer before deleting this conversation.");
  if ((reply.status < 200 || reply.status > 299) && reply.status !== 404) return notice(`Not deleted: ${errorText(reply)}`);
  forgetTitle(sessionId);
  view.rows.delete(sessionId);
  closeEditors();
  announce("Conversation deleted.");
  const listed = await api("api/sessions");
  const next = listed.status === 200 ? listed.body.sessions.find((s) => s.session_id !== sessionId) : null;
  await open(next ? next.session_id : newSessionId());
  notice("Conversation deleted.");
  $("input").focus();
});

// -- the sidebar --------------------------------------------------------------------------------------

// Beside the chat on a wide screen, over it on a phone (where the rest of the page is inert meanwhile).
function setSidebar(open) {
  $("app").dataset.sidebar = open ? "open" : "closed";
  $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  const over = open && narrow.matches;
  document.querySelector("main").inert = over;
  document.querySelector(".skip-link").inert = over;
}

// While the list covers the chat, Tab cycles through the list (as in a dialog).
$("sidebar").addEventListener("keydown", (e) => {
  if (e.key !== "Tab" || !narrow.matches || $("app").dataset.sidebar !== "open") return;
  const stops = [...$("sidebar").querySelectorAll("a[href], button")].filter((el) => el.offsetParent !== null);
  const [first, last] = [stops[0], stops[stops.length - 1]];
  if (e.shiftKey && document.activeElement === first) last.focus();
  else if (!e.shiftKey && document.activeElement === last) first.focus();
  else return;
  e.preventDefault();
});

$("toggle-sidebar").addEventListener("click", () => {
  const open = $("app").dataset.sidebar !== "open";
  setSidebar(open);
  if (open) $("new-chat").focus();
});

$("scrim").addEventListener("click", () => setSidebar(false));
$("close-sidebar").addEventListener("click", () => {
  setSidebar(false);
  $("toggle-sidebar").focus();
});
narrow.addEventListener("change", () => setSidebar(!narrow.matches));

document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  if (narrow.matches && $("app").dataset.sidebar === "open") {
    setSidebar(false);
    $("toggle-sidebar").focus();
  } else if (!$("rename-form").hidden) {
    closeEditors({ focus: "rename" });
  } else if (!$("confirm-delete").hidden) {
    closeEditors({ focus: "delete" });
  }
});

$("new-chat").addEventListener("click", () => {
  if (narrow.matches) setSidebar(false);
  open(newSessionId());
  $("input").focus();
});

setSidebar(!narrow.matches);
if (!narrow.matches) $("input").focus();

(async () => {
  const wanted = params.get("session");
  if (wanted) return open(wanted);
  const reply = await api("api/sessions");
  if (reply.status === 200 && reply.body.sessions.length) return open(reply.body.sessions[0].session_id);
  return open(newSessionId());
})();
