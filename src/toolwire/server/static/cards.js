// Tool cards: finished calls inside the bubble that made them, unfinished ones (pending, running, waiting for
// a person) at the end of their session's messages, with an approval, a client tool's form or a tool's
// question (questions.js) inside; the running-tools bar; client tools the browser runs; answers to waiting
// calls; sub-agents' names.

import { $, api, app, element, errorText, json, notice, sessionPath, view } from "./page.js";
import { addField, readFields } from "./forms.js";
import { focusFirstField, questionForm } from "./questions.js";

const TICK_MS = 250; // elapsed seconds are recomputed often enough that each value is visible for most of a second

// A sub-agent is shown by its name (its runs' interaction-start carry it), else as "sub-agent".
function agentName(sessionId) {
  return view.agents.get(sessionId) || null;
}

export function renderGroupName(summary, sessionId) {
  const name = agentName(sessionId);
  summary.replaceChildren("sub-agent ", element("strong", { class: "agent-name" }, name || "(unnamed)"));
}

// After a reload no interaction-start names the sub-agents: each is named after the caller's call that
// started it, the one of the caller's latest message whose string argument is the sub-agent's task (its
// first user message: `as_tool` passes `task`), or the only call of that message.
export function nameSubAgentsFromHistory(messages, parents, agents = {}) {
  // The sub-agents' own names, as stored (`agents` of GET .../messages); guessed from the calls otherwise.
  for (const [sessionId, name] of Object.entries(agents)) if (name) view.agents.set(sessionId, name);
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

export function nameSubAgent(sessionId, name) {
  if (!name || view.agents.get(sessionId) === name) return;
  view.agents.set(sessionId, name);
  const group = document.querySelector(`details.subsession[data-session="${CSS.escape(sessionId)}"] > summary`);
  if (group) renderGroupName(group, sessionId);
  for (const [k, card] of view.cards) if (k.startsWith(`${sessionId}\u0000`)) card.from.textContent = `from sub-agent ${name}`;
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
  "awaiting-input": "awaiting your answer",
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

export function renderToolCall(call, sessionId) {
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
  "awaiting-input": "asks you a question",
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

export function renderNotifications() {
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
      app.groupFor(n.session_id).append(live.item);
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
  parts.box.open = n.status === "awaiting-approval" || n.status === "awaiting-output" || n.status === "awaiting-input";
  parts.box.append(io("Input", info.args ?? {}, "tool-args"));
  return { ...parts, item, toolName: n.tool_name, status: null, question: null, form: null, notification: n };
}

function updateLiveCard(live, n) {
  live.notification = n;
  const status = n.status;
  // A tool may ask again while it waits (another question, or the same one announced again by the next
  // run): only a different question rebuilds the form, so what is typed in it stays.
  const question = status === "awaiting-input" ? JSON.stringify(view.questions.get(callKeyOf(n)) ?? null) : null;
  if (live.status !== status || live.question !== question) {
    live.status = status;
    live.question = question;
    live.box.setAttribute("data-status", status === "preparing" ? "pending" : status === "executing" ? "running" : status);
    live.badge.textContent = LIVE[status] || status;
    const args = view.transcript.callInfo(n.session_id, n.tool_call_id)?.args;
    if (args) live.box.querySelector('[data-testid="tool-args"]').textContent = json(args);
    live.form?.remove();
    live.form = null;
    if (status === "awaiting-approval") live.form = approvalControls(n);
    else if (status === "awaiting-output" && !clientTool(n.tool_name)) live.form = clientToolForm(n);
    else if (status === "awaiting-input") live.form = questionControls(n);
    if (live.form) {
      live.box.open = true;
      live.box.append(live.form);
      if (status === "awaiting-input") focusFirstField(live.form);
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

// A tool's question: its form (questions.js) answers it as the call's output, bound to the message that made
// the call; the server's refusal of an answer stays in the form rather than in the page's notice.
function questionControls(n) {
  const question = view.questions.get(callKeyOf(n)) || { message: "", mode: "form", requested_schema: {}, server: "" };
  const respond = (output, said) => answerClientTool(n, output, said, { quiet: true });
  return questionForm(n, question, { respond, leave: moveFocusFrom });
}

// After an answer the answered card goes away: the focus goes to the next call that waits, else the message box.
function moveFocusFrom(form) {
  const next = [...document.querySelectorAll('[data-testid="approval"] [data-testid="approve"], .client-tool-form input, .client-tool-form select, .client-tool-form button')]
    .find((el) => !form.contains(el) && !el.disabled);
  (next || $("input")).focus();
}

// -- client tools -------------------------------------------------------------------------------------
// Client tools (`@tool(external=True)`) this page runs itself, in the browser: their output goes back as the
// call's result. An app adds its own with `toolwire.registerClientTool(name, fn)` (fn gets the call's args
// and may return a promise; a throw answers {failed}); a script that runs before this module may leave them in
// `globalThis.toolwireClientTools` ({name: fn}). Any other client tool gets a form, with Cancel.
const CLIENT_TOOLS = new Map([["browser_time_zone", () => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"]]);

export const answered = new Set(); // calls already answered from this page (an answer is sent once)

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
  app.schedule();
  runClientTools();
}

globalThis.toolwire = Object.assign(globalThis.toolwire || {}, { registerClientTool });

for (const [name, fn] of Object.entries(globalThis.toolwireClientTools || {})) if (typeof fn === "function") CLIENT_TOOLS.set(name, fn);

function callKeyOf(n) {
  return `${n.session_id}\u0000${n.tool_call_id}`;
}

// One answer for a client tool's call: its output, or {failed: message}; bound to the message that made it.
function answerClientTool(n, output, said, options = {}) {
  const messageId = view.transcript?.callInfo(n.session_id, n.tool_call_id)?.message_id;
  const body = { tool_outputs: { [n.tool_call_id]: output } };
  if (messageId) body.message_ids = { [n.tool_call_id]: messageId };
  return answer(body, said, options);
}

export async function runClientTools() {
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

// The generic form of a client tool the page has no handler for. With the tool's parameters schema (on its
// tool-call-awaiting event and in the history's awaiting entries): one field per property, its JSON type
// picking the input (an enum a select), required ones marked, prefilled with the model's values. Without
// one: a field per argument the model gave, typed by its value. Send returns the values as the call's
// output, Cancel answers {failed: "cancelled by the user"}.
function clientToolForm(n) {
  const info = view.transcript.callInfo(n.session_id, n.tool_call_id) || {};
  const args = info.args && typeof info.args === "object" ? info.args : {};
  const schema = view.schemas.get(callKeyOf(n));
  const properties = schema && schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const wanted = properties
    ? Object.entries(properties).map(([name, prop]) => [name, prop || {}, name in args ? args[name] : prop?.default])
    : Object.entries(args).map(([name, value]) => [name, null, value]);
  const form = element("form", { class: "client-tool-form", "data-testid": "client-tool-form", "data-tool-call-id": n.tool_call_id });
  const fields = [];
  for (const [name, prop, value] of wanted) {
    const id = `ct-${n.tool_call_id}-${name}`.replace(/[^\w-]/g, "_");
    fields.push(addField(form, id, name, prop, value, { required: required.has(name), needed: !properties || required.has(name) }));
  }
  if (!fields.length) fields.push(addField(form, `ct-${n.tool_call_id}-answer`.replace(/[^\w-]/g, "_"), null, null, "", { needed: true }));
  const error = element("div", { class: "field-error", role: "alert" });
  const send = element("button", { type: "submit", class: "primary", "data-testid": "client-tool-send" }, "Send");
  const cancel = element("button", { type: "button", "data-testid": "client-tool-cancel" }, "Cancel");
  const buttons = element("div", { class: "buttons" });
  buttons.append(send, cancel);
  form.append(error, buttons);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const read = readFields(fields, error);
    if (!read) return;
    answered.add(callKeyOf(n));
    send.disabled = cancel.disabled = true;
    moveFocusFrom(form);
    answerClientTool(n, read.value, `Sent ${n.tool_name}.`);
  });
  cancel.addEventListener("click", () => {
    answered.add(callKeyOf(n));
    send.disabled = cancel.disabled = true;
    moveFocusFrom(form);
    answerClientTool(n, { failed: "cancelled by the user" }, `Cancelled ${n.tool_name}.`);
  });
  return form;
}

/** POST an answer to the waiting calls; resolves to the server's reply (null when not sent: a turn runs).
 * A refusal shows in the page's notice unless `quiet` (the caller shows it where the answer was given). */
export async function answer(body, said, { quiet = false } = {}) {
  const sessionId = view.sessionId;
  if (!sessionId || view.busy) return null;
  view.busy = true;
  view.awaiting = true;
  app.renderActivity();
  if (said) app.announce(said);
  const sent = await api(sessionPath(sessionId, "/messages"), { method: "POST", body: JSON.stringify(body) });
  if (view.sessionId !== sessionId || sent.status === 202) return sent;
  view.busy = false;
  view.awaiting = false;
  app.renderActivity();
  if (!quiet) notice(`Not sent: ${errorText(sent)}`);
  return sent;
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
