"""langgraph-toolbudget: keep an agent's tool set small and relevant.

Its one reason to change: what the package exports (its public face, above every layer).

LangGraph nodes that classify the user's intent into tool categories, select
tools under a proportional per-category budget, search the catalog before the
first model turn, and let the model widen its own tool set through meta-tools.

Key Components:
    - :class:`ToolCatalog`: every tool the app has, with metadata, filters and
      a search index (``ToolCatalog.from_tools``); :func:`load_mcp_catalog`: the
      catalog of MCP servers' tools (``await load_mcp_catalog(connections)``).
    - :class:`ToolBudgetState`: the graph state (tool names only).
    - Nodes: :class:`ClassifyIntent`, :class:`SelectTools`, :class:`ToolSearch`,
      :class:`CallModel`, :class:`ToolAgent`, :class:`ToolExecutor`.
    - Prebuilt: :func:`create_toolbudget_agent`, :func:`add_toolbudget_nodes`.
    - :func:`graph_tool`: a compiled graph as a tool (a child run per call).
    - :class:`BudgetConfig`: the options every node shares, validated once.

Algorithms (BM25 index, budget arithmetic, coercion...) live in
:mod:`langgraph_toolbudget.core`; MCP in :mod:`langgraph_toolbudget.mcp`, which is
imported only when used (``load_mcp_catalog``, or the MCP errors below).

Every name below is imported on first use (PEP 562), so ``import
langgraph_toolbudget`` costs next to nothing and each name costs only what it
needs (the nodes import LangGraph; the catalog only langchain-core).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph_toolbudget.config import BudgetConfig, BudgetOptions
    from langgraph_toolbudget.core.catalog import ToolCatalog, ToolSpec
    from langgraph_toolbudget.core.context_ops import (
        context_summary,
        exclude_tools,
        include_tools,
        set_include_mode,
    )
    from langgraph_toolbudget.core.meta import META_TOOL_NAMES, meta_tool_definitions
    from langgraph_toolbudget.core.semantic import HashingEmbeddings, HybridScorer
    from langgraph_toolbudget.core.tokens import schema_tokens
    from langgraph_toolbudget.mcp import MCPLoadError, MCPServerError, load_mcp_catalog
    from langgraph_toolbudget.middleware import ToolBudgetMiddleware
    from langgraph_toolbudget.nodes.agent import CallModel, ToolAgent
    from langgraph_toolbudget.nodes.executor import ToolExecutor
    from langgraph_toolbudget.nodes.graph_tool import graph_tool
    from langgraph_toolbudget.nodes.intent import ClassifyIntent
    from langgraph_toolbudget.nodes.prebuilt import add_toolbudget_nodes, create_toolbudget_agent
    from langgraph_toolbudget.nodes.prompt import tools_prompt_section
    from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
    from langgraph_toolbudget.nodes.tool_index import StoreToolIndex
    from langgraph_toolbudget.nodes.usage import ToolUsage
    from langgraph_toolbudget.state import ToolBudgetInput, ToolBudgetState

_EXPORTS = {
    "BudgetConfig": "config",
    "BudgetOptions": "config",
    "ToolCatalog": "core.catalog",
    "ToolSpec": "core.catalog",
    "META_TOOL_NAMES": "core.meta",
    "meta_tool_definitions": "core.meta",
    "HashingEmbeddings": "core.semantic",
    "HybridScorer": "core.semantic",
    "schema_tokens": "core.tokens",
    "MCPLoadError": "mcp",
    "MCPServerError": "mcp",
    "load_mcp_catalog": "mcp",
    "CallModel": "nodes.agent",
    "ToolAgent": "nodes.agent",
    "ToolExecutor": "nodes.executor",
    "graph_tool": "nodes.graph_tool",
    "ClassifyIntent": "nodes.intent",
    "add_toolbudget_nodes": "nodes.prebuilt",
    "create_toolbudget_agent": "nodes.prebuilt",
    "tools_prompt_section": "nodes.prompt",
    "SelectTools": "nodes.selection",
    "ToolSearch": "nodes.selection",
    "ToolBudgetState": "state",
    "ToolBudgetInput": "state",
    "include_tools": "core.context_ops",
    "exclude_tools": "core.context_ops",
    "set_include_mode": "core.context_ops",
    "context_summary": "core.context_ops",
    "ToolBudgetMiddleware": "middleware",
    "ToolUsage": "nodes.usage",
    "StoreToolIndex": "nodes.tool_index",
}
"""Public name -> the submodule (below ``langgraph_toolbudget``) that defines it."""


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
    "ClassifyIntent",
    "HashingEmbeddings",
    "HybridScorer",
    "MCPLoadError",
    "MCPServerError",
    "META_TOOL_NAMES",
    "SelectTools",
    "ToolAgent",
    "ToolBudgetInput",
    "ToolBudgetState",
    "ToolCatalog",
    "ToolExecutor",
    "ToolSearch",
    "ToolSpec",
    "add_toolbudget_nodes",
    "create_toolbudget_agent",
    "graph_tool",
    "load_mcp_catalog",
    "meta_tool_definitions",
    "schema_tokens",
    "tools_prompt_section",
    "include_tools",
    "exclude_tools",
    "set_include_mode",
    "context_summary",
    "ToolBudgetMiddleware",
    "ToolUsage",
    "StoreToolIndex",
]
