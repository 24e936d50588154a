// The chat page: history first (Transcript.fromHistory), then the native event stream from the history's
// cursor. The DOM is built once from the history; after that each transcript change re-renders only the
// bubble (or the notification bar) it names, batched per animation frame.
//
// Every URL is relative, so the app works mounted under a path prefix (/chat/). The page's CSP allows only
// its own scripts and styles: no inline script or style, no eval. Assistant text is markdown (vendor/marked),
// sanitised by vendor/purify.min.js (DOMPurify, loaded as a classic script before this module).

import { highlight } from "./highlight.js";
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
  cards: new Map(), // session id + call id -> the card of a call not finished yet (pending, running, waiting)
  openCards: new Set(), // finished cards the person expanded, kept open when their bubble is drawn again
  agents: new Map(), // session id -> the sub-agent's name (its interaction-start), or the tool that started it
  noteText: new Map(), // system bubble id -> how the page words it (failover, error with Retry)
  model: "", // the model of the conversation's current run, as its interaction-start names it
  openMenu: null, // the conversation whose menu is open in the list
  added: [],
  updated: new Set(),
  spoken: [], // for the live region at the end of the frame: texts, and {index, top} for a bubble's text
  notificationsDirty: false,
  frame: false,
  busy: false, // a turn of this conversation is running
  awaiting: false, // ... and nothing of its next step has arrived yet: "Thinking…"
  manage: "unknown", // can this server rename and delete conversations? "unknown" | "no" (a use was refused)
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
      // The fence's language as a data attribute: the sanitiser drops classes, and the highlighter reads it.
      code: ({ text, lang }) => `<pre><code data-lang="${escapeHtml((lang || "").split(/\s/)[0])}">${escapeHtml(text)}</code></pre>\n`,
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
  for (const pre of html.querySelectorAll("pre")) {
    const code = pre.querySelector("code") || pre;
    highlight(code, code.getAttribute("data-lang") || "");
    const block = element("div", { class: "code-block" });
    const copy = element("button", { type: "button", class: "copy", "data-testid": "copy-code", "aria-label": "Copy code" }, "Copy");
    copy.addEventListener("click", () => copyText(code.textContent, copy));
    pre.replaceWith(block);
    block.append(copy, pre);
  }
  box.append(html);
  return box;
}

// -- copying ------------------------------------------------------------------------------------------

async function copyText(text, button) {
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    copied = legacyCopy(text); // no clipboard API (an http address on a LAN is not a secure context)
  }
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  button.textContent = copied ? "Copied" : "Not copied";
  announce(copied ? "Copied." : "Could not copy.");
  setTimeout(() => (button.textContent = label), 1500); // the label comes back; nothing waits on this
}

function legacyCopy(text) {
  const area = element("textarea", { readonly: "", "aria-hidden": "true", class: "offscreen" });
  area.value = text;
  document.body.append(area);
  area.select();
  let done = false;
  try {
    done = document.execCommand("copy");
  } catch {
    done = false;
  }
  area.remove();
  return done;
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

// Each conversation of the list has its menu (⋯): Rename and Delete, which open it and start the same
// controls as the title bar's.
function sessionMenu(sessionId, label) {
  const box = element("div", { class: "session-menu" });
  box.hidden = view.manage === "no";
  const toggle = element("button", { type: "button", class: "menu-toggle", "data-testid": "session-menu", "aria-label": `Actions for ${label}`, "aria-expanded": "false" }, "⋯");
  const items = element("div", { class: "menu-items", "data-testid": "session-menu-items" });
  items.hidden = view.openMenu !== sessionId;
  toggle.setAttribute("aria-expanded", String(!items.hidden));
  const rename = element("button", { type: "button", "data-testid": "menu-rename" }, "Rename");
  const remove = element("button", { type: "button", "data-testid": "menu-delete" }, "Delete");
  items.append(rename, remove);
  box.append(toggle, items);
  toggle.addEventListener("click", () => {
    const opening = items.hidden;
    closeMenus();
    items.hidden = !opening;
    toggle.setAttribute("aria-expanded", String(opening));
    if (opening) {
      view.openMenu = sessionId;
      rename.focus();
    }
  });
  const act = async (button) => {
    closeMenus();
    if (narrow.matches) setSidebar(false);
    if (view.sessionId !== sessionId) await open(sessionId);
    $(button).click();
  };
  rename.addEventListener("click", () => act("rename"));
  remove.addEventListener("click", () => act("delete"));
  return box;
}

function closeMenus() {
  view.openMenu = null;
  for (const items of document.querySelectorAll(".menu-items")) items.hidden = true;
  for (const toggle of document.querySelectorAll(".menu-toggle")) toggle.setAttribute("aria-expanded", "false");
}

function renderTitle() {
  const title = (view.sessionId && titleOf(view.sessionId)) || "New chat";
  $("title").textContent = title;
  document.title = `${title} · toolwire`;
}

// -- loading a conversation -------------------------------------------------------------------------

async function open(sessionId, { fresh = false } = {}) {
  const generation = ++view.generation;
  if (view.source) view.source.close();
  view.source = null;
  view.sessionId = sessionId;
  closeEditors();
  history.replaceState(null, "", `?session=${encodeURIComponent(sessionId)}`);
  renderTitle();
  status("loading…");
  // A new id of this page's own is created at once (asking for its messages first would be a 404).
  let loaded = fresh ? { status: 404 } : await api(sessionPath(sessionId, "/messages"));
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
  nameSubAgentsFromHistory(messages, parents || {});
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
  renderManage();
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
    case "interaction-start":
      if (own) view.model = event.model ? `${event.provider_name ? `${event.provider_name}:` : ""}${event.model}` : view.model;
      else {
        const parent = event.parent_session_id && event.parent_tool_call_id ? view.transcript.callInfo(event.parent_session_id, event.parent_tool_call_id) : null;
        nameSubAgent(event.session_id, event.agent_name || parent?.tool_name);
      }
      return;
    case "failover":
      describeFailover(event);
      break;
    case "error":
      if (own) describeError(event);
      break;
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
      notice(event.status === "cancelled" ? "Stopped." : ""); // a "busy" notice is stale once the turn is over
      if (event.status === "completed") markEmptyAnswer();
      else if (event.status === "cancelled") addMarker("stopped", "Stopped: what the answer had shown so far stays above.");
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

// The notes the transcript adds (rule 7, errors) say what happened; the page words them for a person and
// adds what to do next. Keyed by the note's bubble id: the latest system bubble of the event's session.
function latestNote(sessionId) {
  const messages = view.transcript.messages;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].session_id === sessionId && messages[i].role === "system") return [i, messages[i]];
  }
  return [-1, null];
}

function describeFailover(event) {
  const [index, note] = latestNote(event.session_id);
  if (!note) return;
  const why = [event.error_type, event.status, event.reason].filter(Boolean).join(" ");
  let text = `Model ${event.from_provider}:${event.from_model} failed (${why}); answered by ${event.to_provider}:${event.to_model}.`;
  if (event.dropped_output) text += " What it had streamed is shown struck through.";
  view.noteText.set(note.id, { text, kind: "failover" });
  view.updated.add(index);
}

function describeError(event) {
  const [index, note] = latestNote(event.session_id);
  if (!note) return;
  const model = view.model ? ` (model ${view.model})` : "";
  const prompt = lastPrompt();
  view.noteText.set(note.id, { text: `The answer failed${model}: ${event.message || event.error_type}`, kind: "error", prompt, retryable: !!event.retryable });
  view.updated.add(index);
}

function lastPrompt() {
  const messages = view.transcript.messages;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].session_id === view.sessionId && messages[i].role === "user") return messages[i].text;
  }
  return "";
}

// A page-only line at the end of the conversation (not part of the transcript: gone on reload).
function addMarker(kind, text) {
  const item = element("li", { class: `entry marker ${kind}`, "data-testid": `marker-${kind}` });
  item.append(element("div", { class: "marker-text" }, text));
  $("transcript").append(item);
}

// A turn that completed without a word of text (and no structured output) says so, instead of nothing.
function markEmptyAnswer() {
  const messages = view.transcript.messages;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.session_id !== view.sessionId) continue;
    if (m.role === "user") return addMarker("empty-answer", "The model returned an empty answer.");
    if (m.role === "assistant" && m.text.trim()) return;
  }
}

async function refreshSessions() {
  const listing = ++view.listing;
  const reply = await api("api/sessions");
  if (reply.status !== 200 || listing !== view.listing) return;
  const list = $("sessions");
  // The list is drawn again: an open menu stays open, and the focus stays on the same control.
  const focused = list.contains(document.activeElement) ? document.activeElement : null;
  const refocus = focused && { session: focused.closest("li")?.dataset.session, testId: focused.dataset.testid };
  list.replaceChildren();
  const rows = [...reply.body.sessions];
  if (view.sessionId && !rows.some((s) => s.session_id === view.sessionId)) {
    rows.unshift({ session_id: view.sessionId, title: null });
  }
  appendSessions(list, rows, reply.body.next_cursor);
  if (refocus?.session) {
    const item = [...list.children].find((li) => li.dataset.session === refocus.session);
    item?.querySelector(refocus.testId ? `[data-testid="${refocus.testId}"]` : "a")?.focus();
  }
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
    const item = element("li", { class: "session", "data-session": id });
    item.append(link, sessionMenu(id, label));
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
  markLastAnswer();
  const said = view.spoken.splice(0).map(spoken).filter(Boolean);
  if (said.length) $("announcer").textContent = said.join(" ");
  if (atBottom) pane.scrollTop = pane.scrollHeight;
}

// Regenerate is offered on the conversation's last answer only.
function markLastAnswer() {
  const messages = view.transcript?.messages || [];
  let last = -1;
  for (let i = messages.length - 1; i >= 0 && last < 0; i--) {
    if (messages[i].session_id === view.sessionId && messages[i].role === "assistant" && messages[i].text.trim()) last = i;
  }
  for (const marked of document.querySelectorAll(".entry[data-last-answer]")) marked.removeAttribute("data-last-answer");
  view.bubbles.get(last)?.parentElement?.setAttribute("data-last-answer", "true");
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
  view.cards.clear();
  $("transcript").replaceChildren();
  $("notifications").replaceChildren();
  renderActivity();
}

function rebuild() {
  view.bubbles.clear();
  view.cards.clear(); // their elements go with the list below
  view.noteText.clear(); // notes are ephemeral: a rebuilt transcript numbers its own from 0
  view.model = "";
  view.lastText.clear();
  view.spoken = view.spoken.filter((item) => typeof item === "string"); // bubbles of the conversation left
  view.groups = new Map([[view.sessionId, $("transcript")]]);
  view.added = [];
  view.updated.clear();
  $("transcript").replaceChildren();
  view.transcript.messages.forEach((message, index) => place(index, message));
  renderNotifications();
  renderActivity();
  markLastAnswer();
  $("transcript-pane").scrollTop = $("transcript-pane").scrollHeight;
}

// Send while idle, Stop while a turn runs; "Thinking…" until the next output arrives.
function renderActivity() {
  const send = $("send");
  const stop = $("stop");
  const focused = document.activeElement;
  send.hidden = view.busy;
  stop.hidden = !view.busy;
  $("app").dataset.busy = String(view.busy); // Edit and Regenerate wait for the turn to end
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
  const summary = element("summary", { title: sessionId }, "");
  renderGroupName(summary, sessionId);
  const list = element("ol", { class: "messages" });
  group.append(summary, list);
  const item = element("li", { class: "entry group" });
  item.append(group);
  outer.append(item);
  view.groups.set(sessionId, list);
  return list;
}

// A sub-agent is shown by its name (its runs' interaction-start carry it), else as "sub-agent".
function agentName(sessionId) {
  return view.agents.get(sessionId) || null;
}

function renderGroupName(summary, sessionId) {
  const name = agentName(sessionId);
  summary.replaceChildren("sub-agent ", element("strong", { class: "agent-name" }, name || "(unnamed)"));
}

// After a reload no interaction-start names the sub-agents: each is named after the caller's call that
// started it, the one of the caller's latest message whose string argument is the sub-agent's task (its
// first user message: `as_tool` passes `task`), or the only call of that message.
function nameSubAgentsFromHistory(messages, parents) {
  const latest = new Map(); // session id -> its latest assistant message so far
  for (const message of messages) {
    const sessionId = message.session_id;
    if (message.role === "assistant") latest.set(sessionId, message);
    const parent = parents[sessionId];
    if (message.role !== "user" || !parent || view.agents.has(sessionId)) continue;
    const calls = (latest.get(parent)?.parts || []).filter((p) => p.type === "tool-call");
    const task = (message.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("");
    const call = calls.find((c) => Object.values(c.args || {}).includes(task)) || (calls.length === 1 ? calls[0] : null);
    if (call) view.agents.set(sessionId, call.tool_name);
  }
}

function nameSubAgent(sessionId, name) {
  if (!name || view.agents.get(sessionId) === name) return;
  view.agents.set(sessionId, name);
  const group = document.querySelector(`details.subsession[data-session="${CSS.escape(sessionId)}"] > summary`);
  if (group) renderGroupName(group, sessionId);
  for (const [k, card] of view.cards) if (k.startsWith(`${sessionId}\u0000`)) card.from.textContent = `from sub-agent ${name}`;
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
  item.append(element("span", { class: "sr-only" }, `${speaker(message)} `), bubble);
  fill(bubble, message);
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
  if (m.id.endsWith(":dropped")) bubble.setAttribute("data-dropped", "true"); // a failover discarded it
  else bubble.removeAttribute("data-dropped");
  const parts = [];
  // Calls the model made before this text (buffered until it opened, transcript rule 4) come above it.
  for (const call of m.tool_calls) if (call.before_text) parts.push(renderToolCall(call, m.session_id));
  const worded = m.role === "system" ? view.noteText.get(m.id) : null;
  if (worded) parts.push(renderNote(m, worded));
  else if (m.role === "media") parts.push(renderMedia(m));
  else if (m.role === "assistant" && m.text) parts.push(renderMarkdown(m.text));
  else if (m.role !== "assistant") parts.push(element("div", { class: "text" }, m.text));
  for (const call of m.tool_calls) if (!call.before_text) parts.push(renderToolCall(call, m.session_id));
  if (m.id.endsWith(":dropped")) parts.unshift(element("div", { class: "dropped-label" }, "Dropped: this model failed mid-answer"));
  bubble.replaceChildren(...parts);
  // The bubble's buttons sit under it, outside it: the bubble holds only what was said.
  const entry = bubble.parentElement;
  if (!entry) return;
  entry.querySelector(":scope > .actions")?.remove();
  const actions = bubbleActions(m);
  if (actions) entry.append(actions);
}

// Copy on every answer; Edit on the person's own messages; Regenerate on the conversation's last answer
// (shown while nothing runs: both replace turns, see replaceTurn).
function bubbleActions(m) {
  const top = m.session_id === view.sessionId;
  if (m.id.endsWith(":dropped")) return null;
  const row = element("div", { class: "actions" });
  if (m.role === "assistant" && m.text.trim()) {
    const copy = element("button", { type: "button", class: "copy", "data-testid": "copy-answer", "aria-label": "Copy answer" }, "Copy");
    copy.addEventListener("click", () => copyText(m.text, copy));
    row.append(copy);
    if (top) {
      const again = element("button", { type: "button", class: "regenerate", "data-testid": "regenerate", "data-message": m.id }, "Regenerate");
      again.addEventListener("click", () => regenerate(m));
      row.append(again);
    }
  } else if (m.role === "user" && top) {
    const edit = element("button", { type: "button", class: "edit", "data-testid": "edit", "aria-label": "Edit message" }, "Edit");
    edit.addEventListener("click", (e) => startEdit(m, e.target.closest(".entry")?.querySelector(".message")));
    row.append(edit);
  }
  return row.childElementCount ? row : null;
}

// -- regenerate and edit --------------------------------------------------------------------------------

// The person's turns of this conversation, in order (the top session's user bubbles).
function userTurns() {
  return view.transcript.messages.filter((m) => m.role === "user" && m.session_id === view.sessionId);
}

// Ask again the turn whose answer this is: the same prompt, the turns before it kept, it and what follows dropped.
function regenerate(answerMessage) {
  const messages = view.transcript.messages;
  const at = messages.findIndex((m) => m.id === answerMessage.id);
  const turns = userTurns();
  const turn = turns.filter((u) => messages.findIndex((m) => m.id === u.id) < at).length - 1;
  if (turn < 0) return;
  replaceTurn(turn, turns[turn].text, { trigger: "regenerate-message" }, "Regenerating the answer.");
}

function startEdit(m, bubble) {
  if (view.busy || !bubble) return;
  const form = element("form", { class: "edit-form", "data-testid": "edit-form" });
  const id = `edit-${m.id}`.replace(/[^\w-]/g, "_");
  const area = element("textarea", { id, rows: "3" });
  area.value = m.text;
  const save = element("button", { type: "submit", class: "primary" }, "Send");
  const cancel = element("button", { type: "button" }, "Cancel");
  form.append(element("label", { for: id, class: "sr-only" }, "Edit your message"), area, save, cancel);
  bubble.replaceChildren(form);
  area.focus();
  const close = () => {
    const latest = view.transcript.message(m.id);
    if (latest) fill(bubble, latest);
    bubble.querySelector('[data-testid="edit"]')?.focus();
  };
  cancel.addEventListener("click", close);
  area.addEventListener("keydown", (e) => {
    if (e.key === "Escape") close();
    else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = area.value.trim();
    if (!text) return;
    const turn = userTurns().findIndex((u) => u.id === m.id);
    if (turn >= 0) replaceTurn(turn, text, { trigger: "submit-message", messageId: m.id }, "Sending the edited message.");
  });
}

// Replace turn `index` and everything after it by `text` as a new turn, through the AI SDK endpoint, whose
// server drops the turns the request no longer shows (docs/server.md). The reply streams the new turn; the
// page follows it on its own event stream instead, so the reply is only read to its end (closing it early
// would stop the run).
async function replaceTurn(index, text, extra, said) {
  const sessionId = view.sessionId;
  if (!sessionId || view.busy) return;
  const kept = userTurns().slice(0, index).map((u) => ({ id: u.id, role: "user", parts: [{ type: "text", text: u.text }] }));
  const messages = [...kept, { id: extra.messageId || `${sessionId}-again-${Date.now()}`, role: "user", parts: [{ type: "text", text }] }];
  view.busy = true;
  view.awaiting = true;
  renderActivity();
  announce(said);
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch("api/chat", { method: "POST", headers, body: JSON.stringify({ id: sessionId, messages, ...extra }) });
  } catch (error) {
    response = null;
    notice(`Not sent: ${error}`);
  }
  if (!response?.ok) {
    if (response) notice(`Not sent: ${(await response.json().catch(() => ({})))?.error?.message || `HTTP ${response.status}`}`);
    view.busy = false;
    view.awaiting = false;
    return renderActivity();
  }
  drain(response);
  if (view.sessionId === sessionId) await open(sessionId); // the store now holds the kept turns and the new one
}

async function drain(response) {
  const reader = response.body?.getReader();
  if (!reader) return;
  try {
    while (!(await reader.read()).done);
  } catch {
    // the connection ended: the run goes on on the server, and the event stream shows it
  }
}

function renderNote(m, worded) {
  const box = element("div", { class: "text note", "data-kind": worded.kind }, worded.text);
  if (worded.kind === "error" && worded.prompt) {
    const retry = element("button", { type: "button", class: "retry", "data-testid": "retry" }, "Retry");
    retry.addEventListener("click", () => {
      const input = $("input");
      input.value = worded.prompt; // the prompt goes back in the box: Send asks again, or edit it first
      autosize();
      input.focus();
      announce("The message is back in the box: press Enter to send it again.");
    });
    box.append(" ", retry);
  }
  return box;
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

// -- tool cards -----------------------------------------------------------------------------------------

// What a finished call's status shows. Live completions carry the loop's status; a stored result only its
// text, whose wording (agent/history.py) tells a denial or a cancellation from a failure.
const FINISHED = { ok: "done", error: "error", blocked: "blocked", cancelled: "cancelled", interrupted: "interrupted", denied: "denied", unanswered: "unanswered" };
const STORED = [
  ["Tool call denied by the user", "denied"],
  ["Tool call cancelled", "cancelled"],
  ["Tool call interrupted", "interrupted"],
  ["Tool call not answered", "unanswered"],
];

function finishedStatus(call) {
  if (call.status && FINISHED[call.status]) return FINISHED[call.status];
  const text = typeof call.result === "string" ? call.result : "";
  for (const [prefix, status] of STORED) if (text.startsWith(prefix)) return status;
  return call.is_error ? "error" : "done";
}

const LIVE = {
  preparing: "pending",
  executing: "running",
  "awaiting-approval": "awaiting approval",
  "awaiting-output": "awaiting input",
  "awaiting-subagent": "awaiting sub-agent",
};

function seconds(value) {
  return value < 10 ? `${value.toFixed(1)} s` : `${Math.round(value)} s`;
}

function io(label, value, testId) {
  const box = element("div", { class: "io" });
  const body = element("pre", { class: "json", "data-testid": testId, tabindex: "0", "aria-label": label }, json(value));
  box.append(element("div", { class: "io-label" }, label), body);
  return box;
}

// A card: the summary line (tool, title, status, duration, the sub-agent it comes from) and, expanded, its
// input and output. Finished cards start collapsed; a call that waits for a person starts expanded.
function card({ sessionId, toolName, title, status, key }) {
  const box = element("details", { class: "tool-call", "data-testid": "tool-call", "data-tool-name": toolName, "data-status": status, "data-session": sessionId });
  const summary = element("summary", { class: "head" });
  const badge = element("span", { class: "badge", "data-testid": "tool-status" }, status.replace("-", " "));
  const time = element("span", { class: "duration", "data-testid": "tool-duration" });
  const from = element("span", { class: "from", "data-testid": "tool-from" });
  summary.append(element("span", { class: "name" }, toolName));
  if (title) summary.append(element("span", { class: "title", "data-testid": "tool-title" }, title));
  summary.append(badge, time, from);
  if (sessionId !== view.sessionId) from.textContent = `from sub-agent ${agentName(sessionId) || "(unnamed)"}`;
  box.append(summary);
  if (key) {
    box.open = view.openCards.has(key);
    box.addEventListener("toggle", () => (box.open ? view.openCards.add(key) : view.openCards.delete(key)));
  }
  return { box, badge, time, from };
}

function renderToolCall(call, sessionId) {
  const status = finishedStatus(call);
  const key = `${sessionId}\u0000${call.message_id || ""}\u0000${call.tool_call_id}`;
  const { box, time } = card({ sessionId, toolName: call.tool_name, title: call.title, status, key });
  if (typeof call.duration === "number") time.textContent = seconds(call.duration);
  box.append(io("Input", call.args, "tool-args"));
  const result = io(status === "done" ? "Output" : status === "error" ? "Error" : "Result", call.result, "tool-result");
  result.classList.add("result");
  box.append(result);
  return box;
}

const WAITING = {
  "awaiting-approval": "waits for your approval",
  "awaiting-output": "waits for this client",
  "awaiting-subagent": "waits for its sub-agent",
};

// A sub-agent's call says which sub-agent, by name (its session id is in the card's group title).
function fromWhom(n) {
  return n.session_id !== view.sessionId ? ` · sub-agent ${agentName(n.session_id) || "(unnamed)"}` : "";
}

function notificationLabel(n) {
  if (n.status === "preparing") return `preparing ${n.tool_name}`;
  if (WAITING[n.status]) return `${n.tool_name} ${WAITING[n.status]}${fromWhom(n)}`;
  const elapsed = Math.max(0, Math.floor(Date.now() / 1000 - n.started_at));
  let label = `running ${n.tool_name} (${elapsed}s)`;
  if (typeof n.progress === "number") label += ` ${Math.round(n.progress * 100)}%`;
  if (n.progress_message) label += ` — ${n.progress_message}`;
  return label + fromWhom(n);
}

function renderNotifications() {
  const box = $("notifications");
  box.replaceChildren();
  const active = view.transcript ? view.transcript.activeTools : [];
  for (const n of active) {
    const note = element("span", { class: "notification", "data-testid": "notification", "data-tool-name": n.tool_name, "data-status": n.status, "data-session": n.session_id }, notificationLabel(n));
    note.notification = n;
    box.append(note);
  }
  renderLiveCards(active);
}

// The calls not finished yet, each as its card at the end of its session's messages: kept (with what is
// typed in them) while their status changes, removed when they finish (the finished card then shows in
// the bubble that made the call).
function renderLiveCards(active) {
  const seen = new Set();
  for (const n of active) {
    const key = `${n.session_id}\u0000${n.tool_call_id}`;
    seen.add(key);
    let live = view.cards.get(key);
    if (live && live.toolName !== n.tool_name) {
      live.item.remove(); // a reused id: another call
      live = null;
    }
    if (!live) {
      live = liveCard(n);
      view.cards.set(key, live);
      groupFor(n.session_id).append(live.item);
    }
    updateLiveCard(live, n);
  }
  for (const [key, live] of view.cards) {
    if (seen.has(key)) continue;
    live.item.remove();
    view.cards.delete(key);
  }
}

function liveCard(n) {
  const info = view.transcript.callInfo(n.session_id, n.tool_call_id) || {};
  const parts = card({ sessionId: n.session_id, toolName: n.tool_name, title: info.title, status: LIVE[n.status] || n.status, key: null });
  const item = element("li", { class: "entry live-call", "data-role": "tool" });
  item.append(element("span", { class: "sr-only" }, "Tool call: "), parts.box);
  parts.box.open = n.status === "awaiting-approval" || n.status === "awaiting-output";
  parts.box.append(io("Input", info.args ?? {}, "tool-args"));
  return { ...parts, item, toolName: n.tool_name, status: null, form: null, notification: n };
}

function updateLiveCard(live, n) {
  live.notification = n;
  const status = n.status;
  if (live.status !== status) {
    live.status = status;
    live.box.setAttribute("data-status", status === "preparing" ? "pending" : status === "executing" ? "running" : status);
    live.badge.textContent = LIVE[status] || status;
    const args = view.transcript.callInfo(n.session_id, n.tool_call_id)?.args;
    if (args) live.box.querySelector('[data-testid="tool-args"]').textContent = json(args);
    live.form?.remove();
    live.form = null;
    if (status === "awaiting-approval") live.form = approvalControls(n);
    else if (status === "awaiting-output" && !clientTool(n.tool_name)) live.form = clientToolForm(n);
    if (live.form) {
      live.box.open = true;
      live.box.append(live.form);
    }
  }
  live.time.textContent = status === "executing" || status === "preparing" ? elapsed(n) : "";
}

function elapsed(n) {
  return `${Math.max(0, Math.floor(Date.now() / 1000 - n.started_at))} s`;
}

// -- calls waiting for a person -------------------------------------------------------------------------

// Approve runs the call; Deny refuses it, with the reason typed (the model reads it; Enter in it denies).
// The card above shows what would run: the tool, its title, its whole input, the sub-agent asking.
function approvalControls(n) {
  const form = element("form", { class: "approval", "data-testid": "approval", "data-tool-call-id": n.tool_call_id });
  const reason = element("input", { type: "text", "data-testid": "deny-reason", placeholder: "Reason to deny (optional)", "aria-label": `Reason to deny ${n.tool_name}` });
  const approve = element("button", { type: "button", "data-testid": "approve", class: "primary" }, "Approve");
  const deny = element("button", { type: "button", "data-testid": "deny" }, "Deny");
  const decide = (value, said) => {
    approve.disabled = true;
    deny.disabled = true;
    moveFocusFrom(form);
    const body = { approvals: { [n.tool_call_id]: value } };
    const messageId = view.transcript?.callInfo(n.session_id, n.tool_call_id)?.message_id;
    if (messageId) body.message_ids = { [n.tool_call_id]: messageId };
    answer(body, said);
  };
  approve.addEventListener("click", () => decide(true, `Approved ${n.tool_name}.`));
  deny.addEventListener("click", () => {
    const why = reason.value.trim();
    decide(why ? { denied: why } : false, `Denied ${n.tool_name}.`);
  });
  reason.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.isComposing) return;
    e.preventDefault();
    deny.click();
  });
  form.addEventListener("submit", (e) => e.preventDefault());
  form.append(approve, deny, reason);
  return form;
}

// After an answer the answered card goes away: the focus goes to the next call that waits, else the message box.
function moveFocusFrom(form) {
  const next = [...document.querySelectorAll('[data-testid="approval"] [data-testid="approve"], .client-tool-form input, .client-tool-form button')]
    .find((el) => !form.contains(el) && !el.disabled);
  (next || $("input")).focus();
}

// -- client tools -------------------------------------------------------------------------------------

// Client tools (`@tool(external=True)`) this page runs itself, in the browser: their output goes back as the
// call's result. An app adds its own with `toolwire.registerClientTool(name, fn)` (fn gets the call's args
// and may return a promise; a throw answers {failed}); a script that runs before this module may leave them in
// `globalThis.toolwireClientTools` ({name: fn}). Any other client tool gets a form, with Cancel.
const CLIENT_TOOLS = new Map([["browser_time_zone", () => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"]]);
const answered = new Set(); // calls already answered from this page (an answer is sent once)

function clientTool(name) {
  return CLIENT_TOOLS.get(name) || null;
}

function registerClientTool(name, fn) {
  if (typeof name !== "string" || typeof fn !== "function") throw new TypeError("registerClientTool(name, fn)");
  CLIENT_TOOLS.set(name, fn);
  for (const live of view.cards.values()) {
    if (live.toolName === name && live.status === "awaiting-output") live.status = null; // its form goes
  }
  view.notificationsDirty = true;
  schedule();
  runClientTools();
}
globalThis.toolwire = Object.assign(globalThis.toolwire || {}, { registerClientTool });
for (const [name, fn] of Object.entries(globalThis.toolwireClientTools || {})) if (typeof fn === "function") CLIENT_TOOLS.set(name, fn);

function callKeyOf(n) {
  return `${n.session_id}\u0000${n.tool_call_id}`;
}

// One answer for a client tool's call: its output, or {failed: message}; bound to the message that made it.
function answerClientTool(n, output, said) {
  const messageId = view.transcript?.callInfo(n.session_id, n.tool_call_id)?.message_id;
  const body = { tool_outputs: { [n.tool_call_id]: output } };
  if (messageId) body.message_ids = { [n.tool_call_id]: messageId };
  return answer(body, said);
}

async function runClientTools() {
  if (!view.transcript || view.busy) return;
  const outputs = {};
  const messageIds = {};
  for (const n of view.transcript.activeTools) {
    const run = clientTool(n.tool_name);
    const key = callKeyOf(n);
    if (n.status !== "awaiting-output" || !run || answered.has(key)) continue;
    answered.add(key);
    const info = view.transcript.callInfo(n.session_id, n.tool_call_id) || {};
    try {
      outputs[n.tool_call_id] = await run(info.args || {}, { toolName: n.tool_name, toolCallId: n.tool_call_id, sessionId: n.session_id });
    } catch (error) {
      outputs[n.tool_call_id] = { failed: String(error?.message || error) };
    }
    if (outputs[n.tool_call_id] === undefined) outputs[n.tool_call_id] = null;
    if (info.message_id) messageIds[n.tool_call_id] = info.message_id;
  }
  if (!Object.keys(outputs).length) return;
  const body = { tool_outputs: outputs };
  if (Object.keys(messageIds).length) body.message_ids = messageIds;
  answer(body, "");
}

// The generic form of a client tool the page has no handler for: one field per argument the model gave
// (its JSON type picks the input), prefilled with the model's values; Send returns the values as the
// call's output, Cancel answers {failed: "cancelled by the user"}.
function clientToolForm(n) {
  const info = view.transcript.callInfo(n.session_id, n.tool_call_id) || {};
  const args = info.args && typeof info.args === "object" ? info.args : {};
  const form = element("form", { class: "client-tool-form", "data-testid": "client-tool-form", "data-tool-call-id": n.tool_call_id });
  const fields = [];
  for (const [name, value] of Object.entries(args)) {
    const id = `ct-${n.tool_call_id}-${name}`.replace(/[^\w-]/g, "_");
    const label = element("label", { for: id }, name);
    let input;
    if (typeof value === "boolean") {
      input = element("input", { id, type: "checkbox" });
      input.checked = value;
    } else if (typeof value === "number") {
      input = element("input", { id, type: "number", step: "any" });
      input.value = String(value);
    } else if (typeof value === "string") {
      input = element(value.length > 60 ? "textarea" : "input", { id, type: value.length > 60 ? null : "text" });
      input.value = value;
    } else {
      input = element("textarea", { id, class: "json-field" });
      input.value = JSON.stringify(value, null, 2);
    }
    const row = element("div", { class: "field" });
    row.append(label, input);
    form.append(row);
    fields.push([name, value, input]);
  }
  if (!fields.length) {
    const id = `ct-${n.tool_call_id}-answer`.replace(/[^\w-]/g, "_");
    const row = element("div", { class: "field" });
    const input = element("input", { id, type: "text" });
    row.append(element("label", { for: id }, "Answer"), input);
    form.append(row);
    fields.push([null, "", input]);
  }
  const error = element("div", { class: "field-error", role: "alert" });
  const send = element("button", { type: "submit", class: "primary", "data-testid": "client-tool-send" }, "Send");
  const cancel = element("button", { type: "button", "data-testid": "client-tool-cancel" }, "Cancel");
  const buttons = element("div", { class: "buttons" });
  buttons.append(send, cancel);
  form.append(error, buttons);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    let output = {};
    for (const [name, original, input] of fields) {
      let value;
      if (typeof original === "boolean") value = input.checked;
      else if (typeof original === "number") value = input.value === "" ? null : Number(input.value);
      else if (typeof original === "string") value = input.value;
      else {
        try {
          value = JSON.parse(input.value);
        } catch {
          error.textContent = `${name}: not valid JSON`;
          input.focus();
          return;
        }
      }
      if (name === null) output = value;
      else output[name] = value;
    }
    answered.add(callKeyOf(n));
    send.disabled = cancel.disabled = true;
    moveFocusFrom(form);
    answerClientTool(n, output, `Sent ${n.tool_name}.`);
  });
  cancel.addEventListener("click", () => {
    answered.add(callKeyOf(n));
    send.disabled = cancel.disabled = true;
    moveFocusFrom(form);
    answerClientTool(n, { failed: "cancelled by the user" }, `Cancelled ${n.tool_name}.`);
  });
  return form;
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
  for (const live of view.cards.values()) {
    const n = live.notification;
    const label = n.status === "executing" || n.status === "preparing" ? elapsed(n) : "";
    if (live.time.textContent !== label) live.time.textContent = label;
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
  // What the turn showed stays: its partial text and its calls (the cancelled ones complete as
  // `cancelled`, and interaction-end clears what still ran), not the history reloaded without them.
});

// -- renaming and deleting ----------------------------------------------------------------------------

// Rename and Delete are offered until the server shows it has no PATCH / DELETE api/sessions/{id} (404 that
// is not its JSON "no session", or 405) when one is used: no probe at load, whose refusal every browser
// would log as a console error.
function renderManage() {
  $("manage").hidden = view.manage === "no" || !$("rename-form").hidden;
  for (const menu of document.querySelectorAll(".session-menu")) menu.hidden = view.manage === "no";
}

function notSupported(what) {
  view.manage = "no";
  closeMenus();
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
  await (next ? open(next.session_id) : open(newSessionId(), { fresh: true }));
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

document.addEventListener("click", (e) => {
  if (view.openMenu && !e.target.closest?.(".session-menu")) closeMenus(); // a click elsewhere closes the menu
});

document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  const menu = document.activeElement?.closest?.(".session-menu");
  if (menu && !menu.querySelector(".menu-items").hidden) {
    closeMenus();
    return menu.querySelector(".menu-toggle").focus();
  }
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
  open(newSessionId(), { fresh: true });
  $("input").focus();
});

setSidebar(!narrow.matches);
if (!narrow.matches) $("input").focus();

(async () => {
  const wanted = params.get("session");
  if (wanted) return open(wanted);
  const reply = await api("api/sessions");
  if (reply.status === 200 && reply.body.sessions.length) return open(reply.body.sessions[0].session_id);
  return open(newSessionId(), { fresh: true });
})();
