"""What a turn leaves on the page after a reload, in a real Chromium (issue 31 items 2 and 6): the text a
stopped answer had streamed, and the sub-agents by their own names."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.server.test_page import PacedModel, Serve, assistant, connected, send
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers

LONG = "The refund for order 7 is on its way. " * 40


def test_stop_mid_answer_keeps_the_streamed_text_after_a_reload(page: Page, serve: Serve) -> None:
    running = serve(
        Agent(PacedModel([[TextPart(text=LONG)], [TextPart(text="Fine.")]], chunk_size=8, pause=0.05))
    )
    connected(page, f"{running.url}/?session=stop-text")
    send(page, "Where is my refund?")
    expect(assistant(page).first).to_contain_text("The refund for order 7", timeout=10_000)
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_test_id("notice")).to_have_text("Stopped.")
    shown = assistant(page).first.inner_text()
    assert 0 < len(shown) < len(LONG.strip())
    connected(page, f"{running.url}/?session=stop-text")  # a reload: the history holds the partial text
    expect(assistant(page)).to_have_count(1)
    kept = assistant(page).first.inner_text()
    # all it had shown (and what was streamed while Stop was on its way), nothing else
    assert LONG.startswith(kept) and kept.startswith(shown), (shown, kept)
    send(page, "Thanks")  # the next turn works on the same conversation
    expect(assistant(page).last).to_have_text("Fine.", timeout=10_000)


def test_a_sub_agent_is_named_by_its_own_name_after_a_reload(page: Page, serve: Serve) -> None:
    archivist = Agent(
        ScriptedModel([[TextPart(text="Two memos from March.")]], repeat_last=True), name="archivist"
    )
    call = ToolCallPart(tool_call_id="call_1", tool_name="search_archive", args={"task": "Q3 memos"})
    main = Agent(
        ScriptedModel([[call], [TextPart(text="Found them.")]]),
        tools=[archivist.as_tool("search_archive", "Searches the archive")],
    )
    running = serve(main)
    connected(page, f"{running.url}/?session=named")
    send(page, "Find the Q3 memos")
    expect(assistant(page).last).to_contain_text("Found them.", timeout=10_000)
    connected(page, f"{running.url}/?session=named")  # the name comes from the history endpoint now
    group = page.locator('[data-testid="subsession"]')
    expect(group.locator("summary").first).to_have_text("sub-agent archivist")  # not the tool's name
