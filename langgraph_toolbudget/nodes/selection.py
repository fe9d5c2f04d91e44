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

from langgraph_toolbudget.config import BudgetConfig, RuntimeMode, resolve_config
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.selection import free_tools, search_hits, select_tools
from langgraph_toolbudget.core.semantic import HybridScorer, as_hybrid_scorer
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.nodes._node import BudgetNode, emit_changes
from langgraph_toolbudget.state import state_get, state_messages

__all__ = ["SelectTools", "ToolSearch"]

Strategy = Literal["auto", "categories", "relevance"]


class SelectTools(BudgetNode):
    """Node: choose the visible tools for the chosen categories under a budget.

    Input: ``messages``, ``categories`` (from :class:`ClassifyIntent`) and the
    current ``selected_tools``.
    Output: the working-set update (:meth:`WorkingSet.update`):
    ``{"selected_tools": {"add": [...], "remove": [...]}, "tool_last_used": {...}}``,
    merged into the visible set by the state's reducers; ``{}`` when nothing
    changed. Tools with include mode ``always``, the special categories
    ``human``/``structured_output`` and ``pinned`` tools are added without
    spending budget.

    Args:
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`);
            the keyword arguments below override single options of it, and
            ``None`` keeps the config's value.
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
            tools of earlier turns (``None`` in the config: the set only grows).
        runtime_mode: ``production`` (published and deprecated tools) or ``debug``
            (drafts too): which tools may be chosen.
        name: node name.

    Example:
        ```python
        graph.add_node("select_tools", SelectTools(catalog, model_size="qwen3:8b"))
        ```
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        max_tools: int | None = None,
        min_per_category: int | None = None,
        model_size: str | float | None = None,
        pinned: Sequence[str] | None = None,
        strategy: Strategy = "auto",
        embeddings: Embeddings | HybridScorer | None = None,
        max_visible: int | None = None,
        runtime_mode: RuntimeMode | None = None,
        name: str = "select_tools",
    ) -> None:
        if strategy not in ("auto", "categories", "relevance"):
            raise ValueError(
                f"strategy must be 'auto', 'categories' or 'relevance', got {strategy!r}"
            )
        super().__init__(name)
        self.config = resolve_config(
            config,
            max_tools=max_tools,
            min_per_category=min_per_category,
            model_size=model_size,
            pinned=pinned,
            embeddings=embeddings,
            max_visible=max_visible,
            runtime_mode=runtime_mode,
        )
        self.catalog = catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.strategy = strategy
        self._free = free_tools(catalog, self.config.pinned)
        self.scorer = as_hybrid_scorer(catalog, self.config.embeddings)

    @property
    def max_tools(self) -> int:
        """The budget in force."""
        return self.config.budget

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
        budget = self.config.budget
        if self.strategy == "relevance" or (self.strategy == "auto" and not categories):
            chosen = search_hits(self.catalog, query, limit=budget, exclude=free, scores=scores)
        else:
            chosen = select_tools(
                self.catalog,
                query,
                categories,
                max_tools=budget,
                min_per_category=self.config.min_per_category,
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
        working = WorkingSet.from_state(
            state, pinned=self._free, cap=self.config.max_visible, catalog=self.catalog
        )
        working.refresh(self.choose(query, categories, scores=scores), reason=self.node_name)
        emit_changes(working, self.node_name)
        return working.update()


class ToolSearch(BudgetNode):
    """Node: automatic tool search before the first model turn.

    Ranks the catalog against the latest user message with the same free-text
    ranking as :class:`SelectTools` (BM25 over names, descriptions and argument
    names, fused with embeddings when given; not the regex engine of the
    ``search_tools`` meta-tool) and adds the best ``limit`` hits the visible set
    lacks. A turn is "first" when no AI message is in the history yet; with
    ``every_turn=True`` it searches on every user turn.

    Args:
        catalog: the tool catalog.
        config: the shared options; the keyword arguments below override it.
        limit: how many hits to add at most (the config's ``search_limit``, 5).
        every_turn: search on later turns too.
        min_relative_score: drop hits below this fraction of the best score.
        embeddings: optional LangChain ``Embeddings`` (or a
            :class:`~langgraph_toolbudget.core.semantic.HybridScorer`): hits are
            then ranked by BM25 fused with embedding similarity. An embedding
            failure falls back to BM25 for the turn.
        max_visible: hard cap on the visible set: adding hits beyond it evicts
            the least recently used unpinned tools.
        pinned: tools never evicted under the cap (``always`` tools never are).
        runtime_mode: ``production`` (published and deprecated tools) or ``debug``
            (drafts too): which tools may be found.
        name: node name.

    Output: the working-set update (see :class:`SelectTools`), or ``{}``.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        limit: int | None = None,
        every_turn: bool = False,
        min_relative_score: float = 0.0,
        embeddings: Embeddings | HybridScorer | None = None,
        max_visible: int | None = None,
        pinned: Sequence[str] | None = None,
        runtime_mode: RuntimeMode | None = None,
        name: str = "tool_search",
    ) -> None:
        super().__init__(name)
        self.config = resolve_config(
            config,
            search_limit=limit,
            embeddings=embeddings,
            max_visible=max_visible,
            pinned=pinned,
            runtime_mode=runtime_mode,
        )
        self.catalog = catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        self.every_turn = every_turn
        self.min_relative_score = min_relative_score
        self.scorer = as_hybrid_scorer(catalog, self.config.embeddings)
        self.pinned = free_tools(catalog, self.config.pinned)

    @property
    def limit(self) -> int:
        """How many hits this node adds at most."""
        return self.config.search_limit

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
        working = WorkingSet.from_state(
            state, pinned=self.pinned, cap=self.config.max_visible, catalog=self.catalog
        )
        hits = search_hits(
            self.catalog,
            query,
            limit=self.limit,
            exclude=working.names,
            min_relative_score=self.min_relative_score,
            scores=scores,
        )
        if not hits:
            return {}
        working.add(hits, reason=self.node_name)
        emit_changes(working, self.node_name)
        return working.update()
