"""Why each tool is visible, as data: the reasons the stream events, the state and
``toolbudget explain`` carry. Pure functions.

Its one reason to change: what a visible tool's reason says.

A reason is a small JSON-ready dict with ``"why"`` one of:

- ``"budget"``: chosen by the per-category budget; ``category``, its ``share``
  (slots before redistribution) and the tool's ``score`` (relevance to the query);
- ``"relevance"``: chosen by relevance alone (catalogs without categories); ``score``;
- ``"always"``: include mode ``always`` (or a special category such as ``human``);
- ``"pinned"``: pinned by the app (``BudgetConfig.pinned``);
- ``"included"``: included in this thread's tool context (by the user, or by the model's
  ``include_tool`` / ``include_tool_server``);
- ``"search"``: a hit of the automatic tool search; ``score``;
- ``"add_tool"``, ``"request_more_tools"``: loaded by the model with that meta-call;
- ``"kept"``: ``was`` (``"included"`` or ``"always"``) until the thread's context took that
  back (an inclusion removed, a mode changed); visible from before until something evicts it.

The reasons of the visible tools follow the thread's context at every node
(:meth:`~langgraph_toolbudget.core.context.SessionContext.follow_reasons`).

Key Components:
    - :func:`free_reasons`, :func:`budget_reasons`, :func:`search_reasons`: the
      reasons of one node's choice (the whole offline choice for a query, with these
      reasons, is :func:`langgraph_toolbudget.explain.explain`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from langgraph_toolbudget.core.budget import per_category_budget
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import ALWAYS, PINNED, SessionContext

__all__ = ["budget_reasons", "free_reasons", "search_reasons"]


def _score(catalog: ToolCatalog, scores: np.ndarray | None, name: str) -> float:
    if scores is None:
        return 0.0
    return round(float(scores[catalog.index.position(name)]), 4)


def free_reasons(
    catalog: ToolCatalog,
    free: Iterable[str],
    pinned: Sequence[str] = (),
    context: SessionContext | None = None,
) -> dict[str, dict[str, Any]]:
    """Reasons of the tools visible without budget: ``pinned``, ``included`` or ``always``."""
    context = context or SessionContext()
    out: dict[str, dict[str, Any]] = {}
    for name in free:
        spec = catalog.get(name)
        if name in pinned:
            out[name] = {"why": PINNED}
        else:
            out[name] = {"why": (spec and context.reason(spec)) or ALWAYS}
    return out


def budget_reasons(
    catalog: ToolCatalog,
    chosen: Iterable[str],
    categories: Sequence[str],
    *,
    max_tools: int,
    min_per_category: int,
    scores: np.ndarray | None,
) -> dict[str, dict[str, Any]]:
    """Reasons of the tools the budget chose: the first chosen category holding each,
    that category's share, and the tool's relevance score."""
    known = [c for c in dict.fromkeys(categories) if c in catalog.categories]
    share = per_category_budget(max_tools, len(known), min_per_category) if known else 0
    members = {c: set(catalog.tools_in(c)) for c in known}
    out: dict[str, dict[str, Any]] = {}
    for name in chosen:
        category = next((c for c in known if name in members[c]), None)
        if category is None:
            out[name] = {"why": "relevance", "score": _score(catalog, scores, name)}
        else:
            out[name] = {
                "why": "budget",
                "category": category,
                "share": share,
                "score": _score(catalog, scores, name),
            }
    return out


def search_reasons(
    catalog: ToolCatalog, hits: Iterable[str], scores: np.ndarray | None
) -> dict[str, dict[str, Any]]:
    """Reasons of the automatic tool search's hits, with their scores."""
    return {n: {"why": "search", "score": _score(catalog, scores, n)} for n in hits}
