// A tool's question (an MCP server's elicitation), on the card of the call that waits for it: who asks and
// what, then the form built from the question's schema (Send / Decline / Cancel), or in url mode the page to
// visit (Done / Decline). The answer goes back as the call's tool output; the server checks it against the
// form, and its refusal (409, naming the field) is shown in the form, which stays with what was typed.

import { element, errorText } from "./page.js";
import { addField, readFields } from "./forms.js";

let forms = 0; // numbers each question form's ids: a call id alone may repeat (a sub-agent's, a provider's call_0)

// Only a web page is a link: a `javascript:` or `data:` URL from a server is shown as text, never opened.
function webUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

// A form whose own fields are only `action` (and `content`) would read as an action: it is sent spelled out.
function accepted(content) {
  const keys = Object.keys(content);
  return keys.includes("action") && keys.every((k) => k === "action" || k === "content") ? { action: "accept", content } : content;
}

function linkTo(url) {
  const href = webUrl(url);
  const box = element("p", { class: "question-link" });
  if (href) box.append(element("a", { href, target: "_blank", rel: "noopener noreferrer", "data-testid": "question-link" }, url));
  else box.append(element("span", { "data-testid": "question-link" }, url || "(no link given)"));
  return box;
}

/** The form answering `question` for the waiting call `n`. `respond(output, said)` sends the call's output and
 * resolves to the server's reply (null when nothing was sent); `leave(form)` moves the focus on once the
 * answer is taken. */
export function questionForm(n, question, { respond, leave }) {
  const base = `q${++forms}`;
  // Who asks: `mcp:NAME` is the MCP server NAME (the one the tool comes from); without one, the tool.
  const server = typeof question.server === "string" ? question.server : "";
  const asker = server.startsWith("mcp:") ? `MCP server ${server.slice(4)}` : server || n.tool_name;
  const form = element("form", {
    class: "client-tool-form question-form",
    "data-testid": "question-form",
    "data-tool-call-id": n.tool_call_id,
    "data-mode": question.mode === "url" ? "url" : "form",
    "aria-labelledby": `${base}-text`,
    "aria-describedby": `${base}-from`,
    // The server checks the answer against the form and names what is wrong: one judge, whose words land
    // in the error line below (read out by its role=alert), not the browser's bubbles.
    novalidate: "",
  });
  form.append(
    element("p", { id: `${base}-from`, class: "question-from", "data-testid": "question-from" }, `${asker} asks:`),
    element("p", { id: `${base}-text`, class: "question-text", "data-testid": "question-text" }, question.message || "(no question given)"),
  );
  const fields = [];
  if (question.mode === "url") form.append(linkTo(question.url));
  else {
    const schema = question.requested_schema && typeof question.requested_schema === "object" ? question.requested_schema : {};
    const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    for (const [name, prop] of Object.entries(properties)) {
      fields.push(addField(form, `${base}-${name}`.replace(/[^\w-]/g, "_"), name, prop || {}, prop?.default, { required: required.has(name) }));
    }
  }
  const error = element("div", { class: "field-error", role: "alert", "data-testid": "question-error" });
  const buttons = element("div", { class: "buttons" });
  const button = (label, type, testId) => element("button", { type, class: type === "submit" ? "primary" : null, "data-testid": testId }, label);
  const accept = button(question.mode === "url" ? "Done" : "Send", "submit", "question-send");
  const decline = button("Decline", "button", "question-decline");
  buttons.append(accept, decline);
  if (question.mode !== "url") buttons.append(button("Cancel", "button", "question-cancel"));
  form.append(error, buttons);

  let sending = false; // a double click sends once: the buttons are disabled before the first answer goes
  const reply = async (output, said) => {
    if (sending) return;
    sending = true;
    error.textContent = "";
    for (const b of buttons.children) b.disabled = true; // the focus, if on one, falls to the page's body
    const sent = await respond(output, said);
    const lost = document.activeElement === document.body || form.contains(document.activeElement);
    if (sent?.status === 202) {
      if (lost) leave(form);
      return; // the card goes once the call resumes
    }
    sending = false;
    for (const b of buttons.children) b.disabled = false;
    error.textContent = sent ? errorText(sent) : "Not sent: the conversation is busy.";
    if (lost) (fields[0]?.[2] || accept).focus();
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (question.mode === "url") return void reply({ action: "accept" }, `Told ${asker} it is done.`);
    const read = readFields(fields, error);
    if (read) reply(accepted(read.value), `Answered ${asker}.`);
  });
  decline.addEventListener("click", () => reply({ action: "decline" }, `Declined ${asker}'s question.`));
  buttons.querySelector('[data-testid="question-cancel"]')?.addEventListener("click", () => reply({ action: "cancel" }, `Cancelled ${asker}'s question.`));
  return form;
}

/** The form's first field (its Done button in url mode), focused when the form appears unless the person is
 * typing elsewhere: in a field with something in it, or in another form's field. An empty message box is not
 * typing (the question usually follows the message just sent from it). */
export function focusFirstField(form) {
  const active = document.activeElement;
  const editing = active && active !== document.body && active.matches("input, textarea, select, [contenteditable]");
  if (editing && (active.value || active.id !== "input")) return;
  form.querySelector("input, textarea, select, button")?.focus();
}
