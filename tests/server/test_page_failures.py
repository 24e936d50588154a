"""A provider failing, on the page (issue 27's page part, issue 31 item 4), in a real Chromium.

The primary model is a real OpenAI-compatible HTTP endpoint served by the reliability fault server, which
cuts or refuses at the byte level. A failover mid-answer shows what the failed model streamed as dropped
and a note naming both models; an error stays with its turn, names the model, and Retry puts the prompt
back in the message box.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import expect

from tests.reliability.fault_server import Behaviour, FaultServer, finish_frames, text_frames
from tests.server.test_page import (
    ARTIFACTS,
    DESKTOP,
    OpenPage,
    Serve,
    assistant,
    audited,
    connected,
    send,
    serious_violations,
)
from toolwire import Agent, TextPart
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel
from toolwire.models.scripted import ScriptedModel

pytest_plugins = ["tests.server.test_page"]  # its fixtures: a browser, pages, servers


@pytest.fixture
def faults() -> Iterator[Callable[[list[Behaviour]], str]]:
    """Fault servers on a thread's event loop (the page's server runs on another): each call starts one
    and gives its base URL; all are closed at the end of the test."""
    stops: list[Callable[[], None]] = []
    threads: list[threading.Thread] = []

    def start(behaviours: list[Behaviour]) -> str:
        ready = threading.Event()
        found: dict[str, str] = {}

        async def serve() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            stops.append(lambda: loop.call_soon_threadsafe(stop.set))
            async with FaultServer(behaviours) as server:
                found["url"] = server.base_url
                ready.set()
                await stop.wait()

        thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        thread.start()
        threads.append(thread)
        assert ready.wait(10), "the fault server did not start"
        return found["url"]

    yield start
    for stop in stops:
        stop()
    for thread in threads:
        thread.join(10)


def test_a_failover_shows_the_dropped_attempt_and_who_answered(
    open_page: OpenPage, serve: Serve, faults: Callable[[list[Behaviour]], str]
) -> None:
    # the primary streams half an answer and its connection is cut: the fallback answers
    url = faults([Behaviour(frames=text_frames("The balance is forty-"), cut_after=4)])
    primary = OpenAIChatModel("fault-model", api_key="k", base_url=url)
    fallback = ScriptedModel([[TextPart(text="Your balance is 40 EUR.")]])
    running = serve(Agent(FallbackModel(primary, fallback, breaker=None), retries=0))
    page = audited(open_page(DESKTOP))
    connected(page, f"{running.url}/?session=failover")
    send(page, "What is my balance?")
    expect(assistant(page).last).to_have_text("Your balance is 40 EUR.", timeout=15_000)
    dropped = page.locator('[data-testid="message"][data-dropped="true"]')
    expect(dropped).to_have_count(1)
    expect(dropped).to_contain_text("Dropped")
    expect(dropped).to_contain_text("The balance")
    note = page.locator('[data-testid="message"][data-role="system"][data-level="warning"]')
    expect(note).to_contain_text("Model openai:fault-model failed (")
    expect(note).to_contain_text("answered by scripted:")
    assert serious_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-failover.png"))


def test_an_error_stays_with_its_turn_names_the_model_and_retry_puts_the_prompt_back(
    open_page: OpenPage, serve: Serve, faults: Callable[[list[Behaviour]], str]
) -> None:
    url = faults([Behaviour(status=400, body=b'{"error": {"message": "model not loaded"}}')] * 2)
    running = serve(Agent(OpenAIChatModel("llama3", api_key="k", base_url=url), retries=0))
    page = audited(open_page(DESKTOP))
    connected(page, f"{running.url}/?session=fails")
    send(page, "Summarise my week")
    error = page.locator('[data-testid="message"][data-role="system"][data-level="error"]')
    expect(error).to_contain_text("The answer failed (model ", timeout=15_000)
    expect(error).to_contain_text("llama3")
    # the note follows the turn that failed, in the conversation's order
    assert error.evaluate(
        'el => !!(document.querySelector(\'[data-testid="message"][data-role="user"]\')'
        ".compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    assert serious_violations(page) == []
    expect(page.get_by_test_id("composer-input")).to_have_value("")
    error.get_by_role("button", name="Retry").click()
    expect(page.get_by_test_id("composer-input")).to_have_value("Summarise my week")
    expect(page.get_by_test_id("composer-input")).to_be_focused()


def test_an_error_is_still_with_its_turn_after_a_reload_and_names_the_configured_provider(
    open_page: OpenPage, serve: Serve, faults: Callable[[list[Behaviour]], str]
) -> None:
    # an ollama model: refused once, then it answers the next turn
    answer = text_frames("Your week: three meetings.") + finish_frames("stop")
    url = faults(
        [Behaviour(status=400, body=b'{"error": {"message": "model not loaded"}}'), Behaviour(frames=answer)]
    )
    running = serve(Agent(OpenAIChatModel("llama3", preset="ollama", base_url=url), retries=0))
    page = audited(open_page(DESKTOP))
    connected(page, f"{running.url}/?session=kept")
    send(page, "Summarise my week")
    error = page.locator('[data-testid="message"][data-role="system"][data-level="error"]')
    expect(error).to_contain_text("(model ollama:llama3)", timeout=15_000)  # not openai:llama3
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    send(page, "Try once more")
    expect(assistant(page).last).to_have_text("Your week: three meetings.", timeout=15_000)
    connected(page, f"{running.url}/?session=kept")  # a reload: the error comes from the store now
    expect(error).to_have_count(1)
    expect(error).to_contain_text("The answer failed (model ollama:llama3): ")
    expect(error).to_contain_text("model not loaded")
    # between the turn it ended and the next turn
    order = page.locator('[data-testid="message"]').evaluate_all("els => els.map((e) => e.dataset.role)")
    assert order == ["user", "system", "user", "assistant"], order
    assert serious_violations(page) == []
    error.get_by_role("button", name="Retry").click()
    expect(page.get_by_test_id("composer-input")).to_have_value("Summarise my week")
