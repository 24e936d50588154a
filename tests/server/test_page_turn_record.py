"""What a turn leaves on the page after a reload, in a real Chromium (issue 31 items 2 and 6): the text a
stopped answer had streamed, the sub-agents by their own names, and a client tool's form built from its
schema (issue 31 item 5)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from playwright.sync_api import Page, expect

from tests.server.test_page import PacedModel, Serve, assistant, connected, send
from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
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


@tool(external=True)
def book_table(day: str, seats: int, seating: Literal["inside", "terrace"] = "inside", note: str = "") -> str:
    """A table the user books (answered by the client)."""
    raise NotImplementedError  # never runs: the client supplies the output


def _booking(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "tool":
        return [TextPart(text=f"answered: {json.dumps(last.tool_results[0].output)}")]
    # the model leaves the optional arguments out: the form still asks for them
    return [ToolCallPart(tool_call_id="call_b1", tool_name="book_table", args={"day": "Fri", "seats": 2})]


def test_a_client_tool_form_is_built_from_the_tool_schema_live_and_after_a_reload(
    page: Page, serve: Serve
) -> None:
    running = serve(Agent(ScriptedModel(_booking), tools=[book_table]))
    connected(page, f"{running.url}/?session=booking")
    send(page, "book a table")
    form = page.get_by_test_id("client-tool-form")
    for _ in range(2):  # live (tool-call-awaiting), then after a reload (the history's awaiting entries)
        expect(form.get_by_label("day")).to_have_value("Fri", timeout=10_000)
        expect(form.get_by_label("seats")).to_have_value("2")
        expect(form.get_by_label("seats")).to_have_attribute("required", "")
        expect(form.get_by_label("seating").locator("option")).to_have_text(["inside", "terrace"])
        expect(form.get_by_label("seating")).to_have_value('"inside"')  # its default
        expect(form.get_by_label("note")).to_have_value("")
        connected(page, f"{running.url}/?session=booking")
    form.get_by_label("seats").fill("4")
    form.get_by_label("seating").select_option(label="terrace")
    form.get_by_role("button", name="Send").click()
    # the optional note left empty is left out
    expect(assistant(page).last).to_contain_text(
        'answered: {"day": "Fri", "seats": 4, "seating": "terrace"}', timeout=10_000
    )
