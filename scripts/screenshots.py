"""Regenerate the chat page's screenshots in docs/images (issue 31): every state at 1280x800 and 390x844.

Run from the repository root (Chromium from scripts/setup_chromium.sh, the dev extras installed):

    python scripts/screenshots.py            # all states
    python scripts/screenshots.py approval   # only the states whose name contains "approval"

Each state is a real server (the page tests' helpers: a scripted agent on a loopback port) driven by a real
Chromium, so the docs show the page as it is. The README shows docs/images/page-1280.png.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers: the server on a thread, scripted agents, the fault server

from tests.reliability.fault_server import Behaviour, FaultServer, text_frames  # noqa: E402
from tests.server.test_page import CHROMIUM, DESKTOP, PHONE, PageServer, build_agent, report_agent  # noqa: E402

from toolwire import Agent, TextPart, ToolCallPart, tool  # noqa: E402
from toolwire.messages import Part  # noqa: E402
from toolwire.models.base import ModelRequest  # noqa: E402
from toolwire.models.fallback import FallbackModel  # noqa: E402
from toolwire.models.openai_chat import OpenAIChatModel  # noqa: E402
from toolwire.models.scripted import ScriptedModel  # noqa: E402

IMAGES = ROOT / "docs" / "images"
VIEWPORTS = {"1280": DESKTOP, "390": PHONE}


@tool(requires_approval=True)
def refund(order_id: str, amount: float, reason: str = "") -> str:
    """Refund part of an order (asks the user first)."""
    return f"refunded {amount} EUR on {order_id}"


@tool(external=True)
def pick_slot(day: str, people: int, flexible: bool) -> str:
    """A delivery slot the user picks (answered in the browser)."""
    raise NotImplementedError  # the client answers


async def crunch(size: int) -> str:
    """Crunches numbers (slow)."""
    await asyncio.sleep(3600)
    return "crunched"


def _support(request: ModelRequest) -> Sequence[Part]:
    last = request.messages[-1]
    if last.role == "tool":
        return [TextPart(text=f"Done: {last.tool_results[0].output}.")]
    word = last.text.split()[0].lower()
    if word == "refund":
        reason = (
            "Parcel arrived crushed; photos in ticket 4411. Customer asks for a partial refund of the lamp."
        )
        args = {"order_id": "A-1042", "amount": 49.9, "reason": reason}
        return [
            ToolCallPart(tool_call_id="call_1", tool_name="refund", args=args, title="Refund order A-1042")
        ]
    if word == "delegate":
        return [
            ToolCallPart(tool_call_id="call_1", tool_name="treasurer", args={"task": "refund order B-77"})
        ]
    if word == "crunch":
        return [
            TextPart(text="Crunching the Q3 numbers now."),
            ToolCallPart(tool_call_id="call_1", tool_name="crunch", args={"size": 9}),
        ]
    days = {"day": "Tuesday", "people": 2, "flexible": True}
    return [
        ToolCallPart(tool_call_id="call_1", tool_name="pick_slot", args=days, title="Pick a delivery slot")
    ]


def _treasurer(request: ModelRequest) -> Sequence[Part]:
    if request.messages[-1].role == "tool":
        return [TextPart(text="The refund was not made.")]
    args = {"order_id": "B-77", "amount": 120.0, "reason": "late delivery"}
    return [ToolCallPart(tool_call_id="call_1", tool_name="refund", args=args, title="Refund order B-77")]


def support_agent() -> Agent:
    treasurer = Agent(ScriptedModel(_treasurer), tools=[refund], name="treasurer")
    return Agent(
        ScriptedModel(_support),
        tools=[refund, pick_slot, crunch, treasurer.as_tool("treasurer", "Handles refunds")],
    )


@contextmanager
def fault_server(behaviours: list[Behaviour]) -> Iterator[str]:
    """The reliability fault server on its own thread's event loop; yields its base URL."""
    ready = threading.Event()
    urls: list[str] = []
    stops: list[Callable[[], object]] = []

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        stops.append(lambda: loop.call_soon_threadsafe(stop.set))
        async with FaultServer(behaviours) as server:
            urls.append(server.base_url)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(10), "the fault server did not start"
    try:
        yield urls[0]
    finally:
        stops[0]()
        thread.join(10)


def _send(page: Page, text: str) -> None:
    page.get_by_test_id("composer-input").fill(text)
    page.get_by_test_id("composer-send").click()


def _open(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.get_by_test_id("status")).to_have_text("connected", timeout=15_000)


def _assistant_says(page: Page, text: str) -> None:
    expect(page.locator('[data-testid="message"][data-role="assistant"]').last).to_contain_text(
        text, timeout=15_000
    )


@dataclass
class State:
    name: str
    """The file name's stem: docs/images/{name}-{width}.png."""
    agent: Callable[[], Agent]
    drive: Callable[[Page, str, bool], None]
    """Bring the page to the state: (page, server URL, first viewport of the state)."""
    dark: bool = False


def _chat(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=q3-report")
    if first:
        _send(page, "How did Paris and Oslo do in Q3?")
    _assistant_says(page, "Paris leads")


def _subagents(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=q3-subagents")
    if first:
        _send(page, "Prepare the Q3 report")
    _assistant_says(page, "revenue is up 12%")


def _running(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=crunch-{'a' if first else 'b'}")
    _send(page, "crunch the numbers")
    expect(page.locator('.live-call [data-testid="tool-call"]')).to_have_attribute("data-status", "running")


def _stopped(page: Page, url: str, first: bool) -> None:
    _running(page, url, first)
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_test_id("marker-stopped")).to_be_visible(timeout=15_000)


def _approval(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=refund-approval")
    if first:
        _send(page, "refund the lamp")
    expect(page.get_by_test_id("approval")).to_be_visible(timeout=15_000)


def _sub_approval(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=refund-delegated")
    if first:
        _send(page, "delegate the refund")
    expect(page.get_by_test_id("approval")).to_be_visible(timeout=15_000)


def _client_form(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=pick-slot")
    if first:
        _send(page, "book a delivery slot")
    expect(page.get_by_test_id("client-tool-form")).to_be_visible(timeout=15_000)


def _failed(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=failing-{'a' if first else 'b'}")
    _send(page, "Summarise my week")
    expect(page.get_by_role("button", name="Retry")).to_be_visible(timeout=15_000)


def _failover(page: Page, url: str, first: bool) -> None:
    _open(page, f"{url}/?session=failover-{'a' if first else 'b'}")
    _send(page, "What is my balance?")
    _assistant_says(page, "Your balance is 40 EUR.")


def _menu(page: Page, url: str, first: bool) -> None:
    _chat(page, url, first)
    if page.viewport_size and page.viewport_size["width"] < 720:
        page.get_by_role("button", name="Conversations").click()
    page.get_by_role("button", name="Actions for How did Paris and Oslo do in Q3?").click()


def _failing_agent() -> Agent:
    # a 400 from a real HTTP endpoint, for as many turns as the screenshots take
    holder = fault_server([Behaviour(status=400, body=b'{"error": {"message": "model not loaded"}}')] * 4)
    url = holder.__enter__()
    _cleanups.append(lambda: holder.__exit__(None, None, None))
    return Agent(OpenAIChatModel("llama3", api_key="k", base_url=url), retries=0)


def _failover_agent() -> Agent:
    holder = fault_server([Behaviour(frames=text_frames("The balance is forty-"), cut_after=4)] * 2)
    url = holder.__enter__()
    _cleanups.append(lambda: holder.__exit__(None, None, None))
    primary = OpenAIChatModel("gpt-4o", api_key="k", base_url=url)
    fallback = ScriptedModel([[TextPart(text="Your balance is 40 EUR.")]], repeat_last=True)
    return Agent(FallbackModel(primary, fallback, breaker=None), retries=0)


_cleanups: list[Callable[[], object]] = []

STATES = [
    State("page", report_agent, _chat),
    State("page-dark", report_agent, _chat, dark=True),
    State("page-subagents", build_agent, _subagents),
    State("page-tool-running", support_agent, _running),
    State("page-stopped", support_agent, _stopped),
    State("page-approval", support_agent, _approval),
    State("page-subagent-approval", support_agent, _sub_approval),
    State("page-client-tool", support_agent, _client_form),
    State("page-error", _failing_agent, _failed),
    State("page-failover", _failover_agent, _failover),
    State("page-menu", report_agent, _menu),
]


def shoot(browser: Browser, state: State) -> list[Path]:
    server = PageServer(state.agent())
    written = []
    try:
        for index, (width, viewport) in enumerate(VIEWPORTS.items()):
            context = browser.new_context(viewport=viewport, color_scheme="dark" if state.dark else "light")  # type: ignore[arg-type]
            page = context.new_page()
            state.drive(page, server.url, index == 0)
            page.mouse.move(0, 0)  # no hover effects
            path = IMAGES / f"{state.name}-{width}.png"
            page.screenshot(path=str(path), animations="disabled", caret="hide")
            written.append(path)
            context.close()
    finally:
        server.stop()
    return written


def main(argv: list[str]) -> None:
    wanted = [s for s in STATES if not argv or any(word in s.name for word in argv)]
    IMAGES.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for state in wanted:
                for path in shoot(browser, state):
                    print(path.relative_to(ROOT))
        finally:
            browser.close()
            for cleanup in _cleanups:
                cleanup()


if __name__ == "__main__":
    main(sys.argv[1:])
