// The chat page: history first (Transcript.fromHistory), then the native event stream from the history's
// cursor. The DOM is built once from the history; after that each transcript change re-renders only the
// bubble (or the notification bar) it names, batched per animation frame.
//
// Every URL is relative, so the app works mounted under a path prefix (/chat/). The page's CSP allows only
// its own scripts and styles: no inline script or style, no eval. Assistant text is markdown (vendor/marked),
// sanitised by vendor/purify.min.js (DOMPurify, loaded as a classic script before this module).

import { Transcript } from "./transcript.js";
import { answer, nameSubAgent, nameSubAgentsFromHistory, renderGroupName, renderNotifications, renderToolCall, runClientTools } from "./cards.js";
import { $, api, app, element, errorText, narrow, newSessionId, notice, params, safeUrl, sessionPath, status, token, unsupported, view } from "./page.js";
import { bubbleActions } from "./edits.js";
import { closeMenus, forgetTitle, refreshSessions, rememberTitle, renderTitle, titleOf } from "./sessions.js";
import { renderMarkdown } from "./markdown.js";

// The functions the other modules call back: lent through page.js's `app` (they never import this module).
Object.assign(app, { announce, fill, groupFor, open, renderActivity, schedule, setSidebar });

const MAX_RECONNECTS = 30;

export function announce(text) {
  if (!text) return;
  view.spoken.push(text);
  schedule();
}

// -- loading a conversation -------------------------------------------------------------------------
export async function open(sessionId, { fresh = false } = {}) {
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
    loaded = { status: 200, body: { messages: [], parents: {}, last_seq: {}, cursor: created.body.cursor, errors: [], agents: {} } };
  }
  if (loaded.status !== 200) {
    clearTranscript();
    return status(`cannot load ${sessionId}: ${errorText(loaded)}`);
  }
  const { messages, parents, last_seq: lastSeq, cursor, running, awaiting, errors, agents } = loaded.body;
  // A paused run's calls wait for a person: shown (with Approve / Deny) as the live events showed them.
  // No run in progress (none, or a paused one): the last interaction-end was published (rule 4's flush).
  const ended = !running;
  for (const a of awaiting || []) {
    if (a.parameters) view.schemas.set(`${a.session_id}\u0000${a.tool_call_id}`, a.parameters);
    if (a.question) view.questions.set(`${a.session_id}\u0000${a.tool_call_id}`, a.question);
  }
  const transcript = Transcript.fromHistory(messages, { parents, lastSeq, awaiting: awaiting || [], ended });
  view.transcript = transcript;
  nameSubAgentsFromHistory(messages, parents || {}, agents || {});
  const first = messages.find((m) => m.role === "user" && m.session_id === sessionId);
  if (first) rememberTitle(sessionId, (first.parts || []).filter((p) => p.type === "text").map((p) => p.text).join(" "));
  view.busy = !!running;
  view.awaiting = !!running;
  notice("");
  rebuild();
  drawStoredErrors(errors || [], messages);
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
    if (event.type === "tool-call-awaiting" && event.parameters) view.schemas.set(`${event.session_id}\u0000${event.tool_call_id}`, event.parameters);
    if (event.type === "tool-call-awaiting" && event.question) view.questions.set(`${event.session_id}\u0000${event.tool_call_id}`, event.question);
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
        const asked = view.transcript.activeTools.some((n) => n.status === "awaiting-input");
        announce(asked ? "Waiting for you: answer the tool's question below." : "Waiting for you: approve or deny the tool call below.");
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

// The run's provider as configured (`ollama:llama3`, not the wire's `openai`) when the error names it.
function failedText(error, fallbackModel = "") {
  const named = error.model ? `${error.provider ? `${error.provider}:` : ""}${error.model}` : fallbackModel;
  return `The answer failed${named ? ` (model ${named})` : ""}: ${error.message || error.error_type}`;
}

function describeError(event) {
  const [index, note] = latestNote(event.session_id);
  if (!note) return;
  view.noteText.set(note.id, { text: failedText(event, view.model), kind: "error", prompt: lastPrompt(), retryable: !!event.retryable });
  view.updated.add(index);
}

// A turn's error is stored with it (`errors` of GET .../messages): after a reload it is drawn as the live note
// was (with Retry, which puts that turn's prompt back), after the turn's messages and before the next prompt.
function drawStoredErrors(errors, messages) {
  const created = new Map(messages.map((m) => [`${m.session_id}\u0000${m.id}`, m.created_at]));
  const prompts = [];
  view.transcript.messages.forEach((m, index) => {
    const at = created.get(`${m.session_id}\u0000${m.source_id}`);
    if (m.role === "user" && m.session_id === view.sessionId && at !== undefined) prompts.push({ m, index, at });
  });
  for (const error of errors) {
    if (error.session_id !== view.sessionId) continue;
    const asked = prompts.filter((p) => p.at <= error.created_at).pop();
    const next = prompts.find((p) => p.at > error.created_at);
    const bubble = element("div", { class: "message", "data-testid": "message", "data-role": "system", "data-level": "error", "data-session": view.sessionId });
    bubble.append(renderNote(null, { text: failedText(error), kind: "error", prompt: asked ? asked.m.text : "", retryable: !!error.retryable }));
    const item = element("li", { class: "entry", "data-role": "system", "data-testid": "stored-error" });
    item.append(element("span", { class: "sr-only" }, "Error: "), bubble);
    const anchor = next ? view.bubbles.get(next.index)?.parentElement : null;
    if (anchor) anchor.before(item);
    else $("transcript").append(item);
  }
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

export function schedule() {
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
export function renderActivity() {
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
export function groupFor(sessionId) {
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

export function fill(bubble, m) {
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
export function setSidebar(open) {
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
