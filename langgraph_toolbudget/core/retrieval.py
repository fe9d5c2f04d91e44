"""Your own search as a ranking signal: what a retrieval function returns, as catalog scores. Pure.

Its one reason to change: what a retrieval function may answer and how it is fused.

Users with their own tool search (a vector database, a hosted search API, a
fine-tuned ranker) pass it as ``retriever=``: a function ``(query, catalog)``
returning the tool names it finds, best first, or a mapping of tool names to
scores. :func:`retrieved_scores` turns that answer into an array aligned with
``catalog.index.names``, and :func:`fuse_retrieved` fuses it with the lexical
(or hybrid) scores the way ``HybridScorer`` fuses embedding scores.

Key Components:
    - :func:`retrieved_scores`: a ranked list gets ``1 - i / n`` for its i-th name
      (``n`` names), a mapping each score over the best one; names the catalog
      does not hold are skipped. ``None`` when nothing usable came back.
    - :func:`fuse_retrieved`: ``((1 - w) * base / max(base) + w * retrieved) * scale``,
      ``scale`` being ``max(base)`` (1 when nothing matched lexically), so the
      fused scores stay in the base scores' units and usage can be added after.

Typical Usage:
    >>> from langchain_core.tools import tool
    >>> from langgraph_toolbudget.core.catalog import ToolCatalog
    >>> @tool
    ... def get_forecast(city: str) -> str:
    ...     '''Weather forecast for a city.'''
    ...     return "sun"
    >>> catalog = ToolCatalog.from_tools([get_forecast])
    >>> retrieved_scores(["get_forecast", "not_a_tool"], catalog).tolist()
    [1.0]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from langgraph_toolbudget.core.catalog import ToolCatalog

__all__ = ["DEFAULT_RETRIEVER_WEIGHT", "BAD_ANSWER_ERROR", "fuse_retrieved", "retrieved_scores"]

logger = logging.getLogger(__name__)

DEFAULT_RETRIEVER_WEIGHT = 0.5
"""Share of the retrieval function's score in the fused score (see :func:`fuse_retrieved`)."""

BAD_ANSWER_ERROR = (
    "retriever must return tool names, best first (a list of strings), or a mapping of tool "
    "names to scores (numbers >= 0); it returned {kind}: {value!r}."
)


def _bad(answer: Any) -> TypeError:
    return TypeError(BAD_ANSWER_ERROR.format(kind=type(answer).__name__, value=answer)[:500])


def retrieved_scores(answer: Any, catalog: ToolCatalog) -> np.ndarray | None:
    """A retrieval function's ``answer`` as scores in [0, 1] aligned with ``catalog.index.names``.

    Args:
        answer: tool names, best first (a list or tuple of strings), or a mapping
            of tool names to scores (numbers >= 0; higher is better).
        catalog: the catalog the nodes rank.

    Returns:
        The scores (the i-th of ``n`` listed names gets ``1 - i / n``; a mapped
        tool gets its score over the best score), or ``None`` when no named
        tool is in the catalog or every score is 0.

    Raises:
        TypeError: ``answer`` is neither form (the message names both).
    """
    index = catalog.index
    out = np.zeros(len(index), dtype=np.float64)
    if isinstance(answer, Mapping):
        pairs = list(answer.items())
        if not all(isinstance(n, str) and _score(s) for n, s in pairs):
            raise _bad(answer)
        best = max((float(s) for _, s in pairs), default=0.0)
        hits = [(n, float(s) / best) for n, s in pairs if best > 0 and float(s) > 0]
    elif isinstance(answer, list | tuple) and all(isinstance(n, str) for n in answer):
        names = list(dict.fromkeys(answer))
        hits = [(n, 1.0 - i / len(names)) for i, n in enumerate(names)]
    else:
        raise _bad(answer)
    found = 0
    for name, score in hits:
        if name in catalog:
            out[index.position(name)] = score
            found += 1
    if found < len(hits):
        logger.debug("retriever: %d named tools are not in the catalog", len(hits) - found)
    return out if found else None


def _score(value: Any) -> bool:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(value) and value >= 0


def fuse_retrieved(
    base: np.ndarray, retrieved: np.ndarray, weight: float = DEFAULT_RETRIEVER_WEIGHT
) -> np.ndarray:
    """``base`` (lexical or hybrid scores) fused with a retrieval function's scores.

    ``((1 - w) * base / top + w * retrieved) * scale`` with ``top = max(base)`` and
    ``scale = top`` (``1`` when no tool scored lexically): the weighted fusion
    ``HybridScorer`` applies to embedding scores, in the base scores' units.
    """
    top = float(base.max()) if base.size else 0.0
    scale = top if top > 0 else 1.0
    norm = base / top if top > 0 else np.zeros_like(base)
    out = np.asarray(((1.0 - weight) * norm + weight * retrieved) * scale, dtype=np.float64)
    out.setflags(write=False)
    return out
