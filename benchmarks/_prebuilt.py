"""The prebuilt agent as a plain compiled graph, for ``server_load.py``.

``create_toolbudget_agent`` over the example catalog with the demo model, compiled when the
module loads, as ``_bind_all.py`` compiles the alternative: the two graphs are then served
the same way, without ``examples/server.py``'s graph factory (which the server calls for
every run and state read, to read the run's model and options).
"""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph

from langgraph_toolbudget import create_toolbudget_agent
from langgraph_toolbudget.demo.example_catalog import build_example_catalog
from langgraph_toolbudget.demo.model import DemoChatModel

graph: CompiledStateGraph = create_toolbudget_agent(
    DemoChatModel(), build_example_catalog()
).compile()
