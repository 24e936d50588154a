"""The page at desktop (1280x800) and phone (390x844) sizes, and mounted under a path prefix.

Screenshots go to artifacts/ (page-desktop.png, page-phone.png, page-phone-conversations.png); the docs'
pictures (docs/images) are made by scripts/screenshots.py, never by a test run.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

from tests.server.test_page import (
    ARTIFACTS,
    DESKTOP,
    PHONE,
    OpenPage,
    Serve,
    assistant,
    connected,
    report_agent,
    send,
)

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers


def _report(page: Page, url: str) -> None:
    connected(page, url)
    send(page, "How did Paris and Oslo do in Q3?")
    expect(assistant(page).last).to_contain_text("Paris leads", timeout=10_000)
    expect(page.get_by_role("button", name="Send")).to_be_visible()


def _no_horizontal_scroll(page: Page, width: int) -> None:
    sizes = page.evaluate(
        """() => { const pane = document.getElementById('transcript-pane');
        return { page: document.documentElement.scrollWidth, pane: pane.scrollWidth, paneClient: pane.clientWidth }; }"""
    )
    assert sizes["page"] <= width, sizes
    assert sizes["pane"] <= sizes["paneClient"], sizes  # no message is wider than the conversation
    for box in page.get_by_test_id("message").all():
        bounds = box.bounding_box()
        assert bounds and bounds["x"] >= 0 and bounds["x"] + bounds["width"] <= width, bounds


def test_desktop_keeps_the_list_beside_the_chat_and_can_hide_it(open_page: OpenPage, serve: Serve) -> None:
    running = serve(report_agent())
    page = open_page(DESKTOP)
    _report(page, f"{running.url}/?session=q3-report")
    sidebar, main = page.get_by_role("complementary", name="Conversations"), page.get_by_role("main")
    expect(sidebar.get_by_role("link", name="How did Paris and Oslo do in Q3?")).to_be_visible()
    side, chat = sidebar.bounding_box(), main.bounding_box()
    assert (
        side and chat and side["x"] == 0 and chat["x"] >= side["width"] and chat["x"] + chat["width"] == 1280
    )
    _no_horizontal_scroll(page, 1280)

    ARTIFACTS.mkdir(exist_ok=True)
    page.mouse.move(0, 0)
    page.screenshot(path=str(ARTIFACTS / "page-desktop.png"), animations="disabled")

    toggle = page.get_by_role("button", name="Conversations")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    toggle.click()
    expect(sidebar).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    chat = main.bounding_box()
    assert chat and chat["x"] == 0 and chat["width"] == 1280
    toggle.click()
    expect(sidebar).to_be_visible()


def test_phone_gives_the_chat_the_whole_width(open_page: OpenPage, serve: Serve) -> None:
    running = serve(report_agent())
    page = open_page(PHONE)
    _report(page, f"{running.url}/?session=q3-report")
    sidebar = page.get_by_role("complementary", name="Conversations")
    expect(sidebar).to_be_hidden()
    chat = page.get_by_role("main").bounding_box()
    assert chat and chat["x"] == 0 and chat["width"] == 390
    box = page.get_by_label("Message", exact=True).bounding_box()
    button = page.get_by_role("button", name="Send").bounding_box()
    assert box and box["width"] >= 250, box
    assert button and button["x"] + button["width"] <= 390 and button["y"] + button["height"] <= 844, button
    _no_horizontal_scroll(page, 390)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-phone.png"), animations="disabled")

    # the conversation list slides over the chat, and goes away once a conversation is chosen
    toggle = page.get_by_role("button", name="Conversations")
    toggle.click()
    expect(sidebar).to_be_visible()
    side = sidebar.bounding_box()
    assert side and side["x"] == 0 and side["width"] <= 340, side
    _no_horizontal_scroll(page, 390)
    page.screenshot(path=str(ARTIFACTS / "page-phone-conversations.png"), animations="disabled")
    sidebar.get_by_role("link", name="How did Paris and Oslo do in Q3?").click()
    expect(sidebar).to_be_hidden()
    expect(assistant(page).last).to_contain_text("Paris leads")
    # ... or when the person taps beside it, or closes it
    toggle.click()
    page.mouse.click(370, 400)
    expect(sidebar).to_be_hidden()
    toggle.click()
    sidebar.get_by_role("button", name="Close conversations").click()
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()


def test_the_page_works_mounted_under_a_path_prefix(page: Page, serve: Serve) -> None:
    def under_chat(app: ASGIApp) -> ASGIApp:
        return Starlette(routes=[Mount("/chat", app=app)])

    running = serve(report_agent(), wrap=under_chat)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    _report(page, f"{running.url}/chat/?session=mounted")
    expect(page.locator('[data-testid="tool-call"][data-tool-name="sales_report"]')).to_have_attribute(
        "data-status", "done"
    )
    expect(page.get_by_test_id("session-list").get_by_role("link")).to_have_text(
        ["How did Paris and Oslo do in Q3?"]
    )
    assert page.url == f"{running.url}/chat/?session=mounted"
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    expect(assistant(page).last).to_contain_text("Paris leads")
    outside = [url for url in requested if not url.startswith(f"{running.url}/chat/")]
    assert outside == [], outside
    assert any("/chat/api/sessions/mounted/events" in url for url in requested)
