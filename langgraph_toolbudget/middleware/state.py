"""The agent state of ``ToolBudgetMiddleware``, and its updates.

Key Components:
    - :class:`ToolBudgetAgentState`: ``create_agent``'s state plus the budget's fields.
    - :func:`apply_update`, :func:`state_delta`: merge a node's update the way the
      graph would, and the one update that turns one state into another.
    - :data:`STILL_CALLABLE`: the private field through which ``after_model`` tells
      ``wrap_tool_call`` which tools stay callable in the rest of a reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from langchain.agents.middleware import AgentState
from langchain.agents.middleware.types import OmitFromInput, OmitFromSchema
from typing_extensions import NotRequired

from langgraph_toolbudget.core.context import CONTEXT_FIELDS, merge_context
from langgraph_toolbudget.core.working_set import WorkingSet
from langgraph_toolbudget.state import merge_counts, merge_names

__all__ = ["STILL_CALLABLE", "ToolBudgetAgentState", "apply_update", "state_delta"]

_REDUCERS: dict[str, Callable[[Any, Any], Any]] = {
    "selected_tools": merge_names,
    "discovered_tools": merge_names,
    "tool_last_used": merge_counts,
    **dict.fromkeys((*CONTEXT_FIELDS, "tool_reasons"), merge_context),
}
_MISSING = object()

STILL_CALLABLE = "toolbudget_still_callable"
"""``{"reply": <AI message id>, "tools": [...]}``: tools the model was shown with that reply
which the reply's own built-in calls took out of the visible set; they stay callable in the
rest of that reply, as under ``ToolExecutor`` (ignored once a later reply is the latest)."""


class ToolBudgetAgentState(AgentState[Any]):
    """``create_agent``'s state plus the tool budget's fields (names only, JSON-friendly).

    The fields and their reducers are those of
    :class:`~langgraph_toolbudget.state.ToolBudgetState`; they are left out of the agent's
    input schema (``OmitFromInput``), so a run's input cannot make a tool visible or change
    the tool context.
    """

    # Written by the middleware and the management operations, never by a run's input (the
    # reducer comes last in Annotated: LangGraph reads the last item as the reducer).
    categories: NotRequired[Annotated[list[str], OmitFromInput]]
    category_scores: NotRequired[Annotated[dict[str, float], OmitFromInput]]
    selected_tools: NotRequired[Annotated[list[str], OmitFromInput, merge_names]]
    discovered_tools: NotRequired[Annotated[list[str], OmitFromInput, merge_names]]
    tool_last_used: NotRequired[Annotated[dict[str, int], OmitFromInput, merge_counts]]
    context_tools: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_context]]
    context_servers: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_context]]
    context_tool_modes: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_context]]
    context_server_modes: NotRequired[Annotated[dict[str, str], OmitFromInput, merge_context]]
    tool_reasons: NotRequired[Annotated[dict[str, dict[str, Any]], OmitFromInput, merge_context]]
    # private (not in the graph's input or output): see STILL_CALLABLE
    toolbudget_still_callable: NotRequired[
        Annotated[dict[str, Any], OmitFromSchema(input=True, output=True)]
    ]


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
