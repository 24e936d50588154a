// Copy, Edit and Regenerate under a bubble; Edit and Regenerate replace turns through the AI SDK endpoint.

import { copyText } from "./markdown.js";
import { app, element, json, notice, token, view } from "./page.js";

// Copy on every answer; Edit on the person's own messages; Regenerate on the conversation's last answer
// (shown while nothing runs: both replace turns, see replaceTurn).
export function bubbleActions(m) {
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
    if (latest) app.fill(bubble, latest);
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
  app.renderActivity();
  app.announce(said);
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
    return app.renderActivity();
  }
  drain(response);
  if (view.sessionId === sessionId) await app.open(sessionId); // the store now holds the kept turns and the new one
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
