"""The alternative to the tool-budget agent, for ``server_load.py``: every tool bound.

LangChain's ``create_agent`` over the example catalog's 40 tools, all bound to the same
offline demo model on every call (what a user without this package would serve).
"""

from __future__ import annotations

from langchain.agents import create_agent
from langgraph.graph.state import CompiledStateGraph

from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

graph: CompiledStateGraph = create_agent(
    DemoChatModel(), tools=[spec.tool for spec in build_example_catalog().specs]
)
