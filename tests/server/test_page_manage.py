"""Renaming and deleting a conversation from the page.

The page calls ``PATCH api/sessions/{id}`` with ``{"title": "..."}`` (answer: 200 and the session's JSON,
as a row of ``GET api/sessions``) and ``DELETE api/sessions/{id}`` (answer: 204, or 200), and learns
whether the server has them from one harmless ``PATCH`` with ``{}`` after the first conversation loads
(answer: 400, nothing changed). A server without them (404 that is not its JSON ``not_found``, or 405)
gets no Rename or Delete controls: that test runs today. The other tests drive the real
endpoints.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from playwright.sync_api import Page, expect
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.server.test_page import (
    ARTIFACTS,
    DESKTOP,
    PHONE,
    OpenPage,
    Serve,
    audited,
    connected,
    exchange,
    replying,
    serious_violations,
)

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers


def without_manage(status: int) -> Callable[[ASGIApp], ASGIApp]:
    """An older server: PATCH and DELETE on a session answer ``status`` (404 as Starlette's plain text)."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def older(scope: Scope, receive: Receive, send: Send) -> None:
            path = str(scope.get("path", ""))
            if scope["type"] == "http" and scope["method"] in ("PATCH", "DELETE") and path.count("/") == 3:
                text = "Not Found" if status == 404 else "Method Not Allowed"
                await PlainTextResponse(text, status_code=status)(scope, receive, send)
            else:
                await app(scope, receive, send)

        return older

    return wrap


@pytest.mark.parametrize("status", [404, 405])
def test_no_rename_or_delete_controls_on_a_server_without_them(status: int, page: Page, serve: Serve) -> None:
    """Nothing is probed at load (a refused probe is a console error in every browser): the first use
    finds out, says so, and the controls go."""
    running = serve(replying("Sure."), wrap=without_manage(status))
    connected(page, f"{running.url}/?session=plain")
    exchange(page, "Hello there", "Sure.")
    expect(page.get_by_test_id("conversation-title")).to_have_text("Hello there")
    page.get_by_role("button", name="Rename").click()
    page.get_by_label("Conversation title").fill("Greetings")
    with page.expect_response(lambda response: response.request.method == "PATCH") as refused:
        page.get_by_test_id("rename-save").click()
    assert refused.value.status == status
    expect(page.get_by_test_id("notice")).to_have_text("This server cannot rename conversations.")
    expect(page.get_by_test_id("conversation-title")).to_have_text("Hello there")
    expect(page.get_by_role("button", name="Rename")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    expect(page.get_by_test_id("session-menu")).to_be_hidden()


def test_rename_a_conversation(open_page: OpenPage, serve: Serve) -> None:
    running = serve(replying("Sure."))
    page = audited(open_page(DESKTOP))
    connected(page, f"{running.url}/?session=to-rename")
    exchange(page, "Plan a trip to Lisbon", "Sure.")
    title = page.get_by_role("heading", level=1)
    expect(title).to_have_text("Plan a trip to Lisbon")

    # Escape leaves the title as it was
    page.get_by_role("button", name="Rename").click()
    field = page.get_by_role("textbox", name="Conversation title")
    expect(field).to_be_focused()
    expect(field).to_have_value("Plan a trip to Lisbon")
    assert serious_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-rename.png"), animations="disabled")
    field.fill("Something else")
    field.press("Escape")
    expect(title).to_have_text("Plan a trip to Lisbon")
    expect(page.get_by_role("button", name="Rename")).to_be_focused()

    page.keyboard.press("Enter")  # Rename again, from the keyboard
    field.fill("  Lisbon,   May  ")
    field.press("Enter")
    expect(title).to_have_text("Lisbon, May")
    expect(page.get_by_test_id("session-list").get_by_role("link", name="Lisbon, May")).to_be_visible()
    rows = httpx.get(f"{running.url}/api/sessions").json()["sessions"]
    assert [(r["session_id"], r["title"]) for r in rows] == [("to-rename", "Lisbon, May")]

    # the title is the server's now: it outlives this browser's memory of the first message
    page.evaluate("localStorage.removeItem('toolwire.titles')")
    page.reload()
    expect(title).to_have_text("Lisbon, May")


def test_delete_a_conversation(open_page: OpenPage, serve: Serve) -> None:
    running = serve(replying("Sure."))
    page = audited(open_page(PHONE))
    connected(page, f"{running.url}/?session=keep-me")
    exchange(page, "Keep this one", "Sure.")
    connected(page, f"{running.url}/?session=drop-me")
    exchange(page, "Drop this one", "Sure.")

    # asked first; Keep keeps it
    page.get_by_role("button", name="Delete").click()
    confirm = page.get_by_role("alertdialog")
    expect(confirm).to_contain_text("Delete “Drop this one”? This cannot be undone.")
    expect(confirm.get_by_role("button", name="Keep")).to_be_focused()
    assert serious_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-phone-delete.png"), animations="disabled")
    confirm.get_by_role("button", name="Keep").click()
    expect(confirm).to_be_hidden()
    assert httpx.get(f"{running.url}/api/sessions/drop-me/messages").status_code == 200

    page.get_by_role("button", name="Delete").click()
    confirm.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("notice")).to_have_text("Conversation deleted.")
    expect(page.get_by_test_id("conversation-title")).to_have_text("Keep this one")  # the next one opens
    expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_text("Keep this one")
    page.get_by_role("button", name="Conversations").click()
    links = page.get_by_test_id("session-list").get_by_role("link")
    expect(links).to_have_text(["Keep this one"])
    assert httpx.get(f"{running.url}/api/sessions/drop-me/messages").status_code == 404
    assert [r["session_id"] for r in httpx.get(f"{running.url}/api/sessions").json()["sessions"]] == [
        "keep-me"
    ]
