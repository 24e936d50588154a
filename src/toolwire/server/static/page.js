// The page's shared pieces: the token, the view state every module reads and changes, the server's API and
// small DOM helpers. Imports nothing of the page (every other module may import it).

export const params = new URLSearchParams(location.search);
export const token = params.get("token") || localStorage.getItem("toolwire.token") || "";
if (params.get("token")) localStorage.setItem("toolwire.token", token);

export const $ = (id) => document.getElementById(id);

export const narrow = matchMedia("(max-width: 720px)");

export const view = {
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
  schemas: new Map(), // session id + call id -> a waiting client tool's parameters schema (its form is built from it)
  questions: new Map(), // session id + call id -> what a waiting tool asks ({message, mode, requested_schema, url, server})
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
export const escapeHtml = (text) =>
  String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// -- the server ---------------------------------------------------------------------------------------
export async function api(path, options = {}) {
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

export const sessionPath = (sessionId, rest = "") => `api/sessions/${encodeURIComponent(sessionId)}${rest}`;

// A server without PATCH/DELETE api/sessions/{id} answers 405, or a 404 that is not its JSON "no session".
export const unsupported = (reply) => reply.status === 405 || reply.status === 501 || (reply.status === 404 && reply.body?.error?.type !== "not_found");

export function status(text) {
  $("status").textContent = text;
}

export function notice(text) {
  $("notice").textContent = text;
}

export function errorText(reply) {
  return reply.body?.error?.message || `HTTP ${reply.status}`;
}

// crypto.randomUUID exists only in secure contexts (https, localhost); a LAN http address has just getRandomValues.
export function newSessionId() {
  if (crypto.randomUUID) return `web-${crypto.randomUUID()}`;
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `web-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export function element(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) if (value !== null && value !== undefined) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

export function json(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

export function safeUrl(url) {
  return /^(https?:|data:|blob:|\/)/i.test(url || "") ? url : null; // never javascript: from model output
}

/** What the entry module (app.js) lends the page's other modules (announce, open, renderActivity, ...):
 * filled once when it loads, so they need not import it back (no module imports its importer). */
export const app = {};
