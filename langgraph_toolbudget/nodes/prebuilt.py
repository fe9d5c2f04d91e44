"""Prebuilt graphs: the whole agent in one call, or its nodes added to your graph.

Its one reason to change: how the prebuilt graphs are wired.

Key Components:
    - :func:`create_toolbudget_agent`: the whole graph, uncompiled:
      classify_intent -> select_tools -> tool_search -> agent <-> tools.
    - :func:`add_toolbudget_nodes`: the same nodes added to a user's graph.

Both build one :class:`~langgraph_toolbudget.config.BudgetConfig` and hand it to
every node, so the selection and the executor's ``request_more_tools`` share
one budget.

Typical Usage:
    ```python
    graph = create_toolbudget_agent(model, catalog, max_tools=8, mode="parallel_safe")
    debug = create_toolbudget_agent(model, catalog, runtime_mode="debug")  # drafts run too
    app = graph.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "1"}}
    out = app.invoke({"messages": [HumanMessage("open an issue")]}, config)
    ```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import tools_condition

from langgraph_toolbudget.config import (
    KEEP,
    BudgetConfig,
    ExecutionMode,
    Keep,
    RuntimeMode,
    resolve_config,
    resolve_offload,
)
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.gating import EnabledBuiltins
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.formats.settings import ToolCallFormatsSpec
from langgraph_toolbudget.nodes.agent import CallModel
from langgraph_toolbudget.nodes.executor import ToolExecutor
from langgraph_toolbudget.nodes.intent import ClassifyIntent
from langgraph_toolbudget.nodes.prompt import SystemPrompt
from langgraph_toolbudget.nodes.retrieval import Retriever
from langgraph_toolbudget.nodes.selection import SelectTools, ToolSearch
from langgraph_toolbudget.nodes.usage import ToolUsage
from langgraph_toolbudget.state import ToolBudgetState

__all__ = ["add_toolbudget_nodes", "create_toolbudget_agent"]

STATE_SCHEMA_ERROR = (
    "the graph's state schema has no {missing} field(s). Extend ToolBudgetState: "
    "`class MyState(ToolBudgetState): ...` and build StateGraph(MyState)."
)
NOT_A_GRAPH_ERROR = (
    "graph must be an uncompiled langgraph StateGraph (StateGraph(ToolBudgetState)); got {kind}."
)


def add_toolbudget_nodes(
    graph: StateGraph,
    model: BaseChatModel | str,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    after: str = START,
    then: str = END,
    prefix: str = "",
    max_tools: int | None = None,
    model_size: str | float | None = None,
    min_per_category: int | None = None,
    max_categories: int | None = None,
    classifier_model: BaseChatModel | str | None = None,
    search_limit: int | None = None,
    embeddings: Embeddings | HybridScorer | None = None,
    mode: ExecutionMode | None = None,
    pinned: Sequence[str] | None = None,
    max_visible: int | None = None,
    max_iterations: int | None = None,
    max_meta_calls: int | None = None,
    max_parallel: int | None = None,
    group_limits: Mapping[str, int] | None = None,
    runtime_mode: RuntimeMode | None = None,
    enabled_builtins: EnabledBuiltins = None,
    system_prompt: SystemPrompt = None,
    tool_call_formats: ToolCallFormatsSpec = None,
    model_supports_tools: bool | None = None,
    offload_over_chars: int | None | Keep = KEEP,
    offload_over_tokens: int | None = None,
    usage: ToolUsage | None = None,
    max_schema_tokens: int | None = None,
    retriever: Retriever | None = None,
) -> str:
    """Add classify_intent -> select_tools -> tool_search -> agent <-> tools to ``graph``.

    Args:
        graph: a ``StateGraph`` whose state extends :class:`ToolBudgetState`.
        model: the chat model of the agent (native tool calling or not, see
            ``tool_call_formats``), or a
            ``"provider:model"`` string for LangChain's ``init_chat_model``.
        catalog: the tool catalog.
        config: the shared options; the keyword arguments below override it
            (``None`` keeps the config's value).
        after: the node the pipeline starts after (``START`` by default).
        then: where the agent goes when it answers (``END`` by default).
        prefix: prepended to every node name, to add the nodes twice.
        max_tools: the budget (default 8, or the preset of ``model_size``).
        model_size: model name or size for the budget presets.
        min_per_category: floor of each category's share.
        max_categories: categories classify_intent returns at most.
        classifier_model: optional chat model for classify_intent.
        search_limit: tools the automatic tool search adds.
        embeddings: optional LangChain ``Embeddings`` (or a ``HybridScorer``) for
            classify_intent, select_tools and tool_search: tools are then
            ranked by BM25 fused with embedding similarity (see
            :mod:`langgraph_toolbudget.core.semantic`).
        mode: ``sequential`` or ``parallel_safe``.
        pinned: tools always visible.
        max_visible: hard cap on visible tools.
        max_iterations: model calls per user turn.
        max_meta_calls: meta-calls per user turn.
        max_parallel: size of the executor's thread pool for sync tools (default 16).
        group_limits: concurrency group -> calls at once (e.g. ``{"github": 4}``).
        runtime_mode: ``production`` (published and deprecated tools are listed,
            chosen and run) or ``debug`` (drafts too); disabled tools never are.
        enabled_builtins: which built-in tools the model gets and whether the
            automatic tool search runs: ``None`` (the defaults), a list of names
            or patterns, or ``{"allow": [...], "deny": [...]}``.
        system_prompt: a string, a ``SystemMessage``, or a callable of the state.
        tool_call_formats: how the agent shows tools to the model and reads its
            calls: ``{"enabled": ["native", "hermes"], "primary": "hermes"}``
            (names ``native``, ``hermes``, ``mistral``, ``pythonic``, ``json``);
            ``None``: native when the model supports it, else the text format
            its name suggests (Hermes by default). See ``docs/formats.md``.
        model_supports_tools: override the check of the model's native tool
            calling (``None``: ask the model).
        offload_over_chars: tool results longer than this many characters are
            stored out of the conversation and read back with the output tools
            (default 20,000; ``None`` turns offloading off; see ``docs/offloading.md``).
        offload_over_tokens: the same limit in estimated tokens (default: unused).
        usage: a :class:`~langgraph_toolbudget.nodes.usage.ToolUsage`: the
            tools node records the tools that ran successfully for each user
            message, and the selection nodes rank by that history (see
            ``docs/usage.md``). Off by default.
        max_schema_tokens: a budget in schema tokens for select_tools (each
            category's share is a share of tokens); ``max_tools``/``model_size``,
            when set, cap the number of tools too.
        retriever: your own tool search for the three ranking nodes: a function
            ``(query, catalog)``, sync or async, returning tool names best first
            or ``{name: score}`` (see ``docs/selection.md``).

    Returns:
        The name of the first added node (to route to it yourself if needed).

    Raises:
        TypeError: the graph's state lacks the tool-budget fields; an option
            of the wrong type; a model that is not a chat model.
        ValueError: an option out of range; a model without native tool calling
            when no text format is enabled.
    """
    if not isinstance(graph, StateGraph):
        raise TypeError(NOT_A_GRAPH_ERROR.format(kind=type(graph).__name__))
    missing = [k for k in ("selected_tools", "categories", "messages") if k not in graph.channels]
    if missing:
        raise TypeError(STATE_SCHEMA_ERROR.format(missing=", ".join(missing)))
    shared = resolve_config(
        config,
        max_tools=max_tools,
        model_size=model_size,
        min_per_category=min_per_category,
        max_categories=max_categories,
        search_limit=search_limit,
        embeddings=embeddings,
        mode=mode,
        pinned=pinned,
        max_visible=max_visible,
        max_iterations=max_iterations,
        max_meta_calls=max_meta_calls,
        max_parallel=max_parallel,
        group_limits=group_limits,
        runtime_mode=runtime_mode,
        enabled_builtins=enabled_builtins,
        tool_call_formats=tool_call_formats,
        model_supports_tools=model_supports_tools,
        offload_over_tokens=offload_over_tokens,
        usage=usage,
        max_schema_tokens=max_schema_tokens,
        retriever=retriever,
    )
    shared = resolve_offload(shared, offload_over_chars)
    names = {
        k: f"{prefix}{k}"
        for k in ("classify_intent", "select_tools", "tool_search", "agent", "tools")
    }
    nodes = {
        "classify_intent": ClassifyIntent(
            catalog, config=shared, model=classifier_model, name=names["classify_intent"]
        ),
        "select_tools": SelectTools(catalog, config=shared, name=names["select_tools"]),
        "tool_search": ToolSearch(catalog, config=shared, name=names["tool_search"]),
        "agent": CallModel(
            model, catalog, config=shared, system_prompt=system_prompt, name=names["agent"]
        ),
        "tools": ToolExecutor(catalog, config=shared, name=names["tools"]),
    }
    for key, node in nodes.items():
        graph.add_node(names[key], node)
    graph.add_edge(after, names["classify_intent"])
    graph.add_edge(names["classify_intent"], names["select_tools"])
    graph.add_edge(names["select_tools"], names["tool_search"])
    graph.add_edge(names["tool_search"], names["agent"])
    graph.add_conditional_edges(
        names["agent"], tools_condition, {"tools": names["tools"], END: then}
    )
    graph.add_edge(names["tools"], names["agent"])
    return names["classify_intent"]


def create_toolbudget_agent(
    model: BaseChatModel | str,
    catalog: ToolCatalog,
    *,
    config: BudgetConfig | None = None,
    state_schema: type[Any] = ToolBudgetState,
    context_schema: type[Any] | None = None,
    max_tools: int | None = None,
    model_size: str | float | None = None,
    min_per_category: int | None = None,
    max_categories: int | None = None,
    classifier_model: BaseChatModel | str | None = None,
    search_limit: int | None = None,
    embeddings: Embeddings | HybridScorer | None = None,
    mode: ExecutionMode | None = None,
    pinned: Sequence[str] | None = None,
    max_visible: int | None = None,
    max_iterations: int | None = None,
    max_meta_calls: int | None = None,
    max_parallel: int | None = None,
    group_limits: Mapping[str, int] | None = None,
    runtime_mode: RuntimeMode | None = None,
    enabled_builtins: EnabledBuiltins = None,
    system_prompt: SystemPrompt = None,
    tool_call_formats: ToolCallFormatsSpec = None,
    model_supports_tools: bool | None = None,
    offload_over_chars: int | None | Keep = KEEP,
    offload_over_tokens: int | None = None,
    usage: ToolUsage | None = None,
    max_schema_tokens: int | None = None,
    retriever: Retriever | None = None,
) -> StateGraph:
    """Build the whole agent graph, uncompiled, so you choose checkpointer and store.

    ``classify_intent -> select_tools -> tool_search -> agent <-> tools``: the
    agent node calls the model with the meta-tools and the visible tools; the
    tools node runs its calls (a ``ToolNode`` replacement that intercepts
    meta-tools). The options are those of :func:`add_toolbudget_nodes`
    (``max_tools=8``, ``mode="parallel_safe"``, ``max_iterations=5``, ...);
    ``state_schema`` must extend :class:`ToolBudgetState`.

    Example:
        ```python
        graph = create_toolbudget_agent(model, catalog, max_tools=8, mode="parallel_safe")
        out = graph.compile().invoke({"messages": [HumanMessage("...")]})
        out["messages"], out["selected_tools"], out["categories"]
        ```
    """
    graph = StateGraph(state_schema, context_schema=context_schema)
    add_toolbudget_nodes(
        graph,
        model,
        catalog,
        config=config,
        max_tools=max_tools,
        model_size=model_size,
        min_per_category=min_per_category,
        max_categories=max_categories,
        classifier_model=classifier_model,
        search_limit=search_limit,
        embeddings=embeddings,
        mode=mode,
        pinned=pinned,
        max_visible=max_visible,
        max_iterations=max_iterations,
        max_meta_calls=max_meta_calls,
        max_parallel=max_parallel,
        group_limits=group_limits,
        runtime_mode=runtime_mode,
        enabled_builtins=enabled_builtins,
        system_prompt=system_prompt,
        tool_call_formats=tool_call_formats,
        model_supports_tools=model_supports_tools,
        offload_over_chars=offload_over_chars,
        offload_over_tokens=offload_over_tokens,
        usage=usage,
        max_schema_tokens=max_schema_tokens,
        retriever=retriever,
    )
    return graph
