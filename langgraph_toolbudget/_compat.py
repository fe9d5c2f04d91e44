"""Every private upstream name this package uses, in one place.

Each import says what it replaces and the versions it was checked against, so an
upgrade that breaks one shows up here first. Nothing else in the package imports
a private name of LangGraph, LangChain, the MCP adapters or the MCP SDK.

The MCP adapters' and MCP SDK's private names are in the sibling
:mod:`langgraph_toolbudget._compat_mcp`: this module is imported by the core, and
importing the core must not load the MCP SDK, so the MCP part is imported only by
:mod:`langgraph_toolbudget.mcp`. The two modules are that one place:

- here: LangGraph's ``RunnableCallable``;
- ``_compat_mcp``: ``_MCPCallbacks``, ``_build_interceptor_chain``,
  ``_convert_call_tool_result``, ``_handle_mcp_tool_error``, ``_list_all_tools``
  (langchain-mcp-adapters), ``next_request_id`` and ``transport_closed`` (read the
  MCP SDK's ``BaseSession._request_id`` and ``BaseSession._read_stream``).
"""

from __future__ import annotations

# LangGraph's node runnable: runs a sync and an async function under invoke/ainvoke and
# passes `config` (and `runtime`) by signature, as LangGraph's own nodes and ToolNode do.
# The public alternative, RunnableLambda, adds a tracing span per node and no `runtime`.
# Checked: langgraph 1.0.x - 1.2.22.
from langgraph._internal._runnable import RunnableCallable

__all__ = ["RunnableCallable"]
