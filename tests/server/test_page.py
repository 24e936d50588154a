"""The web chat page in a real headless Chromium (system package) against a real server on loopback.

A scripted conversation with a slow tool and a sub-agent that calls its own tool: the test asserts
what a person sees while it runs and after, then reloads and asserts the same transcript comes back
from history. A screenshot goes to artifacts/chat.png.

The helpers here (a server on a thread, a paced scripted model, one Chromium per test module, pages
that fail their test on any Content-Security-Policy violation) are shared by tests/server/test_page_*.py.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright
from starlette.types import ASGIApp

from toolwire import Agent, RunContext, TextPart, ToolCallPart
from toolwire.messages import Part
from toolwire.models.base import ModelRequest, ModelStreamPart
from toolwire.models.scripted import ScriptedModel
from toolwire.server import create_app
from toolwire.store import MemoryStore

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).parents[2]
ARTIFACTS = ROOT / "artifacts"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
AXE = Path(__file__).parent / "node" / "node_modules" / "axe-core" / "axe.min.js"


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


REPORT_ANSWER = """Here is **Q3** by city:

| city | orders | revenue |
| --- | ---: | ---: |
| Paris | 1,204 | €96,320 |
| Oslo | 688 | €61,920 |

```sql
SELECT city, count(*) AS orders, sum(total) AS revenue FROM orders WHERE quarter = 'Q3' GROUP BY city ORDER BY revenue DESC;
```

Paris leads; the full export is at https://reports.example.com/q3/exports/orders-by-city-2025-q3-final-v2.csv."""


def sales_report(quarter: str, cities: list[str]) -> dict[str, dict[str, int]]:
    """Orders and revenue per city for a quarter."""
    return {"Paris": {"orders": 1204, "revenue": 96320}, "Oslo": {"orders": 688, "revenue": 61920}}


def report_agent() -> Agent:
    return Agent(
        ScriptedModel(
            [
                [
                    TextPart(text="Let me pull the Q3 numbers."),
                    ToolCallPart(
                        tool_call_id="call_1",
                        tool_name="sales_report",
                        args={"quarter": "Q3", "cities": ["Paris", "Oslo"]},
                    ),
                ],
                [TextPart(text=REPORT_ANSWER)],
            ]
        ),
        tools=[sales_report],
    )


class PacedModel(ScriptedModel):
    """A scripted model that answers only once ``gate`` is set and pauses ``pause`` s after each streamed part."""

    def __init__(
        self,
        turns: Sequence[Sequence[Part]],
        *,
        gate: threading.Event | None = None,
        pause: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(turns, **kwargs)
        self.gate = gate
        self.pause = pause

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.02)
        async for part in super().stream(request):
            yield part
            if self.pause:
                await asyncio.sleep(self.pause)


class PageServer:
    """``create_app(agent)`` on a loopback port, served by uvicorn on a thread; ``wrap`` may mount it."""

    def __init__(
        self,
        agent: Agent,
        tokens: dict[str, str] | None = None,
        wrap: Callable[[ASGIApp], ASGIApp] | None = None,
    ) -> None:
        self.store = MemoryStore()
        inner = create_app(agent, store=self.store, tokens=tokens)
        self.app = wrap(inner) if wrap else inner
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
def servers() -> Iterator[list[PageServer]]:
    """The servers a test started, stopped after its pages close (an open event stream delays shutdown)."""
    started: list[PageServer] = []
    yield started
    for running in started:
        running.stop()


@pytest.fixture
def serve(servers: list[PageServer]) -> Callable[..., PageServer]:
    def start(agent: Agent, **kwargs: Any) -> PageServer:
        running = PageServer(agent, **kwargs)
        servers.append(running)
        return running

    return start


@pytest.fixture
def server(serve: Callable[..., PageServer]) -> PageServer:
    return serve(build_agent())


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), (
        "scripts/setup_chromium.sh installs Debian's chromium"
    )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def open_page(browser: Browser, servers: list[PageServer]) -> Iterator[Callable[..., Page]]:
    """New pages, each in its own browser context (its own localStorage). A script error in a page, or
    (unless ``bypass_csp``) a breach of the server's Content-Security-Policy, fails the test."""
    contexts = []
    problems: list[str] = []

    def new_page(viewport: dict[str, int] | None = None, *, bypass_csp: bool = False) -> Page:
        context = browser.new_context(
            viewport=viewport or {"width": 1100, "height": 800}, bypass_csp=bypass_csp
        )  # type: ignore[arg-type]
        contexts.append(context)
        opened = context.new_page()
        opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
        if not bypass_csp:
            opened.on("console", lambda message: _csp(message.text, problems))
        return opened

    yield new_page
    for context in contexts:
        context.close()
    assert not problems, problems


def _csp(text: str, problems: list[str]) -> None:
    if "Content Security Policy" in text:
        problems.append(f"CSP: {text}")


@pytest.fixture
def page(open_page: Callable[..., Page]) -> Page:
    return open_page()


OpenPage = Callable[..., Page]
Serve = Callable[..., PageServer]


def replying(text: str, **kwargs: Any) -> Agent:
    """An agent that answers every message with ``text`` (``kwargs`` go to its :class:`PacedModel`)."""
    return Agent(PacedModel([[TextPart(text=text)]], repeat_last=True, **kwargs))


def assistant(page: Page) -> Locator:
    """The assistant's bubbles (of the conversation and of its sub-agents)."""
    return page.locator('[data-testid="message"][data-role="assistant"]')


def connected(page: Page, url: str) -> Page:
    """Open ``url`` and wait until the page follows the conversation's event stream."""
    page.goto(url)
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    return page


def send(page: Page, text: str) -> None:
    page.get_by_test_id("composer-input").fill(text)
    page.get_by_test_id("composer-send").click()


def exchange(page: Page, text: str, reply: str) -> None:
    """Send ``text`` and wait for the answer, the whole of the latest assistant bubble: ``reply``."""
    send(page, text)
    expect(assistant(page).last).to_have_text(reply, timeout=10_000)


def audited(page: Page) -> Page:
    """Load axe-core into every document the page opens (as a devtools script: the page's CSP allows
    no inline script, and the page under test must not be changed to allow one)."""
    assert AXE.is_file(), "run scripts/setup_node.sh (npm ci in tests/server/node installs axe-core)"
    page.add_init_script(path=str(AXE))
    return page


def serious_violations(page: Page) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
            .filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")) }))"""
    )
    return found


# Everything the live region says, in order (a screen reader reads each change).
_LISTEN = """
window.__said = [];
new MutationObserver((records) => {
  const region = document.getElementById("announcer");
  if (region && region.textContent && records.some((r) => region.contains(r.target))) {
    window.__said.push(region.textContent);
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def listen_to_live_region(page: Page) -> None:
    """From the next page load on, keep what the page's live region says (see :func:`live_region_said`)."""
    page.add_init_script(_LISTEN)


def live_region_said(page: Page) -> list[str]:
    said: list[str] = page.evaluate("window.__said")
    return said


def test_chat_page_shows_tools_sub_agents_and_resumes(
    server: PageServer, page: Page, open_page: Callable[..., Page]
) -> None:
    page.goto(f"{server.url}/?session=page-test")
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    page.get_by_test_id("composer-input").fill("Prepare the Q3 report")
    page.get_by_test_id("composer-send").click()

    # while the slow tool runs: a notification matched to it, with elapsed seconds ticking
    running = page.locator('[data-testid="notification"][data-tool-name="generate_report"]')
    expect(running).to_have_attribute("data-status", "executing", timeout=10_000)
    expect(running).to_contain_text("running generate_report (")
    # ... and its card in the conversation, with its status and input, while it runs
    card = page.locator('.live-call [data-testid="tool-call"][data-tool-name="generate_report"]')
    expect(card).to_have_attribute("data-status", "running")
    expect(card.get_by_test_id("tool-status")).to_have_text("running")
    expect(card.get_by_test_id("tool-duration")).to_have_text(re.compile(r"^\d+ s$"))
    user = page.locator('[data-testid="message"][data-role="user"][data-session="page-test"]')
    expect(user).to_have_text("Prepare the Q3 report")
    first = page.locator('[data-testid="message"][data-role="assistant"][data-session="page-test"]').first
    expect(first).to_contain_text("I will build the report")
    # changes re-render only the bubble they name: marked elements must survive the rest of the run
    user.evaluate("el => el.setAttribute('data-mark', 'kept')")
    first.evaluate("el => el.setAttribute('data-mark', 'kept')")

    # a second tab opened mid-run resumes from history: the unfinished call shows as running
    other = open_page()
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
    group.locator("> summary").click()
    expect(group.locator('[data-testid="message"]').first).to_be_hidden()
    group.locator("> summary").click()
    expect(group.locator('[data-testid="message"]').first).to_be_visible()

    # reload: the same transcript is rebuilt from the history endpoint
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=10_000)
    _assert_finished_transcript(page)


def _assert_finished_transcript(page: Page) -> None:
    first = page.locator('[data-testid="message"][data-role="assistant"][data-session="page-test"]').first
    expect(first).to_contain_text("I will build the report and ask the researcher.")
    report = first.locator('[data-testid="tool-call"][data-tool-name="generate_report"]')
    expect(report).to_have_attribute("data-status", "done")
    expect(report.get_by_test_id("tool-status")).to_have_text("done")
    expect(report.get_by_test_id("tool-args")).to_have_text('{\n  "quarter": "Q3"\n}')  # pretty, complete
    expect(report.get_by_test_id("tool-args")).to_be_hidden()  # a finished card starts collapsed
    report.locator("summary").click()
    expect(report.get_by_test_id("tool-args")).to_be_visible()
    report.locator("summary").click()
    expect(report.get_by_test_id("tool-result")).to_contain_text("revenue up 12%")
    delegated = first.locator('[data-testid="tool-call"][data-tool-name="researcher"]')
    expect(delegated.get_by_test_id("tool-result")).to_contain_text("Found two archive documents")

    group = page.locator('[data-testid="subsession"][data-session^="page-test.sub_"]')
    expect(group).to_have_count(1)
    expect(group.locator("summary").first).to_have_text("sub-agent researcher")  # its name, not its id
    sub_message = group.locator('[data-testid="message"][data-role="assistant"]')
    expect(sub_message).to_contain_text("Found two archive documents about Q3 churn.")
    search = group.locator('[data-testid="tool-call"][data-tool-name="search_archive"]')
    expect(search.get_by_test_id("tool-result")).to_contain_text("memo from March")
    expect(search.get_by_test_id("tool-from")).to_have_text("from sub-agent researcher")
    # the sub-agent searched, then wrote: its card comes before the text written after it
    assert search.evaluate(
        "card => !!(card.compareDocumentPosition(card.parentElement.querySelector('.text'))"
        " & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    # the sub-agent's call_1 is not confused with the parent's call_1
    expect(page.locator('[data-testid="tool-call"][data-tool-name="search_archive"]')).to_have_count(1)
    expect(page.locator('[data-testid="tool-call"][data-tool-name="generate_report"]')).to_have_count(1)


def test_token_new_chat_and_session_list(page: Page, serve: Callable[..., PageServer]) -> None:
    agent = Agent(ScriptedModel([[TextPart(text="Hello, Alice.")], [TextPart(text="Second chat here.")]]))
    running = serve(agent, tokens={"secret-alice": "alice"})
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
    expect(page.locator('[data-testid="message"][data-role="assistant"]')).to_have_text("Second chat here.")
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


def test_the_page_reaches_every_conversation_page_by_page(
    page: Page, serve: Callable[..., PageServer]
) -> None:
    """GET /api/sessions answers a page at a time (top-level conversations only); the list offers the
    older ones, so none is out of reach."""
    running = serve(build_agent())
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


def test_the_page_shows_every_message_a_busy_tool_publishes_between_heartbeats(
    page: Page, serve: Callable[..., PageServer]
) -> None:
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
    running = serve(agent)
    listen_to_live_region(page)
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
    # a screen reader hears the tool start once, not at each of its progress reports
    assert " ".join(live_region_said(page)).count("Running reporter.") == 1
