"""What the nodes do with a ``ToolUsage``: rank with it, and record the tools that ran.

Key Components:
    - :func:`ranking_scores` / :func:`aranking_scores`: the scores a ranking node
      (``ClassifyIntent``, ``SelectTools``, ``ToolSearch``) ranks by, fused with the history.
    - :func:`succeeded_tools`: the regular tools of a batch that ran successfully, which
      ``ToolExecutor`` and ``ToolAgent`` record.
    - :func:`record_call` / :func:`arecord_call`: the same for one call, which
      ``ToolBudgetMiddleware`` records (the agent's tool node runs each call on its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from langgraph_toolbudget.core.catalog import ToolCatalog
from langgraph_toolbudget.core.intent import latest_user_text
from langgraph_toolbudget.core.meta import META_TOOL_NAMES
from langgraph_toolbudget.core.working_set import state_messages
from langgraph_toolbudget.nodes.usage import ToolUsage

__all__ = ["aranking_scores", "arecord_call", "ranking_scores", "record_call", "succeeded_tools"]


def succeeded_tools(calls: Sequence[ToolCall], outputs: Sequence[Any]) -> list[str]:
    """The regular (not meta) tools of ``calls`` whose output is not an error, in call order.

    A refused call (unknown, not visible...) and a call that raised both get an
    error ``ToolMessage``, so neither counts.
    """
    names = []
    for call, output in zip(calls, outputs, strict=True):
        if call["name"] in META_TOOL_NAMES:
            continue
        items = output if isinstance(output, list) else [output]
        failed = False
        for item in items:
            messages = [item]
            if isinstance(item, Command) and isinstance(item.update, dict):
                messages = list(item.update.get("messages", []))
            failed = failed or any(
                isinstance(m, ToolMessage) and m.status == "error" for m in messages
            )
        if not failed:
            names.append(call["name"])
    return list(dict.fromkeys(names))


def ranking_scores(
    usage: ToolUsage | None,
    catalog: ToolCatalog,
    query: str,
    scores: np.ndarray | None,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """The scores a ranking node ranks by: ``scores`` fused with ``usage`` (if any)."""
    if usage is None or not query:
        return scores
    usage.attach(config)
    return usage.scores(catalog, query, scores)


async def aranking_scores(
    usage: ToolUsage | None,
    catalog: ToolCatalog,
    query: str,
    scores: np.ndarray | None,
    config: RunnableConfig | None,
) -> np.ndarray | None:
    """Async :func:`ranking_scores` (loads the history through the store's async API)."""
    if usage is None or not query:
        return scores
    await usage.aattach(config)
    return usage.scores(catalog, query, scores)


def _call_record(state: Any, call: ToolCall, output: Any) -> tuple[str, list[str]]:
    """The latest user message and ``[call's tool]`` when it ran successfully, else ``[]``."""
    names = succeeded_tools([call], [output])
    return (latest_user_text(state_messages(state)) if names else ""), names


def record_call(
    usage: ToolUsage | None, state: Any, call: ToolCall, output: Any, config: RunnableConfig
) -> None:
    """Record one executed call against the state's latest user message, if it succeeded."""
    if usage is not None:
        query, names = _call_record(state, call, output)
        usage.record_run(query, names, config)


async def arecord_call(
    usage: ToolUsage | None, state: Any, call: ToolCall, output: Any, config: RunnableConfig
) -> None:
    """Async :func:`record_call`."""
    if usage is not None:
        query, names = _call_record(state, call, output)
        await usage.arecord_run(query, names, config)
