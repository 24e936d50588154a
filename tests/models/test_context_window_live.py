"""A real server's real context-length error: llama-cpp-python's server (as ``test_llama_cpp_server`` starts
it) with a 256-token context. Its refusal is a :class:`ContextLengthExceeded` stating the window, the model
learns that window, and a session that outgrows it goes on at a larger-window model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.models.test_llama_cpp_server import _serve
from toolwire import Agent
from toolwire.errors import ContextLengthExceeded
from toolwire.events import FailoverEvent
from toolwire.messages import Message
from toolwire.models import collect, estimate_request_tokens, record_usage
from toolwire.models.base import ModelRequest, ModelSettings
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel

pytestmark = pytest.mark.live

SMALL_CTX = 256
SHORT = ModelSettings(temperature=0.0, seed=0, max_tokens=8)


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve(tmp_path_factory.mktemp("llama-small") / "server.log", n_ctx=SMALL_CTX) as base:
        yield base


def _model(base: str) -> OpenAIChatModel:
    return OpenAIChatModel("smollm2", base_url=base, stream=False)


async def test_the_real_servers_refusal_is_typed_and_teaches_the_window(small_server: str) -> None:
    model = _model(small_server)
    assert model.context_window is None  # a self-hosted server's window is not known beforehand
    long = Message.user("Tell me about the weather. " * 80)  # ~480 tokens
    with pytest.raises(ContextLengthExceeded) as raised:
        await collect(model, ModelRequest(messages=[long], settings=SHORT))
    await model.aclose()
    error = raised.value
    assert error.status == 400 and error.limit == SMALL_CTX
    assert error.requested is not None and error.requested > SMALL_CTX
    assert _model(small_server).context_window == SMALL_CTX  # any later model object of that server


async def test_the_estimate_follows_the_real_servers_own_count(small_server: str) -> None:
    """(Before the agents' tests: their requests teach this server's estimates too.) The server reports what
    its tokenizer (and chat template) counted; a few of its answers correct the
    characters-per-token ratio until an unseen request's estimate is within 20 % of its real count."""
    model = _model(small_server)
    sentences = [
        "My parcel of black tea has not arrived yet.",
        "Could you tell me when the order I placed on Monday will be shipped to Paris?",
        "The mug I received was broken, and I would like a refund or a new one sent to my home address.",
        "Please change the delivery address of my last order to the office, since nobody is at home during "
        "the day and the courier keeps leaving notes.",
    ]
    for text in sentences:
        request = ModelRequest(messages=[Message.user(text)], settings=SHORT)
        response = await collect(model, request)
        record_usage(model, request, response.usage)
    for text in ("Where is my tea?", "How long does shipping a parcel of green tea to Lyon take? " * 2):
        probe = ModelRequest(messages=[Message.user(text)], settings=SHORT)
        estimate = estimate_request_tokens(model, probe)
        untaught = estimate_request_tokens(_model("http://127.0.0.1:9/v1"), probe)  # the default ratio
        actual = (await collect(model, probe)).usage.input_tokens
        print(f"{text[:20]!r}: estimate {estimate}, untaught {untaught}, the server's count {actual}")
        assert actual > 0 and abs(estimate - actual) <= 0.2 * actual
    await model.aclose()


async def test_a_session_that_outgrows_the_small_window_goes_on_at_a_larger_one(
    small_server: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with _serve(tmp_path_factory.mktemp("llama-large") / "server.log", n_ctx=2048) as large_server:
        agent = Agent(
            FallbackModel(_model(small_server), larger_context=_model(large_server), breaker=None),
            model_settings=SHORT,
            retries=0,
        )
        answered_by: list[str | None] = []
        session = "outgrowing"
        for turn in range(6):
            events = [
                e async for e in agent.stream(f"Turn {turn}: " + "note this down. " * 12, session_id=session)
            ]
            assert events[-1].status == "completed"  # type: ignore[union-attr]
            answered_by.append(next((e.to_model for e in events if isinstance(e, FailoverEvent)), None))
        await agent.aclose()
    # The first turns fit the small window; once the history outgrew it, every turn went on elsewhere.
    assert answered_by[0] is None and answered_by[-1] == "smollm2"


async def test_a_session_that_outgrows_the_small_window_goes_on_there_compacted(small_server: str) -> None:
    """(Last in this module: its requests teach the estimates of this server's model.) Without a larger model: the server's refusal teaches the window, the step is compacted (older turns
    summarised by the same small model, or left out when its summary does not fit) and asked again, and
    every later turn is compacted before it is sent."""
    model = _model(small_server)
    agent = Agent(model, model_settings=SHORT, retries=0)
    session = "compacted"
    for turn in range(6):
        events = [
            e async for e in agent.stream(f"Turn {turn}: " + "note this down. " * 12, session_id=session)
        ]
        assert events[-1].status == "completed", events[-2:]  # type: ignore[union-attr]
    store = await agent.get_store()
    assert len([m for m in await store.raw_messages(session) if m.role == "user"]) == 6  # all kept
    assert model.context_window == SMALL_CTX
    await agent.aclose()
