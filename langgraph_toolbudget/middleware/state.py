"""The agent state of ``ToolBudgetMiddleware``, and its updates.

Key Components:
    - :class:`ToolBudgetAgentState`: ``create_agent``'s state plus the budget's fields.
    - :func:`apply_update`, :func:`state_delta`: merge a node's update the way the
      graph would, and the one update that turns one state into another.
    - :func:`batch_of`: the tool calls a call was made with (its AI message's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from langchain.agents.middleware import AgentState
from langchain_core.messages import AIMessage
from typing_extensions import NotRequired

from langgraph_toolbudget.core.context import CONTEXT_FIELDS, merge_context
from langgraph_toolbudget.core.working_set import WorkingSet, state_messages
from langgraph_toolbudget.state import merge_counts, merge_names

__all__ = ["ToolBudgetAgentState", "apply_update", "batch_of", "state_delta", "update_delta"]

_REDUCERS: dict[str, Callable[[Any, Any], Any]] = {
    "selected_tools": merge_names,
    "discovered_tools": merge_names,
    "tool_last_used": merge_counts,
    **dict.fromkeys((*CONTEXT_FIELDS, "tool_reasons"), merge_context),
}
_MISSING = object()


class ToolBudgetAgentState(AgentState[Any]):
    """``create_agent``'s state plus the tool budget's fields (names only, JSON-friendly).

    The fields and their reducers are those of
    :class:`~langgraph_toolbudget.state.ToolBudgetState`.
    """

    categories: NotRequired[list[str]]
    category_scores: NotRequired[dict[str, float]]
    selected_tools: NotRequired[Annotated[list[str], merge_names]]
    discovered_tools: NotRequired[Annotated[list[str], merge_names]]
    tool_last_used: NotRequired[Annotated[dict[str, int], merge_counts]]
    context_tools: NotRequired[Annotated[dict[str, str], merge_context]]
    context_servers: NotRequired[Annotated[dict[str, str], merge_context]]
    context_tool_modes: NotRequired[Annotated[dict[str, str], merge_context]]
    context_server_modes: NotRequired[Annotated[dict[str, str], merge_context]]
    tool_reasons: NotRequired[Annotated[dict[str, dict[str, Any]], merge_context]]


def apply_update(state: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``state`` with a node's ``update`` merged in through the state's reducers."""
    merged = dict(state)
    for key, value in update.items():
        reducer = _REDUCERS.get(key)
        merged[key] = reducer(state.get(key), value) if reducer else value
    return merged


def state_delta(
    before: dict[str, Any], after: dict[str, Any], keys: Sequence[str]
) -> dict[str, Any]:
    """The update that turns ``before`` into ``after`` for ``keys`` plus the visible set
    (``selected_tools``, ``tool_last_used``, ``tool_reasons``)."""
    out = {k: after[k] for k in keys if k in after and after[k] != before.get(k)}
    diff = WorkingSet(list(after.get("selected_tools") or [])).diff(
        before.get("selected_tools") or []
    )
    if diff["add"] or diff["remove"]:
        out["selected_tools"] = diff
    old = before.get("tool_last_used") or {}
    used = {k: v for k, v in (after.get("tool_last_used") or {}).items() if old.get(k) != v}
    if used:
        out["tool_last_used"] = used
    reasons = _map_delta(before.get("tool_reasons") or {}, after.get("tool_reasons") or {})
    if reasons:
        out["tool_reasons"] = reasons
    return out


def _map_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The ``merge_context`` update turning ``before`` into ``after`` (``None`` removes)."""
    out: dict[str, Any] = {k: v for k, v in after.items() if before.get(k, _MISSING) != v}
    out.update((k, None) for k in before if k not in after)
    return out


def batch_of(state: Any, call: Any) -> list[Any]:
    """The tool calls of the AI message that made ``call`` (just ``[call]`` if not found)."""
    for message in reversed(state_messages(state)):
        if isinstance(message, AIMessage) and any(
            c.get("id") == call.get("id") for c in message.tool_calls
        ):
            return list(message.tool_calls)
    return [call]


def update_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What ``after`` adds to ``before``, two updates merged with ``merge_update``'s rules.

    Lists extend (the new items), dicts merge (the changed entries), else the new value.
    """
    out: dict[str, Any] = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(old, list) and isinstance(value, list):
            new: Any = value[len(old) :]
        elif isinstance(old, dict) and isinstance(value, dict):
            new = {k: v for k, v in value.items() if old.get(k, _MISSING) != v}
        elif value != old or key not in before:
            out[key] = value
            continue
        else:
            continue
        if new:
            out[key] = new
    return out
