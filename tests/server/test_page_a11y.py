"""The page with a keyboard and a screen reader: an axe-core audit (npm, tests/server/node) of each state,
the roles and labels a screen reader reads, what its live region says during a turn, and keyboard-only use."""

from __future__ import annotations

import threading

from playwright.sync_api import expect

from tests.server.test_page import (
    DESKTOP,
    PHONE,
    OpenPage,
    Serve,
    assistant,
    audited,
    connected,
    listen_to_live_region,
    live_region_said,
    replying,
    report_agent,
    send,
    serious_violations,
)

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers


def test_axe_finds_nothing_serious_on_desktop_or_phone(open_page: OpenPage, serve: Serve) -> None:
    running = serve(report_agent())
    desktop = audited(open_page(DESKTOP))
    connected(desktop, f"{running.url}/?session=audit")
    assert serious_violations(desktop) == []  # empty conversation
    send(desktop, "How did Paris and Oslo do in Q3?")
    expect(assistant(desktop).last).to_contain_text("Paris leads", timeout=10_000)
    assert serious_violations(desktop) == []  # markdown, a table, code, a tool call

    phone = audited(open_page(PHONE))
    connected(phone, f"{running.url}/?session=audit")
    expect(assistant(phone).last).to_contain_text("Paris leads")
    assert serious_violations(phone) == []
    phone.get_by_role("button", name="Conversations").click()
    expect(phone.get_by_role("complementary", name="Conversations")).to_be_visible()
    assert serious_violations(phone) == []  # the list over the chat


def test_a_turn_is_read_out_and_in_progress_controls_pass_the_audit(
    open_page: OpenPage, serve: Serve
) -> None:
    gate = threading.Event()
    running = serve(
        replying("The answer is **42**.", gate=gate),
    )
    page = audited(open_page(DESKTOP))
    listen_to_live_region(page)
    connected(page, f"{running.url}/?session=spoken")

    # what a screen reader finds: a labelled message box and buttons, messages as a list with speakers
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_focused()  # ready to type on arrival
    send(page, "What is the answer?")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.get_by_test_id("thinking")).to_be_visible()
    assert serious_violations(page) == []  # Thinking… and Stop
    gate.set()
    messages = page.get_by_role("region", name="Messages").get_by_role("list").get_by_role("listitem")
    expect(messages).to_contain_text(["You: What is the answer?", "Assistant: The answer is 42."])
    # each message's own buttons follow it, named for what they do
    expect(messages.nth(0).get_by_role("button", name="Edit message")).to_be_visible()
    expect(messages.nth(1).get_by_role("button", name="Copy answer")).to_be_visible()
    expect(messages.nth(1).get_by_role("button", name="Regenerate")).to_be_visible()
    said = live_region_said(page)
    assert said[0] == "Thinking…" and said[-1] == "The answer is 42.", said


def test_tools_are_read_out_as_they_start_and_finish(open_page: OpenPage, serve: Serve) -> None:
    running = serve(report_agent())
    page = open_page(DESKTOP)
    listen_to_live_region(page)
    connected(page, f"{running.url}/?session=tools-spoken")
    send(page, "How did Paris and Oslo do in Q3?")
    expect(assistant(page).last).to_contain_text("Paris leads")
    said = " ".join(live_region_said(page))  # what comes in one frame is said at once
    expected = [
        "Thinking…",
        "Let me pull the Q3 numbers.",
        "Running sales_report.",
        "sales_report finished.",
        "Here is Q3 by city: city orders revenue Paris 1,204 €96,320",
    ]
    positions = [said.find(text) for text in expected]
    assert -1 not in positions and positions == sorted(positions), said
    assert said.endswith("orders-by-city-2025-q3-final-v2.csv."), said


def test_everything_works_from_the_keyboard(open_page: OpenPage, serve: Serve) -> None:
    running = serve(replying("Noted."))
    page = open_page(DESKTOP)
    connected(page, f"{running.url}/?session=keys-1")
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_be_focused()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")  # a new line, not a send
    page.keyboard.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    page.keyboard.press("Enter")
    expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_text("first line\nsecond line")
    expect(assistant(page)).to_have_text("Noted.")

    # Tab reaches the list, New chat and the conversation links; Enter uses them
    def tab_to(name: str) -> None:
        for _ in range(20):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent.trim()") == name:
                return
        raise AssertionError(f"Tab never reached {name!r}")

    tab_to("New chat")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("message")).to_have_count(0)
    expect(page.get_by_test_id("status")).to_have_text("connected")
    expect(box).to_be_focused()
    page.keyboard.type("second chat")
    page.keyboard.press("Enter")
    expect(assistant(page)).to_have_text("Noted.")
    tab_to("first line second line")
    page.keyboard.press("Enter")
    expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_text("first line\nsecond line")

    # the skip link comes before the list and lands in the message box
    tab_to("New chat")
    page.keyboard.press("Shift+Tab")
    skip = page.get_by_role("link", name="Skip to the message box")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(box).to_be_focused()


def test_the_phone_list_opens_and_closes_from_the_keyboard(open_page: OpenPage, serve: Serve) -> None:
    running = serve(replying("Noted."))
    page = open_page(PHONE)
    connected(page, f"{running.url}/?session=keys-phone")
    toggle = page.get_by_role("button", name="Conversations")
    toggle.focus()
    page.keyboard.press("Enter")
    sidebar = page.get_by_role("complementary", name="Conversations")
    expect(sidebar).to_be_visible()
    expect(page.get_by_role("button", name="New chat", exact=True)).to_be_focused()
    for _ in range(6):  # focus stays in the open list (3 stops): the chat behind it is inert
        page.keyboard.press("Tab")
        assert page.evaluate("!!document.activeElement.closest('#sidebar')"), "focus left the open list"
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()
