"""The offline first-turn tool choice for a query, explained: what ``toolbudget explain`` prints.

Its one reason to change: what the explanation of a first turn's choice holds.

It runs what the prebuilt agent runs on a first turn (the lexical classifier, the budget,
the automatic tool search) under :class:`~langgraph_toolbudget.config.BudgetConfig`'s
options, checked there (a budget below 0 or ``max_categories=0`` raises naming the option),
and returns each chosen tool with its reason (:mod:`langgraph_toolbudget.core.reasons`) and
the schema tokens saved.

Typical Usage:
    ```python
    data = explain(catalog, "weather in Paris", max_tools=4)
    [row["name"] for row in data["tools"]], data["schema_tokens"]["saved_ratio"]
    ```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from typing_extensions import Unpack

from langgraph_toolbudget.config import BudgetConfig, BudgetOptions
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.intent import classify_lexical
from langgraph_toolbudget.core.reasons import budget_reasons, free_reasons, search_reasons
from langgraph_toolbudget.core.selection import free_tools, search_hits, select_tools
from langgraph_toolbudget.core.tokens import token_savings

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

    Classifies the query (lexical), applies the budget, then the automatic tool
    search, as the prebuilt agent does on a first turn with these options.

    Args:
        catalog: the catalog.
        query: the user's text.
        config: the options (:class:`~langgraph_toolbudget.config.BudgetConfig`); those used
            here: the budget (``max_tools``, else ``model_size``'s preset),
            ``min_per_category``, ``max_categories``, ``search_limit``, ``pinned``.
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
    ranked = classify_lexical(catalog, query, max_categories=config.max_categories)
    categories = [c for c, _ in ranked]
    scores = catalog.index.scores(query) if query else None
    free = free_tools(catalog, config.pinned)
    chosen = select_tools(
        catalog,
        query,
        categories,
        max_tools=config.budget,
        min_per_category=config.min_per_category,
        exclude=free,
        scores=scores,
    )
    hits = search_hits(
        catalog, query, limit=config.search_limit, exclude=[*free, *chosen], scores=scores
    )
    reasons: Mapping[str, dict[str, Any]] = {
        **free_reasons(catalog, free, config.pinned),
        **budget_reasons(
            catalog,
            chosen,
            categories,
            max_tools=config.budget,
            min_per_category=config.min_per_category,
            scores=scores,
        ),
        **search_reasons(catalog, hits, scores),
    }
    visible = [*free, *chosen, *hits]
    every_tool = catalog.tools(catalog.tool_names)
    return {
        "query": query,
        "categories": [{"name": c, "score": round(s, 4)} for c, s in ranked],
        "tools": [{"name": n, **reasons[n]} for n in visible],
        "schema_tokens": token_savings([*meta_tools, *catalog.tools(visible)], every_tool),
    }
