"""Every private upstream name this package uses, in one place.

Each import says what it replaces and the versions it was checked against, so an
upgrade that breaks one shows up here first. Nothing else in the package imports
a private name of LangGraph, LangChain, the MCP adapters or the MCP SDK.
"""

from __future__ import annotations

# LangGraph's node runnable: runs a sync and an async function under invoke/ainvoke and
# passes `config` (and `runtime`) by signature, as LangGraph's own nodes and ToolNode do.
# The public alternative, RunnableLambda, adds a tracing span per node and no `runtime`.
# Checked: langgraph 1.0.x - 1.2.22.
from langgraph._internal._runnable import RunnableCallable

__all__ = ["RunnableCallable"]
