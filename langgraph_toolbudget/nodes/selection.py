"""select_tools and tool_search: the nodes that choose which tools the model sees.

Key Components:
    - :class:`SelectTools`: the proportional per-category budget
      (:func:`langgraph_toolbudget.core.selection.select_tools`).
    - :class:`ToolSearch`: the automatic BM25 search before the first model turn
      (:func:`langgraph_toolbudget.core.selection.search_hits`).

Typical Usage:
    ```python
    graph.add_node("select_tools", SelectTools(catalog, max_tools=8))
    graph.add_node("tool_search", ToolSearch(catalog, limit=5))
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.selection import (
    _check_pinned,
    _resolve_budget,
    free_tools,
    search_hits,
    select_tools,
)
from langgraph_toolbudget.core.semantic import HybridScorer, as_hybrid_scorer
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.nodes._node import BudgetNode, emit_event
from langgraph_toolbudget.state import state_get, state_messages

__all__ = ["SelectTools", "ToolSearch"]

Strategy = Literal["auto", "categories", "relevance"]


def _check_cap(max_visible: int | None) -> int | None:
    if max_visible is not None and max_visible < 1:
        raise ValueError(f"max_visible must be >= 1 or None, got {max_visible}")
    return max_visible


def _grow_visible(
    state: Any,
    new: Sequence[str],
    *,
    pinned: Sequence[str],
    cap: int | None,
    node: str,
) -> dict[str, Any]:
    """The state update that makes ``new`` visible, evicting under ``cap`` (LRU)."""
    before = list(state_get(state, "selected_tools", None) or [])
    if cap is None:
        added = [n for n in new if n not in set(before)]
        if added:
            emit_event({"node": node, "added": added, "removed": [], "reason": node})
        return {"selected_tools": list(new)}
    working = WorkingSet.from_state(
        {"selected_tools": before, "tool_last_used": state_get(state, "tool_last_used", None)},
        pinned=pinned,
        cap=cap,
    )
    for name in new:  # chosen again this turn: recently relevant, evicted last
        if name in working:
            working.touch(name)
    added, evicted = working.add(new)
    if added or evicted:
        emit_event({"node": node, "added": added, "removed": evicted, "reason": node})
    diff = working.diff(before)
    if not diff["add"] and not diff["remove"]:
        return {"tool_last_used": dict(working.last_used)}
    return {"selected_tools": diff, "tool_last_used": dict(working.last_used)}


class SelectTools(BudgetNode):
    """Node: choose the visible tools for the chosen categories under a budget.

    Input: ``messages`` and ``categories`` (from :class:`ClassifyIntent`).
    Output: ``{"selected_tools": [...]}``, appended to the visible set by the
    state's reducer. Tools with include mode ``always``, the special categories
    ``human``/``structured_output`` and ``pinned`` tools are added without
    spending budget.

    Args:
        catalog: the tool catalog.
        max_tools: the budget (default 8, or the preset for ``model_size``).
        min_per_category: floor of each category's share (default 2).
        model_size: a model name or size for the presets: small (<7B) 2,
            medium (7-30B) 5, large (>30B) 10. Ignored when ``max_tools`` is set.
        pinned: tools always visible ("pre-discovered"), outside the budget.
        strategy: ``categories`` (per-category budget), ``relevance`` (the
            ``max_tools`` most relevant tools, for catalogs without
            categories), ``auto`` (categories when the state has some, else
            relevance).
        embeddings: optional LangChain ``Embeddings`` (or a
            :class:`~langgraph_toolbudget.core.semantic.HybridScorer`): tools are
            then ranked by BM25 fused with embedding similarity. An embedding
            failure falls back to BM25 for the turn.
        max_visible: hard cap on the visible set across turns: adding this
            turn's tools beyond it evicts the least recently used unpinned
            tools of earlier turns (``None``: the set only grows).

    Example:
        ```python
        graph.add_node("select_tools", SelectTools(catalog, model_size="qwen3:8b"))
        ```
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        max_tools: int | None = None,
        min_per_category: int = 2,
        model_size: str | float | None = None,
        pinned: Sequence[str] = (),
        strategy: Strategy = "auto",
        embeddings: Embeddings | HybridScorer | None = None,
        max_visible: int | None = None,
        name: str = "select_tools",
    ) -> None:
        if strategy not in ("auto", "categories", "relevance"):
            raise ValueError(
                f"strategy must be 'auto', 'categories' or 'relevance', got {strategy!r}"
            )
        super().__init__(name)
        self.catalog = catalog
        self.max_tools = _resolve_budget(max_tools, model_size)
        self.min_per_category = min_per_category
        self.pinned = _check_pinned(catalog, pinned)
        self._free = free_tools(catalog, self.pinned)
        self.strategy = strategy
        self.scorer = as_hybrid_scorer(catalog, embeddings)
        self.max_visible = _check_cap(max_visible)

    @property
    def free_tools(self) -> list[str]:
        """Visible without budget: ``always`` tools, special categories, pinned tools."""
        return list(self._free)

    def choose(
        self, query: str, categories: Sequence[str], *, scores: np.ndarray | None = None
    ) -> list[str]:
        """The tools this node makes visible for a query and categories.

        ``scores``: relevance of every tool (default: ``catalog.index.scores(query)``).
        """
        free = self.free_tools
        if self.strategy == "relevance" or (self.strategy == "auto" and not categories):
            chosen = search_hits(
                self.catalog, query, limit=self.max_tools, exclude=free, scores=scores
            )
        else:
            chosen = select_tools(
                self.catalog,
                query,
                categories,
                max_tools=self.max_tools,
                min_per_category=self.min_per_category,
                exclude=free,
                scores=scores,
            )
        return [*free, *chosen]

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = latest_user_text(state_messages(state))
        scores = self.scorer.scores(query) if self.scorer is not None and query else None
        return self._update(state, query, scores)

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = latest_user_text(state_messages(state))
        scores = await self.scorer.ascores(query) if self.scorer is not None and query else None
        return self._update(state, query, scores)

    def _update(self, state: Any, query: str, scores: np.ndarray | None) -> dict[str, Any]:
        categories = list(state_get(state, "categories", None) or [])
        chosen = self.choose(query, categories, scores=scores)
        return _grow_visible(
            state, chosen, pinned=self.free_tools, cap=self.max_visible, node=self.name
        )


class ToolSearch(BudgetNode):
    """Node: automatic tool search before the first model turn.

    Searches the catalog with the latest user message and adds the best
    ``limit`` hits to the visible set (the same ranking as ``search_tools``
    uses for free text). A turn is "first" when no AI message is in the
    history yet; with ``every_turn=True`` it searches on every user turn.

    Args:
        catalog: the tool catalog.
        limit: how many hits to add at most (default 5).
        every_turn: search on later turns too.
        min_relative_score: drop hits below this fraction of the best score.
        embeddings: optional LangChain ``Embeddings`` (or a
            :class:`~langgraph_toolbudget.core.semantic.HybridScorer`): hits are
            then ranked by BM25 fused with embedding similarity. An embedding
            failure falls back to BM25 for the turn.
        max_visible: hard cap on the visible set: adding hits beyond it evicts
            the least recently used unpinned tools (``None``: no cap).
        pinned: tools never evicted under the cap (``always`` tools never are).

    Output: ``{"selected_tools": [...]}`` (only new names), or ``{}``.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        limit: int = 5,
        every_turn: bool = False,
        min_relative_score: float = 0.0,
        embeddings: Embeddings | HybridScorer | None = None,
        max_visible: int | None = None,
        pinned: Sequence[str] = (),
        name: str = "tool_search",
    ) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        super().__init__(name)
        self.catalog = catalog
        self.limit = limit
        self.every_turn = every_turn
        self.min_relative_score = min_relative_score
        self.scorer = as_hybrid_scorer(catalog, embeddings)
        self.max_visible = _check_cap(max_visible)
        self.pinned = free_tools(catalog, pinned)

    def _query(self, state: Any) -> str | None:
        """The text to search for, or None when this turn is not searched."""
        messages = state_messages(state)
        if not self.every_turn and any(isinstance(m, AIMessage) for m in messages):
            return None
        return latest_user_text(messages)

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        if query is None:
            return {}
        scores = self.scorer.scores(query) if self.scorer is not None and query else None
        return self._update(state, query, scores)

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        if query is None:
            return {}
        scores = await self.scorer.ascores(query) if self.scorer is not None and query else None
        return self._update(state, query, scores)

    def _update(self, state: Any, query: str, scores: np.ndarray | None) -> dict[str, Any]:
        visible = list(state_get(state, "selected_tools", None) or [])
        hits = search_hits(
            self.catalog,
            query,
            limit=self.limit,
            exclude=visible,
            min_relative_score=self.min_relative_score,
            scores=scores,
        )
        if not hits:
            return {}
        return _grow_visible(state, hits, pinned=self.pinned, cap=self.max_visible, node=self.name)
