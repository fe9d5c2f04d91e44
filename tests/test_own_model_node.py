"""A model node of your own: ``tools_to_bind`` gives it every tool it may call this turn.

The README's recipe (your node, the selection nodes in front, ``ToolExecutor`` for the tools)
binds ``tools_to_bind(catalog, state, config=config)``: the meta-tools, the output tools once a
result was offloaded, the visible tools; nothing hidden.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.store.memory import InMemoryStore

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    SelectTools,
    ToolBudgetInput,
    ToolBudgetState,
    ToolCatalog,
    ToolExecutor,
    exclude_tools,
    tools_to_bind,
)
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.execution.output_tools import OUTPUT_TOOL_NAMES
from langgraph_toolbudget.testing import ScriptedChatModel


@tool
def export_orders() -> str:
    """Export every order of the shop as JSON (large)."""
    return json.dumps({"orders": [{"id": i, "total_eur": i % 97} for i in range(8000)]})


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


@tool
def secret_op(target: str) -> str:
    """Run the privileged maintenance operation."""
    return "done"


def catalog() -> ToolCatalog:
    return ToolCatalog.from_tools(
        [export_orders, get_weather, secret_op],
        categories={"shop": ["export_orders"], "weather": ["get_weather"], "ops": ["secret_op"]},
        tool_metadata={"secret_op": {"include": "manual"}},
    )


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def own_graph(model: ScriptedChatModel, cat: ToolCatalog, config: BudgetConfig) -> Any:
    def agent(state: ToolBudgetState) -> dict[str, Any]:  # the README's own model node
        bound = model.bind_tools(tools_to_bind(cat, state, config=config))
        return {"messages": [bound.invoke(state["messages"])]}

    g = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
    g.add_node("select_tools", SelectTools(cat, config=config))
    g.add_node("agent", agent)
    g.add_node("tools", ToolExecutor(cat, config=config))
    g.add_edge(START, "select_tools")
    g.add_edge("select_tools", "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(store=InMemoryStore())


def test_an_own_model_node_is_bound_the_output_tools_once_a_result_is_offloaded():
    def query(messages: list[Any], bound: list[str]) -> AIMessage:
        stub = next(m for m in messages if isinstance(m, ToolMessage))
        handle = stub.artifact["offloaded"]["handle"]
        return call(
            "query_large_output", {"handle": handle, "jq_expression": ".orders | length"}, "q"
        )

    model = ScriptedChatModel(
        responses=[call("export_orders", {}, "e"), query, AIMessage("8000 orders")], cycle=False
    )
    cat = catalog()
    config = BudgetConfig(max_tools=3)
    out = own_graph(model, cat, config).invoke({"messages": [("user", "export the shop orders")]})
    first, second, third = model.bound_tools
    assert first[: len(META_TOOL_NAMES)] == list(META_TOOL_NAMES)
    assert not set(OUTPUT_TOOL_NAMES) & set(first)  # nothing offloaded yet: nothing to read
    assert set(OUTPUT_TOOL_NAMES) <= set(second)  # the stub asks for them: they are bound
    answer = next(m for m in out["messages"] if getattr(m, "tool_call_id", None) == "q")
    assert answer.status == "success" and "8000" in answer.content
    assert "secret_op" not in {*first, *second, *third}  # manual: never bound unless included


def test_tools_to_bind_is_what_call_model_binds_and_hides_what_the_thread_excluded():
    cat = catalog()
    config = BudgetConfig(max_tools=3)
    state = {
        "messages": [("user", "weather?")],
        "selected_tools": ["get_weather", "export_orders"],
        **exclude_tools(tools=["export_orders"]),
    }
    names = [t.name for t in tools_to_bind(cat, state, config=config)]
    assert names[: len(META_TOOL_NAMES)] == list(META_TOOL_NAMES)
    assert "get_weather" in names and "export_orders" not in names and "secret_op" not in names
    model = ScriptedChatModel(responses=["ok"])
    CallModel(model, cat, config=config).invoke(state)
    assert model.bound_tools == [names]
