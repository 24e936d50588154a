// The conversation list: titles (the server's, else the first message sent from this browser), pages of
// conversations, and each one's menu.

import { $, api, app, element, errorText, narrow, status, view } from "./page.js";

const TITLES_KEY = "toolwire.titles"; // session id -> title from its first message, for servers that store none

const MAX_TITLES = 500;

const TITLE_LENGTH = 60;

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

export function rememberTitle(sessionId, text) {
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

export function forgetTitle(sessionId) {
  const titles = localTitles();
  delete titles[sessionId];
  storeTitles(titles);
}

// The server's title (set by PATCH) first, then the first message sent from this browser.
export function titleOf(sessionId) {
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
    if (narrow.matches) app.setSidebar(false);
    if (view.sessionId !== sessionId) await app.open(sessionId);
    $(button).click();
  };
  rename.addEventListener("click", () => act("rename"));
  remove.addEventListener("click", () => act("delete"));
  return box;
}

export function closeMenus() {
  view.openMenu = null;
  for (const items of document.querySelectorAll(".menu-items")) items.hidden = true;
  for (const toggle of document.querySelectorAll(".menu-toggle")) toggle.setAttribute("aria-expanded", "false");
}

export function renderTitle() {
  const title = (view.sessionId && titleOf(view.sessionId)) || "New chat";
  $("title").textContent = title;
  document.title = `${title} · toolwire`;
}

export async function refreshSessions() {
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
      if (narrow.matches) app.setSidebar(false);
      app.open(id);
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
