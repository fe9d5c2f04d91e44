"""langgraph-toolbudget: keep an agent's tool set small and relevant.

LangGraph nodes that classify the user's intent into tool categories, select
tools under a proportional per-category budget, search the catalog before the
first model turn, and let the model widen its own tool set through meta-tools.

Key Components:
    - :class:`ToolCatalog`: every tool the app has, with metadata, filters and
      a search index (``ToolCatalog.from_tools``, ``await ToolCatalog.from_mcp``).
    - :class:`ToolBudgetState`: the graph state (tool names only).
    - Nodes: :class:`ClassifyIntent`, :class:`SelectTools`, :class:`ToolSearch`,
      :class:`CallModel`, :class:`ToolAgent`, :class:`ToolExecutor`.
    - Prebuilt: :func:`create_toolbudget_agent`, :func:`add_toolbudget_nodes`.
    - :func:`graph_tool`: a compiled graph as a tool (a child run per call).
    - :class:`BudgetConfig`: the options every node shares, validated once.

Algorithms (BM25 index, budget arithmetic, coercion...) live in
:mod:`langgraph_toolbudget.core`; MCP in :mod:`langgraph_toolbudget.mcp`, which is
imported only when used (``ToolCatalog.from_mcp``, or the MCP errors below).
"""

from typing import TYPE_CHECKING, Any

from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog, ToolSpec
from langgraph_toolbudget.core.meta import META_TOOL_NAMES, meta_tool_definitions
from langgraph_toolbudget.core.semantic import HashingEmbeddings, HybridScorer
from langgraph_toolbudget.core.tokens import schema_tokens
from langgraph_toolbudget.nodes.agent import CallModel, ToolAgent
from langgraph_toolbudget.nodes.executor import ToolExecutor
from langgraph_toolbudget.nodes.graph_tool import graph_tool
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.prebuilt import add_toolbudget_nodes, create_toolbudget_agent
from langgraph_toolbudget.nodes.prompt import tools_prompt_section
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.state import ToolBudgetState

if TYPE_CHECKING:
    from langgraph_toolbudget.mcp import MCPLoadError, MCPServerError

_LAZY = {"MCPLoadError", "MCPServerError"}


def __getattr__(name: str) -> Any:
    # The MCP errors are importable from here without paying for the MCP SDK at import time.
    if name in _LAZY:
        from langgraph_toolbudget import mcp

        return getattr(mcp, name)
    raise AttributeError(f"module 'langgraph_toolbudget' has no attribute {name!r}")


__all__ = [
    "META_TOOL_NAMES",
    "BudgetConfig",
    "CallModel",
    "ClassifyIntent",
    "HashingEmbeddings",
    "HybridScorer",
    "MCPLoadError",
    "MCPServerError",
    "SelectTools",
    "ToolAgent",
    "ToolBudgetState",
    "ToolCatalog",
    "ToolExecutor",
    "ToolSearch",
    "ToolSpec",
    "add_toolbudget_nodes",
    "create_toolbudget_agent",
    "graph_tool",
    "meta_tool_definitions",
    "schema_tokens",
    "tools_prompt_section",
]
