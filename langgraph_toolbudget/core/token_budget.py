"""The budget in tokens: each category's share is a share of schema tokens. Pure functions.

Its one reason to change: the arithmetic of a budget counted in schema tokens.

``select_tools`` spends a budget counted in tools by default. With
``max_schema_tokens`` it spends one counted in the tokens of the chosen tools'
JSON schemas, measured as :func:`~langgraph_toolbudget.core.tokens.schema_tokens`
measures them: a category of small tools gets more of them, one huge schema no
longer costs the same as a one-argument tool.

Key Components:
    - :func:`allocate_tokens`: the proportional per-category share, in tokens,
      with the unused tokens redistributed to the most relevant remaining tools.
    - :func:`tool_tokens`: the schema tokens of each tool of a catalog (counted
      on first use, kept by the catalog).
    - :data:`MIN_TOOL_TOKENS`: a floor of one tool's schema tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.tokens import schema_tokens

__all__ = ["MIN_TOOL_TOKENS", "allocate_tokens", "tool_tokens"]

MIN_TOOL_TOKENS = 20
"""Fewer schema tokens than any tool costs (a tool named ``a`` with no description and no
argument costs 27): a token budget of ``N`` never chooses more than ``N // MIN_TOOL_TOKENS``
tools, the count the default visible-set cap allows for under a token budget alone
(:meth:`~langgraph_toolbudget.config.BudgetConfig.visible_cap`)."""


def tool_tokens(catalog: ToolCatalog) -> Callable[[str], int]:
    """The schema tokens of one tool of ``catalog`` (counted once per tool, kept by the catalog).

    The cache is the ``catalog.derived`` entry ``tool_tokens``: one int per tool counted,
    so at most one per catalog tool.
    """
    counts: dict[str, int] = catalog.derived.get("tool_tokens", dict)

    def count(name: str) -> int:
        found = counts.get(name)
        if found is None:
            found = counts[name] = schema_tokens(catalog.tools([name]))
        return found

    return count


def allocate_tokens(
    ranked: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    cost: Callable[[str], int],
    *,
    max_tokens: int,
    max_tools: int | None = None,
    exclude: Sequence[str] = (),
) -> list[str]:
    """Pick tools from ranked categories under a budget of schema tokens.

    Each category gets ``max_tokens // len(ranked)`` tokens and takes its tools
    best first while they fit (a tool too large for what is left is skipped, a
    smaller one after it may still fit); the tokens left over go to the most
    relevant tools not chosen yet, while they fit in ``max_tokens``.

    Args:
        ranked: ``(category, [(tool, relevance), ...])``, categories in priority
            order, tools best first.
        cost: the schema tokens of a tool.
        max_tokens: the budget: the chosen tools' tokens never exceed it.
        max_tools: also at most this many tools (``None``: tokens only).
        exclude: tools already visible (not chosen, cost nothing).

    Returns:
        Tool names, de-duplicated, deterministic.

    >>> sizes = {"a": 50, "b": 200, "c": 60, "d": 40}
    >>> allocate_tokens([("x", [("a", 3.0), ("b", 2.0)]), ("y", [("c", 1.0), ("d", 0.5)])],
    ...                 sizes.__getitem__, max_tokens=200)
    ['a', 'c', 'd']
    """
    if not ranked or max_tokens <= 0:
        return []
    share = max_tokens // len(ranked)
    cap = max_tools if max_tools is not None else float("inf")
    chosen: list[str] = []
    seen = set(exclude)
    spent = 0
    leftovers: list[tuple[float, int, int, str]] = []
    for cat_pos, (_, tools) in enumerate(ranked):
        used = 0
        for tool_pos, (name, score) in enumerate(tools):
            if name in seen:
                continue
            size = cost(name)
            if used + size <= share and spent + size <= max_tokens and len(chosen) < cap:
                chosen.append(name)
                seen.add(name)
                used += size
                spent += size
            else:
                leftovers.append((-score, cat_pos, tool_pos, name))
    leftovers.sort()
    for _, _, _, name in leftovers:
        if len(chosen) >= cap:
            break
        size = cost(name)
        if name not in seen and spent + size <= max_tokens:
            chosen.append(name)
            seen.add(name)
            spent += size
    return chosen
