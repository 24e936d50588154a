"""What people expect of a chat page (issue 31 item 7), in a real Chromium against a real server: copy
buttons and highlighted code, regenerate and edit-and-resend (the server's AI SDK endpoint cuts the turns
they replace), dark mode that passes the audit, a menu per conversation, wide tables that scroll sideways on
a phone, an empty answer shown as such, and no console error on load."""

from __future__ import annotations

from collections.abc import Sequence

from playwright.sync_api import ConsoleMessage, Page, expect

from tests.server.test_page import (
    ARTIFACTS,
    DESKTOP,
    PHONE,
    REPORT_ANSWER,
    OpenPage,
    Serve,
    assistant,
    audited,
    connected,
    exchange,
    replying,
    report_agent,
    send,
    serious_violations,
)
from toolwire import Agent, TextPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers

SQL = (
    "SELECT city, count(*) AS orders, sum(total) AS revenue FROM orders WHERE quarter = 'Q3' "
    "GROUP BY city ORDER BY revenue DESC;"
)


def _counting_agent() -> Agent:
    """Answers "answer N to <the last user text>"; an empty prompt ("nothing") gets an empty answer."""
    count = 0

    def respond(request: ModelRequest) -> Sequence[Part]:
        nonlocal count
        count += 1
        last_user = next(m.text for m in reversed(request.messages) if m.role == "user")
        return [] if last_user == "nothing" else [TextPart(text=f"answer {count} to {last_user}")]

    return Agent(ScriptedModel(respond))


def _shown(page: Page) -> list[str]:
    bubbles = page.locator('[data-testid="message"]')
    return [f"{b.get_attribute('data-role')}: {b.inner_text()}" for b in bubbles.all()]


def test_copy_buttons_copy_the_answer_and_its_code_which_is_highlighted(page: Page, serve: Serve) -> None:
    running = serve(report_agent())
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    connected(page, f"{running.url}/?session=copy")
    send(page, "How did Paris and Oslo do in Q3?")
    answer = assistant(page).last
    expect(answer).to_contain_text("Paris leads", timeout=10_000)

    code = answer.locator("pre code")
    expect(code).to_have_text(SQL)  # colouring keeps the text as it was
    expect(code.locator(".tok-kw").first).to_have_text("SELECT")
    expect(code.locator(".tok-str")).to_have_text(["'Q3'"])
    answer.get_by_role("button", name="Copy code").click()
    assert page.evaluate("navigator.clipboard.readText()") == SQL
    expect(answer.get_by_role("button", name="Copy code")).to_have_text("Copied")

    page.get_by_role("button", name="Copy answer").last.click()
    assert page.evaluate("navigator.clipboard.readText()") == REPORT_ANSWER


def test_regenerate_and_edit_and_resend_replace_the_turns_they_follow(page: Page, serve: Serve) -> None:
    running = serve(_counting_agent())
    url = f"{running.url}/?session=redo"
    connected(page, url)
    exchange(page, "first", "answer 1 to first")
    exchange(page, "second", "answer 2 to second")
    # Regenerate is offered on the last answer only
    expect(page.get_by_role("button", name="Regenerate")).to_have_count(1)

    page.get_by_role("button", name="Regenerate").click()
    expect(assistant(page).last).to_have_text("answer 3 to second", timeout=10_000)
    expected = [
        "user: first",
        "assistant: answer 1 to first",
        "user: second",
        "assistant: answer 3 to second",
    ]
    expect(page.locator('[data-testid="message"]')).to_have_count(4)
    assert _shown(page) == expected
    connected(page, url)  # the store dropped the replaced answer: a reload shows the same
    expect(page.locator('[data-testid="message"]')).to_have_count(4)
    assert _shown(page) == expected

    page.get_by_role("button", name="Edit message").first.click()
    box = page.get_by_label("Edit your message")
    expect(box).to_be_focused()
    box.fill("FIRST, edited")
    box.press("Enter")
    expect(assistant(page).last).to_have_text("answer 4 to FIRST, edited", timeout=10_000)
    expect(page.locator('[data-testid="message"]')).to_have_count(2)
    connected(page, url)
    expect(page.locator('[data-testid="message"]')).to_have_count(2)
    assert _shown(page) == ["user: FIRST, edited", "assistant: answer 4 to FIRST, edited"]


def test_an_empty_answer_is_shown_as_such(page: Page, serve: Serve) -> None:
    running = serve(_counting_agent())
    connected(page, f"{running.url}/?session=empty")
    send(page, "nothing")
    expect(page.get_by_test_id("marker-empty-answer")).to_have_text(
        "The model returned an empty answer.", timeout=10_000
    )


def test_dark_mode_keeps_the_audit_clean(open_page: OpenPage, serve: Serve) -> None:
    running = serve(report_agent())
    page = audited(open_page(DESKTOP))
    page.emulate_media(color_scheme="dark")
    connected(page, f"{running.url}/?session=dark")
    send(page, "How did Paris and Oslo do in Q3?")
    expect(assistant(page).last).to_contain_text("Paris leads", timeout=10_000)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(17, 24, 39)", background
    page.locator('[data-testid="tool-call"]').first.locator("summary").click()  # an open card too
    assert serious_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-dark.png"))


def test_a_wide_table_scrolls_sideways_on_a_phone(open_page: OpenPage, serve: Serve) -> None:
    head = "| " + " | ".join(f"column {n}" for n in range(12)) + " |"
    rule = "|" + " --- |" * 12
    row = "| " + " | ".join(f"{n * 1000:,} EUR" for n in range(12)) + " |"
    running = serve(replying(f"The numbers:\n\n{head}\n{rule}\n{row}\n"))
    page = audited(open_page(PHONE))
    connected(page, f"{running.url}/?session=wide")
    send(page, "All the numbers")
    table = assistant(page).last.locator("table")
    expect(table).to_be_visible(timeout=10_000)
    table_width, visible_width, page_width = table.evaluate(
        "t => [t.scrollWidth, t.clientWidth, document.documentElement.scrollWidth]"
    )
    assert table_width > visible_width, (table_width, visible_width)  # it scrolls inside the bubble ...
    assert page_width <= PHONE["width"], page_width  # ... never the page
    table.evaluate("t => { t.scrollLeft = t.scrollWidth; }")
    assert table.evaluate("t => t.scrollLeft") > 0
    assert serious_violations(page) == []


def test_each_conversation_has_a_menu_to_rename_or_delete_it(page: Page, serve: Serve) -> None:
    running = serve(replying("Sure."))
    connected(page, f"{running.url}/?session=menu-a")
    exchange(page, "Plan the offsite", "Sure.")
    connected(page, f"{running.url}/?session=menu-b")
    exchange(page, "Book the train", "Sure.")
    menu = page.get_by_role("button", name="Actions for Plan the offsite")
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    page.locator('[data-testid="menu-rename"]:visible').click()
    title = page.get_by_label("Conversation title")
    expect(title).to_be_focused()
    expect(title).to_have_value("Plan the offsite")  # the menu's conversation, now open
    title.fill("Offsite in June")
    page.get_by_test_id("rename-save").click()
    expect(page.get_by_test_id("session-list").get_by_role("link", name="Offsite in June")).to_be_visible()

    page.get_by_role("button", name="Actions for Book the train").click()
    page.keyboard.press("Escape")  # closes the menu, the focus back on its button
    expect(page.get_by_role("button", name="Actions for Book the train")).to_be_focused()
    page.get_by_role("button", name="Actions for Book the train").click()
    page.locator('[data-testid="menu-delete"]:visible').click()
    expect(page.get_by_test_id("confirm-delete")).to_contain_text("Book the train")
    page.get_by_test_id("delete-confirm").click()
    expect(page.get_by_test_id("session-list").get_by_role("link", name="Book the train")).to_have_count(0)


def test_no_console_error_on_load(page: Page, serve: Serve) -> None:
    running = serve(replying("Sure."))
    errors: list[str] = []

    def keep(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", keep)
    connected(page, running.url)  # no conversation yet: a new one
    exchange(page, "hello", "Sure.")
    page.reload()  # an existing one
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    expect(assistant(page)).to_have_text("Sure.")
    assert errors == []
