"""LangGraph: a model node returning scripted AIMessages with tool calls, a ToolNode, tools_condition;
checkpointer none or AsyncSqliteSaver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

NAME = "langgraph"
STORES = ("none", "sqlite")


async def run(calls: int, steps: int, store: str, tmp: Path) -> int:
    executed = 0
    step = 0

    @tool
    async def noop(i: int) -> str:
        """Does nothing."""
        nonlocal executed
        executed += 1
        return "ok"

    async def model(state: MessagesState) -> dict[str, Any]:
        nonlocal step
        step += 1
        if step > steps:
            return {"messages": [AIMessage(content="done")]}
        tool_calls = [{"name": "noop", "args": {"i": i}, "id": f"c{step}_{i}", "type": "tool_call"} for i in range(calls)]
        return {"messages": [AIMessage(content="", tool_calls=tool_calls)]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([noop]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    config = {"recursion_limit": 2 * steps + 10, "configurable": {"thread_id": "bench"}}
    if store == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp / "lg.db")) as saver:
            app = graph.compile(checkpointer=saver)
            await app.ainvoke({"messages": [("user", "go")]}, config)
    else:
        app = graph.compile()
        await app.ainvoke({"messages": [("user", "go")]}, config)
    return executed
