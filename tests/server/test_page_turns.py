"""A turn as a person follows it: Thinking… after Send, Stop while it runs, no stale notice after it ends,
and conversations listed by title (their first message) instead of their ids."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
from playwright.sync_api import Page, expect

import toolwire
from tests.server.test_page import ARTIFACTS, OpenPage, Serve, assistant, connected, exchange, replying, send
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers


def test_thinking_then_answer_and_no_stale_busy_notice(page: Page, serve: Serve) -> None:
    gate = threading.Event()  # the model answers only once the test has seen the page wait
    running = serve(replying("Here is the **answer**.", gate=gate))
    connected(page, f"{running.url}/?session=think")
    thinking, notice = page.get_by_test_id("thinking"), page.get_by_test_id("notice")
    send_button, stop = page.get_by_role("button", name="Send"), page.get_by_role("button", name="Stop")
    expect(send_button).to_be_visible()
    expect(stop).to_be_hidden()
    expect(thinking).to_be_hidden()

    send(page, "What is the answer?")
    expect(thinking).to_be_visible()
    expect(thinking).to_have_text("Thinking…")
    expect(stop).to_be_visible()
    expect(send_button).to_be_hidden()
    expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_text("What is the answer?")

    # a second message while the answer is coming: refused, said so, and the text is kept
    box = page.get_by_label("Message", exact=True)
    box.fill("And another thing")
    box.press("Enter")
    expect(notice).to_have_text("Busy: wait for the current answer to finish, or press Stop.")
    expect(box).to_have_value("And another thing")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-thinking.png"), animations="disabled")

    gate.set()
    expect(assistant(page)).to_have_text("Here is the answer.")
    expect(thinking).to_be_hidden()
    expect(notice).to_be_hidden()  # the busy notice went with the turn
    expect(stop).to_be_hidden()
    expect(send_button).to_be_visible()
    box.press("Enter")  # the kept text goes now
    expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_count(2)
    expect(notice).to_be_hidden()


def test_stop_cancels_the_turn_and_the_next_one_runs(page: Page, serve: Serve) -> None:
    finished: list[str] = []

    async def crunch(size: int) -> str:
        """Crunches numbers for a long time."""
        await asyncio.sleep(60)
        finished.append("crunch")
        return "crunched"

    model = ScriptedModel(
        [
            [
                TextPart(text="Crunching now."),
                ToolCallPart(tool_call_id="call_1", tool_name="crunch", args={"size": 9}),
            ],
            [TextPart(text="Back again.")],
        ]
    )
    running = serve(Agent(model, tools=[crunch]))
    connected(page, f"{running.url}/?session=stop-me")
    send(page, "Crunch the numbers")
    chip = page.locator('[data-testid="notification"][data-tool-name="crunch"]')
    expect(chip).to_have_attribute("data-status", "executing", timeout=10_000)
    expect(page.get_by_test_id("thinking")).to_be_hidden()  # the running tool shows instead

    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_test_id("notice")).to_have_text("Stopped.")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()  # ready for the next message
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_test_id("notification")).to_have_count(0)  # nothing left showing as running
    expect(page.get_by_test_id("thinking")).to_be_hidden()
    expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_text("Crunch the numbers")
    # what the turn did stays on screen: its text and its call, cancelled (not an error), after a reload too
    for _ in range(2):
        expect(assistant(page).first).to_contain_text("Crunching now.")
        crunch = page.locator('[data-testid="message"] [data-testid="tool-call"][data-tool-name="crunch"]')
        expect(crunch).to_have_attribute("data-status", "cancelled")
        expect(crunch.get_by_test_id("tool-status")).to_have_text("cancelled")
        page.screenshot(path=str(ARTIFACTS / "page-stopped.png"), animations="disabled")
        connected(page, f"{running.url}/?session=stop-me")
    history = httpx.get(f"{running.url}/api/sessions/stop-me/messages").json()
    assert history["running"] is False and finished == []

    send(page, "Try something else")
    expect(assistant(page).last).to_have_text("Back again.", timeout=10_000)
    expect(page.get_by_test_id("notice")).to_be_hidden()


def test_conversations_are_listed_by_their_first_message(open_page: OpenPage, serve: Serve) -> None:
    running = serve(replying("Sure."))
    with httpx.Client(base_url=running.url) as client:
        assert client.post("/api/sessions", json={"session_id": "untitled-1"}).status_code == 201
    page = open_page()
    connected(page, f"{running.url}/?session=trip")
    title = page.get_by_test_id("conversation-title")
    expect(title).to_have_text("New chat")
    long = "Plan a trip to Lisbon in May with a day in Sintra, trams, pastéis de nata and a fado evening"
    exchange(page, long, "Sure.")

    shown = "Plan a trip to Lisbon in May with a day in Sintra, trams…"
    expect(title).to_have_text(shown)
    links = page.get_by_test_id("session-list").get_by_role("link")
    expect(links.filter(has_text=shown)).to_have_attribute("aria-current", "page")
    expect(links.filter(has_text="untitled-1")).to_have_count(1)  # nothing known about it: its id
    assert page.title().startswith(shown)

    # the title outlives a reload, and a new tab opening the conversation derives it from the history
    page.reload()
    expect(title).to_have_text(shown)
    fresh = open_page()
    connected(fresh, f"{running.url}/?session=trip")
    expect(fresh.get_by_test_id("conversation-title")).to_have_text(shown)
    expect(fresh.get_by_test_id("session-list").get_by_role("link", name=shown)).to_be_visible()


def test_every_call_shows_when_the_model_reuses_call_0_live_and_after_a_reload(
    page: Page, serve: Serve
) -> None:
    """A local server numbering calls per response sends call_0 on every step and turn (issue 28): each
    call gets its own box with its own result, as the turn streams and when the page rebuilds from history."""

    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{city} is sunny"

    def asks(*cities: str) -> list[list[Any]]:
        steps = [[ToolCallPart(tool_call_id="call_0", tool_name="weather", args={"city": c})] for c in cities]
        return [*steps, [TextPart(text=f"Done with {len(cities)}.")]]

    model = ScriptedModel([*asks("Paris", "Rome"), *asks("Oslo")])
    running = serve(Agent(model, tools=[toolwire.tool(weather)]))
    connected(page, f"{running.url}/?session=reused")
    results = page.locator('[data-testid="tool-call"][data-tool-name="weather"] [data-testid="tool-result"]')
    send(page, "Paris and Rome?")
    expect(assistant(page).last).to_contain_text("Done with 2.")
    send(page, "And Oslo?")
    expect(assistant(page).last).to_contain_text("Done with 1.")
    expected = ["Paris is sunny", "Rome is sunny", "Oslo is sunny"]
    expect(results).to_contain_text(expected)  # as many boxes as calls, in the order they were made
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    expect(results).to_contain_text(expected)
