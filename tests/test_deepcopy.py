"""``copy.deepcopy`` of the public objects, as LangGraph's ``ToolNode`` and graphs allow.

What is shared by design (a catalog's derived data, a ``ToolUsage`` history, a
``DatabaseToolbox``) is shared by the copy; a ``ToolExecutor``'s copy runs on a runner of
its own. Real tools, stores and SQLite; only the chat model is scripted.
"""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

from langgraph_toolbudget import (
    BudgetConfig,
    DatabaseToolbox,
    ToolAgent,
    ToolBudgetInput,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    ToolUsage,
    create_toolbudget_agent,
)
from langgraph_toolbudget.testing import ScriptedChatModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def catalog() -> ToolCatalog:
    return ToolCatalog.from_tools([get_weather, send_email], categories={"w": ["get_weather"]})


def weather_call(cid: str = "c1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": cid}])


def test_deepcopy_of_a_catalog_shares_its_derived_data():
    original = catalog()
    index = original.index  # built once, then shared
    copied = copy.deepcopy(original)
    assert copied.tool_names == original.tool_names
    assert copied.derived is original.derived and copied.index is index


def test_deepcopy_of_an_executor_runs_on_a_runner_of_its_own():
    node = ToolExecutor(catalog(), enforce_visibility=False)
    copied = copy.deepcopy(node)
    assert copied.runner is not node.runner
    assert copied.runner.pipeline is not node.runner.pipeline
    assert copied.config is node.config and copied.name == node.name
    assert copied.func.__self__ is copied and copied.afunc.__self__ is copied
    out = copied.invoke({"messages": [weather_call()]})
    assert out["messages"][0].content == "sunny in Rome"


def test_deepcopy_of_a_from_tools_executor_keeps_toolnode_wording():
    node = ToolExecutor.from_tools([get_weather])
    copied = copy.deepcopy(node)
    assert copied.runner.policy.toolnode_wording and not copied._track_use
    ghost = AIMessage("", tool_calls=[{"name": "ghost", "args": {}, "id": "g1"}])
    assert copied.invoke([ghost])[0].content == node.invoke([ghost])[0].content


def test_deepcopy_of_the_prebuilt_graph_compiled_or_not():
    graph = create_toolbudget_agent(
        ScriptedChatModel(responses=[weather_call(), AIMessage("done")]), catalog()
    )
    # A deep-copied compiled graph does not run, LangGraph's own neither (its sentinels are
    # copied): copy the graph, then compile the copy.
    copy.deepcopy(graph.compile())
    app = copy.deepcopy(graph).compile()
    out = app.invoke({"messages": [HumanMessage("weather in Rome")]})
    assert [m.content for m in out["messages"][-2:]] == ["sunny in Rome", "done"]


def test_deepcopy_of_a_config_shares_its_usage_and_database_toolbox(tmp_path: Path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("create table orders (id integer)")
    usage, toolbox = ToolUsage(), DatabaseToolbox({"shop": f"sqlite:///{path}"})
    config = BudgetConfig(usage=usage, database_toolbox=toolbox, group_limits={"g": 2})
    for copied in (copy.deepcopy(config), config.model_copy(deep=True)):
        assert copied == config
        assert copied.usage is usage and copied.database_toolbox is toolbox
        assert copied.group_limits is not config.group_limits
    assert copy.deepcopy(usage) is usage and copy.deepcopy(usage.history) is usage.history


def test_deepcopy_of_an_agent_with_usage_records_into_the_same_history():
    usage = ToolUsage()
    model = ScriptedChatModel(responses=[weather_call(), AIMessage("done")])
    app = copy.deepcopy(create_toolbudget_agent(model, catalog(), usage=usage)).compile()
    app.invoke({"messages": [HumanMessage("weather in Rome")]})
    assert [row["tool"] for row in usage.export()] == ["get_weather"]


def test_deepcopy_of_a_tool_agent_runs_its_own_loop():
    """The copy's loop is compiled anew over its own nodes (a compiled loop copied as it is
    fails at its first run: LangGraph's sentinels are copied with it)."""
    add = {"name": "add_tool", "args": {"tool_names": ["get_weather"]}, "id": "a1"}
    script = [AIMessage("", tool_calls=[add]), weather_call(), AIMessage("done")]
    model = ScriptedChatModel(responses=script)
    node = ToolAgent(model, catalog(), max_tools=2)
    for build in (
        lambda: _in_graph(copy.deepcopy(node)).compile(),
        lambda: copy.deepcopy(_in_graph(node)).compile(),
    ):
        out = build().invoke({"messages": [HumanMessage("weather in Rome")]})
        assert out["messages"][-1].content == "done"
        assert out["messages"][-2].content == "sunny in Rome"
    assert model.i == 0  # the original's scripted model never ran: each copy has its own


def _in_graph(node: ToolAgent) -> StateGraph:
    graph = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph
