"""A tool's question on the page (issue 29 item 4: MCP elicitation as a durable pause): the live server's agent
calls the test MCP server's ``book`` (the SDK's server over stdio), which asks "When, and for how many, at
PLACE?" with a form {date: string, seats: integer}. The call's card shows who asks, the question and its
form; a wrong answer is refused with the server's words and nothing is lost; Send, Decline and a reload
while waiting all work from the page. A question with a page to visit (URL mode, tests/server/
_mcp_link_server.py) shows its link, only when it is a web page, with Done and Decline."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, Request, expect

from tests.server.test_page import (
    DESKTOP,
    OpenPage,
    PageServer,
    Serve,
    assistant,
    audited,
    connected,
    send,
    serious_violations,
)
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel
from toolwire.tools.mcp import MCPServerStdio

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers

MCP_SERVER = Path(__file__).parents[1] / "tools" / "_mcp_server.py"


def _respond(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "tool":
        [result] = last.tool_results
        output = result.output["result"] if isinstance(result.output, dict) else result.output
        return [TextPart(text=f"answered: {output}")]
    place = (last.text or "").removeprefix("book ")
    return [ToolCallPart(tool_call_id=f"call_{place}", tool_name="book", args={"place": place})]


@pytest.fixture
def asking(serve: Serve) -> PageServer:
    """A live server whose agent's tools come from the test MCP server (started on the agent's first run,
    in the server's own event loop; stopped with that loop when the server stops)."""
    source = MCPServerStdio(sys.executable, [str(MCP_SERVER), "stdio"], name="bookings", timeout=20)
    return serve(Agent(ScriptedModel(_respond), tools=[source], name="support"))


def _question(page: Page, place: str) -> Locator:
    """The question's form, found as a person finds it: a form named by the question."""
    return page.get_by_role("form", name=f"When, and for how many, at {place}?")


def _answers(page: Page) -> list[dict[str, Any]]:
    """The bodies of the answers the page POSTs (``tool_outputs``), in order."""
    sent: list[dict[str, Any]] = []

    def keep(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/messages"):
            body = json.loads(request.post_data or "{}")
            if "tool_outputs" in body:
                sent.append(body["tool_outputs"])

    page.on("request", keep)
    return sent


def test_the_page_shows_a_tools_question_and_sends_the_answer(
    open_page: OpenPage, asking: PageServer
) -> None:
    page = audited(open_page(DESKTOP))
    url = f"{asking.url}/?session=ask-paris"
    connected(page, url)
    sent = _answers(page)
    send(page, "book Paris")
    form = _question(page, "Paris")
    expect(form).to_be_visible(timeout=20_000)
    expect(form.get_by_test_id("question-from")).to_have_text("MCP server bookings asks:")
    expect(form.get_by_label("date")).to_be_focused()  # the message box was left empty: nobody types there
    expect(form.get_by_label("seats")).to_have_attribute("type", "number")
    expect(form.get_by_label("date")).to_have_attribute("required", "")
    assert serious_violations(page) == []  # the question's form, labels and buttons

    connected(page, url)  # a reload: the question comes back from the history's ``awaiting``
    expect(form).to_be_visible()
    form.get_by_label("date").fill("Friday")
    form.get_by_label("seats").fill("2.5")
    form.get_by_role("button", name="Send").click()
    expect(form.get_by_role("alert")).to_contain_text("'seats' must be an integer")
    expect(form.get_by_label("date")).to_have_value("Friday")  # refused: the form stays as it was
    expect(form.get_by_role("button", name="Send")).to_be_enabled()
    assert sent == [{"call_Paris": {"date": "Friday", "seats": 2.5}}]

    form.get_by_label("seats").fill("4")
    # Two clicks on the button itself (a real double click may miss the second: the error line closes
    # between them, which moves the button up).
    form.get_by_role("button", name="Send").evaluate("send => { send.click(); send.click(); }")
    expect(assistant(page).last).to_contain_text("answered: booked Paris on Friday for 4", timeout=20_000)
    expect(form).to_have_count(0)
    assert sent[1:] == [{"call_Paris": {"date": "Friday", "seats": 4}}]  # the double click sent once


def test_decline_tells_the_tool_no(page: Page, asking: PageServer) -> None:
    connected(page, f"{asking.url}/?session=ask-oslo")
    send(page, "book Oslo")
    form = _question(page, "Oslo")
    expect(form).to_be_visible(timeout=20_000)
    form.get_by_role("button", name="Decline").click()
    expect(assistant(page).last).to_contain_text("answered: not booked: decline", timeout=20_000)
    expect(form).to_have_count(0)


LINK_SERVER = Path(__file__).parent / "_mcp_link_server.py"


def _visit(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "tool":
        [result] = last.tool_results
        output = result.output["result"] if isinstance(result.output, dict) else result.output
        return [TextPart(text=f"answered: {output}")]
    url = (last.text or "").removeprefix("visit ")
    return [ToolCallPart(tool_call_id=f"call_{len(request.messages)}", tool_name="visit", args={"url": url})]


def test_a_question_with_a_link_is_done_or_declined(page: Page, serve: Serve) -> None:
    """URL mode: the page to visit is a link opening a new tab, only when it is a web page; Done accepts."""
    source = MCPServerStdio(sys.executable, [str(LINK_SERVER)], name="links", timeout=20)
    running = serve(Agent(ScriptedModel(_visit), tools=[source]))
    connected(page, f"{running.url}/?session=ask-link")
    send(page, "visit https://pay.example/confirm?b=1")
    form = page.get_by_role("form", name="Open this page to confirm the booking.")
    expect(form).to_be_visible(timeout=20_000)
    link = form.get_by_role("link", name="https://pay.example/confirm?b=1")
    expect(link).to_have_attribute("href", "https://pay.example/confirm?b=1")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(form.get_by_role("button", name="Done")).to_be_focused()
    form.get_by_role("button", name="Done").click()
    expect(assistant(page).last).to_contain_text("answered: visited: accept", timeout=20_000)

    send(page, "visit javascript:alert(1)")
    expect(form).to_be_visible(timeout=20_000)
    expect(form.get_by_test_id("question-link")).to_have_text("javascript:alert(1)")
    expect(form.get_by_role("link")).to_have_count(0)  # not a web page: shown, never followed
    form.get_by_role("button", name="Decline").click()
    expect(assistant(page).last).to_contain_text("answered: visited: decline", timeout=20_000)
