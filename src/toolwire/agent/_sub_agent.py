"""An agent as another agent's tool (``Agent.as_tool``): a sub-agent run in a child session.

The child session hangs under the caller's session and belongs to the caller's owner (the loop checks
both). Its events are forwarded into the caller's stream unchanged, in their own session envelope. When
the sub-agent's run pauses, the tool raises :class:`~toolwire.errors.SubAgentPaused`: the caller's call
waits with it, and the answers come back to this tool as ``ctx.resume``, which continues the same child
session.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from toolwire.agent.loop import AgentRun
from toolwire.errors import SubAgentPaused
from toolwire.tools.context import RunContext
from toolwire.tools.function import Tool, function_tool


def sub_agent_tool(stream: Callable[..., AgentRun[Any]], name: str, description: str) -> Tool:
    """A tool named ``name`` that asks a task of the agent whose ``stream`` it is given, in a child session
    of the calling run."""

    async def delegate(ctx: RunContext[Any], task: str) -> Any:
        resume = ctx.resume
        if resume is not None:  # its run paused earlier: continue it with the answers it waited for
            run = stream(
                session_id=resume.session_id,
                parent=ctx,
                approvals=resume.approvals,
                tool_outputs=resume.tool_outputs,
            )
        else:
            # Random, so nobody can create it first; the loop checks it hangs under this session and
            # belongs to this session's owner.
            run = stream(task, session_id=f"{ctx.session_id}.sub_{secrets.token_hex(8)}", parent=ctx)
        async with run:
            async for event in run:
                ctx.forward(event)
        assert run.result is not None
        if run.result.status == "paused":  # its calls wait for a person: this call waits with them
            raise SubAgentPaused(run.session_id, run.result.pending)
        return run.result.output

    delegate.__doc__ = f"{description}\n\nArgs:\n    task: What to ask the {name} agent, in plain words."
    return function_tool(delegate, name=name, description=description)
