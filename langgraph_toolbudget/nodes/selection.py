"""select_tools and tool_search: the nodes that choose which tools the model sees.

Its one reason to change: how the select_tools and tool_search nodes read and write state.

Key Components:
    - :class:`SelectTools`: the proportional per-category budget
      (:func:`langgraph_toolbudget.core.selection.select_tools`).
    - :class:`ToolSearch`: the automatic BM25 search before the first model turn
      (:func:`langgraph_toolbudget.core.selection.search_hits`).

Typical Usage:
    ```python
    graph.add_node("select_tools", SelectTools(catalog, max_tools=8))
    graph.add_node("tool_search", ToolSearch(catalog, search_limit=5))
    ```
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from typing_extensions import Unpack

from langgraph_toolbudget.config import (
    BudgetConfig,
    BudgetOptions,
    SelectionStrategy,
    check_node_options,
)
from langgraph_toolbudget.core.budget import cut_evenly
from langgraph_toolbudget.core.catalog import ToolCatalog, require_catalog
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.gating import AUTO_TOOL_SEARCH
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.reasons import budget_reasons, free_reasons, search_reasons
from langgraph_toolbudget.core.selection import search_hits, select_tools
from langgraph_toolbudget.core.semantic import as_hybrid_scorer
from langgraph_toolbudget.core.token_budget import tool_tokens
from langgraph_toolbudget.core.warm import awarm_catalog
from langgraph_toolbudget.core.working_set import WorkingSet, tools_in_use
from langgraph_toolbudget.execution.builtins import check_builtin_names
from langgraph_toolbudget.nodes._node import BudgetNode, emit_changes
from langgraph_toolbudget.nodes.retrieval import anode_scores, brings_no_topic, node_scores
from langgraph_toolbudget.nodes.usage import check_usage_catalog
from langgraph_toolbudget.state import state_get, state_messages

__all__ = ["SelectTools", "ToolSearch"]

logger = logging.getLogger(__name__)

Strategy = SelectionStrategy

BUDGET_REASONS = frozenset({"budget", "relevance"})
"""The ``why`` of a tool ``select_tools`` chose (see ``core/reasons.py``). It removes the tools
of its earlier choices that a new topic leaves unused and gives a tool it chooses again this
choice's reason, so a visible tool with one of these is this turn's choice, in use, or the
previous choice a request without a topic keeps."""


def _why(reason: Any) -> Any:
    return reason.get("why") if isinstance(reason, Mapping) else None


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
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        strategy: ``categories`` (per-category budget), ``relevance`` (the
            budget's most relevant tools, for catalogs without categories),
            ``auto`` (categories when the state has some, else relevance).
        name: node name.
        **options: any ``BudgetConfig`` option, over ``config``'s value. Those this
            node reads: ``max_tools``/``model_size`` (the budget),
            ``min_per_category``, ``max_schema_tokens``, ``pinned``,
            ``max_visible``, ``runtime_mode``, and the ranking's ``embeddings``,
            ``usage`` and ``retriever``.

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog``, or ``config`` not a
            ``BudgetConfig``; an unknown option (the message names the node and the
            closest of its own keywords and the ``BudgetConfig`` options: ``max_tool=3``);
            an option of the wrong type, named with the node (``max_tools="3"``,
            ``strategy=1``, ``name=1``).
        ValueError: an option out of range, named with the node (``max_tools=-1``,
            ``strategy="best"``, ``name=""``); a ``pinned`` name that is not a tool of the
            catalog in its ``runtime_mode``; ``max_visible`` below the number of tools
            visible without budget; a ``usage`` built with ``catalog=`` a catalog that
            lacks this one's tools.

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
        strategy: Strategy = "auto",
        name: str = "select_tools",
        **options: Unpack[BudgetOptions],
    ) -> None:
        super().__init__(name)
        check_node_options(SelectTools, strategy=strategy)
        self.config = BudgetConfig.resolve(config, options, owner=SelectTools)
        catalog = require_catalog(catalog, "SelectTools")
        self.catalog = catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        check_usage_catalog(self.config.usage, catalog, "SelectTools")
        self.strategy = strategy
        self._free = self.config.free_tools_within_cap(catalog)
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
        self,
        query: str,
        categories: Sequence[str],
        *,
        scores: np.ndarray | None = None,
        context: SessionContext | None = None,
        config: RunnableConfig | None = None,
        fallback: bool = True,
    ) -> list[str]:
        """The tools this node makes visible for a query and categories.

        Args:
            query: the request's text, ranked against the catalog.
            categories: the chosen categories (:class:`ClassifyIntent`'s); with none,
                the ``auto`` strategy ranks by relevance alone.
            scores: relevance of every tool (default: ``catalog.index.scores(query)``).
            context: the thread's tool context (included tools are free, excluded ones
                never chosen); default: none.
            config: the run's (its usage scope, for the ``fallback``).
            fallback: when nothing matches, the most used tools (with ``usage``); the
                node passes False when the thread already holds a choice, which then
                stays.

        Returns:
            The tool names: first those visible without budget in the thread (``always``,
            special categories and ``pinned`` tools it did not exclude, and the tools it
            included), then the chosen ones: at most the budget (``max_tools`` or the
            ``model_size`` preset; any number under ``max_schema_tokens`` alone), within
            ``max_schema_tokens``.
        """
        context = context or SessionContext()
        free = context.free(self.catalog, self.free_tools)
        skip = [*free, *context.unselectable(self.catalog)]
        also = context.selectable(self.catalog)
        tokens = self.config.max_schema_tokens
        cap = self.config.tool_cap
        budget = len(self.catalog) if cap is None else cap  # a cap of 0 chooses nothing
        if self.strategy == "relevance" or (self.strategy == "auto" and not categories):
            chosen = search_hits(
                self.catalog, query, limit=budget, exclude=skip, scores=scores, also_selectable=also
            )
            chosen = self._within_tokens(chosen)
        else:
            chosen = select_tools(
                self.catalog,
                query,
                categories,
                max_tools=budget,
                min_per_category=self.config.min_per_category,
                exclude=skip,
                scores=scores,
                max_schema_tokens=tokens,
                also_selectable=also,
            )
        usage = self.config.usage
        if not chosen and query and usage is not None and fallback:
            popular = usage.popular(self.catalog, budget + len(skip), config)
            chosen = [n for n in popular if n not in skip]
            chosen = self._within_tokens(chosen[:budget])
            logger.info("select_tools: nothing matches %r; the most used tools: %s", query, chosen)
        return [*free, *chosen[:budget]]

    def _within_tokens(self, names: list[str]) -> list[str]:
        """``names`` in order while their schema tokens fit ``max_schema_tokens``."""
        tokens = self.config.max_schema_tokens
        if tokens is None:
            return names
        cost, out, spent = tool_tokens(self.catalog), [], 0
        for name in names:
            if spent + cost(name) <= tokens:
                out.append(name)
                spent += cost(name)
        return out

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = latest_user_text(state_messages(state))
        scores = node_scores(self.config, self.catalog, self.scorer, query, config)
        return self._update(state, query, scores, config)

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        await awarm_catalog(self.catalog)  # the first turn builds the indexes off the loop
        query = latest_user_text(state_messages(state))
        scores = await anode_scores(self.config, self.catalog, self.scorer, query, config)
        return self._update(state, query, scores, config)

    def _update(
        self, state: Any, query: str, scores: np.ndarray | None, config: RunnableConfig
    ) -> dict[str, Any]:
        categories = list(state_get(state, "categories", None) or [])
        context = SessionContext.from_state(state)
        working = context.working_set(
            state,
            self.catalog,
            self._free,
            cap=self.config.visible_cap(len(self._free)),
            add_free=False,
        )
        if scores is None and query:
            scores = self.catalog.index.scores(query)
        free = context.free(self.catalog, self._free)
        held = any(n not in free for n in working.names)
        # Similarity ranks any request; without categories (a classifier model may name some)
        # the request's words say whether it has a topic.
        if (
            held
            and not categories
            and brings_no_topic(self.config, self.catalog, self.scorer, query, config)
        ):
            chosen = list(free)
        else:
            chosen = self.choose(
                query, categories, scores=scores, context=context, config=config, fallback=not held
            )
        by_budget = self.strategy == "categories" or (self.strategy == "auto" and categories)
        details = {
            **budget_reasons(
                self.catalog,
                chosen[len(free) :],
                categories if by_budget else [],
                max_tools=self.config.budget,
                min_per_category=self.config.min_per_category,
                scores=scores,
            ),
            **free_reasons(self.catalog, free, self.config.pinned, context),
        }
        # The topics the conversation left go, unless the thread is using their tools. A
        # request that matches no tool ("and in Lima?", "thanks!") leaves no topic: it is
        # about the one before, whose tools stay.
        if len(chosen) > len(free):
            keep = {*chosen, *tools_in_use(state_messages(state)), *working.pinned}
            working.remove([n for n in working.names if n not in keep], reason=self.node_name)
        chosen = self._within_cap(chosen, len(free), working, details)
        working.refresh(chosen, reason=self.node_name, details=details)
        emit_changes(working, self.node_name)
        return working.update()

    @staticmethod
    def _within_cap(
        chosen: list[str], n_free: int, working: WorkingSet, details: Mapping[str, Any]
    ) -> list[str]:
        """``chosen`` (its first ``n_free`` visible for free) cut to the room the cap leaves
        beside the tools never evicted, each category keeping its best tools: the working set
        would otherwise drop the last picks, whole categories (``max_visible`` below the
        budget)."""
        picks, room = chosen[n_free:], working.room(chosen[:n_free])
        if room is None or len(picks) <= room:
            return chosen
        category_of = {n: details.get(n, {}).get("category") for n in picks}
        return [*chosen[:n_free], *cut_evenly(picks, category_of, room)]


class ToolSearch(BudgetNode):
    """Node: automatic tool search before the first model turn.

    Ranks the catalog against the latest user message with the same free-text
    ranking as :class:`SelectTools` (BM25 over names, descriptions and argument
    names, fused with embeddings when given; not the regex engine of the
    ``search_tools`` meta-tool) and adds the best ``limit`` hits the visible set
    lacks. Under the cap (``max_visible``) the hits only take the room left by the tools
    ``select_tools`` chose, the tools in use and the pinned ones: they evict only other
    tools (earlier hits, older loads), least recently used first, and the hits that do
    not fit are not added. A turn is "first" when no AI message is in the history yet; with
    ``every_turn=True`` it searches on every user turn. It does nothing when
    ``enabled_builtins`` turns ``"tool_search"`` off, or when no tool is
    deferred (every tool is visible from the start).

    Args:
        catalog: the tool catalog.
        config: the shared options (:class:`~langgraph_toolbudget.config.BudgetConfig`).
        every_turn: search on later turns too.
        min_relative_score: drop hits below this fraction of the best score.
        name: node name.
        **options: any ``BudgetConfig`` option, over ``config``'s value. Those this
            node reads: ``search_limit`` (hits added at most), ``enabled_builtins``
            (``"tool_search"`` must be enabled), ``pinned``, ``max_visible``,
            ``runtime_mode``, and the ranking's ``embeddings``, ``usage`` and
            ``retriever``.

    Output: the working-set update (see :class:`SelectTools`), or ``{}``.

    Raises:
        TypeError: ``catalog`` is not a ``ToolCatalog``, or ``config`` not a
            ``BudgetConfig``; an unknown option (the message names the node and the
            closest of its own keywords and the ``BudgetConfig`` options); an option of
            the wrong type, named with the node (``every_turn="yes"``,
            ``min_relative_score="x"``, ``max_tools="3"``).
        ValueError: an option out of range, named with the node
            (``min_relative_score=-1`` or ``2``: it is a share from 0 to 1;
            ``search_limit=-1``); an ``enabled_builtins`` name that is a near miss of a
            built-in's (``"tool_serch"``: the message names the built-in and the
            corrected value); a ``pinned`` name that is not a
            tool of the catalog in its ``runtime_mode``; ``max_visible`` below the number
            of tools visible without budget; a ``usage`` built with ``catalog=`` a
            catalog that lacks this one's tools.
    """

    def __init__(
        self,
        catalog: ToolCatalog,
        *,
        config: BudgetConfig | None = None,
        every_turn: bool = False,
        min_relative_score: float = 0.0,
        name: str = "tool_search",
        **options: Unpack[BudgetOptions],
    ) -> None:
        super().__init__(name)
        check_node_options(ToolSearch, every_turn=every_turn, min_relative_score=min_relative_score)
        self.config = BudgetConfig.resolve(config, options, owner=ToolSearch)
        catalog = require_catalog(catalog, "ToolSearch")
        self.catalog = catalog = catalog.in_runtime_mode(self.config.runtime_mode)
        check_usage_catalog(self.config.usage, catalog, "ToolSearch")
        self.every_turn = every_turn
        self.min_relative_score = min_relative_score
        self.scorer = as_hybrid_scorer(catalog, self.config.embeddings)
        self.pinned = self.config.free_tools_within_cap(catalog)
        # The search runs only when it is enabled and some tool is deferred
        # (not visible from the start), so there is something to find; a thread that set
        # a tool to ``agent`` may defer one the catalog does not (see ``_query``).
        self.deferred = any(
            catalog.selectable(n) and n not in self.pinned for n in catalog.tool_names
        )
        self.allowed = self.config.builtin_filter.allows(AUTO_TOOL_SEARCH, default=True)
        self.enabled = self.deferred and self.allowed
        check_builtin_names(self.config.builtin_filter)  # "tool_serch" would turn it off

    @property
    def limit(self) -> int:
        """How many hits this node adds at most."""
        return self.config.search_limit

    def _query(self, state: Any) -> str | None:
        """The text to search for, or None when this turn is not searched."""
        messages = state_messages(state)
        if not self.allowed:
            return None
        if not self.deferred and not SessionContext.from_state(state).selectable(self.catalog):
            return None
        if not self.every_turn and any(isinstance(m, AIMessage) for m in messages):
            return None
        return latest_user_text(messages)

    def run(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        if query is None:
            return {}
        scores = node_scores(self.config, self.catalog, self.scorer, query, config)
        if self._no_topic(state, query, config):
            return {}
        return self._update(state, query, scores)

    async def arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        if query is None:
            return {}
        await awarm_catalog(self.catalog)  # the first turn builds the indexes off the loop
        scores = await anode_scores(self.config, self.catalog, self.scorer, query, config)
        if self._no_topic(state, query, config):
            return {}
        return self._update(state, query, scores)

    def _no_topic(self, state: Any, query: str, config: RunnableConfig) -> bool:
        """A later turn's request without a topic (no category, and see ``brings_no_topic``)
        adds no hits: the choice of the turns before it holds. A first turn has none to keep."""
        if state_get(state, "categories", None):
            return False
        later = any(isinstance(m, AIMessage) for m in state_messages(state))
        return later and brings_no_topic(self.config, self.catalog, self.scorer, query, config)

    def _update(self, state: Any, query: str, scores: np.ndarray | None) -> dict[str, Any]:
        context = SessionContext.from_state(state)
        working = context.working_set(
            state,
            self.catalog,
            self.pinned,
            cap=self.config.visible_cap(len(self.pinned)),
            add_free=False,
        )
        hits = search_hits(
            self.catalog,
            query,
            limit=self.limit,
            exclude=[*working.names, *context.unselectable(self.catalog)],
            min_relative_score=self.min_relative_score,
            scores=scores,
            also_selectable=context.selectable(self.catalog),
            focus=state_get(state, "categories", None) or None,
        )
        if not hits:
            return {}
        if scores is None:
            scores = self.catalog.index.scores(query)
        details = search_reasons(self.catalog, hits, scores)
        # The hits complete the turn's choice, never displace it: under the cap they take the
        # room that select_tools' choice and the tools in use leave (pinned tools stay anyway).
        chosen = [n for n in working.names if _why(working.reasons.get(n)) in BUDGET_REASONS]
        keep = [*chosen, *tools_in_use(state_messages(state))]
        working.add(hits, reason=self.node_name, details=details, keep=keep)
        emit_changes(working, self.node_name)
        return working.update()
