"""``estimate_request_tokens``: characters over a per-model ratio, corrected by the usage providers report."""

from __future__ import annotations

from toolwire.messages import FilePart, Message, TextPart, ToolCallPart, ToolResultPart, Usage
from toolwire.models import estimate_request_tokens, record_usage
from toolwire.models._tokens import (
    DEFAULT_CHARS_PER_TOKEN,
    FILE_TOKENS,
    MESSAGE_OVERHEAD,
    Sizes,
    chars_per_token,
    failed_attempt_usage,
)
from toolwire.models.base import ModelRequest, ToolDefinition
from toolwire.models.openai_chat import OpenAIChatModel

TOOL = ToolDefinition(name="lookup", description="Find an order.", parameters={"type": "object"})


def _model(name: str) -> OpenAIChatModel:
    return OpenAIChatModel(name, api_key="k", base_url="http://127.0.0.1:9/v1")


def _history(turns: int) -> list[Message]:
    history: list[Message] = []
    for i in range(turns):
        call = ToolCallPart("lookup", tool_call_id=f"c{i}", args={"order_id": f"A-{i}"})
        result = ToolResultPart(
            "lookup", tool_call_id=f"c{i}", output={"status": "shipped", "note": "x" * 200}
        )
        history += [
            Message.user(f"Where is order A-{i}?"),
            Message(role="assistant", parts=(TextPart("Looking."), call)),
            Message(role="tool", parts=(result,)),
        ]
    return history


def test_an_unknown_model_is_estimated_at_the_default_ratio() -> None:
    model = _model("estimator-default")
    request = ModelRequest(messages=[Message.user("a" * 700)], instructions="b" * 70)
    assert chars_per_token(model) == DEFAULT_CHARS_PER_TOKEN
    assert estimate_request_tokens(model, request) == 770 / DEFAULT_CHARS_PER_TOKEN + MESSAGE_OVERHEAD
    bigger = ModelRequest(messages=_history(10), tools=[TOOL])
    assert estimate_request_tokens(model, bigger) > estimate_request_tokens(
        model, ModelRequest(messages=_history(5), tools=[TOOL])
    )
    with_file = ModelRequest(messages=[Message(role="user", parts=(FilePart("image/png", data="aGk="),))])
    assert estimate_request_tokens(model, with_file) == FILE_TOKENS + MESSAGE_OVERHEAD


def test_reported_usage_corrects_the_ratio_of_that_model_only() -> None:
    model, other = _model("estimator-dense"), _model("estimator-other")

    def reported(request: ModelRequest) -> int:
        """What a tokenizer of 2 characters per token (plus the per-message overhead) would count."""
        chars = sum(len(m.parts[0].text) for m in request.messages if isinstance(m.parts[0], TextPart))
        return chars // 2 + MESSAGE_OVERHEAD * len(request.messages)

    for turn in range(1, 5):
        request = ModelRequest(messages=[Message.user("z" * (400 * turn))])
        record_usage(model, request, Usage(input_tokens=reported(request)))
    unseen = ModelRequest(messages=[Message.user("y" * 10_000)])
    assert abs(estimate_request_tokens(model, unseen) - reported(unseen)) <= 0.05 * reported(unseen)
    assert chars_per_token(other) == DEFAULT_CHARS_PER_TOKEN  # another model keeps its own ratio
    record_usage(model, unseen, Usage())  # a provider that reports no input tokens changes nothing
    assert abs(chars_per_token(model) - 2.0) < 0.15


def test_a_failed_attempt_counts_what_it_probably_cost() -> None:
    model = _model("estimator-failed")
    request = ModelRequest(messages=[Message.user("q" * 350)])
    assert failed_attempt_usage(model, request) == Usage()  # never answered (refused, HTTP error): not billed
    cut = failed_attempt_usage(model, request, answered=True, streamed_chars=35)
    assert cut == Usage(input_tokens=estimate_request_tokens(model, request), output_tokens=10, requests=1)
    stated = Usage(input_tokens=120, requests=1)  # what the provider reported before the cut
    assert failed_attempt_usage(model, request, reported=stated, answered=True, streamed_chars=35) == stated


def test_a_runs_sizes_give_the_same_estimates_and_measure_each_message_once() -> None:
    """``Sizes`` (a run's measures, reused from step to step) changes no estimate, whether the next request
    extends the last one, replaces a message in its middle (a compaction's stand-in) or is shorter; and a
    growing history is measured once per message, not once per step."""
    model = _model("estimator-sizes")
    sizes = Sizes()
    history = _history(30)
    counted: list[Message] = []
    original = Sizes.message_chars

    def counting(self: Sizes, message: Message) -> tuple[int, int]:
        counted.append(message)
        return original(self, message)

    Sizes.message_chars = counting  # type: ignore[method-assign]
    try:
        for end in range(1, len(history) + 1):  # a run's steps: the history grows
            request = ModelRequest(messages=tuple(history[:end]), tools=[TOOL], instructions="Be brief.")
            assert estimate_request_tokens(model, request, sizes) == estimate_request_tokens(model, request)
    finally:
        Sizes.message_chars = original  # type: ignore[method-assign]
    assert len(counted) == len(history)  # each measured once
    trimmed = list(history)
    trimmed[2] = Message(
        role="tool", parts=(ToolResultPart("lookup", tool_call_id="c0", output="[left out]"),)
    )
    for messages in (tuple(trimmed), tuple(history[:10]), tuple(history), ()):
        request = ModelRequest(messages=messages, tools=[TOOL])
        assert estimate_request_tokens(model, request, sizes) == estimate_request_tokens(model, request)
