"""The web chat page in a real headless Chromium (system package) against a real server on loopback.

A scripted conversation with a slow tool and a sub-agent that calls its own tool: the test asserts
what a person sees while it runs and after, then reloads and asserts the same transcript comes back
from history. A screenshot goes to artifacts/chat.png.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import Page, expect, sync_playwright

from toolwire import Agent, RunContext, TextPart, ToolCallPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parents[2] / "artifacts"


async def generate_report(quarter: str) -> str:
    """Builds the quarterly report (slow)."""
    await asyncio.sleep(2.0)
    return f"report {quarter}: revenue up 12%"


def search_archive(query: str) -> list[str]:
    """Searches the archive."""
    return [f"{query}: memo from March", f"{query}: board minutes"]


def build_agent() -> Agent:
    researcher = Agent(
        ScriptedModel(
            [
                [ToolCallPart(tool_call_id="call_1", tool_name="search_archive", args={"query": "Q3 churn"})],
                [TextPart(text="Found two archive documents about Q3 churn.")],
            ]
        ),
        tools=[search_archive],
        name="researcher",
    )
    return Agent(
        ScriptedModel(
            [
                [
                    TextPart(text="I will build the report and ask the researcher."),
                    ToolCallPart(tool_call_id="call_1", tool_name="generate_report", args={"quarter": "Q3"}),
                    ToolCallPart(tool_call_id="call_2", tool_name="researcher", args={"task": "Q3 churn"}),
                ],
                [TextPart(text="The Q3 report is ready: revenue is up 12%.")],
            ]
        ),
        tools=[generate_report, researcher.as_tool("researcher", "Researches the archive")],
    )


class _Server:
    def __init__(self, agent: Agent, tokens: dict[str, str] | None = None) -> None:
        self.app = create_app(agent, store=MemoryStore(), tokens=tokens)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", access_log=False))
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


@pytest.fixture
def server() -> Iterator[_Server]:
    running = _Server(build_agent())
    yield running
    running.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), (
        "scripts/setup_chromium.sh installs Debian's chromium"
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1100, "height": 800})
        finally:
            browser.close()


def test_chat_page_shows_tools_sub_agents_and_resumes(server: _Server, page: Page) -> None:
    page.goto(f"{server.url}/?session=page-test")
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    page.get_by_test_id("composer-input").fill("Prepare the Q3 report")
    page.get_by_test_id("composer-send").click()

    # while the slow tool runs: a notification matched to it, with elapsed seconds ticking
    running = page.locator('[data-testid="notification"][data-tool-name="generate_report"]')
    expect(running).to_have_attribute("data-status", "executing", timeout=10_000)
    expect(running).to_contain_text("running generate_report (")
    user = page.locator('[data-testid="message"][data-role="user"][data-session="page-test"]')
    expect(user).to_have_text("Prepare the Q3 report")
    first = page.locator('[data-testid="message"][data-role="assistant"][data-session="page-test"]').first
    expect(first).to_contain_text("I will build the report")
    # changes re-render only the bubble they name: marked elements must survive the rest of the run
    user.evaluate("el => el.setAttribute('data-mark', 'kept')")
    first.evaluate("el => el.setAttribute('data-mark', 'kept')")

    # a second tab opened mid-run resumes from history: the unfinished call shows as running
    assert page.context.browser is not None
    other = page.context.browser.new_page(viewport={"width": 1100, "height": 800})
    other.goto(f"{server.url}/?session=page-test")
    other_running = other.locator('[data-testid="notification"][data-tool-name="generate_report"]')
    expect(other_running).to_have_attribute("data-status", "executing", timeout=5_000)
    expect(running).to_contain_text("(1s)", timeout=5_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "chat-running.png"))

    # after: notifications gone, calls attached under the assistant message that made them
    final = page.locator('[data-testid="message"][data-role="assistant"][data-session="page-test"]').last
    expect(final).to_contain_text("revenue is up 12%", timeout=15_000)
    expect(page.get_by_test_id("notification")).to_have_count(0)
    _assert_finished_transcript(page)
    page.screenshot(path=str(ARTIFACTS / "chat.png"), full_page=True)
    expect(page.locator('[data-mark="kept"]')).to_have_count(2)
    # the tab that joined mid-run ends with the same transcript (calls finished before it loaded included)
    expect(other.get_by_test_id("notification")).to_have_count(0)
    _assert_finished_transcript(other)
    other.close()

    # the sub-agent group collapses and expands
    group = page.locator('[data-testid="subsession"]')
    group.locator("summary").click()
    expect(group.locator('[data-testid="message"]').first).to_be_hidden()
    group.locator("summary").click()
    expect(group.locator('[data-testid="message"]').first).to_be_visible()

    # reload: the same transcript is rebuilt from the history endpoint
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    _assert_finished_transcript(page)


def _assert_finished_transcript(page: Page) -> None:
    first = page.locator('[data-testid="message"][data-role="assistant"][data-session="page-test"]').first
    expect(first).to_contain_text("I will build the report and ask the researcher.")
    report = first.locator('[data-testid="tool-call"][data-tool-name="generate_report"]')
    expect(report).to_have_attribute("data-status", "ok")
    expect(report.get_by_test_id("tool-result")).to_contain_text("revenue up 12%")
    delegated = first.locator('[data-testid="tool-call"][data-tool-name="researcher"]')
    expect(delegated.get_by_test_id("tool-result")).to_contain_text("Found two archive documents")

    group = page.locator('[data-testid="subsession"][data-session^="page-test.sub_"]')
    expect(group).to_have_count(1)
    sub_message = group.locator('[data-testid="message"][data-role="assistant"]')
    expect(sub_message).to_contain_text("Found two archive documents about Q3 churn.")
    search = group.locator('[data-testid="tool-call"][data-tool-name="search_archive"]')
    expect(search.get_by_test_id("tool-result")).to_contain_text("memo from March")
    # the sub-agent's call_1 is not confused with the parent's call_1
    expect(page.locator('[data-testid="tool-call"][data-tool-name="search_archive"]')).to_have_count(1)
    expect(page.locator('[data-testid="tool-call"][data-tool-name="generate_report"]')).to_have_count(1)


def test_token_new_chat_and_session_list(page: Page) -> None:
    agent = Agent(ScriptedModel([[TextPart(text="Hello, Alice.")], [TextPart(text="Second chat here.")]]))
    running = _Server(agent, tokens={"secret-alice": "alice"})
    try:
        # no session in the URL and none stored: the page starts a new one, with the token of the URL
        page.goto(f"{running.url}/?token=secret-alice")
        expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
        first_url = page.url
        assert "session=web-" in first_url and "token" not in first_url  # the token leaves the address bar
        page.get_by_test_id("composer-input").fill("hi")
        page.get_by_test_id("composer-send").click()
        expect(page.locator('[data-testid="message"][data-role="assistant"]')).to_have_text("Hello, Alice.")
        sessions = page.get_by_test_id("session-list").locator("a")
        expect(sessions).to_have_count(1)

        page.get_by_test_id("new-chat").click()
        expect(page.get_by_test_id("message")).to_have_count(0)
        expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
        assert page.url != first_url
        page.get_by_test_id("composer-input").fill("and again")
        page.get_by_test_id("composer-send").click()
        expect(page.locator('[data-testid="message"][data-role="assistant"]')).to_have_text(
            "Second chat here."
        )
        expect(sessions).to_have_count(2)

        # back to the first conversation from the list, then a reload: the token now comes from localStorage
        page.locator(f'[data-testid="session-list"] a[href="?{first_url.split("?")[1]}"]').click()
        expect(page.locator('[data-testid="message"][data-role="assistant"]')).to_have_text("Hello, Alice.")
        page.reload()
        expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
        expect(page.locator('[data-testid="message"][data-role="user"]')).to_have_text("hi")

        # without the token the API refuses: the page says so instead of showing someone's chat
        page.evaluate("localStorage.removeItem('toolwire.token')")
        page.reload()
        expect(page.get_by_test_id("status")).to_contain_text("cannot load", timeout=10_000)
        expect(page.get_by_test_id("message")).to_have_count(0)
    finally:
        running.stop()


def test_the_page_reaches_every_conversation_page_by_page(page: Page) -> None:
    """GET /api/sessions answers a page at a time (top-level conversations only); the list offers the
    older ones, so none is out of reach."""
    running = _Server(build_agent())
    try:
        ids = [f"conv-{n:02d}" for n in range(57)]  # more than one page of 50
        with httpx.Client(base_url=running.url) as client:
            for session_id in ids:
                assert client.post("/api/sessions", json={"session_id": session_id}).status_code == 201
        page.goto(f"{running.url}/?session=conv-00")
        expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
        links = page.get_by_test_id("session-list").locator("a")
        expect(links).to_have_count(51)  # the newest 50, and the open (oldest) one on top
        page.get_by_test_id("older-sessions").click()
        expect(links).to_have_count(57)
        expect(page.get_by_test_id("older-sessions")).to_have_count(0)
        assert sorted(link.get_attribute("title") or "" for link in links.all()) == ids
    finally:
        running.stop()


def test_the_page_shows_every_message_a_busy_tool_publishes_between_heartbeats(page: Page) -> None:
    """A tool that reports progress and system messages while heartbeats run every 10 ms: the page, which
    drops events whose seq is not above the last one it saw, must show every message."""
    count = 15

    async def reporter(ctx: RunContext[Any], steps: int) -> str:
        """Reports while it works."""
        for i in range(steps):
            ctx.progress((i + 1) / steps, f"step {i + 1}")
            ctx.system_message(f"note {i + 1} of {steps}")
            await asyncio.sleep(0.03)
        return "reported"

    agent = Agent(
        ScriptedModel(
            [
                [ToolCallPart(tool_call_id="call_1", tool_name="reporter", args={"steps": count})],
                [TextPart(text="All reported.")],
            ]
        ),
        tools=[reporter],
        heartbeat_interval=0.01,
    )
    running = _Server(agent)
    try:
        page.goto(f"{running.url}/?session=busy-tool")
        expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
        page.get_by_test_id("composer-input").fill("Report")
        page.get_by_test_id("composer-send").click()
        expect(page.locator('[data-testid="message"][data-role="assistant"]').last).to_contain_text(
            "All reported.", timeout=15_000
        )
        notes = page.locator('[data-testid="message"][data-role="system"]')
        expect(notes).to_have_count(count)
        assert notes.all_inner_texts()[-1].endswith(f"note {count} of {count}")
    finally:
        running.stop()
