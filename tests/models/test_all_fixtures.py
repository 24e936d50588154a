"""Every recorded fixture is replayed by some adapter test (and only the cross-provider one by two)."""

from __future__ import annotations

from tests.cassettes import all_fixtures
from tests.models import test_anthropic, test_bedrock, test_gemini, test_openai_chat, test_openai_responses

CROSS_PROVIDER = (
    "pydantic-ai/tests/models/cassettes/test_google/test_thinking_with_tool_calls_from_other_model.yaml"
)


def test_every_recording_is_replayed_by_an_adapter_test() -> None:
    lists = {
        "openai_chat": test_openai_chat.FIXTURES + test_openai_chat.FOCUSED_FIXTURES,
        "openai_responses": test_openai_responses.FIXTURES,
        "anthropic": test_anthropic.FIXTURES + test_anthropic.FOCUSED_FIXTURES,
        "bedrock": test_bedrock.FIXTURES,
        "gemini": test_gemini.FIXTURES,
    }
    covered = [path for paths in lists.values() for path in paths]
    assert sorted(set(covered)) == all_fixtures()
    # 46 copied whole, then 4 more (SOURCES.md, "Added for issue 16"): 1 whole file and 3 excerpts.
    assert len(all_fixtures()) == 50
    duplicates = {p for p in covered if covered.count(p) > 1}
    assert duplicates <= {CROSS_PROVIDER}
