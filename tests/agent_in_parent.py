"""The package's agent compiled as a subgraph node of a ``MessagesState`` parent graph.

Served by the tests' ``langgraph dev`` (graph ``toolbudget_in_parent``): the parent's state has
no tool-context fields (they live in the subgraph's state), so the CLI and the MCP context
server must refuse a tool-context update on its threads instead of reporting a dropped one.
"""

from langgraph.graph import START, MessagesState, StateGraph

from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

agent = create_toolbudget_agent(DemoChatModel(), build_example_catalog())
parent = StateGraph(MessagesState)
parent.add_node("assistant", agent.compile(checkpointer=True))
parent.add_edge(START, "assistant")
graph = parent
