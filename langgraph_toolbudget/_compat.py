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

from collections.abc import Callable
from typing import Any

# LangGraph's node runnable: runs a sync and an async function under invoke/ainvoke and
# passes `config` (and `runtime`) by signature, as LangGraph's own nodes and ToolNode do.
# The public alternative, RunnableLambda, adds a tracing span per node and no `runtime`.
# Checked: langgraph 1.0.x - 1.2.22.
from langgraph._internal._runnable import RunnableCallable

__all__ = [
    "RunnableCallable",
    "has_injected_args",
    "injector_for",
    "is_invalid_resume",
    "runtime_of",
]


# --- LangGraph prebuilt: argument injection for tools (InjectedState, InjectedStore,
# ToolRuntime, InjectedToolCallId), so every call, injected or not, runs through our own
# pipeline and behaves as under ToolNode. `_get_all_injected_args` finds a tool's injected
# parameters; `ToolNode._inject_tool_args` fills them (strips model-forged values, raises
# on a missing store or state key). The runtime travels in the config under
# CONFIG_KEY_RUNTIME. Checked: langgraph 1.0.x - 1.2.22, langgraph-prebuilt 1.0.x - 1.1.2.
from langgraph._internal._constants import CONF, CONFIG_KEY_RUNTIME  # noqa: E402
from langgraph.prebuilt.tool_node import ToolNode, _get_all_injected_args  # noqa: E402


def has_injected_args(tool: Any) -> bool:
    """Does LangGraph inject any of this tool's arguments?"""
    return bool(_get_all_injected_args(tool).all_injected_keys)


def injector_for(tool: Any) -> Callable[[Any, Any], Any]:
    """A function ``(tool_call, tool_runtime) -> tool_call`` with the injected arguments filled."""
    node = ToolNode([tool])

    def inject(call: Any, runtime: Any) -> Any:
        return node._inject_tool_args(call, runtime, tool)

    return inject


def runtime_of(config: Any) -> Any:
    """LangGraph's ``Runtime`` of the running graph (context, store, stream writer), or None."""
    return (config or {}).get(CONF, {}).get(CONFIG_KEY_RUNTIME)


try:  # langgraph >= 1.1 marks a resume value that fails an interrupt's schema
    from langgraph.errors import is_invalid_resume
except ImportError:  # pragma: no cover - older langgraph never marks it

    def is_invalid_resume(error: BaseException) -> bool:
        return False
