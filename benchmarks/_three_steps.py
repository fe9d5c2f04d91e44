"""The prebuilt agent with its selection as three graph steps, for ``server_load.py``.

``classify_intent -> select_tools -> tool_search -> agent <-> tools``: the graph
``create_toolbudget_agent`` built before it ran the three selection nodes as one step
(``choose_tools``), with the same nodes, options, model and routing edge, so
``--three-steps`` measures what one step instead of three is worth on a server.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_toolbudget import (
    BudgetConfig,
    CallModel,
    ClassifyIntent,
    SelectTools,
    ToolBudgetInput,
    ToolBudgetState,
    ToolExecutor,
    ToolSearch,
)
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel
from langgraph_toolbudget.nodes._node import route_tools

catalog = build_example_catalog()
config = BudgetConfig()
builder = StateGraph(ToolBudgetState, input_schema=ToolBudgetInput)
builder.add_node("classify_intent", ClassifyIntent(catalog, config=config))
builder.add_node("select_tools", SelectTools(catalog, config=config))
builder.add_node("tool_search", ToolSearch(catalog, config=config))
builder.add_node("agent", CallModel(DemoChatModel(), catalog, config=config))
builder.add_node("tools", ToolExecutor(catalog, config=config))
builder.add_edge(START, "classify_intent")
builder.add_edge("classify_intent", "select_tools")
builder.add_edge("select_tools", "tool_search")
builder.add_edge("tool_search", "agent")
builder.add_conditional_edges("agent", route_tools, {"tools": "tools", END: END})
builder.add_edge("tools", "agent")
graph: CompiledStateGraph = builder.compile()
