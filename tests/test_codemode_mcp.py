"""CodeMode over MCP tools: a program calls real FastMCP servers' tools (stdio processes)
through the catalog's sessions, with the executor's checks; under ``invoke``, ``ainvoke``
and the middleware. Only the chat model is scripted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from mcp_servers import stdio

from langgraph_toolbudget import ToolBudgetMiddleware, create_toolbudget_agent
from langgraph_toolbudget.mcp import MCPToolCatalog, load_mcp_catalog_sync
from langgraph_toolbudget.testing import ScriptedChatModel

CODE = (
    "total = 0\n"
    "for n in range(1, 11):\n"
    "    total = add(a=total, b=multiply(a=n, b=n))\n"
    "print('sum of squares:', total)\n"
    "try:\n"
    "    divide(a=1, b=0)\n"
    "except RuntimeError as e:\n"
    "    print('divide failed:', 'cannot divide by zero' in str(e))\n"
    "try:\n"
    "    add_note(text='x')\n"
    "except PermissionError as e:\n"
    "    print('hidden:', str(e)[:40])\n"
)
EXPECTED = (
    "sum of squares: 385.0\ndivide failed: True\nhidden: Error: 'add_note' exists but is not "
)
OPTIONS: dict[str, Any] = {
    "enabled_builtins": ["python_execution"],
    "tool_call_formats": {"enabled": ["native", "codemode"], "primary": "codemode"},
    "pinned": ["add", "multiply", "divide"],
    "max_tools": 0,
    "search_limit": 0,
}


@pytest.fixture(scope="module")
def catalog() -> Iterator[MCPToolCatalog]:
    cat = load_mcp_catalog_sync(
        {"math": stdio("math_server.py"), "notes": stdio("notes_server.py")}
    )
    try:
        yield cat
    finally:
        cat.close()


def script() -> list[Any]:
    call = {"name": "python_execution", "args": {"code": CODE}, "id": "p1"}
    return [AIMessage("", tool_calls=[call]), AIMessage("done")]


def answer_of(out: dict[str, Any]) -> ToolMessage:
    return next(m for m in out["messages"] if isinstance(m, ToolMessage))


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_a_program_calls_mcp_tools_over_the_catalogs_sessions(catalog, api):
    model = ScriptedChatModel(responses=script(), cycle=False)
    graph = create_toolbudget_agent(model, catalog, **OPTIONS).compile()
    payload = {"messages": [HumanMessage("sum the squares")]}
    out = graph.invoke(payload) if api == "invoke" else await graph.ainvoke(payload)
    answer = answer_of(out)
    assert answer.status == "success", answer.content
    assert answer.content.startswith(EXPECTED)
    assert answer.artifact["codemode"]["tool_calls"] == 22
    assert "def add(a: float, b: float) -> Any:" in model.calls[0][0].content


@pytest.mark.parametrize("api", ["invoke", "ainvoke"])
async def test_the_middleware_runs_the_same_program_over_mcp(catalog, api):
    model = ScriptedChatModel(responses=script(), cycle=False)
    agent = create_agent(model, middleware=[ToolBudgetMiddleware(catalog, **OPTIONS)])
    payload = {"messages": [HumanMessage("sum the squares")]}
    out = agent.invoke(payload) if api == "invoke" else await agent.ainvoke(payload)
    assert answer_of(out).content.startswith(EXPECTED)
