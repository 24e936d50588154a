"""Tool cards on the page (issue 31, items 1, 5 and 6), in a real Chromium against a real server.

An approval shows what would run, inside the tool's own card: the tool, its title, its whole input
(pretty and scrollable) and the sub-agent asking, for a top-level and a sub-agent's call, after a reload
too; Enter in the reason box denies, and a denial is not shown as an error. A client tool without a
browser handler gets a form built from its call (Send, Cancel); an app's handler registered with
``toolwire.registerClientTool`` answers by itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from playwright.sync_api import Locator, Page, expect

from tests.server.test_page import (
    DESKTOP,
    OpenPage,
    Serve,
    assistant,
    audited,
    connected,
    send,
    serious_violations,
)
from toolwire import Agent, TextPart, ToolCallPart, tool
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers

NOTE = "Customer says the parcel arrived crushed; photos attached to ticket 4411. " * 12


@tool(requires_approval=True)
def refund(order_id: str, amount: float, note: str = "") -> str:
    """Refund part of an order (asks the user first)."""
    return f"refunded {amount} on {order_id}"


@tool(external=True)
def pick_slot(day: str, people: int, flexible: bool) -> str:
    """A delivery slot the user picks (answered by the client)."""
    raise NotImplementedError  # never runs: the client supplies the output


def _answer(request: ModelRequest) -> Sequence[Part] | None:
    last = request.messages[-1]
    if last.role == "tool":
        result = last.tool_results[0]
        return [TextPart(text=f"answered: {'error ' if result.is_error else ''}{json.dumps(result.output)}")]
    return None


def _treasurer(request: ModelRequest) -> Sequence[Part]:
    answered = _answer(request)
    if answered is not None:
        return answered
    return [
        ToolCallPart(
            tool_call_id="call_t1",
            tool_name="refund",
            args={"order_id": "B2", "amount": 99.0, "note": "sub-agent refund"},
            title="Refund order B2",
        )
    ]


def _respond(request: ModelRequest) -> Sequence[Part]:
    answered = _answer(request)
    if answered is not None:
        return answered
    word = request.messages[-1].text.split()[0]
    if word == "refund":
        call = ToolCallPart(
            tool_call_id="call_r1",
            tool_name="refund",
            args={"order_id": "A1", "amount": 1250.5, "note": NOTE},
            title="Refund order A1",
        )
        return [call]
    if word == "both":
        return [
            ToolCallPart(tool_call_id="call_l1", tool_name="lookup", args={"order_id": "A1"}),
            ToolCallPart(tool_call_id="call_r2", tool_name="refund", args={"order_id": "A1", "amount": 5.0}),
        ]
    if word == "delegate":
        return [ToolCallPart(tool_call_id="call_d1", tool_name="treasurer", args={"task": "refund B2"})]
    return [
        ToolCallPart(
            tool_call_id="call_p1", tool_name="pick_slot", args={"day": "Tue", "people": 2, "flexible": True}
        )
    ]


def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: a lamp, 40 EUR"


def _agent() -> Agent[Any, str]:
    treasurer = Agent(ScriptedModel(_treasurer), tools=[refund], name="treasurer")
    return Agent(
        ScriptedModel(_respond),
        tools=[refund, pick_slot, lookup, treasurer.as_tool("treasurer", "Handles refunds")],
    )


def _waiting(page: Page, tool_name: str) -> Locator:
    return page.locator(f'.live-call [data-testid="tool-call"][data-tool-name="{tool_name}"]')


def test_an_approval_shows_what_will_run_inside_its_card(open_page: OpenPage, serve: Serve) -> None:
    running = serve(_agent())
    page = audited(open_page(DESKTOP))
    url = f"{running.url}/?session=approve-card"
    connected(page, url)
    send(page, "refund please")
    card = _waiting(page, "refund")
    expect(card).to_have_attribute("data-status", "awaiting-approval", timeout=10_000)
    expect(card.get_by_test_id("tool-status")).to_have_text("awaiting approval")
    expect(card.get_by_test_id("tool-title")).to_have_text("Refund order A1")
    args = card.get_by_test_id("tool-args")
    expect(args).to_be_visible()
    expect(args).to_contain_text('"amount": 1250.5')
    # complete (the whole note, not an ellipsis) and scrollable where it is long
    assert json.loads(args.inner_text()) == {"order_id": "A1", "amount": 1250.5, "note": NOTE}
    assert args.evaluate("el => el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight")
    approve = card.get_by_test_id("approval").get_by_role("button", name="Approve")
    expect(approve).to_be_visible()
    assert serious_violations(page) == []

    connected(page, url)  # a reload: the same card, its input from the stored call
    expect(card).to_have_attribute("data-status", "awaiting-approval")
    expect(card.get_by_test_id("tool-title")).to_have_text("Refund order A1")
    assert json.loads(card.get_by_test_id("tool-args").inner_text())["amount"] == 1250.5
    card.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("composer-input")).to_be_focused()  # nothing else waits: back to the box
    expect(assistant(page).last).to_contain_text('answered: "refunded 1250.5 on A1"', timeout=10_000)
    done = page.locator('[data-testid="message"] [data-testid="tool-call"][data-tool-name="refund"]')
    expect(done).to_have_attribute("data-status", "done")
    expect(_waiting(page, "refund")).to_have_count(0)


def test_a_sub_agents_approval_names_it_and_enter_in_the_reason_denies(
    open_page: OpenPage, serve: Serve
) -> None:
    running = serve(_agent())
    page = audited(open_page(DESKTOP))
    connected(page, f"{running.url}/?session=approve-sub")
    send(page, "delegate the refund")
    card = _waiting(page, "refund")
    expect(card).to_have_attribute("data-status", "awaiting-approval", timeout=10_000)
    expect(card.get_by_test_id("tool-from")).to_have_text("from sub-agent treasurer")
    expect(card.get_by_test_id("tool-title")).to_have_text("Refund order B2")
    expect(card.get_by_test_id("tool-args")).to_contain_text('"amount": 99,')
    # the card is in the sub-agent's group, which is named, not numbered
    group = page.locator('[data-testid="subsession"]')
    expect(group.locator("> summary")).to_have_text("sub-agent treasurer")
    expect(group.locator(".live-call")).to_have_count(1)
    chip = page.locator('[data-testid="notification"][data-tool-name="refund"]')
    expect(chip).to_have_text("refund waits for your approval · sub-agent treasurer")
    assert serious_violations(page) == []

    reason = card.get_by_label("Reason to deny refund")
    reason.fill("not this one")
    reason.press("Enter")
    expect(assistant(page).last).to_contain_text("answered:", timeout=10_000)
    denied = group.locator('[data-testid="message"] [data-testid="tool-call"][data-tool-name="refund"]')
    expect(denied).to_have_attribute("data-status", "denied")
    expect(denied.get_by_test_id("tool-status")).to_have_text("denied")
    expect(denied.get_by_test_id("tool-result")).to_contain_text("denied by the user: not this one")
    # a refusal is not a failure: not painted as an error
    colours = denied.evaluate("el => getComputedStyle(el).borderLeftColor")
    assert colours != "rgb(220, 38, 38)", colours


def test_a_client_tool_without_a_handler_gets_a_form_with_cancel(open_page: OpenPage, serve: Serve) -> None:
    running = serve(_agent())
    page = audited(open_page(DESKTOP))
    connected(page, f"{running.url}/?session=slot-form")
    send(page, "book a slot")
    card = _waiting(page, "pick_slot")
    expect(card).to_have_attribute("data-status", "awaiting-output", timeout=10_000)
    form = card.get_by_test_id("client-tool-form")
    expect(form.get_by_label("day")).to_have_value("Tue")
    expect(form.get_by_label("people")).to_have_value("2")
    expect(form.get_by_label("flexible")).to_be_checked()
    assert serious_violations(page) == []
    form.get_by_label("day").fill("Wed")
    form.get_by_label("flexible").uncheck()
    form.get_by_role("button", name="Send").click()
    expect(assistant(page).last).to_contain_text(
        'answered: {"day": "Wed", "people": 2, "flexible": false}', timeout=10_000
    )

    send(page, "book another")
    expect(card).to_have_attribute("data-status", "awaiting-output", timeout=10_000)
    card.get_by_role("button", name="Cancel").click()
    expect(assistant(page).last).to_contain_text('answered: error "cancelled by the user"', timeout=10_000)
    expect(page.get_by_test_id("composer-input")).to_be_focused()


def test_an_app_registers_its_own_browser_handler(page: Page, serve: Serve) -> None:
    running = serve(_agent())
    connected(page, f"{running.url}/?session=slot-handler")
    page.evaluate(
        "toolwire.registerClientTool('pick_slot', async (args) => `picked ${args.day} for ${args.people}`)"
    )
    send(page, "book a slot")
    expect(assistant(page).last).to_contain_text('answered: "picked Tue for 2"', timeout=10_000)
    expect(page.get_by_test_id("client-tool-form")).to_have_count(0)


def test_what_already_ran_shows_while_a_call_waits(page: Page, serve: Serve) -> None:
    """A step whose first call ran and whose second waits for approval, before any text: the finished card
    shows (done, with its output) above the waiting one, live and after a reload (transcript rule 4)."""
    running = serve(_agent())
    url = f"{running.url}/?session=ran-and-waits"
    connected(page, url)
    send(page, "both please")
    expect(_waiting(page, "refund")).to_have_attribute("data-status", "awaiting-approval", timeout=10_000)
    for _ in range(2):
        done = page.locator('[data-testid="message"] [data-testid="tool-call"][data-tool-name="lookup"]')
        expect(done).to_have_attribute("data-status", "done")
        expect(done.get_by_test_id("tool-result")).to_contain_text("a lamp, 40 EUR")
        connected(page, url)
    _waiting(page, "refund").get_by_role("button", name="Approve").click()
    expect(assistant(page).last).to_contain_text("answered:", timeout=10_000)
    cards = page.locator('[data-testid="message"] [data-testid="tool-call"]')
    expect(cards).to_have_count(2)  # the approved call joined the card that ran, in the order made
    assert [c.get_attribute("data-tool-name") for c in cards.all()] == ["lookup", "refund"]
