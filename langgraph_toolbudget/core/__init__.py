"""Pure logic: catalog, search, budget arithmetic, working set, coercion, meta-tools.

Its one reason to change: what the pure-logic layer holds (each module below says its own).

Nothing here is a LangGraph node; the adapters in :mod:`langgraph_toolbudget.nodes`,
:mod:`langgraph_toolbudget.execution` and :mod:`langgraph_toolbudget.mcp` are thin layers over it.
"""
