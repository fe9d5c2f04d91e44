"""langgraph-toolbudget: keep an agent's tool set small and relevant.

LangGraph nodes that classify the user's intent into tool categories, select
tools under a proportional per-category budget, search the catalog before the
first model turn, and let the model widen its own tool set through meta-tools.
"""

from langgraph_toolbudget.core.budget import max_tools_for_model
from langgraph_toolbudget.core.catalog import ToolCatalog, ToolSpec
from langgraph_toolbudget.core.intent import classify_lexical
from langgraph_toolbudget.core.meta import META_TOOL_NAMES, meta_tool_definitions
from langgraph_toolbudget.core.search import SearchResult, ToolIndex
from langgraph_toolbudget.core.selection import search_hits, select_tools
from langgraph_toolbudget.core.semantic import HashingEmbeddings, HybridScorer
from langgraph_toolbudget.core.tokens import schema_tokens
from langgraph_toolbudget.mcp import MCPLoadError, MCPServerError, load_mcp_catalog
from langgraph_toolbudget.nodes.agent import (
    CallModel,
    ToolAgent,
    add_toolbudget_nodes,
    create_toolbudget_agent,
    tools_prompt_section,
)
from langgraph_toolbudget.nodes.executor import ToolExecution, ToolExecutor
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.state import ToolBudgetState, merge_names

__all__ = [
    "CallModel",
    "META_TOOL_NAMES",
    "MCPLoadError",
    "MCPServerError",
    "ToolAgent",
    "ToolExecution",
    "ToolExecutor",
    "add_toolbudget_nodes",
    "create_toolbudget_agent",
    "meta_tool_definitions",
    "schema_tokens",
    "tools_prompt_section",
    "ClassifyIntent",
    "HashingEmbeddings",
    "HybridScorer",
    "SearchResult",
    "SelectTools",
    "ToolBudgetState",
    "ToolCatalog",
    "ToolIndex",
    "ToolSearch",
    "ToolSpec",
    "classify_lexical",
    "load_mcp_catalog",
    "max_tools_for_model",
    "merge_names",
    "search_hits",
    "select_tools",
]
