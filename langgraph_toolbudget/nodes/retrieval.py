"""The scores a ranking node ranks by: lexical, embeddings, your retrieval function, usage.

``ClassifyIntent``, ``SelectTools`` and ``ToolSearch`` all rank the tools of the
latest user message the same way, through :func:`node_scores` (or
:func:`anode_scores`): BM25, fused with embedding similarity when ``embeddings=``
is set, fused with a retrieval function's answer when ``retriever=`` is set
(:mod:`langgraph_toolbudget.core.retrieval`), plus the recorded usage when
``usage=`` is set (:class:`~langgraph_toolbudget.nodes.usage.ToolUsage`). Its one reason to
change: what a ranking node ranks by.

The retrieval function is ``(query, catalog) -> tool names best first, or
{tool name: score}``, sync or async. Sync nodes run an async one on the
package's background loop; async nodes run a sync one in a worker thread, so it
may block on I/O. If it raises, the turn ranks without it and a warning is
logged (as for an embedding failure); an answer of the wrong shape raises
``TypeError`` naming the two accepted shapes.

Similarity scores (embeddings, a retrieval function) are relative: some tool always scores
high, so they do not say whether a request has a topic at all. :func:`brings_no_topic` decides
that for them on the request's words, as the lexical ranking does: a request of a thread that
holds a choice (:func:`holds_choice`) and that no tool's words match ("And in Lima?",
"thanks!") leaves that choice as it is.

Typical Usage:
    ```python
    def my_search(query: str, catalog: ToolCatalog) -> list[str]:
        return vector_db.search(query, k=10)  # tool names, best first

    SelectTools(catalog, retriever=my_search)
    ```
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import numpy as np
from langchain_core.runnables import RunnableConfig

from langgraph_toolbudget._runner import run_sync
from langgraph_toolbudget.config import BudgetConfig
from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.context import SessionContext
from langgraph_toolbudget.core.retrieval import fuse_retrieved, retrieved_scores
from langgraph_toolbudget.core.selection import words_match
from langgraph_toolbudget.core.semantic import HybridScorer
from langgraph_toolbudget.nodes.usage import ToolUsage, ausage_scores, records_usage, usage_scores

__all__ = ["Retriever", "anode_scores", "brings_no_topic", "holds_choice", "node_scores"]

logger = logging.getLogger(__name__)

Retriever = Callable[[str, ToolCatalog], Any]
"""``(query, catalog) -> tool names best first, or {tool name: score}`` (or an awaitable of it)."""


FAILED = object()
"""What :func:`_ask` returns when the retrieval function raised."""


async def _awaited(answer: Awaitable[Any]) -> Any:
    return await answer


def _fused(
    budget: BudgetConfig, catalog: ToolCatalog, query: str, base: np.ndarray | None, answer: Any
) -> np.ndarray | None:
    retrieved = None if answer is FAILED else retrieved_scores(answer, catalog)
    if retrieved is None:
        return base
    lexical = base if base is not None else catalog.index.scores(query)
    return fuse_retrieved(lexical, retrieved, budget.retriever_weight)


def _failed(retriever: Any, exc: BaseException) -> Any:
    name = getattr(retriever, "__name__", type(retriever).__name__)
    logger.warning("retriever %s failed (%r); ranking without it this turn", name, exc)
    return FAILED


def _ask(retriever: Retriever, query: str, catalog: ToolCatalog) -> Any:
    """The function's answer (an async one run on the background loop), or ``FAILED``."""
    try:
        answer = retriever(query, catalog)
        return run_sync(_awaited(answer)) if inspect.isawaitable(answer) else answer
    except Exception as exc:  # noqa: BLE001 - the user's search failing must not end the turn
        return _failed(retriever, exc)


async def _aask(retriever: Retriever, query: str, catalog: ToolCatalog) -> Any:
    """Async :func:`_ask`: a sync function runs in a worker thread."""
    call = getattr(retriever, "__call__", None)  # noqa: B004 - an object's async __call__
    try:
        if inspect.iscoroutinefunction(retriever) or inspect.iscoroutinefunction(call):
            return await retriever(query, catalog)
        answer = await asyncio.to_thread(retriever, query, catalog)
        return await answer if inspect.isawaitable(answer) else answer
    except Exception as exc:  # noqa: BLE001 - the user's search failing must not end the turn
        return _failed(retriever, exc)


def _with_usage(
    usage: ToolUsage | None,
    catalog: ToolCatalog,
    query: str,
    scores: np.ndarray | None,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """The scores a ranking node ranks by: ``scores`` fused with ``usage`` (if any)."""
    if usage is None:
        return scores
    records_usage(config)  # a bad opt-out value fails here, before the model or a tool runs
    if not query:
        return scores
    return usage_scores(usage, catalog, query, scores, config)  # a store failure: no usage


async def _awith_usage(
    usage: ToolUsage | None,
    catalog: ToolCatalog,
    query: str,
    scores: np.ndarray | None,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """Async :func:`_with_usage` (loads the history through the store's async API)."""
    if usage is None:
        return scores
    records_usage(config)  # a bad opt-out value fails here, before the model or a tool runs
    if not query:
        return scores
    return await ausage_scores(usage, catalog, query, scores, config)


def node_scores(
    budget: BudgetConfig,
    catalog: ToolCatalog,
    scorer: HybridScorer | None,
    query: str,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """The scores a ranking node ranks ``catalog`` by for ``query`` (``None``: lexical only).

    Raises:
        TypeError: the retrieval function answered in neither accepted shape.
    """
    scores = scorer.scores(query) if scorer is not None and query else None
    if budget.retriever is not None and query:
        answer = _ask(budget.retriever, query, catalog)
        scores = _fused(budget, catalog, query, scores, answer)
    return _with_usage(budget.usage, catalog, query, scores, config)


async def anode_scores(
    budget: BudgetConfig,
    catalog: ToolCatalog,
    scorer: HybridScorer | None,
    query: str,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """Async :func:`node_scores` (a sync retrieval function runs in a worker thread)."""
    scores = await scorer.ascores(query) if scorer is not None and query else None
    if budget.retriever is not None and query:
        answer = await _aask(budget.retriever, query, catalog)
        scores = _fused(budget, catalog, query, scores, answer)
    return await _awith_usage(budget.usage, catalog, query, scores, config)


def holds_choice(state: Any, catalog: ToolCatalog, free: Iterable[str]) -> bool:
    """Whether the thread's visible set holds a tool beyond those visible for free (``free``:
    the node's ``always`` and pinned tools; the thread's tool context is applied)."""
    context = SessionContext.from_state(state)
    working = context.working_set(state, catalog, free, add_free=False)
    thread_free = set(context.free(catalog, free))
    return any(n not in thread_free for n in working.names)


def brings_no_topic(
    budget: BudgetConfig,
    catalog: ToolCatalog,
    scorer: HybridScorer | None,
    query: str,
    config: RunnableConfig | None,
) -> bool:
    """Whether ``query``, ranked by similarity, is a request without a topic of its own.

    True when the ranking fuses embedding similarity (``scorer``) or a retrieval function's
    answer, and no word of ``query`` matches a tool or a category
    (:func:`~langgraph_toolbudget.core.selection.words_match`), nor, with ``usage=``, a
    recorded request. The lexical ranking alone needs no such check: a request whose words
    match nothing scores 0 everywhere and chooses nothing. Call it after :func:`node_scores`
    (which attaches the usage history to the run).
    """
    if not query or (scorer is None and budget.retriever is None):
        return False
    if words_match(catalog, query):
        return False
    usage = budget.usage
    return usage is None or usage.scores(catalog, query, None, config=config) is None
