"""``FallbackModel`` on its own (``collect``, direct streaming) and as ``Agent([...])``."""

from __future__ import annotations

import socket

import pytest

from tests.reliability.fault_server import Behaviour, FaultServer, finish_frames, text_frames
from toolwire import Agent
from toolwire.errors import ConfigError, ProviderConnectionError, ProviderHTTPError
from toolwire.messages import Message
from toolwire.models import Breaker, collect, infer_model
from toolwire.models.base import ModelRequest
from toolwire.models.fallback import FallbackModel
from toolwire.models.openai_chat import OpenAIChatModel

GOOD = Behaviour(frames=text_frames("All good.") + finish_frames("stop"))
REQUEST = ModelRequest(messages=[Message.user("hi")])


def chat_model(base_url: str) -> OpenAIChatModel:
    return OpenAIChatModel("fault-model", api_key="test", base_url=base_url)


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


async def test_collect_fails_over_before_the_answer_starts() -> None:
    async with FaultServer([GOOD]) as server:
        model = FallbackModel(chat_model(dead_url()), chat_model(server.base_url), breaker=None)
        response = await collect(model, REQUEST)
        await model.aclose()
    assert response.text == "All good."


async def test_direct_streaming_does_not_fail_over_once_the_answer_started() -> None:
    cut = Behaviour(frames=text_frames("All good, and more.") + finish_frames("stop"), cut_after=3)
    async with FaultServer([cut]) as primary, FaultServer([GOOD]) as fallback:
        model = FallbackModel(chat_model(primary.base_url), chat_model(fallback.base_url), breaker=None)
        with pytest.raises(ProviderConnectionError):
            await collect(model, REQUEST)
        await model.aclose()
    assert fallback.requests == []  # what was yielded cannot be taken back from a direct caller


async def test_a_non_retryable_error_is_raised_without_asking_the_fallback() -> None:
    bad = Behaviour(status=401, body=b'{"error": {"message": "no", "type": "invalid_api_key"}}')
    async with FaultServer([bad]) as primary, FaultServer([GOOD]) as fallback:
        model = FallbackModel(chat_model(primary.base_url), chat_model(fallback.base_url))
        with pytest.raises(ProviderHTTPError):
            await collect(model, REQUEST)
        assert model.fails_over(ProviderHTTPError("x", status=401)) is False
        listed = FallbackModel(model.primary, chat_model(fallback.base_url), failover_on=[401])
        assert listed.fails_over(ProviderHTTPError("x", status=401))
        await model.aclose()
    assert fallback.requests == []


def test_a_list_of_models_is_a_fallback_model() -> None:
    first, second = chat_model("http://127.0.0.1:9/v1"), chat_model("http://127.0.0.1:10/v1")
    agent = Agent([first, second])
    assert isinstance(agent.model, FallbackModel) and agent.model.models == (first, second)
    assert infer_model([first]) is first
    with pytest.raises(ConfigError):
        infer_model([])
    with pytest.raises(ConfigError):
        FallbackModel(first)
    with pytest.raises(ConfigError):
        Breaker(failures=0)


def test_when_every_breaker_is_open_the_cooldown_ending_first_leads() -> None:
    first, second = chat_model("http://127.0.0.1:11/v1"), chat_model("http://127.0.0.1:12/v1")
    model = FallbackModel(first, second, breaker=Breaker(failures=1, window=60.0, cooldown=60.0))
    assert model.candidates() == (first, second)
    error = ProviderHTTPError("down", status=503, retryable=True)
    assert model.after_failure(second, error, [first]) == [first]  # counted: second opens first
    assert model.candidates() == (first,)
    model.failed(first, error)
    assert model.candidates() == (second, first)  # both cooling down: a try rather than no answer
    model.answered(second)  # a success closes it
    assert model.candidates() == (second,)  # the primary still cools down
