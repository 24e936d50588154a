"""A failover shows as one line in the CLI's live output, after the dropped partial text."""

from __future__ import annotations

import io

from rich.console import Console

from toolwire.cli._output import EventPrinter
from toolwire.events import FailoverEvent, TextDeltaEvent


def test_a_failover_is_one_line_after_the_dropped_text() -> None:
    buffer = io.StringIO()
    printer = EventPrinter(Console(file=buffer, width=300, force_terminal=False), "S")
    envelope = {"session_id": "S", "interaction_id": "i"}
    printer(TextDeltaEvent(**envelope, id="m-0", delta="Let me lo", message_id="m"))
    printer(
        FailoverEvent(
            **envelope,
            step=1,
            message_id="m",
            from_provider="anthropic",
            from_model="claude-sonnet-4-5",
            to_provider="openai",
            to_model="gpt-4o",
            reason="anthropic:claude-sonnet-4-5 HTTP 529: overloaded",
            error_type="ProviderHTTPError",
            status=529,
            dropped_output=True,
        )
    )
    printer(TextDeltaEvent(**envelope, id="m-0", delta="Let me look.", message_id="m"))
    printer.close()
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "Let me lo",
        "↪ failover anthropic:claude-sonnet-4-5 → openai:gpt-4o (anthropic:claude-sonnet-4-5 HTTP 529: "
        "overloaded); what it streamed is dropped",
        "Let me look.",
    ]
