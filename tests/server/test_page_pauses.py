"""Calls that wait for a person, on the page: Approve / Deny (with a reason) on a call awaiting approval,
still there after a reload; and a client tool the page runs itself in the browser (its time zone)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.security.agents import browser_time_zone, refund
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
from toolwire import Agent, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest
from toolwire.models.scripted import ScriptedModel

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers


def _respond(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "tool":
        return [TextPart(text=f"answered: {last.tool_results[0].output}")]
    word, _, rest = last.text.partition(" ")
    if word == "refund":
        return [ToolCallPart(tool_call_id=f"call_{rest}", tool_name="refund", args={"order": rest})]
    return [ToolCallPart(tool_call_id="call_tz", tool_name="browser_time_zone", args={})]


def _agent() -> Agent[Any, str]:
    return Agent(ScriptedModel(_respond), tools=[refund, browser_time_zone])


def test_approve_and_deny_survive_a_reload(open_page: OpenPage, serve: Serve) -> None:
    running = serve(_agent())
    page = audited(open_page(DESKTOP))
    url = f"{running.url}/?session=pause-me"
    connected(page, url)
    send(page, "refund A1")
    chip = page.locator('[data-testid="notification"][data-tool-name="refund"]')
    expect(chip).to_have_attribute("data-status", "awaiting-approval", timeout=10_000)
    expect(chip).to_have_text("refund waits for your approval")
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    assert serious_violations(page) == []  # the approval controls

    connected(page, url)  # a reload: the waiting call comes back from the history's ``awaiting``
    expect(chip).to_have_attribute("data-status", "awaiting-approval")
    page.get_by_label("Reason to deny refund").fill("too large")
    page.get_by_role("button", name="Deny").click()
    expect(assistant(page).last).to_contain_text("answered: Tool call denied by the user: too large")
    expect(chip).to_have_count(0)
    expect(page.get_by_test_id("approval")).to_have_count(0)

    send(page, "refund A2")
    page.get_by_role("button", name="Approve").click()
    expect(assistant(page).last).to_contain_text("answered: refunded A2", timeout=10_000)
    expect(page.get_by_test_id("approval")).to_have_count(0)


def test_the_page_runs_its_client_tool_in_the_browser(page: Page, serve: Serve) -> None:
    running = serve(_agent())
    connected(page, f"{running.url}/?session=clock")
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    send(page, "what time zone am I in?")
    expect(assistant(page).last).to_contain_text(f"answered: {zone}", timeout=10_000)
    expect(page.get_by_test_id("notification")).to_have_count(0)


def test_a_client_tool_left_waiting_is_run_when_the_page_opens(page: Page, serve: Serve) -> None:
    """The run paused while no page was open (a turn started from another client): opening the
    conversation runs the browser's tool and the answer follows."""
    running = serve(_agent())
    with httpx.Client(base_url=running.url, timeout=10) as client:
        assert client.post("/api/sessions/later/messages", json={"text": "tz"}).status_code == 202
        for _ in range(200):
            history = client.get("/api/sessions/later/messages").json()
            if not history["running"]:
                break
            time.sleep(0.02)
        assert [a["tool_name"] for a in history["awaiting"]] == ["browser_time_zone"]
    connected(page, f"{running.url}/?session=later")
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    expect(assistant(page).last).to_contain_text(f"answered: {zone}", timeout=10_000)
