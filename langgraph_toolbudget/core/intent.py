"""Offline intent classification: a query -> tool categories, ranked. Pure functions.

Its one reason to change: how a query is scored against categories.

Key Components:
    - :func:`classify_lexical`: offline scoring of categories against a query
      (category name and description, and the tools inside each category).
    - :func:`latest_user_text`, :func:`message_text`: the text a turn is about.
    - :func:`starts_turn`: the messages that start a user turn (not a summary).

The node over these is :class:`langgraph_toolbudget.nodes.intent.ClassifyIntent`.

Typical Usage:
    ```python
    classify_lexical(catalog, "open an issue for the crash", max_categories=3)
    ```
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.messages import BaseMessage, HumanMessage

from langgraph_toolbudget.core.catalog import ToolCatalog

__all__ = [
    "classify_lexical",
    "content_parts",
    "latest_user_text",
    "message_text",
    "starts_turn",
]

SUMMARY_SOURCE = "summarization"
"""``additional_kwargs["lc_source"]`` of the human message in which LangChain's
``SummarizationMiddleware`` replaces the messages it summarised."""


def content_parts(content: str | list[Any], *, keep_other: bool = False) -> list[str]:
    """The text parts of a message's content: a string, or its text blocks in order.

    ``keep_other``: blocks that are not text (images, tool data) become JSON, not nothing.
    """
    if isinstance(content, str):
        return [content]
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif keep_other:
            parts.append(json.dumps(block, default=str))
    return parts


def message_text(message: BaseMessage) -> str:
    """The plain text of a message, whatever its content blocks."""
    return " ".join(content_parts(message.content))


def starts_turn(message: Any) -> bool:
    """Does ``message`` start a user turn: a human message that is not a summary of earlier
    messages (LangChain's ``SummarizationMiddleware`` writes one mid-turn; counting from it
    would restart the turn's bounds)."""
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") != SUMMARY_SOURCE
    )


def latest_user_text(messages: Sequence[Any]) -> str:
    """Text of the latest human message that starts a turn ("" if there is none)."""
    for message in reversed(messages):
        if starts_turn(message):
            return message_text(message)
        if isinstance(message, dict) and message.get("role") in ("user", "human"):
            return str(message.get("content", ""))
    return ""


class _CategoryScorer:
    """Precomputed category membership, so a query is scored in a few numpy passes.

    A category's score is its best member's relevance, plus a quarter of its
    next two members' (a category with several matching tools beats one lucky
    match), plus the BM25 score of the category's own name and description.
    """

    TOP_MEMBERS = 3
    OTHER_MEMBER_WEIGHT = 0.25

    def __init__(self, catalog: ToolCatalog) -> None:
        # The indexes, not the catalog: the catalog owns this scorer, which must not own it back.
        index = self.index = catalog.index
        self.category_index = catalog.category_index
        self.names = list(catalog.categories)
        tools, cats = [], []
        for c_pos, cat in enumerate(self.names):
            for name in catalog.tools_in(cat):
                tools.append(index.position(name))
                cats.append(c_pos)
        # (tool, category) membership pairs, grouped by category: category c's pairs are
        # ``pair_tool[starts[k]:starts[k + 1]]`` for its place k among the non-empty categories.
        self.pair_tool = np.asarray(tools, dtype=np.int64)
        pair_cat = np.asarray(cats, dtype=np.int64)
        first = np.r_[True, pair_cat[1:] != pair_cat[:-1]] if pair_cat.size else np.zeros(0, bool)
        self.starts = np.flatnonzero(first)
        self.groups = pair_cat[self.starts]  # the category of each group
        self.sizes = np.diff(np.r_[self.starts, pair_cat.size])
        self.positions = np.arange(pair_cat.size)

    def category_scores(self, query: str, tool_scores: np.ndarray | None = None) -> np.ndarray:
        """Score of every category (in ``catalog.categories`` order).

        Each category's best three member scores are found by three segment maxima
        (each removing the previous maximum) rather than by sorting every member.
        """
        if tool_scores is None:
            tool_scores = self.index.scores(query)
        out = np.zeros(len(self.names), dtype=np.float64)
        if self.starts.size:
            member = np.maximum(tool_scores[self.pair_tool], 0.0)  # members <= 0 add nothing
            total = np.zeros(self.starts.size)
            for rank in range(self.TOP_MEMBERS):
                best = np.maximum.reduceat(member, self.starts)
                total += best if rank == 0 else best * self.OTHER_MEMBER_WEIGHT
                if rank + 1 < self.TOP_MEMBERS:  # drop each group's (first) maximum
                    at = np.repeat(best, self.sizes) == member
                    first = np.minimum.reduceat(
                        np.where(at, self.positions, member.size), self.starts
                    )
                    member[first] = 0.0
            out[self.groups] = total
        out += self.category_index.scores(query)
        return out

    def score(
        self, query: str, tool_scores: np.ndarray | None = None, limit: int | None = None
    ) -> list[tuple[str, float]]:
        """Categories scoring above zero, best first (catalog order breaking ties); ``limit``."""
        scores = self.category_scores(query, tool_scores)
        ids = np.flatnonzero(scores > 0)
        if limit is not None and limit < ids.size:
            kth = np.partition(scores[ids], ids.size - limit)[ids.size - limit]
            ids = ids[scores[ids] >= kth]  # ties at the limit kept, then cut after sorting
        order = ids[np.lexsort((ids, -scores[ids]))][:limit]
        return [(self.names[i], float(scores[i])) for i in order]


def classify_lexical(
    catalog: ToolCatalog,
    query: str,
    *,
    max_categories: int = 3,
    min_relative_score: float = 0.5,
    tool_scores: np.ndarray | None = None,
) -> list[tuple[str, float]]:
    """Rank the catalog's categories for a query, offline.

    Args:
        catalog: the tool catalog.
        query: the user's text.
        max_categories: return at most this many.
        min_relative_score: drop categories scoring below this fraction of the best.
        tool_scores: relevance of every tool, aligned with ``catalog.index.names``
            (e.g. :meth:`HybridScorer.scores`); default ``catalog.index.scores(query)``.

    Returns:
        ``(category, score)`` best first; empty when nothing matches.
    """
    scored = _scorer(catalog).score(query, tool_scores, limit=max_categories)
    if not scored:
        return []
    floor = scored[0][1] * min_relative_score
    return [(c, s) for c, s in scored[:max_categories] if s >= floor]


def _scorer(catalog: ToolCatalog) -> _CategoryScorer:
    """The catalog's category scorer (``catalog.derived`` entry ``category_scorer``)."""
    return catalog.derived.get("category_scorer", lambda: _CategoryScorer(catalog))
