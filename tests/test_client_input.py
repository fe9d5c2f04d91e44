"""A client's run input never changes the visible set or the tool context.

Only our nodes and the management operations (``graph.update_state`` with the context
operations, the CLI, the MCP context server, the opt-in context tools) do. The prebuilt
graphs take an input schema without the budget's fields, the middleware leaves them out of
``create_agent``'s input, and ``add_toolbudget_nodes`` warns about a graph that lets a client
write them.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from agent_tools import weather_and_secret_op
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import StateGraph

from langgraph_toolbudget import (
    ToolBudgetInput,
    ToolBudgetMiddleware,
    ToolBudgetState,
    ToolCatalog,
    add_toolbudget_nodes,
    create_toolbudget_agent,
    exclude_tools,
)
from langgraph_toolbudget.testing import ScriptedChatModel

RAN: list[str] = []


def catalog() -> ToolCatalog:
    return weather_and_secret_op(RAN)


def model_calling(name: str, **args: Any) -> ScriptedChatModel:
    call = {"name": name, "args": args, "id": "c1", "type": "tool_call"}
    return ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")])


HOSTILE_INPUTS = {
    "selected_tools": {"selected_tools": ["secret_op"], "tool_last_used": {"secret_op": 1}},
    "context_tools": {"context_tools": {"secret_op": "include"}},
    "context_tool_modes": {"context_tool_modes": {"secret_op": "always"}},
    "tool_reasons": {"selected_tools": ["secret_op"], "tool_reasons": {"secret_op": {"why": "x"}}},
}


def answer(out: dict[str, Any]) -> ToolMessage:
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    return message


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@pytest.mark.parametrize("hostile", list(HOSTILE_INPUTS))
def test_run_input_cannot_make_a_manual_tool_visible_in_the_prebuilt_graph(hostile):
    app = create_toolbudget_agent(model_calling("secret_op", target="db"), catalog()).compile()
    payload = {"messages": [HumanMessage("run maintenance on db")], **HOSTILE_INPUTS[hostile]}
    out = app.invoke(payload)
    assert RAN == []
    assert answer(out).status == "error"
    assert "secret_op" not in out.get("selected_tools", [])
    assert "secret_op" not in out.get("context_tools", {})


@pytest.mark.parametrize("hostile", list(HOSTILE_INPUTS))
async def test_run_input_cannot_make_a_manual_tool_visible_under_create_agent(hostile):
    middleware = ToolBudgetMiddleware(catalog())
    agent = create_agent(model_calling("secret_op", target="db"), middleware=[middleware])
    payload = {"messages": [HumanMessage("run maintenance on db")], **HOSTILE_INPUTS[hostile]}
    out = await agent.ainvoke(payload)
    assert RAN == []
    assert answer(out).status == "error"
    assert "secret_op" not in out.get("selected_tools", [])


@pytest.mark.parametrize("fresh", [True, False], ids=["thread-that-never-ran", "thread-that-ran"])
def test_run_input_cannot_undo_an_exclusion_the_operator_set(fresh):
    call = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1", "type": "tool_call"}
    script = [AIMessage("", tool_calls=[call]), AIMessage("ok")]
    model = ScriptedChatModel(responses=script if fresh else [AIMessage("hello"), *script])
    app = create_toolbudget_agent(model, catalog()).compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    if fresh:  # a thread that never ran takes a management update as its first node
        app.update_state(config, exclude_tools(tools=["get_weather"]), as_node="choose_tools")
    else:
        app.invoke({"messages": [HumanMessage("hi")]}, config)
        app.update_state(config, exclude_tools(tools=["get_weather"]))  # the operator's decision
    payload = {
        "messages": [HumanMessage("weather in Oslo?")],
        "context_tools": {"get_weather": "include"},
    }
    out = app.invoke(payload, config)
    assert RAN == []
    assert "excluded" in str(answer(out).content)
    assert app.get_state(config).values["context_tools"] == {"get_weather": "exclude"}


def test_the_prebuilt_input_schema_keeps_the_users_own_fields():
    class AppState(ToolBudgetState):
        user_id: str

    graph = create_toolbudget_agent(
        ScriptedChatModel(responses=["hi"]), catalog(), state_schema=AppState
    )
    fields = set(graph.input_schema.__annotations__)
    assert {"messages", "user_id"} <= fields
    assert not fields & {"selected_tools", "context_tools", "tool_reasons", "categories"}
    out = graph.compile().invoke({"messages": [HumanMessage("hi")], "user_id": "u1"})
    assert out["user_id"] == "u1"


def test_add_toolbudget_nodes_warns_about_a_graph_whose_input_takes_the_budget_fields():
    model = ScriptedChatModel(responses=["hi"])
    with pytest.warns(UserWarning, match="input_schema=ToolBudgetInput"):
        add_toolbudget_nodes(StateGraph(ToolBudgetState), model, catalog())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_toolbudget_nodes(
            StateGraph(ToolBudgetState, input_schema=ToolBudgetInput), model, catalog()
        )
