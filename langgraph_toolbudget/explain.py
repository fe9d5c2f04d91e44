"""The offline first-turn tool choice for a query, explained: what ``toolbudget explain`` prints.

Its one reason to change: what the explanation of a first turn's choice holds.

It runs the prebuilt agent's own first step on a new thread: the
:class:`~langgraph_toolbudget.nodes.choose.ChooseTools` node (classifier, budget, automatic tool
search, the very code ``create_toolbudget_agent`` runs), then takes the tools its model call
binds (:func:`~langgraph_toolbudget.nodes.thread_prompt.tools_to_bind`), under
:class:`~langgraph_toolbudget.config.BudgetConfig`'s options, checked there (a budget below 0 or
``max_categories=0`` raises naming the option). So it cannot tell another story than the agent:
every option the agent's first turn reads (``max_visible``, ``max_schema_tokens``,
``runtime_mode``, ``pinned``, ``embeddings``...) is read here too. It returns each tool with its
reason (:mod:`langgraph_toolbudget.core.reasons`) and the schema tokens saved.

Typical Usage:
    ```python
    data = explain(catalog, "weather in Paris", max_tools=4)
    [row["name"] for row in data["tools"]], data["schema_tokens"]["saved_ratio"]
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage
from typing_extensions import Unpack

from langgraph_toolbudget.config import BudgetConfig, BudgetOptions
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.reasons import free_reasons
from langgraph_toolbudget.core.selection import free_tools
from langgraph_toolbudget.core.tokens import token_savings
from langgraph_toolbudget.nodes.choose import ChooseTools
from langgraph_toolbudget.nodes.thread_prompt import tools_to_bind
from langgraph_toolbudget.state import apply_update

__all__ = ["explain"]


def explain(
    catalog: ToolCatalog,
    query: str,
    *,
    config: BudgetConfig | None = None,
    meta_tools: Sequence[Any] = (),
    **options: Unpack[BudgetOptions],
) -> dict[str, Any]:
    """The offline choice of a first turn for ``query``, explained.

    Runs the prebuilt agent's first step (:class:`~langgraph_toolbudget.nodes.choose.ChooseTools`:
    the classifier, the budget, the automatic tool search) on a new thread whose first message
    is ``query``, and lists the tools the agent's first model call is then bound, in its order:
    what ``create_toolbudget_agent`` with these options shows the model, whatever the options.

    Args:
        catalog: the catalog.
        query: the user's text.
        config: the options (:class:`~langgraph_toolbudget.config.BudgetConfig`), those the
            agent would take; every option its first turn reads is read here (the budget,
            ``max_visible``, ``max_schema_tokens``, ``runtime_mode``, ``pinned``,
            ``search_limit``, ``enabled_builtins``, the ranking's ``embeddings``, ``usage``
            and ``retriever``...).
        meta_tools: the built-in tools bound with the chosen ones (their schema
            tokens count as spent; the baseline is every tool alone, see
            :func:`~langgraph_toolbudget.core.tokens.token_savings`).
        **options: any ``BudgetConfig`` option, over ``config``'s value.

    Returns:
        ``{"query", "categories": [{"name", "score"}], "tools": [{"name", **reason}],
        "schema_tokens": {"all", "chosen", "saved", "saved_ratio"}}``.

    Raises:
        TypeError: an unknown option, or a value of the wrong type (``BudgetConfig``'s checks).
        ValueError: a value out of range (``max_categories=0``, ``max_tools=-3``...).
    """
    config = BudgetConfig.resolve(config, options, owner=explain)
    catalog = require_catalog(catalog, "explain")
    start = {"messages": [HumanMessage(query)]}
    state = apply_update(start, ChooseTools(catalog, config=config).invoke(start))
    view = catalog.in_runtime_mode(config.runtime_mode)
    visible = [t.name for t in tools_to_bind(catalog, state, config=config) if t.name in view]
    # A tool visible for free that a small max_visible kept out of the chosen set is still bound.
    reasons = {
        **free_reasons(view, free_tools(view, config.pinned), config.pinned),
        **state.get("tool_reasons", {}),
    }
    ranked = state.get("category_scores", {})
    every_tool = view.tools(view.tool_names)
    return {
        "query": query,
        "categories": [{"name": c, "score": round(float(s), 4)} for c, s in ranked.items()],
        "tools": [{"name": n, **reasons[n]} for n in visible],
        "schema_tokens": token_savings([*meta_tools, *view.tools(visible)], every_tool),
    }
