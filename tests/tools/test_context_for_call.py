"""``RunContext.for_call`` is spelled out for speed: it must still carry every field but the call."""

from __future__ import annotations

import dataclasses

from toolwire.messages import Message, ToolCallPart
from toolwire.tools.context import RunContext


def test_for_call_keeps_every_other_field() -> None:
    ctx: RunContext[dict[str, int]] = RunContext(
        deps={"a": 1},
        session_id="s",
        user_session_id="u",
        interaction_id="i",
        parent_session_id="p",
        step=3,
        messages=(Message.user("hi"),),
        agent_name="agent",
        resumes={"c0": object()},  # type: ignore[dict-item]
    )
    call = ToolCallPart(tool_call_id="c1", tool_name="t", args={})
    derived = ctx.for_call(call)
    assert derived.call is call
    for f in dataclasses.fields(RunContext):
        if f.name != "call":
            assert getattr(derived, f.name) is getattr(ctx, f.name), f.name
