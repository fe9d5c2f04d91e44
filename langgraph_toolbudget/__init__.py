"""langgraph-toolbudget: keep an agent's tool set small and relevant.

LangGraph nodes that classify the user's intent into tool categories, select
tools under a proportional per-category budget, search the catalog before the
first model turn, and let the model widen its own tool set through meta-tools.
"""

from langgraph_toolbudget.agent import (
    CallModel,
    ToolAgent,
    add_toolbudget_nodes,
    create_toolbudget_agent,
    tools_prompt_section,
)
from langgraph_toolbudget.budget import max_tools_for_model
from langgraph_toolbudget.catalog import ToolCatalog, ToolSpec
from langgraph_toolbudget.executor import ToolExecution, ToolExecutor
from langgraph_toolbudget.intent import ClassifyIntent, classify_lexical
from langgraph_toolbudget.mcp import MCPLoadError, MCPServerError, load_mcp_catalog
from langgraph_toolbudget.meta import META_TOOL_NAMES, meta_tool_definitions
from langgraph_toolbudget.search import SearchResult, ToolIndex
from langgraph_toolbudget.selection import SelectTools, ToolSearch, search_hits, select_tools
from langgraph_toolbudget.semantic import HashingEmbeddings, HybridScorer
from langgraph_toolbudget.state import ToolBudgetState, merge_names
from langgraph_toolbudget.tokens import schema_tokens

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
