"""langgraph-toolbudget: keep an agent's tool set small and relevant.

Its one reason to change: what the package exports (its public face, above every layer).

LangGraph nodes that classify the user's intent into tool categories, select
tools under a proportional per-category budget, search the catalog before the
first model turn, and let the model widen its own tool set through meta-tools.

What ``__all__`` holds, by the three ways in:

    - The prebuilt agent: :func:`create_toolbudget_agent`, over a :class:`ToolCatalog`
      (``ToolCatalog.from_tools``, or ``await load_mcp_catalog(connections)`` for MCP
      servers, with :class:`MCPLoadError` / :class:`MCPServerError`), configured by
      :class:`BudgetConfig` / :class:`BudgetOptions` (``usage=ToolUsage()`` to learn).
    - Nodes in your own graph: :class:`ClassifyIntent`, :class:`SelectTools`,
      :class:`ToolSearch` (or the three as one step, :class:`ChooseTools`),
      :class:`CallModel`, :class:`ToolExecutor`, :class:`ToolAgent`,
      :func:`add_toolbudget_nodes`, over :class:`ToolBudgetState` (run input:
      :class:`ToolBudgetInput`); :func:`tools_to_bind` and :func:`tools_prompt_section`
      for your own model node.
    - Middleware for LangChain's ``create_agent``: :class:`ToolBudgetMiddleware`.
    - SQL sources as built-in tools (``search_schemas``, read-only ``execute_sql``):
      :class:`DatabaseToolbox`, passed as ``database_toolbox=``.
    - A thread's tool context: :func:`include_tools`, :func:`exclude_tools`,
      :func:`set_include_mode` (state updates), applied with :func:`update_context` /
      :func:`aupdate_context` (right on a thread that never ran), :func:`context_summary`.

Everything else is importable from its module: the algorithms (BM25 index, budget
arithmetic, embeddings, coercion...) from :mod:`langgraph_toolbudget.core`, the graph as a
tool from :mod:`langgraph_toolbudget.nodes.graph_tool`, the store-backed tool index from
:mod:`langgraph_toolbudget.nodes.tool_index`; MCP lives in :mod:`langgraph_toolbudget.mcp`,
imported only when used.

Every name below is imported on first use (PEP 562), so ``import
langgraph_toolbudget`` costs next to nothing and each name costs only what it
needs (the nodes import LangGraph; the catalog only langchain-core).
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph_toolbudget.config import BudgetConfig, BudgetOptions
    from langgraph_toolbudget.core.catalog import ToolCatalog
    from langgraph_toolbudget.core.context_ops import (
        context_summary,
        exclude_tools,
        include_tools,
        set_include_mode,
    )
    from langgraph_toolbudget.database import DatabaseToolbox
    from langgraph_toolbudget.mcp import MCPLoadError, MCPServerError, load_mcp_catalog
    from langgraph_toolbudget.middleware import ToolBudgetMiddleware
    from langgraph_toolbudget.nodes.agent import CallModel, ToolAgent
    from langgraph_toolbudget.nodes.choose import ChooseTools
    from langgraph_toolbudget.nodes.executor import ToolExecutor
    from langgraph_toolbudget.nodes.intent import ClassifyIntent
    from langgraph_toolbudget.nodes.prebuilt import add_toolbudget_nodes, create_toolbudget_agent
    from langgraph_toolbudget.nodes.prompt import tools_prompt_section
    from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
    from langgraph_toolbudget.nodes.thread_prompt import tools_to_bind
    from langgraph_toolbudget.nodes.usage import ToolUsage
    from langgraph_toolbudget.state import ToolBudgetInput, ToolBudgetState
    from langgraph_toolbudget.threads import aupdate_context, update_context

_EXPORTS = {
    "BudgetConfig": "config",
    "BudgetOptions": "config",
    "ToolCatalog": "core.catalog",
    "MCPLoadError": "mcp",
    "MCPServerError": "mcp",
    "load_mcp_catalog": "mcp",
    "CallModel": "nodes.agent",
    "ToolAgent": "nodes.agent",
    "ChooseTools": "nodes.choose",
    "ToolExecutor": "nodes.executor",
    "ClassifyIntent": "nodes.intent",
    "add_toolbudget_nodes": "nodes.prebuilt",
    "create_toolbudget_agent": "nodes.prebuilt",
    "tools_prompt_section": "nodes.prompt",
    "tools_to_bind": "nodes.thread_prompt",
    "SelectTools": "nodes.selection",
    "ToolSearch": "nodes.selection",
    "ToolBudgetState": "state",
    "ToolBudgetInput": "state",
    "include_tools": "core.context_ops",
    "exclude_tools": "core.context_ops",
    "set_include_mode": "core.context_ops",
    "context_summary": "core.context_ops",
    "update_context": "threads",
    "aupdate_context": "threads",
    "ToolBudgetMiddleware": "middleware",
    "ToolUsage": "nodes.usage",
    "DatabaseToolbox": "database",
}
"""Public name -> the submodule (below ``langgraph_toolbudget``) that defines it."""


# Hidden from type checkers, which read the names from the imports above: a module
# __getattr__ they could see would type any name imported from the package, misspelt ones
# too, as Any.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'langgraph_toolbudget' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"langgraph_toolbudget.{module}"), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_EXPORTS})


__all__ = [
    "BudgetConfig",
    "BudgetOptions",
    "CallModel",
    "ChooseTools",
    "ClassifyIntent",
    "MCPLoadError",
    "MCPServerError",
    "SelectTools",
    "ToolAgent",
    "ToolBudgetInput",
    "ToolBudgetState",
    "ToolCatalog",
    "ToolExecutor",
    "ToolSearch",
    "add_toolbudget_nodes",
    "create_toolbudget_agent",
    "load_mcp_catalog",
    "tools_prompt_section",
    "tools_to_bind",
    "include_tools",
    "exclude_tools",
    "set_include_mode",
    "context_summary",
    "update_context",
    "aupdate_context",
    "ToolBudgetMiddleware",
    "ToolUsage",
    "DatabaseToolbox",
]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# The middleware extra: `import *` gives the rest without it. Not for type checkers, which
# would apply the removal whatever is installed and refuse the documented
# `from langgraph_toolbudget import ToolBudgetMiddleware` under --strict (no implicit re-export).
if not TYPE_CHECKING and not _installed("langchain"):
    __all__.remove("ToolBudgetMiddleware")
